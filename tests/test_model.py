"""Loading: bad files give one clear ModelLoadError; external data is checked, never read."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, external_data_helper, helper, numpy_helper
from onnxcost_testing import parse

import onnxcost
from onnxcost.errors import GraphError, ModelLoadError

TINY = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4] x) => (float[1,4] y) {
  y = Relu (x)
}"""


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="no such file"):
        onnxcost.analyze(tmp_path / "nope.onnx")


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="is a directory"):
        onnxcost.analyze(tmp_path)


def test_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "empty.onnx"
    p.write_bytes(b"")
    with pytest.raises(ModelLoadError, match="empty"):
        onnxcost.analyze(p)


def test_not_onnx(tmp_path: Path) -> None:
    p = tmp_path / "notes.onnx"
    p.write_text("this is a text file, not a model\n")
    with pytest.raises(ModelLoadError, match="not"):
        onnxcost.analyze(p)


def test_truncated_file(tmp_path: Path) -> None:
    p = tmp_path / "t.onnx"
    data = parse(TINY).SerializeToString()
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises((ModelLoadError, GraphError)):
        onnxcost.analyze(p)


def test_ir_version_too_new(tmp_path: Path) -> None:
    m = parse(TINY)
    m.ir_version = onnx.IR_VERSION + 5
    with pytest.raises(ModelLoadError, match="upgrade"):
        onnxcost.analyze(m.SerializeToString())


def _external_model(tmp_path: Path, location: str) -> Path:
    w = numpy_helper.from_array(np.ones((64, 64), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "m.onnx"
    onnx.save(model, path, save_as_external_data=True, location=location, size_threshold=0)
    return path


def test_external_data_is_checked_not_read(tmp_path: Path) -> None:
    path = _external_model(tmp_path, "m.data")
    a = onnxcost.analyze(path)
    # MatMul [1,64] x [64,64]: 64 x 64 = 4,096 MACs; params 4,096
    assert (a.totals.macs, a.totals.params) == (4_096, 4_096)
    # model_bytes counts the data file: 64 x 64 x 4 = 16,384 B of it
    assert a.model.model_bytes >= 16_384


def test_missing_external_data(tmp_path: Path) -> None:
    path = _external_model(tmp_path, "m.data")
    (tmp_path / "m.data").unlink()
    with pytest.raises(ModelLoadError, match="missing"):
        onnxcost.analyze(path)


def test_truncated_external_data(tmp_path: Path) -> None:
    path = _external_model(tmp_path, "m.data")
    os.truncate(tmp_path / "m.data", 100)
    with pytest.raises(ModelLoadError, match="truncated"):
        onnxcost.analyze(path)


def test_external_data_outside_the_folder_is_refused(tmp_path: Path) -> None:
    path = _external_model(tmp_path, "m.data")
    m = onnx.load(path, load_external_data=False)
    for e in m.graph.initializer[0].external_data:
        if e.key == "location":
            e.value = "../../etc/passwd"
    path.write_bytes(m.SerializeToString())
    with pytest.raises(ModelLoadError, match="path traversal"):
        onnxcost.analyze(path)


def _constant_external_model(tmp_path: Path) -> Path:
    """An external initializer w (64x64) and a Constant c (64x64) whose tensor is external too:
    two location keys in the file, one of them on a Constant."""
    w = numpy_helper.from_array(np.ones((64, 64), np.float32), "w")
    c = numpy_helper.from_array(np.ones((64, 64), np.float32), "c_value")
    graph = helper.make_graph(
        [
            helper.make_node("Constant", [], ["c"], value=c),
            helper.make_node("MatMul", ["x", "w"], ["h"]),
            helper.make_node("MatMul", ["h", "c"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "m.onnx"
    external_data_helper.convert_model_to_external_data(
        model, location="m.data", size_threshold=0, convert_attribute=True
    )
    onnx.save(model, path)
    assert onnx.load(path, load_external_data=False).graph.node[0].attribute[0].t.external_data
    return path


def test_constant_with_external_data_is_checked(tmp_path: Path) -> None:
    path = _constant_external_model(tmp_path)
    a = onnxcost.analyze(path)
    # two MatMuls [1,64] x [64,64]: 2 x 4,096 MACs; w and c are 4,096 params each
    assert (a.totals.macs, a.totals.params) == (8_192, 8_192)
    m = onnx.load(path, load_external_data=False)
    for e in m.graph.node[0].attribute[0].t.external_data:
        if e.key == "location":
            e.value = "../outside.data"
    path.write_bytes(m.SerializeToString())
    with pytest.raises(ModelLoadError, match=r"'c_value' points its external data outside"):
        onnxcost.analyze(path)


def test_input_file_is_never_modified(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    m = parse(TINY)
    m.graph.node[0].name = ""  # the analyzer names nodes: only in its own copy
    path.write_bytes(m.SerializeToString())
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    onnxcost.analyze(path, input_shapes={"x": (3, 4)}, allow_reshape=True)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_model_proto_argument_is_not_modified() -> None:
    m = parse(TINY)
    m.graph.node[0].name = ""
    before = m.SerializeToString()
    a = onnxcost.analyze(m, input_shapes={"x": (3, 4)}, allow_reshape=True)
    assert a.nodes[0].name == "Relu_0"
    assert m.SerializeToString() == before
