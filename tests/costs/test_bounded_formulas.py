"""Formulas are closed-form: absurd attributes and dims finish at once with exact counts;
invalid attributes (infinity, strings, a group that does not split the channels) give the
node status error and a note naming the attribute, never a wrong count or an uncaught exception.

Each absurd case used to loop once per window tap, direction or channel (hours); they run
under a one-second alarm here.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import onnxcost
from onnxcost.analysis.records import NodeRecord
from onnxcost.costs._closed_form import clamped_floor_sum, floor_sum
from onnxcost.costs.normalization import lrn_window_adds
from onnxcost.costs.pooling import _axis_taps


@contextmanager
def within(seconds: int) -> Iterator[None]:
    """Fail the test if the block runs longer than ``seconds``."""

    def expire(signum: int, frame: object) -> None:
        raise AssertionError(f"took longer than {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    inits: list[onnx.TensorProto] | None = None,
    ms: bool = False,
) -> onnx.ModelProto:
    opsets = [helper.make_opsetid("", 21)]
    if ms:
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits or [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def _vi(
    name: str, shape: list[int] | None = None, t: int = TensorProto.FLOAT
) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, t, shape)


def _node(model: onnx.ModelProto, op_type: str) -> NodeRecord:
    with within(1):
        nodes = [n for n in onnxcost.analyze(model).nodes if n.op_type == op_type]
    assert len(nodes) == 1
    return nodes[0]


def test_max_pool_kernel_of_2_to_the_30() -> None:
    # X [1, 1, 4], kernel 2**30, pads 2**30 both sides, stride 1:
    # Y length = 4 + 2 x 2**30 - 2**30 + 1 = 2**30 + 5.
    # Window o covers x in [o - 2**30, o - 1]: each of the 4 elements is read by 2**30 windows.
    # FLOPs = taps - numel(Y) = 4 x 2**30 - (2**30 + 5) = 3 x 2**30 - 5 = 3,221,225,467
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[1 << 30], pads=[1 << 30] * 2)
    n = _node(_model([node], [_vi("x", [1, 1, 4])], [_vi("y")]), "MaxPool")
    assert (n.status, n.flops) == ("ok", 3 * 2**30 - 5)


def test_rnn_claiming_2_to_the_30_directions() -> None:
    # X [T 2, B 1, I 3], R [D 2**30, H 4, H 4]:
    # MACs = D T B H (I + H) = 2**30 x 2 x 1 x 4 x 7 = 56 x 2**30 = 60,129,542,144
    # FLOPs = 2 MACs + D T B H (1 + Tanh 1) = 112 x 2**30 + 16 x 2**30 = 128 x 2**30
    node = helper.make_node("RNN", ["x", "w", "r"], ["y"], hidden_size=4)
    inputs = [_vi("x", [2, 1, 3]), _vi("w", [1 << 30, 4, 3]), _vi("r", [1 << 30, 4, 4])]
    n = _node(_model([node], inputs, [_vi("y")]), "RNN")
    assert (n.macs, n.flops) == (56 * 2**30, 128 * 2**30)


def test_lrn_over_2_to_the_40_channels() -> None:
    # size 3: each channel's window adds 2 squares, the two edge channels 1:
    # adds = 2 x 2**40 - 2; FLOPs = 5 numel + 1 x adds = 5 x 2**40 + 2 x 2**40 - 2 = 7,696,581,394,430
    node = helper.make_node("LRN", ["x"], ["y"], size=3)
    n = _node(_model([node], [_vi("x", [1, 1 << 40, 1, 1])], [_vi("y")]), "LRN")
    assert n.flops == 7 * 2**40 - 2


def test_tf_idf_max_gram_length_2_to_the_40() -> None:
    # X [1, 8], grams of length 1..2**40: only lengths 1..8 fit, 8 + 7 + ... + 1 = 36
    node = helper.make_node(
        "TfIdfVectorizer",
        ["x"],
        ["y"],
        min_gram_length=1,
        max_gram_length=1 << 40,
        max_skip_count=0,
        mode="TF",
        ngram_counts=[0],
        ngram_indexes=[0],
        pool_int64s=[1],
    )
    n = _node(_model([node], [_vi("x", [1, 8], TensorProto.INT64)], [_vi("y")]), "TfIdfVectorizer")
    assert n.flops == 36


def _brute_taps(n_in: int, n_out: int, k: int, stride: int, dilation: int, pad: int) -> int:
    return sum(
        1 for o in range(n_out) for j in range(k) if 0 <= o * stride - pad + j * dilation < n_in
    )


@settings(derandomize=True, max_examples=100, deadline=None)
@given(
    st.integers(1, 12),
    st.integers(1, 12),
    st.integers(1, 9),
    st.integers(1, 5),
    st.integers(1, 4),
    st.integers(-6, 8),
)
def test_axis_taps_closed_form_matches_counting(
    n_in: int, n_out: int, k: int, stride: int, dilation: int, pad: int
) -> None:
    assert _axis_taps(n_in, n_out, k, stride, dilation, pad) == _brute_taps(
        n_in, n_out, k, stride, dilation, pad
    )


@settings(derandomize=True, max_examples=100, deadline=None)
@given(st.integers(0, 40), st.integers(1, 50))
def test_lrn_window_adds_closed_form_matches_counting(channels: int, size: int) -> None:
    lo, hi = (size - 1) // 2, (size - 1) - (size - 1) // 2
    brute = sum(min(channels - 1, c + hi) - max(0, c - lo) for c in range(channels))
    assert lrn_window_adds(channels, size) == brute


@settings(derandomize=True, max_examples=100, deadline=None)
@given(
    st.integers(0, 30),
    st.integers(1, 9),
    st.integers(-20, 20),
    st.integers(-50, 50),
    st.integers(-10, 10),
    st.integers(0, 10),
)
def test_floor_sums_match_counting(n: int, m: int, a: int, b: int, lo: int, width: int) -> None:
    values = [(a * i + b) // m for i in range(n)]
    assert floor_sum(n, m, a, b) == sum(values)
    hi = lo + width
    assert clamped_floor_sum(n, m, a, b, lo, hi) == sum(min(hi, max(lo, v)) for v in values)


def _attention(num_heads: onnx.AttributeProto) -> onnx.ModelProto:
    node = helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain="com.microsoft")
    node.attribute.append(num_heads)
    io = [_vi(n, [1, 4, 8]) for n in ("q", "k", "v")]
    return _model([node], io, [_vi("y", [1, 4, 8])], ms=True)


@pytest.mark.parametrize(
    ("attr", "shown"),
    [
        (helper.make_attribute("num_heads", float("inf")), "num_heads=inf"),
        (helper.make_attribute("num_heads", "two"), "num_heads='two'"),
        (helper.make_attribute("num_heads", 1.5), "num_heads=1.5"),
    ],
)
def test_attribute_that_is_not_an_integer_is_a_note(attr: onnx.AttributeProto, shown: str) -> None:
    n = _node(_attention(attr), "MultiHeadAttention")
    assert (n.status, n.macs, n.flops) == ("error", 0, 0)
    assert n.note == f"not costed: attribute {shown} is not an integer"


def _conv(group: int) -> onnx.ModelProto:
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=group)
    weight = helper.make_tensor("w", TensorProto.FLOAT, [4, 4, 3, 3], np.zeros(144))
    return _model([node], [_vi("x", [1, 4, 8, 8])], [_vi("y", [1, 4, 6, 6])], [weight])


@pytest.mark.parametrize("group", [0, 3, 2**62, -1])
def test_conv_group_that_does_not_split_channels_is_not_costed(group: int) -> None:
    n = _node(_conv(group), "Conv")
    assert (n.status, n.macs) == ("error", 0)
    assert n.note.startswith(f"not costed: group={group} does not split 4 input channels")


def test_conv_group_one_still_costs() -> None:
    # Y [1, 4, 6, 6] = 144 outputs x C_in/group 4 x 3 x 3 = 144 x 36 = 5,184 MACs
    n = _node(_conv(1), "Conv")
    assert (n.status, n.macs) == ("ok", 5_184)


def test_pool_stride_zero_is_not_costed() -> None:
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2], strides=[0])
    n = _node(_model([node], [_vi("x", [1, 1, 4])], [_vi("y", [1, 1, 3])]), "AveragePool")
    assert n.status == "error"
    assert "stride 0" in n.note
