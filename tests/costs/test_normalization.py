"""Normalization cost formulas, and BatchNorm statistics kept apart from params."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import onnx
import pytest
from onnx import helper

import onnxcost
from onnxcost.analysis.records import NodeRecord
from onnxcost.costs import REGISTRY, Cost, OpContext, TensorInfo
from onnxcost.costs.normalization import lrn_window_adds

NodeOf = Callable[..., NodeRecord]
AnalysisOf = Callable[..., onnxcost.Analysis]


def model(signature: str, body: str, opset: int = 21) -> str:
    return f'<ir_version: 10, opset_import: ["" : {opset}]>\ng {signature} {{ {body} }}'


def formula_cost(op: str, shapes: list[tuple[int, ...]], opset: int, **attrs: Any) -> Cost:
    """The formula on float tensors, output shaped like input 0: for ops ONNX cannot infer."""
    node = helper.make_node(op, [f"x{i}" for i in range(len(shapes))], ["y"], **attrs)
    f32 = onnx.TensorProto.FLOAT
    inputs = tuple(TensorInfo(f"x{i}", f32, s) for i, s in enumerate(shapes))
    spec = REGISTRY.lookup("", op, opset)
    assert spec is not None
    return spec.formula(OpContext(node, opset, inputs, (TensorInfo("y", f32, shapes[0]),)))


_BN_WEIGHTS = (
    "<float[3] s = {1.0, 1.0, 1.0}, float[3] b = {0.0, 0.0, 0.0},"
    " float[3] m = {0.0, 0.0, 0.0}, float[3] v = {1.0, 1.0, 1.0}>"
)


def test_batch_norm_inference(analysis_of: AnalysisOf) -> None:
    text = model(
        f"(float[2,3,4,4] x) => (float y) {_BN_WEIGHTS}",
        "y = BatchNormalization(x, s, b, m, v)",
        15,
    )
    a = analysis_of(text)
    (rec,) = a.nodes
    # 2x3x4x4 = 96 elements x 4 (sub, div, mul, add) + 3 channels x 2 (add eps, sqrt) = 390
    assert rec.flops == 390
    assert rec.macs == 0
    assert rec.params == 6  # scale 3 + bias 3
    assert a.totals.params == 6
    assert a.totals.stat_params == 6  # running mean 3 + var 3: statistics, not params


@pytest.mark.parametrize("opset", [7, 9, 14])
def test_batch_norm_inference_opsets(node_of: NodeOf, opset: int) -> None:
    text = model(
        f"(float[2,3,4,4] x) => (float y) {_BN_WEIGHTS}",
        "y = BatchNormalization(x, s, b, m, v)",
        opset,
    )
    assert node_of(text).flops == 390  # 96 x 4 + 3 x 2, as above


def test_batch_norm_training(node_of: NodeOf) -> None:
    text = model(
        f"(float[2,3,4,4] x) => (float y, float rm, float rv) {_BN_WEIGHTS}",
        "y, rm, rv = BatchNormalization<training_mode=1>(x, s, b, m, v)",
        15,
    )
    # inference part 390; batch mean 96, variance 3 x 96; running updates 3 channels x 2 x 3
    # = 390 + 384 + 18 = 792
    assert node_of(text).flops == 792


@pytest.mark.parametrize(
    ("attrs", "bias", "flops"),
    [
        ("", True, 590),  # rows 2x5 = 10: 6 x 80 + 3 x 10 = 510, + bias 80 = 590
        ("", False, 510),  # no bias: 6 x 80 + 3 x 10
        ("<axis=1>", False, 486),  # rows 2: 6 x 80 + 3 x 2
        ("<axis=0>", False, 483),  # rows 1 (empty product): 6 x 80 + 3
    ],
)
def test_layer_norm(node_of: NodeOf, attrs: str, bias: bool, flops: int) -> None:
    # X is 2x5x8 = 80 elements. Scale and B are shaped like the normalized dims.
    axis = {"": 2, "<axis=1>": 1, "<axis=0>": 0}[attrs]
    dims = [2, 5, 8][axis:]
    n = math.prod(dims)
    shape = ",".join(str(d) for d in dims)
    ones = ", ".join(["1.0"] * n)
    inits = f"<float[{shape}] sc = {{{ones}}}" + (
        f", float[{shape}] bi = {{{ones}}}>" if bias else ">"
    )
    call = f"y = LayerNormalization{attrs}(x, sc{', bi' if bias else ''})"
    rec = node_of(model(f"(float[2,5,8] x) => (float y) {inits}", call, 17))
    assert rec.flops == flops
    assert rec.params == n * (2 if bias else 1)


@pytest.mark.parametrize(("opset", "affine"), [(18, 3), (21, 6)])
def test_group_norm(opset: int, affine: int) -> None:
    # ONNX 1.23 infers no output shape for GroupNormalization: the formula is called directly.
    # Scale and bias are [num_groups] at opset 18 and [C] from 21; the count is the same.
    cost = formula_cost(
        "GroupNormalization", [(2, 6, 4, 4), (affine,), (affine,)], opset, num_groups=3
    )
    # 2x6x4x4 = 192 elements x 7 (mean, sub, square, var, mul, scale, bias) + 2x3 groups x 3 = 1362
    assert cost == Cost(flops=1362)


def test_instance_norm(node_of: NodeOf) -> None:
    text = model(
        "(float[2,3,4,4] x) => (float y) <float[3] s = {1,1,1}, float[3] b = {0,0,0}>",
        "y = InstanceNormalization(x, s, b)",
    )
    rec = node_of(text)
    assert rec.flops == 690  # 96 elements x 7 + 2x3 instances x 3 = 672 + 18
    assert rec.params == 6


@pytest.mark.parametrize(
    ("attrs", "flops"),
    [
        ("", 350),  # rows 2x5 = 10: 4 x 80 + 3 x 10
        ("<axis=1>", 326),  # rows 2: 4 x 80 + 3 x 2
    ],
)
def test_rms_norm(node_of: NodeOf, attrs: str, flops: int) -> None:
    scale = "float[8] s = {1,1,1,1,1,1,1,1}"
    if attrs:
        scale = "float[5,8] s = {" + ", ".join(["1"] * 40) + "}"
    text = model(
        f"(float[2,5,8] x) => (float y) <{scale}>", f"y = RMSNormalization{attrs}(x, s)", 23
    )
    assert node_of(text).flops == flops


@pytest.mark.parametrize(
    ("attrs", "flops"),
    [
        ("", 72),  # p=2: square, sum, sqrt, div: 3 x 24
        ("<p=1>", 66),  # p=1: abs, sum, div: 3 x 24 - 6 rows (2x3)
        ("<axis=0, p=2>", 72),  # p=2 is 3 x 24 whatever the axis
        ("<axis=0, p=1>", 60),  # rows 3x4 = 12: 3 x 24 - 12
    ],
)
def test_lp_norm(node_of: NodeOf, attrs: str, flops: int) -> None:
    assert (
        node_of(model("(float[2,3,4] x) => (float y)", f"y = LpNormalization{attrs}(x)")).flops
        == flops
    )


@pytest.mark.parametrize(
    ("attrs", "flops"),
    [
        ({}, 492),  # axes [0,2,3]: groups 3 (channels): 5 x 96 + 4 x 3
        ({"axes": [2, 3]}, 504),  # groups 2x3 = 6: 5 x 96 + 4 x 6
        ({"axes": [-1]}, 576),  # groups 2x3x4 = 24: 5 x 96 + 4 x 24
    ],
)
def test_mean_variance_norm(attrs: dict[str, Any], flops: int) -> None:
    # ONNX 1.23 infers no output shape for MeanVarianceNormalization: the formula is called directly.
    assert formula_cost("MeanVarianceNormalization", [(2, 3, 4, 4)], 13, **attrs) == Cost(
        flops=flops
    )


@pytest.mark.parametrize(
    ("channels", "size", "adds"),
    [
        (5, 3, 8),  # windows [0,1] [0,2] [1,3] [2,4] [3,4]: 1 + 2 + 2 + 2 + 1
        (5, 1, 0),  # a window of one channel needs no add
        (4, 2, 3),  # window [c, c+1]: 1 + 1 + 1 + 0
        (3, 5, 6),  # every window spans all 3 channels: 3 x 2
    ],
)
def test_lrn_window_adds(channels: int, size: int, adds: int) -> None:
    assert lrn_window_adds(channels, size) == adds


def test_lrn(node_of: NodeOf) -> None:
    text = model("(float[1,5,2,2] x) => (float y)", "y = LRN<size=3>(x)")
    # 20 elements x 5 (square, x alpha/size, + bias, pow, div) + 4 positions x 8 window adds
    assert node_of(text).flops == 132
