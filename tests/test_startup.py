"""Start-up (issue 16): `onnxcost --version` and `--help` load no numerical library, and
`import onnxcost` loads the analyzer only when ``analyze`` or ``Analysis`` is first used."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("numpy", "onnx", "google.protobuf", "onnxruntime", "networkx", "pandas", "ml_dtypes")


def _modules_after(code: str) -> set[str]:
    script = f"import sys\n{code}\nprint(' '.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.strip().splitlines()[-1].split())  # the last line: after any help


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in {h.split(".")[0] for h in HEAVY})


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["analyze", "--help"]])
def test_version_and_help_import_no_numerical_library(args: list[str]) -> None:
    code = (
        "from onnxcost.cli.app import main\n"
        f"sys.argv = ['onnxcost', *{args!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
    )
    modules = _modules_after(code)
    assert "onnxcost.cli.app" in modules
    assert _heavy(modules) == []


def test_version_does_not_import_rich() -> None:
    code = (
        "from onnxcost.cli.app import main\n"
        "sys.argv = ['onnxcost', '--version']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
    )
    assert sorted(m for m in _modules_after(code) if m.startswith("rich")) == []


def test_import_onnxcost_is_light_and_analyze_loads_on_use() -> None:
    assert _heavy(_modules_after("import onnxcost")) == []
    modules = _modules_after("import onnxcost\nonnxcost.analyze")
    assert "onnxcost.analysis.walk" in modules
    assert "onnx" in modules


def test_the_public_names_are_the_function_and_class() -> None:
    code = (
        "import onnxcost\n"
        "import onnxcost.api, onnxcost.analysis.walk\n"  # no submodule shadows the function
        "from onnxcost import Analysis, analyze\n"
        "assert callable(onnxcost.analyze) and onnxcost.analyze is analyze\n"
        "assert analyze.__module__ == 'onnxcost.api'\n"
        "assert isinstance(Analysis, type)\n"
    )
    _modules_after(code)


def test_analyzing_a_file_builds_no_built_in_model_machinery() -> None:
    # The built-in models (and numpy.random, which their builders import: 15 ms of a start)
    # load only for a name that is no file.
    model = Path(__file__).resolve().parent.parent / "models" / "mlp_torch_script.onnx"
    code = (
        "from onnxcost.cli.app import main\n"
        f"sys.argv = ['onnxcost', 'analyze', {str(model)!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
    )
    modules = _modules_after(code)
    assert "onnxcost.analysis.walk" in modules
    assert sorted(m for m in modules if m.startswith(("onnxcost.zoo", "numpy.random"))) == []
