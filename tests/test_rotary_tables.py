"""A rotary embedding's cos and sin tables, folded into stored tensors (analysis.rotary) or
computed in the graph from constants (weights._trigonometric), are no params. Expected
counts are worked out by hand in the comments."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import onnxcost

F = TensorProto.FLOAT
ANGLES = np.arange(4.0)[:, None] * np.array([1.0, 0.1])  # 4 positions x inv_freq [1, 0.1]


def _params_of(nodes: list[onnx.NodeProto], stored: list[onnx.TensorProto], x: list[int]) -> int:
    """The params counted in the graph of ``nodes`` from x (``x``'s shape) to y."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, x)],
        [helper.make_tensor_value_info("y", F, None)],
        stored,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return onnxcost.analyze(model).totals.params


def _applied(
    cos: np.ndarray, sin: np.ndarray, names: tuple[str, str] = ("unsqueeze_14", "unsqueeze_15")
) -> int:
    """q [1, 2, 4, 2] * cos + q * sin, the two stored as the dynamo exporter folds them."""
    nodes = [
        helper.make_node("Mul", ["x", names[0]], ["a"]),
        helper.make_node("Mul", ["x", names[1]], ["b"]),
        helper.make_node("Add", ["a", "b"], ["y"]),
    ]
    stored = [
        numpy_helper.from_array(cos, names[0]),
        numpy_helper.from_array(sin, names[1]),
    ]
    return _params_of(nodes, stored, [1, 2, 4, 2])


def test_folded_cos_and_sin_tables_are_no_params() -> None:
    cos, sin = np.cos(ANGLES)[None, None], np.sin(ANGLES)[None, None]  # [1, 1, 4, 2] each
    # Mistral's unsqueeze_14 and unsqueeze_15 at 4 positions: 0 (2 x 8 = 16 were counted)
    assert _applied(cos.astype(np.float32), sin.astype(np.float32)) == 0
    # in float16, c² + s² is 1 to float16's precision: 0
    assert _applied(cos.astype(np.float16), sin.astype(np.float16)) == 0
    # two tensors of values in [-1, 1] not on the unit circle (weights): 16, as stored
    rng = np.random.default_rng(0)
    weights = rng.uniform(-1, 1, (2, 1, 1, 4, 2)).astype(np.float32)
    assert _applied(weights[0], weights[1]) == 16
    # a scale of ones beside a layer scale of 1e-5 (PoolFormer's, 1 + 1e-10 on the
    # circle to float32's precision) varies over no position: 16, as stored
    ones, small = np.ones((1, 1, 4, 2), np.float32), np.full((1, 1, 4, 2), 1e-5, np.float32)
    assert _applied(ones, small) == 16
    # stored under a param's path (rope.cos, rope.sin): the model's own, not read, 16
    named = ("rope.cos", "rope.sin")
    assert _applied(cos.astype(np.float32), sin.astype(np.float32), names=named) == 16


def test_sin_and_cos_side_by_side_are_no_params() -> None:
    # GPT-J's embed_positions, sin and cos concatenated on the last dim ([1, 4, 4]), split
    # where it is applied: 0 (16 were counted)
    table = np.concatenate([np.sin(ANGLES), np.cos(ANGLES)], axis=-1)[None].astype(np.float32)
    nodes = [
        helper.make_node("Split", ["index_4", "halves"], ["s", "c"], axis=-1),
        helper.make_node("Mul", ["x", "s"], ["a"]),
        helper.make_node("Mul", ["x", "c"], ["b"]),
        helper.make_node("Add", ["a", "b"], ["y"]),
    ]
    stored = [
        numpy_helper.from_array(table, "index_4"),
        numpy_helper.from_array(np.array([2, 2], np.int64), "halves"),
    ]
    assert _params_of(nodes, stored, [1, 4, 2]) == 0


def test_a_table_in_a_constant_gathered_at_the_positions_is_no_param() -> None:
    # the TorchScript export of GPT-J: embed_positions ([4 positions, sin | cos], a buffer) as
    # a Constant, gathered at the positions: 0 (16 were counted)
    table = np.concatenate([np.sin(ANGLES), np.cos(ANGLES)], axis=-1).astype(np.float32)
    value = numpy_helper.from_array(table, "/rotary_emb/Constant_output_0")
    nodes = [
        helper.make_node("Constant", [], [value.name], value=value),
        helper.make_node("Gather", [value.name, "positions"], ["rows"]),
        helper.make_node("Mul", ["x", "rows"], ["y"]),
    ]
    stored = [numpy_helper.from_array(np.arange(4, dtype=np.int64), "positions")]
    assert _params_of(nodes, stored, [4, 4]) == 0


def test_a_table_computed_from_constants_by_cos_is_no_param() -> None:
    # the TorchScript exporter: cos(positions x inv_freq) computed in the graph from a stored
    # inv_freq [2] and positions [4, 1]: nothing counts behind the Cos (4 + 2 = 6 were
    # counted: the stored tensors it is computed from)
    def rotary(trig: str) -> list[onnx.NodeProto]:
        return [
            helper.make_node("Mul", ["positions", "inv_freq"], ["angles"]),
            helper.make_node(trig, ["angles"], ["table"]),
            helper.make_node("Mul", ["x", "table"], ["y"]),
        ]

    stored = [
        numpy_helper.from_array(np.arange(4.0, dtype=np.float32)[:, None], "positions"),
        numpy_helper.from_array(np.array([1.0, 0.1], np.float32), "inv_freq"),
    ]
    assert _params_of(rotary("Cos"), stored, [4, 2]) == 0
    assert _params_of(rotary("Sin"), stored, [4, 2]) == 0
    # an Exp of the same constants is no position table: what it is computed from, 6
    assert _params_of(rotary("Exp"), stored, [4, 2]) == 6
