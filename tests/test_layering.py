"""Layering: data flows load -> shapes -> costs -> analysis -> (symbolic, bench, compare, llm)
-> report -> cli, one way.

The layers are declared once, as import-linter contracts in pyproject.toml, and checked
statically here (imports inside functions and under TYPE_CHECKING count). The library must
also analyse a model where onnxruntime cannot load and without the CLI, the renderers or the
bench.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import onnxcost

PACKAGE = Path(onnxcost.__file__).parent

_BLOCKED_RUN = textwrap.dedent(
    """
    import sys

    blocked = ("onnxruntime", "onnxcost.cli", "onnxcost.report", "onnxcost.bench")
    for name in blocked:
        sys.modules[name] = None  # any import of these now raises ImportError

    import onnx
    from onnx import helper

    import onnxcost
    import onnxcost.analysis.walk, onnxcost.analysis.budget, onnxcost.compare, onnxcost.costs
    import onnxcost.load.graph, onnxcost.load.model, onnxcost.costs.catalog, onnxcost.analysis.records
    import onnxcost.shapes.infer, onnxcost.load.tensors, onnxcost.zoo

    model = onnx.parser.parse_model('''
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 3] x) => (float[2, 4] y) <float[3, 4] w = {1,2,3,4,5,6,7,8,9,10,11,12}> {
        y = MatMul(x, w)
    }
    ''')
    result = onnxcost.analyze(model)
    comparison = onnxcost.compare.compare([model, model])
    print(result.totals.macs, comparison.totals[0].values)
    loaded = sorted(m for m, mod in sys.modules.items() if mod is not None)
    assert not [m for m in loaded if m.startswith(blocked)], loaded
    """
)


def test_analysis_runs_with_cli_report_bench_and_onnxruntime_blocked() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _BLOCKED_RUN], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    # MatMul [2,3] x [3,4]: 2*3*4 = 24 MACs, in both models of the comparison.
    assert done.stdout.split() == ["24", "(24,", "24)"]


def test_the_declared_layers_hold() -> None:
    """import-linter's contracts (pyproject.toml): every layer imports only the layers below
    it, and only bench/ and llm/ import onnxruntime."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlinter.cli import lint_imports_command; lint_imports_command()",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=PACKAGE.parent,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_no_import_circle() -> None:
    """No module reaches itself through imports, counting those inside functions."""
    import grimp
    import networkx as nx

    graph = grimp.build_graph("onnxcost")
    edges = nx.DiGraph(
        (m, i) for m in graph.modules for i in graph.find_modules_directly_imported_by(m)
    )
    circles = [sorted(c) for c in nx.strongly_connected_components(edges) if len(c) > 1]
    assert circles == []


def test_module_sizes() -> None:
    """Issue 21's house rules: no module over 800 lines, no command module of cli/ over 300."""
    lines = {p: len(p.read_text(encoding="utf-8").splitlines()) for p in PACKAGE.rglob("*.py")}
    assert sorted(str(p.relative_to(PACKAGE)) for p, n in lines.items() if n > 800) == []
    shared = {"__init__.py", "app.py", "guard.py", "options.py", "progress.py", "render.py"}
    commands = {p: n for p, n in lines.items() if p.parent.name == "cli" and p.name not in shared}
    assert sorted(p.name for p, n in commands.items() if n > 300) == []
