"""Layering: data flows model -> graph -> shapes -> costs -> records -> renderers, one way.

The library must analyse a model where onnxruntime cannot load and without the CLI, the
renderers or the bench; graph and shapes must not reach up into the cost formulas.
"""

from __future__ import annotations

import ast
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
    import onnxcost.analyze, onnxcost.budget, onnxcost.compare, onnxcost.costs
    import onnxcost.graph, onnxcost.model, onnxcost.opsinfo, onnxcost.records
    import onnxcost.shapes, onnxcost.tensors, onnxcost.zoo

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


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_graph_and_shapes_do_not_import_the_cost_formulas() -> None:
    for module in ("graph.py", "shapes.py", "model.py", "tensors.py"):
        imported = _imported_modules(PACKAGE / module)
        upward = sorted(m for m in imported if m.startswith("onnxcost.costs"))
        assert upward == [], f"{module} imports {upward}"


def test_tensors_module_imports_nothing_else_of_onnxcost() -> None:
    imported = _imported_modules(PACKAGE / "tensors.py")
    assert sorted(m for m in imported if m.startswith("onnxcost")) == []
