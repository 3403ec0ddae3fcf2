"""GRID.toml: every mistake refused before anything runs, in one line naming the key; the
cells in a stable order; a cell's command line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import cli
from typer.testing import CliRunner

from onnxcost import zoo
from onnxcost.cli.app import app
from onnxcost.sweep.cells import argv, cell_key, cells, count
from onnxcost.sweep.grid import GridError, parse

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


def _grid(text: str, options: Any, base: Path = Path()) -> Any:
    return parse(tomllib.loads(text), options, base=base, builtins=zoo.names())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('command = "analyze"\nmodels = ["mlp"]\n[gird]\ndim = ["batch=1"]',
         "unknown key 'gird' (did you mean 'grid'?)"),
        ('command = "analyse"\nmodels = ["mlp"]', "command 'analyse' cannot be swept"),
        ('models = ["mlp"]', "'command' is missing"),
        ('command = "analyze"\nmodels = []', "'models' must be a non-empty list"),
        ('command = "analyze"\nmodels = ["mlpp"]',
         "models: 'mlpp' is neither a file"),
        ('command = "analyze"\nmodels = ["nothing/*.onnx"]', "models: 'nothing/*.onnx' matches no file"),
        ('command = "analyze"\nmodels = ["mlp"]\n[grid]\nbatchsize = [1]',
         "grid.batchsize: onnxcost analyze has no option --batchsize"),
        ('command = "analyze"\nmodels = ["mlp"]\n[grid]\ninput_shape = ["x=1"]',
         "grid.input_shape: onnxcost analyze has no option --input_shape (did you mean 'input-shape'?)"),
        ('command = "analyze"\nmodels = ["mlp"]\n[grid]\ndim = []', "grid.dim is empty"),
        ('command = "analyze"\nmodels = ["mlp"]\n[grid]\ndim = "batch=1"', "grid.dim must be a list"),
        ('command = "analyze"\nmodels = ["mlp"]\n[grid]\ndim = ["batch=x"]', "grid.dim: 'batch=x': "),
        ('command = "analyze"\nmodels = ["mlp"]\n[grid]\nconvention = ["pytorch"]',
         "grid.convention: 'pytorch': "),
        ('command = "analyze"\nmodels = ["mlp"]\n[grid]\nsymbolic = ["yes"]',
         "grid.symbolic: --symbolic is a flag: its values are true or false"),
        ('command = "analyze"\nmodels = ["mlp"]\n[grid]\nformat = ["json"]',
         "grid.format: the sweep sets --format itself"),
        ('command = "analyze"\nmodels = ["mlp"]\n[grid]\ndim = ["batch=1", "batch=1"]',
         "grid.dim: 'batch=1' is listed twice"),
        ('command = "bench"\nmodels = ["mlp"]\n[grid]\nruns = [0]',
         "grid.runs: 0: 0 is not in the range x>=1"),
        ('command = "bench"\nmodels = ["mlp"]\n[grid]\nthreads = [[1, 2]]',
         "grid.threads: --threads takes one value per cell"),
        ('command = "analyze"\nmodels = ["mlp"]\ntimeout_s = 0', "timeout_s must be a number of seconds > 0"),
        ('command = "analyze"\nmodels = ["mlp"]\nrepeat = 0', "repeat must be a whole number >= 1"),
        ('command = "analyze"\nmodels = ["mlp"]\n[resources]\ngpus = 1',
         "unknown key resources.gpus (did you mean 'gpu'?)"),
        ('command = "analyze"\nmodels = ["mlp"]\n[resources]\ngpu = -1', "resources.gpu must be a number >= 0"),
    ],
)  # fmt: skip
def test_a_bad_grid_is_one_error_naming_the_key(text: str, message: str, options: Any) -> None:
    with pytest.raises(GridError) as e:
        _grid(text, options)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_the_cli_refuses_a_bad_grid_in_one_line_and_runs_nothing(tmp_path: Path) -> None:
    (tmp_path / "g.toml").write_text(
        'command = "analyze"\nmodels = ["mlp"]\n[grid]\nbatchsize = [1]\n'
    )
    r = CliRunner().invoke(
        app, ["sweep", str(tmp_path / "g.toml"), "-o", str(tmp_path / "r.jsonl")]
    )
    assert r.exit_code == 1
    assert r.stderr.strip().splitlines() == [
        f"onnxcost: error: {tmp_path / 'g.toml'}: grid.batchsize: onnxcost analyze has no option "
        "--batchsize (see onnxcost analyze --help)"
    ]
    assert not (tmp_path / "r.jsonl").exists()


def test_a_results_file_with_rows_is_not_extended_without_resume(tmp_path: Path) -> None:
    (tmp_path / "g.toml").write_text('command = "analyze"\nmodels = ["mlp"]\n')
    (tmp_path / "g.jsonl").write_text('{"cell": {}, "status": "ok"}\n')
    r = cli("sweep", "g.toml", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        "onnxcost: error: g.jsonl already holds results: pass --resume to run only the cells it "
        "lacks, or choose another -o"
    )
    assert (tmp_path / "g.jsonl").read_text() == '{"cell": {}, "status": "ok"}\n'


def test_cells_come_model_first_then_the_axes_in_file_order(tmp_path: Path, options: Any) -> None:
    (tmp_path / "b.onnx").write_bytes(b"")
    (tmp_path / "a.onnx").write_bytes(b"")
    g = _grid(
        'command = "analyze"\nmodels = ["mlp", "*.onnx"]\nrepeat = 2\n'
        '[grid]\ndim = ["batch=1", "batch=8"]\nsymbolic = [false, true]\n',
        options,
        base=tmp_path,
    )
    got = [(dict(c.cell), c.repeat) for c in cells(g)]
    # 3 models (mlp, then the glob's matches sorted) x 2 dims x 2 flags x 2 repeats = 24 runs.
    assert count(g) == 24
    assert len(got) == 24
    assert got[:5] == [
        ({"model": "mlp", "dim": "batch=1", "symbolic": False}, 0),
        ({"model": "mlp", "dim": "batch=1", "symbolic": False}, 1),
        ({"model": "mlp", "dim": "batch=1", "symbolic": True}, 0),
        ({"model": "mlp", "dim": "batch=1", "symbolic": True}, 1),
        ({"model": "mlp", "dim": "batch=8", "symbolic": False}, 0),
    ]
    assert [c["model"] for c, r in got[::8]] == ["mlp", "a.onnx", "b.onnx"]
    assert cell_key({"model": "m", "dim": "batch=1"}) == '{"dim":"batch=1","model":"m"}'
    assert cell_key({"model": "m"}, 1) == '{"model":"m"}#1'


def test_a_cells_command_line(options: Any) -> None:
    g = _grid(
        'command = "analyze"\nmodels = ["mlp"]\n[grid]\ndim = [["batch=2", "x=3"]]\n'
        "symbolic = [true, false]\n",
        options,
    )
    first, second = list(cells(g))[:2]
    assert argv(g, first.cell) == [
        "analyze", "--dim", "batch=2", "--dim", "x=3", "--symbolic", "-f", "json", "--", "mlp"
    ]  # fmt: skip
    assert argv(g, second.cell) == [
        "analyze", "--dim", "batch=2", "--dim", "x=3", "-f", "json", "--", "mlp"
    ]  # fmt: skip
