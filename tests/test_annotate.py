"""onnxcost annotate: shapes and costs written into a copy, never over the input."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from typer.testing import CliRunner

from onnxcost import zoo
from onnxcost.cli.app import app

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


POISON = b"\xde\xad\xbe\xef"
"""Weight bytes a test can recognise (as float32, a NaN)."""


def _big_inline_model(n: int) -> onnx.ModelProto:
    """Y = X @ W with W [n, n] float32 inline (raw_data of POISON), a Constant holding a
    unpacked double tensor (600 float64 fields, field 10 one by one) and an If whose branch
    has a large initializer of its own: every place the loader cuts a payload."""
    from onnx import TensorProto, helper

    w = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[n, n], raw_data=POISON * n * n)
    values = b"".join(bytes([10 << 3 | 1]) + np.float64(i).tobytes() for i in range(600))
    unpacked = TensorProto.FromString(
        TensorProto(name="d", data_type=TensorProto.DOUBLE, dims=[600]).SerializeToString() + values
    )
    branch_w = TensorProto(name="B", data_type=TensorProto.FLOAT, dims=[n], raw_data=POISON * n)
    out = [helper.make_tensor_value_info("b", TensorProto.FLOAT, [n])]
    then = helper.make_graph([helper.make_node("Identity", ["B"], ["b"])], "t", [], out, [branch_w])
    other = helper.make_graph([helper.make_node("Identity", ["B2"], ["b"])], "e", [], out)
    other.initializer.append(branch_w)
    other.initializer[0].name = "B2"
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm"),
            helper.make_node("Constant", [], ["D"], name="c", value=unpacked),
            helper.make_node("If", ["cond"], ["b"], name="if", then_branch=then, else_branch=other),
        ],
        "g",
        [
            helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, n]),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
        ],
        [
            helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, n]),
            helper.make_tensor_value_info("D", TensorProto.DOUBLE, [600]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [n]),
        ],
        [w],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _without_annotations(m: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(m)
    del copy.graph.value_info[:]
    del copy.metadata_props[:]
    for node in copy.graph.node:
        del node.metadata_props[:]
    return copy


def test_annotate_never_holds_the_inline_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tracemalloc

    import onnxcost.load.model

    monkeypatch.setattr(onnxcost.load.model, "LAZY_MIN_BYTES", 0)  # the large-file path, small file
    n = 2048
    source = _big_inline_model(n)
    path = tmp_path / "m.onnx"
    path.write_bytes(source.SerializeToString())
    weight_bytes = n * n * 4  # W: 2048 x 2048 float32 = 16 MiB
    out = tmp_path / "a.onnx"
    tracemalloc.start()
    try:
        result = runner.invoke(app, ["annotate", str(path), str(out)])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.exit_code == 0, result.output
    assert peak < weight_bytes // 8, peak  # W is never held, not even once
    m = onnx.load(str(out))
    # [1,2048] x [2048,2048]: 2048 * 2048 = 4,194,304 MACs in the annotation ...
    assert _props(m.metadata_props)["onnxcost.macs"] == "4194304"
    # ... and every weight, the unpacked one and the branch's, exactly as in the input.
    assert _without_annotations(m) == _without_annotations(source)
    assert m.graph.initializer[0].raw_data == POISON * n * n


def test_annotate_from_bytes_keeps_the_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    import onnxcost.load.model
    from onnxcost.report.annotate import annotated, write

    monkeypatch.setattr(onnxcost.load.model, "LAZY_MIN_BYTES", 0)
    source = _big_inline_model(512)  # 512 * 512 = 262,144 elements: past folding, cut
    data = source.SerializeToString()
    proto, _ = annotated(data)
    assert not proto.graph.initializer[0].raw_data  # cut when loaded ...
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"onnxcost-annotate-{os.getpid()}.onnx"
    try:
        write(proto, data, out)
        assert _without_annotations(onnx.load(str(out))) == _without_annotations(source)
    finally:
        out.unlink(missing_ok=True)
