"""Bad input to the API raises an OnnxcostError naming the fix, never ValueError or OSError;
the CLI prints it on one line with exit code 1."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import onnxcost
from onnxcost.cli.app import app
from onnxcost.errors import ModelLoadError, ShapeError

MLP = Path(__file__).resolve().parent.parent / "models" / "mlp_keras.onnx"
runner = CliRunner()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"input_shapes": {"input": (2**70, 784)}},  # past int64: protobuf raised ValueError
        {"input_shapes": {"input": (2**63, 784)}},  # int64's max + 1
        {"input_shapes": {"input": (-1, 784)}},
        {"input_shapes": {"input": (1.5, 784)}},
        {"input_shapes": {"input": (True, 784)}},
        {"dims": {"batch": 2**70}},
        {"dims": {"N": 2**64}},
    ],
)
def test_dims_past_int64_are_a_shape_error(kwargs: dict[str, object]) -> None:
    with pytest.raises(ShapeError, match=r"from 0 to 2\*\*62"):
        onnxcost.analyze(MLP, **kwargs)  # type: ignore[arg-type]


def test_a_dim_of_2_62_is_accepted() -> None:
    # [2**62, 784] x [784, 128]: the first MatMul alone is 2**62 * 784 * 128 MACs.
    a = onnxcost.analyze(MLP, input_shapes={"input": (2**62, 784)})
    assert a.totals.macs >= 2**62 * 784 * 128


def _too_long(tmp_path: Path) -> str:
    return str(tmp_path / ("a" * 5000 + ".onnx"))  # NAME_MAX is 255 on Linux


def test_a_path_longer_than_the_system_allows(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="File name too long; pass a shorter path"):
        onnxcost.analyze(_too_long(tmp_path))
    deep = str(tmp_path) + "/a" * 3000 + "/m.onnx"  # PATH_MAX is 4096
    with pytest.raises(ModelLoadError, match="pass a shorter path"):
        onnxcost.analyze(deep)


def test_the_cli_says_it_on_one_line(tmp_path: Path) -> None:
    r = runner.invoke(app, ["analyze", _too_long(tmp_path)])
    assert r.exit_code == 1, r.output
    assert r.output.count("\n") == 1
    assert "pass a shorter path" in r.output
    assert len(r.output) < 300  # the 5,000-character name is shortened
