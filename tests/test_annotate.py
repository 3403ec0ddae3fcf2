"""onnxcost annotate: shapes and costs written into a copy, never over the input."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import onnx
import pytest
from typer.testing import CliRunner

from onnxcost import zoo
from onnxcost.cli import app

runner = CliRunner()


def _props(entries: object) -> dict[str, str]:
    return {e.key: e.value for e in entries}  # type: ignore[attr-defined]


@pytest.fixture
def model(tmp_path: Path) -> Path:
    (tmp_path / "in").mkdir()
    return zoo.save("resnet18", tmp_path / "in" / "r.onnx")


def test_annotated_copy_has_shapes_and_costs(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "a.onnx"
    result = runner.invoke(app, ["annotate", str(model), str(out)])
    assert result.exit_code == 0, result.output
    m = onnx.load(str(out))
    onnx.checker.check_model(m)
    shapes = {
        vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim] for vi in m.graph.value_info
    }
    conv = next(n for n in m.graph.node if n.name == "/conv1/Conv")
    # 224x224 input, 7x7 stride 2 pad 3: (224 + 6 - 7) // 2 + 1 = 112; 64 channels.
    assert shapes[conv.output[0]] == [1, 64, 112, 112]
    props = _props(conv.metadata_props)
    # 112 * 112 * 64 * 3 * 7 * 7 = 118,013,952 MACs; 64 * 3 * 7 * 7 = 9,408 weights.
    assert props["onnxcost.macs"] == "118013952"
    assert props["onnxcost.params"] == "9408"
    assert props["onnxcost.status"] == "ok"
    assert _props(m.metadata_props)["onnxcost.macs"] == "1814073344"
    # Every main-graph node carries its costs; weights are the input's.
    assert all("onnxcost.macs" in _props(n.metadata_props) for n in m.graph.node)
    original = onnx.load(str(model))
    assert [t.raw_data for t in m.graph.initializer] == [
        t.raw_data for t in original.graph.initializer
    ]


def test_never_writes_the_input(model: Path, tmp_path: Path) -> None:
    before = hashlib.sha256(model.read_bytes()).hexdigest()
    result = runner.invoke(app, ["annotate", str(model), str(model), "--force"])
    assert result.exit_code == 1
    assert "input model" in result.output
    link = tmp_path / "link.onnx"
    os.symlink(model, link)
    result = runner.invoke(app, ["annotate", str(model), str(link), "--force"])
    assert result.exit_code == 1
    assert hashlib.sha256(model.read_bytes()).hexdigest() == before


def test_existing_model_needs_force(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "a.onnx"
    assert runner.invoke(app, ["annotate", str(model), str(out)]).exit_code == 0
    result = runner.invoke(app, ["annotate", str(model), str(out)])
    assert result.exit_code == 1
    assert "--force" in result.output
    assert runner.invoke(app, ["annotate", str(model), str(out), "--force"]).exit_code == 0
    # No temporary file is left beside it.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.onnx", "in"]


def test_external_data_stays_in_its_folder(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    src = zoo.save("mlp", tmp_path / "m" / "m.onnx", weights=False)
    elsewhere = tmp_path / "a.onnx"
    result = runner.invoke(app, ["annotate", str(src), str(elsewhere)])
    assert result.exit_code == 1
    assert "external data" in result.output
    assert not elsewhere.exists()
    beside = src.parent / "a.onnx"
    assert runner.invoke(app, ["annotate", str(src), str(beside)]).exit_code == 0
