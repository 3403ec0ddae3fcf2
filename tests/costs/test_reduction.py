"""Reductions, the Softmax family, losses and transforms: n values reduced to one cost n - 1."""

from __future__ import annotations

from collections.abc import Callable

import onnx
import pytest
from onnxcost_testing import formula_cost

from onnxcost.analysis.records import NodeRecord
from onnxcost.costs import Cost
from onnxcost.costs.reduction import fft_flops

NodeOf = Callable[..., NodeRecord]


def model(signature: str, body: str, opset: int = 21) -> str:
    return f'<ir_version: 10, opset_import: ["" : {opset}]>\ng {signature} {{ {body} }}'


_F32 = onnx.TensorProto.FLOAT
_I64 = onnx.TensorProto.INT64


# X is 2x3x4 = 24 elements; reducing axis 1 leaves Y 2x1x4 = 8 (2x4 without keepdims).
_REDUCE = [
    ("ReduceSum", 16),  # 8 outputs x (3 - 1) adds = 24 - 8
    ("ReduceMax", 16),  # 24 - 8 compares
    ("ReduceMin", 16),  # 24 - 8
    ("ReduceProd", 16),  # 24 - 8 multiplies
    ("ReduceMean", 24),  # 16 adds + 8 divides
    ("ReduceLogSum", 24),  # 16 adds + 8 logs
    ("ReduceL1", 40),  # 24 abs + 16 adds
    ("ReduceSumSquare", 40),  # 24 squares + 16 adds
    ("ReduceL2", 48),  # 24 squares + 16 adds + 8 sqrts
    ("ReduceLogSumExp", 48),  # 24 exps + 16 adds + 8 logs
]


@pytest.mark.parametrize(("op", "flops"), _REDUCE)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_axes_input(node_of: NodeOf, op: str, flops: int, keepdims: int) -> None:
    text = model(
        "(float[2,3,4] x) => (float y) <int64[1] axes = {1}>",
        f"y = {op}<keepdims={keepdims}>(x, axes)",
        18,
    )
    rec = node_of(text)
    assert rec.flops == flops  # keepdims changes the shape, not numel(Y)
    assert rec.params == 0


@pytest.mark.parametrize(("op", "flops"), _REDUCE)
def test_reduce_axes_attribute(node_of: NodeOf, op: str, flops: int) -> None:
    # Opset 11: axes is an attribute for every Reduce op.
    rec = node_of(model("(float[2,3,4] x) => (float y)", f"y = {op}<axes=[1]>(x)", 11))
    assert rec.flops == flops


def test_reduce_sum_opset13_input(node_of: NodeOf) -> None:
    # ReduceSum took axes as an input at 13, five opsets before the others.
    text = model(
        "(float[2,3,4] x) => (float y) <int64[1] axes = {1}>", "y = ReduceSum(x, axes)", 13
    )
    assert node_of(text).flops == 16  # 24 - 8


@pytest.mark.parametrize(
    ("op", "flops"),
    [
        ("ReduceSum", 23),  # all 24 elements to 1: 23 adds
        ("ReduceMean", 24),  # 23 adds + 1 divide
        ("ReduceL2", 48),  # 24 squares + 23 adds + 1 sqrt
    ],
)
def test_reduce_all_axes(node_of: NodeOf, op: str, flops: int) -> None:
    assert node_of(model("(float[2,3,4] x) => (float y)", f"y = {op}(x)", 18)).flops == flops


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceL2"])
def test_reduce_noop_with_empty_axes(node_of: NodeOf, op: str) -> None:
    rec = node_of(
        model("(float[2,3,4] x) => (float y)", f"y = {op}<noop_with_empty_axes=1>(x)", 18)
    )
    assert rec.status == "zero"  # no axes: the output is the input
    assert rec.flops == 0


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_reduce(node_of: NodeOf, op: str) -> None:
    text = model("(float[2,3,4] x) => (int64 y)", f"y = {op}<axis=1, keepdims=0>(x)")
    assert node_of(text).flops == 16  # 8 outputs x 2 compares = 24 - 8


@pytest.mark.parametrize(("op", "opset"), [("CumSum", 14), ("CumProd", 26)])
def test_cumulative(node_of: NodeOf, op: str, opset: int) -> None:
    text = model("(float[2,3,4] x) => (float y) <int64 axis = {1}>", f"y = {op}(x, axis)", opset)
    assert node_of(text).flops == 24  # one per element of 2x3x4


@pytest.mark.parametrize(
    ("k", "flops"),
    [
        (1, 20),  # ceil(log2 2) = 1 compare per element x 2x10
        (3, 40),  # ceil(log2 4) = 2 x 20
        (4, 60),  # ceil(log2 5) = 3 x 20
    ],
)
def test_top_k(node_of: NodeOf, k: int, flops: int) -> None:
    text = model(
        f"(float[2,10] x) => (float v, int64 i) <int64[1] k = {{{k}}}>",
        "v, i = TopK(x, k)",
    )
    rec = node_of(text)
    assert rec.output_shapes == ((2, k), (2, k))
    assert rec.flops == flops


def test_top_k_opset1_attribute(node_of: NodeOf) -> None:
    text = model("(float[2,10] x) => (float v, int64 i)", "v, i = TopK<k=3>(x)", 1)
    assert node_of(text).flops == 40  # k = 3: ceil(log2 4) = 2 x 20


# X is 2x3x4 = 24 elements.
@pytest.mark.parametrize(
    ("op", "opset", "attrs", "flops"),
    [
        ("Softmax", 13, "", 108),  # rows 2x3 = 6 of 4: 5 x 24 - 2 x 6
        ("Softmax", 13, "<axis=1>", 104),  # rows 2x4 = 8 of 3: 120 - 16
        ("Softmax", 13, "<axis=0>", 96),  # rows 12 of 2: 120 - 24
        ("Softmax", 11, "", 116),  # coerced 2-D, axis 1: rows 2 of 12: 120 - 4
        ("Softmax", 11, "<axis=2>", 108),  # coerced 2-D, rows 2x3 = 6 of 4: 120 - 12
        ("Softmax", 1, "", 116),  # as opset 11
        ("LogSoftmax", 13, "", 114),  # 5 x 24 - 6 rows
        ("LogSoftmax", 11, "", 118),  # 120 - 2 rows
        ("Hardmax", 13, "", 18),  # 6 rows x 3 compares = 24 - 6
        ("Hardmax", 11, "", 22),  # 2 rows x 11 compares = 24 - 2
    ],
)
def test_softmax_family(node_of: NodeOf, op: str, opset: int, attrs: str, flops: int) -> None:
    assert (
        node_of(model("(float[2,3,4] x) => (float y)", f"y = {op}{attrs}(x)", opset)).flops == flops
    )


@pytest.mark.parametrize(
    ("op", "opset", "shape", "flops"),
    [
        # An axis of length 0 under rows that are not: rows of no element cost nothing.
        # Coerced to 2-D (opset < 13) at axis 1, [2, 0, 4] is 2 rows of 0 elements: 5 x 0 -
        # 2 x 2 gave -4 FLOPs.
        ("Softmax", 11, [2, 0, 4], 0),
        ("LogSoftmax", 11, [2, 0, 4], 0),  # not -2
        ("Hardmax", 11, [2, 0, 4], 0),  # not -2
        ("Softmax", 11, [2, 3, 1], 26),  # 2 rows of 3 x 1 elements: 5 x 6 - 2 x 2 = 26
        # Along one axis (opset 13), 6 rows of 0 elements are no rows: 0, not -12.
        ("Softmax", 13, [2, 3, 0], 0),
        ("Softmax", 13, [0, 3, 4], 0),  # no rows: 0 either way
        ("Softmax", 13, [2, 3, 1], 18),  # rows of one element: 5 x 6 - 2 x 6 = 18
    ],
)
def test_softmax_family_over_an_empty_axis(
    node_of: NodeOf, op: str, opset: int, shape: list[int], flops: int
) -> None:
    text = model("(float[a,b,c] x) => (float y)", f"y = {op}(x)", opset)
    assert node_of(text, input_shapes={"x": shape}).flops == flops


# Input 2x3x4: N 2, C 3, d 4; target 2x4 = 8 picks.
@pytest.mark.parametrize(
    ("reduction", "weighted", "flops"),
    [
        ("none", False, 8),  # 8 negations
        ("sum", False, 15),  # 8 + 7 adds
        ("mean", False, 16),  # 8 + 7 adds + 1 divide
        ("none", True, 16),  # 8 x (neg, mul weight)
        ("mean", True, 31),  # 16 + 7 adds + 7 weight adds + 1 divide
    ],
)
def test_nll_loss(node_of: NodeOf, reduction: str, weighted: bool, flops: int) -> None:
    sig = "(float[2,3,4] x, int64[2,4] t) => (float loss)"
    args = "x, t"
    if weighted:
        sig += " <float[3] w = {1.0, 2.0, 3.0}>"
        args += ", w"
    rec = node_of(
        model(sig, f'loss = NegativeLogLikelihoodLoss<reduction="{reduction}">({args})', 13)
    )
    assert rec.flops == flops
    assert rec.params == (3 if weighted else 0)  # class weights count; targets never


def test_softmax_cross_entropy(node_of: NodeOf) -> None:
    text = model(
        "(float[2,3,4] x, int64[2,4] t) => (float loss)", "loss = SoftmaxCrossEntropyLoss(x, t)", 13
    )
    # log-softmax over C=3: 5 x 24 - 8 rows = 112; then NLL mean over 8: 8 + 7 + 1 = 16
    assert node_of(text).flops == 128


@pytest.mark.parametrize(
    ("shape", "flops"),
    [
        ("2,3,3", 30),  # n=3: 3 divides + 10 multiply-subtracts + 2 pivot products = 15, x 2
        ("2,2", 4),  # n=2: 1 + 2 + 1 (ad - bc via LU)
        ("4,1,1", 0),  # 1x1: the element itself
    ],
)
def test_det(node_of: NodeOf, shape: str, flops: int) -> None:
    assert node_of(model(f"(float[{shape}] x) => (float y)", "y = Det(x)")).flops == flops


@pytest.mark.parametrize(("n", "flops"), [(1, 0), (2, 10), (8, 120), (16, 320), (12, 215)])
def test_fft_flops(n: int, flops: int) -> None:
    assert fft_flops(n) == flops  # 5 N log2 N, rounded: 12 -> 5 x 12 x 3.585 = 215.1


@pytest.mark.parametrize(
    ("opset", "x", "body", "inits", "flops"),
    [
        (17, "1,16,1", "y = DFT(x)", "", 320),  # axis 1, N 16: one transform of 5 x 16 x 4
        (17, "3,8,2", "y = DFT(x)", "", 360),  # 3 complex transforms of N 8: 3 x 120
        (20, "2,8,2", "y = DFT(x)", "", 240),  # default axis -2: 2 transforms of N 8
        (20, "1,8,1", "y = DFT(x, n)", "<int64 n = {16}>", 320),  # dft_length 16: 5 x 16 x 4
        # The axis input is not read: the axis whose length changed, else the default -2.
        (
            20,
            "2,4,8,1",
            "y = DFT(x, n, a)",
            "<int64 n = {8}, int64 a = {1}>",
            1920,
        ),  # axis 1: 4 -> 8,
        # so N 8 over 2x8 = 16 transforms: 16 x 120
        (20, "2,4,8,1", "y = DFT(x, , a)", "<int64 a = {-2}>", 960),  # N 8 over 2x4 = 8: 8 x 120
    ],
)
def test_dft(node_of: NodeOf, opset: int, x: str, body: str, inits: str, flops: int) -> None:
    rec = node_of(model(f"(float[{x}] x) => (float y) {inits}", body, opset))
    assert rec.flops == flops


def test_stft(node_of: NodeOf) -> None:
    ones = ", ".join(["1.0"] * 16)
    text = model(
        f"(float[1,64,1] s) => (float y) <int64 step = {{16}}, float[16] win = {{{ones}}}>",
        "y = STFT<onesided=1>(s, step, win)",
        17,
    )
    rec = node_of(text)
    assert rec.output_shapes == ((1, 4, 9, 2),)  # (64 - 16) / 16 + 1 = 4 frames, 16 / 2 + 1 bins
    # per frame: FFT of 16 = 320, window multiply 16: 4 frames x 336
    assert rec.flops == 1344
    assert rec.params == 0  # the window is a meta input


def test_non_max_suppression() -> None:
    # The output's length is data-dependent: the formula is called directly.
    cost = formula_cost(
        "NonMaxSuppression",
        [(_F32, (1, 5, 4)), (_F32, (1, 2, 5))],
        [(_I64, (3, 3))],
    )
    # per class: sort 5 x ceil(log2 5) = 15, threshold 5, IoU 13 x 10 pairs = 130 -> 150
    # 1 batch x 2 classes x 150 + box areas 3 x 5 = 315
    assert cost == Cost(flops=315)


def test_tf_idf_vectorizer(node_of: NodeOf) -> None:
    text = model(
        "(int64[2,6] x) => (float y)",
        'y = TfIdfVectorizer<mode="TFIDF", min_gram_length=1, max_gram_length=2, max_skip_count=0,'
        " ngram_counts=[0, 3], ngram_indexes=[0, 1, 2, 3], pool_int64s=[1, 2, 3, 1, 2],"
        " weights=[1.0, 1.0, 1.0, 1.0]>(x)",
        9,
    )
    rec = node_of(text)
    assert rec.output_shapes == ((2, 4),)
    # per row 6 unigrams + 5 bigrams = 11 increments, x 2 rows = 22; TFIDF weights 2x4 = 8
    assert rec.flops == 30
