"""Elementwise cost formulas: one FLOP per primitive per element, transcendentals count 1."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import onnxcost
from onnxcost.analysis.records import NodeRecord

NodeOf = Callable[..., NodeRecord]
AnalysisOf = Callable[..., onnxcost.Analysis]


def model(signature: str, body: str, opset: int = 21) -> str:
    return f'<ir_version: 10, opset_import: ["" : {opset}]>\ng {signature} {{ {body} }}'


# X is 1x3x4x4 = 48 elements throughout.
@pytest.mark.parametrize(
    ("op", "opset", "flops"),
    [
        ("Relu", 21, 48),  # max: 48 x 1
        ("Abs", 21, 48),  # 48 x 1
        ("Neg", 21, 48),  # 48 x 1
        ("Exp", 21, 48),  # a transcendental counts 1: 48 x 1
        ("Tanh", 21, 48),  # 48 x 1
        ("Erf", 21, 48),  # 48 x 1
        ("Sqrt", 21, 48),  # 48 x 1
        ("Cos", 21, 48),  # 48 x 1
        ("Floor", 21, 48),  # 48 x 1
        ("ThresholdedRelu", 21, 48),  # compare: 48 x 1
        ("LeakyRelu", 21, 96),  # compare, mul: 48 x 2
        ("Shrink", 21, 144),  # 2 compares, add: 48 x 3
        ("Elu", 21, 192),  # compare, exp, sub, mul: 48 x 4
        ("Selu", 21, 240),  # compare, exp, mul, sub, mul: 48 x 5
        ("Celu", 21, 336),  # max, div, exp, sub, mul, min, add: 48 x 7
        ("Sigmoid", 21, 192),  # neg, exp, add, div: 48 x 4
        ("HardSigmoid", 21, 192),  # mul, add, min, max: 48 x 4
        ("HardSwish", 22, 240),  # HardSigmoid 4 + mul: 48 x 5
        ("Softplus", 21, 144),  # exp, add, log: 48 x 3
        ("Softsign", 21, 144),  # abs, add, div: 48 x 3
        ("Mish", 21, 240),  # softplus 3, tanh, mul: 48 x 5
        ("Gelu", 20, 240),  # div, erf, add, mul, mul: 48 x 5
        ('Gelu<approximate="tanh">', 20, 384),  # pow, mul, add, mul, tanh, add, mul, mul: 48 x 8
        ("Swish", 24, 240),  # alpha = 1: sigmoid 4 + mul: 48 x 5
        ("Swish<alpha=2.0>", 24, 288),  # alpha x, sigmoid 4, mul: 48 x 6
    ],
)
def test_unary_activation(node_of: NodeOf, op: str, opset: int, flops: int) -> None:
    rec = node_of(model("(float[1,3,4,4] x) => (float y)", f"y = {op}(x)", opset))
    assert rec.status == "ok"
    assert rec.macs == 0
    assert rec.flops == flops


@pytest.mark.parametrize(
    ("op", "in_type", "out_type"),
    [
        ("Not", "bool", "bool"),
        ("IsNaN", "float", "bool"),
        ("IsInf", "float", "bool"),
        ("Sign", "float", "float"),
        ("BitwiseNot", "int32", "int32"),
    ],
)
def test_unary_typed(node_of: NodeOf, op: str, in_type: str, out_type: str) -> None:
    rec = node_of(model(f"({in_type}[2,3] x) => ({out_type} y)", f"y = {op}(x)"))
    assert rec.flops == 6  # 2x3 = 6 elements, 1 each


@pytest.mark.parametrize(
    ("op", "a", "b", "flops"),
    [
        ("Add", "float[2,3,4]", "float[2,3,4]", 24),  # same shape: 2x3x4 = 24
        ("Add", "float[2,3,4]", "float[4]", 24),  # broadcast: Y is 2x3x4 = 24
        ("Mul", "float[2,1,4]", "float[1,3,1]", 24),  # both broadcast: Y is 2x3x4 = 24
        ("Sub", "float[1]", "float[5,6]", 30),  # Y is 5x6 = 30
        ("Div", "float[3,4]", "float[3,4]", 12),  # 3x4 = 12
        ("Pow", "float[3,4]", "float[1]", 12),  # one pow per element: 12
        ("Mod", "int32[3,4]", "int32[3,4]", 12),  # 12
        ("Less", "float[2,3,4]", "float[4]", 24),  # bool Y is 2x3x4 = 24 compares
        ("GreaterOrEqual", "float[2,3]", "float[2,3]", 6),  # 6 compares
        ("Equal", "int64[2,3]", "int64[1]", 6),  # 6 compares
        ("And", "bool[4,4]", "bool[4]", 16),  # 4x4 = 16
        ("BitwiseXor", "int32[4,4]", "int32[4,4]", 16),  # 16
    ],
)
def test_binary_broadcast(node_of: NodeOf, op: str, a: str, b: str, flops: int) -> None:
    out = "bool" if op in ("Less", "GreaterOrEqual", "Equal", "And") else a.split("[")[0]
    rec = node_of(model(f"({a} a, {b} b) => ({out} y)", f"y = {op}(a, b)"))
    assert rec.status == "ok"
    assert rec.flops == flops


def test_bitshift(node_of: NodeOf) -> None:
    text = model(
        "(uint32[2,8] a, uint32[2,8] b) => (uint32 y)", 'y = BitShift<direction="LEFT">(a, b)'
    )
    assert node_of(text).flops == 16  # 2x8 = 16 shifts


@pytest.mark.parametrize(
    ("dtype", "itemsize"),
    [("float", 4), ("float16", 2), ("bfloat16", 2), ("double", 8)],
)
def test_add_bytes_follow_dtype(node_of: NodeOf, dtype: str, itemsize: int) -> None:
    rec = node_of(model(f"({dtype}[2,3,4] a, {dtype}[4] b) => ({dtype} y)", "y = Add(a, b)"))
    assert rec.flops == 24  # 2x3x4 = 24, whatever the dtype
    assert rec.bytes_read == (24 + 4) * itemsize  # A 24 + B 4 elements
    assert rec.bytes_written == 24 * itemsize


def test_prelu_slope_is_a_param(node_of: NodeOf) -> None:
    text = model(
        "(float[2,3,4,4] x) => (float y) <float[3,1,1] slope = {0.1, 0.2, 0.3}>",
        "y = PRelu(x, slope)",
    )
    rec = node_of(text)
    assert rec.flops == 192  # 2x3x4x4 = 96 elements x 2 (compare, mul)
    assert rec.params == 3  # slope [3,1,1]


def test_prelu_one_shared_slope_is_a_param(node_of: NodeOf) -> None:
    # torch's PReLU() learns one slope for every channel; the TorchScript exporter writes it
    # [1, 1, 1]: torch's sum(p.numel()) counts it, 1 param (it was left out as a lone scalar)
    text = model(
        "(float[2,3,4,4] x) => (float y) <float[1,1,1] slope = {0.25}>", "y = PRelu(x, slope)"
    )
    assert node_of(text).params == 1


@pytest.mark.parametrize(
    ("op", "n", "flops"),
    [
        ("Sum", 1, 0),  # one input: a copy
        ("Sum", 2, 24),  # (2-1) x 24
        ("Sum", 3, 48),  # (3-1) x 24
        ("Max", 3, 48),  # (3-1) x 24 compares
        ("Min", 2, 24),  # (2-1) x 24
        ("Mean", 1, 0),  # one input: a copy
        ("Mean", 2, 48),  # (2-1) adds + 1 div = 2 x 24
        ("Mean", 3, 72),  # (3-1) adds + 1 div = 3 x 24
    ],
)
def test_variadic(node_of: NodeOf, op: str, n: int, flops: int) -> None:
    # The inputs broadcast to 2x3x4 = 24 elements: the first is full, the others smaller.
    shapes = ["float[2,3,4]", "float[3,4]", "float[4]"][:n]
    names = [f"x{i}" for i in range(n)]
    sig = (
        "(" + ", ".join(f"{s} {nm}" for s, nm in zip(shapes, names, strict=True)) + ") => (float y)"
    )
    rec = node_of(model(sig, f"y = {op}({', '.join(names)})"))
    assert rec.flops == flops
    assert rec.status == ("zero" if flops == 0 else "ok")


@pytest.mark.parametrize(
    ("opset", "call", "flops"),
    [
        (6, "Clip<min=0.0, max=6.0>(x)", 24),  # attribute bounds: min, max = 2 x 12
        (6, "Clip(x)", 24),  # default bounds are +-FLT_MAX, still applied: 2 x 12
        (13, "Clip(x, lo, hi)", 24),  # both bounds: 2 x 12
        (13, "Clip(x, lo)", 12),  # min only: 1 x 12
        (13, "Clip(x, , hi)", 12),  # max only: 1 x 12
        (13, "Clip(x)", 0),  # no bounds: a copy
    ],
)
def test_clip_by_opset(node_of: NodeOf, opset: int, call: str, flops: int) -> None:
    sig = "(float[3,4] x) => (float y)"
    if opset >= 11:
        sig += " <float lo = {0.0}, float hi = {6.0}>"
    rec = node_of(model(sig, f"y = {call}", opset))
    assert rec.flops == flops  # X is 3x4 = 12 elements
    assert rec.params == 0


def test_where_is_zero(node_of: NodeOf) -> None:
    text = model("(bool[2,3] c, float[2,3] a, float[2,3] b) => (float y)", "y = Where(c, a, b)")
    rec = node_of(text)
    assert rec.status == "zero"
    assert rec.flops == 0
    assert rec.bytes_read == 6 + 24 + 24  # bool 6 x 1 + two float 6 x 4


def test_range(node_of: NodeOf) -> None:
    text = model(
        "() => (float y) <float a = {0.0}, float b = {10.0}, float d = {1.0}>",
        "y = Range(a, b, d)",
    )
    rec = node_of(text)
    assert rec.flops == 10  # 10 elements, one add each
    assert rec.params == 0


@pytest.mark.parametrize(
    ("call", "flops"),
    [
        ("RandomUniform<shape=[2,5]>()", 20),  # 10 draws, scale + shift
        ("RandomNormal<shape=[3,4]>()", 24),  # 12 draws, scale + shift
    ],
)
def test_random(node_of: NodeOf, call: str, flops: int) -> None:
    assert node_of(model("() => (float y)", f"y = {call}")).flops == flops


def test_random_like_and_bernoulli(analysis_of: AnalysisOf) -> None:
    text = model(
        "(float[2,3] x) => (float y, float z)",
        "y = RandomUniformLike(x) z = Bernoulli(x)",
    )
    flops = {n.op_type: n.flops for n in analysis_of(text).nodes}
    assert flops["RandomUniformLike"] == 12  # 6 draws x 2 (scale, shift)
    assert flops["Bernoulli"] == 6  # 6 compares


def test_multinomial(node_of: NodeOf) -> None:
    text = model("(float[2,5] x) => (int32 y)", "y = Multinomial<sample_size=3>(x)")
    # per batch row: exp 5 + running sum 4 = 9; per sample 1 scale + ceil(log2 5) = 3 compares
    # = 2 x (9 + 3 x 4) = 42
    assert node_of(text).flops == 42


@pytest.mark.parametrize(
    ("op", "flops"),
    [
        ("HannWindow", 32),  # 8 x 4 (angle mul, cos, mul, sub)
        ("HammingWindow", 32),  # 8 x 4
        ("BlackmanWindow", 64),  # 8 x 8 (two cosine terms)
    ],
)
def test_windows(node_of: NodeOf, op: str, flops: int) -> None:
    rec = node_of(model("() => (float w) <int64 n = {8}>", f"w = {op}(n)", 17))
    assert rec.flops == flops
    assert rec.params == 0


def test_mel_weight_matrix(node_of: NodeOf) -> None:
    text = model(
        "() => (float y) <int64 nb = {8}, int64 dl = {16}, int64 sr = {8000}, float lo = {0.0}, float hi = {4000.0}>",
        "y = MelWeightMatrix(nb, dl, sr, lo, hi)",
        17,
    )
    rec = node_of(text)
    assert rec.output_shapes == ((9, 8),)  # dft_length / 2 + 1 = 9 bins x 8 mel bins
    assert rec.flops == 144  # 72 entries x 2 (sub, div)
