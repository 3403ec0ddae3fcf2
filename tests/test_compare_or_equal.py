"""LessOrEqual and GreaterOrEqual at opsets 12 to 15, which ONNX 1.23 types without a shape
(they are functions of Less, Greater and Equal there): transformers' causal mask exported at
opset 14 left about 85 nodes of a decoder unknown_shape, counted 0."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import onnxcost


def _mask(op: str, opset: int) -> onnx.ModelProto:
    """a [n, 1, s] op b [1, s, 1] -> Cast to float -> Relu."""
    graph = helper.make_graph(
        [
            helper.make_node(op, ["a", "b"], ["c"]),
            helper.make_node("Cast", ["c"], ["d"], to=TensorProto.FLOAT),
            helper.make_node("Relu", ["d"], ["e"]),
        ],
        "mask",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["n", 1, "s"]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, "s", 1]),
        ],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


@pytest.mark.parametrize("op", ["LessOrEqual", "GreaterOrEqual"])
@pytest.mark.parametrize("opset", [12, 14, 15, 16])
def test_a_mask_compared_or_equal_has_its_shape_at_every_opset(op: str, opset: int) -> None:
    # At n = 2, s = 5 the broadcast of [2, 1, 5] and [1, 5, 1] is [2, 5, 5]: 50 compares
    # (one FLOP each) and 50 in the Relu; as onnxruntime's output has it.
    model = _mask(op, opset)
    a = onnxcost.analyze(model, dims={"n": 2, "s": 5})
    assert [r.status for r in a.nodes] == ["ok", "zero", "ok"], a.warnings
    assert a.nodes[0].output_shapes == ((2, 5, 5),)
    assert (a.nodes[0].flops, a.nodes[2].flops) == (50, 50)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {"a": np.zeros((2, 1, 5), np.float32), "b": np.zeros((1, 5, 1), np.float32)}
    assert session.run(None, feeds)[0].shape == (2, 5, 5)
    flops = onnxcost.analyze(model, symbolic=True).formulas["flops"]
    assert flops is not None
    assert flops.evaluate({"n": 3, "s": 7}) == 2 * 3 * 7 * 7  # the compares and the Relu
