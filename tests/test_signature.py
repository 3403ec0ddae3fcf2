"""analysis.signature: a tensor torch's graph signature names as a buffer or a constant is no
param. Expected counts are worked out by hand in the comments."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import onnxcost
from onnxcost.analysis.signature import SIGNATURE

F = TensorProto.FLOAT


def _analysed(kind: str | None) -> tuple[int, int]:
    """x [2, 8] -> Mul by ``rope.inv_freq`` [8] -> BatchNormalization by ``bn.*`` [8] each,
    with a graph signature naming inv_freq of ``kind`` (none without): (params, stat_params)."""
    nodes = [
        helper.make_node("Mul", ["x", "rope.inv_freq"], ["h"]),
        helper.make_node(
            "BatchNormalization",
            ["h4", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
            ["y4"],
        ),
    ]
    nodes[1:1] = [helper.make_node("Reshape", ["h", "four"], ["h4"])]
    inits = [
        numpy_helper.from_array(np.linspace(1.0, 0.01, 8, dtype=np.float32), "rope.inv_freq"),
        numpy_helper.from_array(np.array([2, 8, 1, 1], np.int64), "four"),
    ]
    for name, value in (
        ("weight", 1.5),
        ("bias", 0.5),
        ("running_mean", 0.1),
        ("running_var", 2.0),
    ):
        inits.append(numpy_helper.from_array(np.full(8, value, np.float32), f"bn.{name}"))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, [2, 8])],
        [helper.make_tensor_value_info("y4", F, [2, 8, 1, 1])],
        inits,
    )
    if kind is not None:
        lines = [
            "",
            "# inputs",
            "p_bn_weight: PARAMETER target='bn.weight'",
            "p_bn_bias: PARAMETER target='bn.bias'",
            "b_bn_running_mean: BUFFER target='bn.running_mean' persistent=True",
            "b_bn_running_var: BUFFER target='bn.running_var' persistent=True",
            f"b_rope_inv_freq: {kind} target='rope.inv_freq' persistent=False",
            "x: USER_INPUT",
        ]
        entry = graph.metadata_props.add()
        entry.key, entry.value = SIGNATURE, "\n".join(lines)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    a = onnxcost.analyze(model)
    return a.totals.params, a.totals.stat_params


def test_a_buffer_read_as_a_weight_is_no_param() -> None:
    # a rotary embedding's inv_freq [8], torch's buffer: the BatchNorm's weight and bias,
    # 8 + 8 = 16 params, and its running mean and variance, 16 statistics (both buffers)
    assert _analysed("BUFFER") == (16, 16)
    # a constant torch lifted from the forward: no param either
    assert _analysed("CONSTANT_TENSOR") == (16, 16)
    # named a parameter, or no signature (another exporter): 8 + 16 = 24 params
    assert _analysed("PARAMETER") == (24, 16)
    assert _analysed(None) == (24, 16)
