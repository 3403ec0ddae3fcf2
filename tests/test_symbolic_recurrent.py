"""LSTM, GRU and RNN in the symbolic walk (issue 22): their output shapes carried, so a
recurrent model's formulas come from the one walk (with a peak) instead of sampled
analyses, and each is its hand count at every point checked."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxcost
from onnxcost.symbolic.shapes import symbolic_shapes

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _model(op: str, directions: int, layout: int) -> onnx.ModelProto:
    """x [s, b, 4] ([b, s, 4] with layout 1) -> op (hidden 8) -> Y -> Relu."""
    g, rng = GATES[op], np.random.default_rng(0)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    dims = ["b", "s", 4] if layout else ["s", "b", 4]
    attrs: dict[str, object] = {"hidden_size": 8}
    if directions == 2:
        attrs["direction"] = "bidirectional"
    if layout:
        attrs["layout"] = 1
    nodes = [
        helper.make_node(op, ["x", "w", "r"], ["y", "y_h"], **attrs),  # type: ignore[arg-type]
        helper.make_node("Relu", ["y"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes,
        "rnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [
            helper.make_tensor_value_info("z", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("y_h", TensorProto.FLOAT, None),
        ],
        [weight("w", directions, g * 8, 4), weight("r", directions, g * 8, 8)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


@pytest.mark.parametrize(
    ("op", "directions", "layout"),
    [("LSTM", 1, 0), ("GRU", 2, 0), ("RNN", 1, 1), ("LSTM", 2, 1)],
)
def test_a_recurrent_layer_is_walked_once_and_costs_its_hand_count(
    op: str, directions: int, layout: int
) -> None:
    # MACs: D directions x s steps x b rows x G gates x H (I + H) = D·G·8·12·b·s: an LSTM
    # 4 x 96 = 384·b·s, a bidirectional GRU 2 x 3 x 96 = 576·b·s, an RNN 96·b·s. Y is
    # [s, D, b, 8] ([b, s, D, 8] with layout 1): the Relu writes 4·D·8·b·s bytes.
    model = _model(op, directions, layout)
    assert not symbolic_shapes(model).uncarried
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert not any("sampled" in w for w in a.warnings), a.warnings
    macs = a.symbolic.nodes[0]["macs"]
    relu = a.symbolic.nodes[1]["bytes_written"]
    assert macs is not None
    assert relu is not None
    assert a.formulas["peak_activation_bytes"] is not None, a.warnings
    per = directions * GATES[op] * 8 * 12
    for b, s in ((1, 1), (2, 5), (3, 7)):
        point = {"b": b, "s": s}
        assert macs.evaluate(point) == per * b * s
        assert relu.evaluate(point) == 4 * directions * 8 * b * s
        want = onnxcost.analyze(model, dims=point)
        assert want.nodes[0].macs == per * b * s
        for key, f in a.formulas.items():
            if f is not None:
                assert f.evaluate(point) == getattr(want.totals, key), (key, point)


def test_the_last_step_squeezed_leaves_out_an_empty_sequence() -> None:
    # tf2onnx's Keras LSTM: Y [s, 1, b, 8] -> Y[-1:] (the last step, [min(1, s), 1, b, 8]) ->
    # Squeeze axes 0, 1 -> [b, 8]. At s = 0 the slice is empty and ONNX refuses to squeeze a
    # dim of 0: the model has no s = 0. The walk squeezed it all the same, so the formulas
    # claimed s = 0 (and a concrete analysis there fails).
    model = _model("LSTM", 1, 0)
    graph = model.graph
    del graph.node[1:]
    del graph.output[:]
    ints = [("st", -1), ("en", 2**62), ("ax", 0)]
    graph.initializer.extend(numpy_helper.from_array(np.array([v], np.int64), n) for n, v in ints)
    graph.initializer.append(numpy_helper.from_array(np.array([0, 1], np.int64), "sq"))
    graph.node.extend(
        [
            helper.make_node("Slice", ["y", "st", "en", "ax"], ["last"]),
            helper.make_node("Squeeze", ["last", "sq"], ["h"]),
        ]
    )
    graph.output.append(helper.make_tensor_value_info("h", TensorProto.FLOAT, None))
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.zero_allowed == {"s": False, "b": True}
    assert any(w.startswith("s=0 is not a valid point") for w in a.warnings)
    with pytest.raises(onnxcost.errors.ShapeError):
        onnxcost.analyze(model, dims={"s": 0, "b": 2})
