"""Conv, ConvTranspose, DeformConv: MACs, FLOPs, params and bytes computed by hand."""

from __future__ import annotations

import pytest
from onnxcost_testing import only_node


def conv_model(x: str, w: str, y: str, attrs: str, bias: str = "", opset: int = 17) -> str:
    b_decl = f", float[{bias}] b = {{1.0}}" if bias else ""
    b_in = ", b" if bias else ""
    attrs = f"<{attrs}>" if attrs else ""
    return f"""
<ir_version: 8, opset_import: ["" : {opset}]>
g (float[{x}] x) => (float[{y}] y) <float[{w}] w = {{1.0}}{b_decl}> {{
  y = Conv {attrs} (x, w{b_in})
}}"""


def test_conv_worked_example_from_the_issue() -> None:
    # Conv2d(3->2, k=7, s=2, p=3, no bias) on 1x3x500x500: output 1x2x250x250.
    # MACs = numel(Y) x C_in x 7 x 7 = (2 x 250 x 250) x 3 x 49 = 125,000 x 147 = 18,375,000
    # bytes_read = X 3x500x500x4 = 3,000,000 + W 2x3x7x7x4 = 1,176 -> 3,001,176
    # bytes_written = 2x250x250x4 = 500,000
    n = only_node(
        conv_model(
            "1,3,500,500",
            "2,3,7,7",
            "1,2,250,250",
            "kernel_shape=[7,7], strides=[2,2], pads=[3,3,3,3]",
        )
    )
    assert (n.macs, n.flops, n.params) == (18_375_000, 36_750_000, 294)
    assert (n.bytes_read, n.bytes_written) == (3_001_176, 500_000)
    assert n.status == "ok"


def test_conv_bias_is_flops_not_macs() -> None:
    # 1x3x8x8 -> 1x4x8x8 (k3, p1): MACs = 4x8x8 x 3x3x3 = 256 x 27 = 6,912; bias: +256 FLOPs
    # params = 4x3x3x3 + 4 = 112
    n = only_node(conv_model("1,3,8,8", "4,3,3,3", "1,4,8,8", "pads=[1,1,1,1]", bias="4"))
    assert (n.macs, n.flops, n.params) == (6_912, 2 * 6_912 + 256, 112)


def test_the_bias_of_one_output_channel_is_a_param() -> None:
    # Keras' last Conv2D(1, 3) of a decoder: W 1x3x3x3 = 27 params + its one-element bias
    # = 28 (a lone scalar elsewhere, an epsilon, is no param; here it was not counted)
    n = only_node(conv_model("1,3,8,8", "1,3,3,3", "1,1,8,8", "pads=[1,1,1,1]", bias="1"))
    assert n.params == 28


def test_gemm_bias_of_one_output_is_a_param() -> None:
    # Dense(4 -> 1) as a Gemm: B 4x1 = 4 params + C [1] = 5
    n = only_node(
        '<ir_version: 8, opset_import: ["" : 17]>'
        "g (float[2,4] a) => (float[2,1] y) <float[4,1] b = {1.0, 1.0, 1.0, 1.0}, float[1] c = {0.5}>"
        " { y = Gemm (a, b, c) }"
    )
    assert n.params == 5


@pytest.mark.parametrize(
    ("group", "w", "macs"),
    [
        # grouped: 1x8x6x6 -> 1x8x6x6, group 2: W = 8 x 4 x 3 x 3; MACs = 288 x 4 x 9 = 10,368
        (2, "8,4,3,3", 10_368),
        # depthwise: group 8, W = 8 x 1 x 3 x 3; MACs = 288 x 1 x 9 = 2,592
        (8, "8,1,3,3", 2_592),
    ],
)
def test_conv_groups(group: int, w: str, macs: int) -> None:
    n = only_node(conv_model("1,8,6,6", w, "1,8,6,6", f"pads=[1,1,1,1], group={group}"))
    assert n.macs == macs


def test_conv_auto_pad_and_dilation() -> None:
    # SAME_UPPER stride 2 on 1x1x7x7 -> 1x1x4x4; dilation 2 (k3 covers 5); MACs = 16 x 1 x 9 = 144
    n = only_node(
        conv_model(
            "1,1,7,7", "1,1,3,3", "1,1,4,4", 'auto_pad="SAME_UPPER", strides=[2,2], dilations=[2,2]'
        )
    )
    assert n.macs == 144
    assert n.output_shapes == ((1, 1, 4, 4),)


def test_conv_1d_and_3d() -> None:
    # 1-D: 2x4x10 -> 2x6x8 (k3): MACs = 2x6x8 x 4x3 = 96 x 12 = 1,152
    assert only_node(conv_model("2,4,10", "6,4,3", "2,6,8", "")).macs == 1_152
    # 3-D: 1x2x4x4x4 -> 1x3x2x2x2 (k3, no pad): MACs = 3x8 x 2x27 = 24 x 54 = 1,296
    assert only_node(conv_model("1,2,4,4,4", "3,2,3,3,3", "1,3,2,2,2", "")).macs == 1_296


def test_conv_transpose_counts_from_the_input_side() -> None:
    # X 1x4x5x5, W [C_in=4, C_out=2, 3, 3], stride 2 -> Y 1x2x11x11
    # MACs = numel(X) x C_out x 9 = 100 x 2 x 9 = 1,800 (from the output side: 242 x 4 x 9 = 8,712, wrong)
    # bias adds numel(Y) = 242 FLOPs
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4,5,5] x) => (float[1,2,11,11] y) <float[4,2,3,3] w = {1.0}, float[2] b = {1.0, 2.0}> {
  y = ConvTranspose <strides=[2,2]> (x, w, b)
}"""
    n = only_node(text)
    assert n.output_shapes == ((1, 2, 11, 11),)
    assert (n.macs, n.flops, n.params) == (1_800, 3_600 + 242, 74)


def test_conv_transpose_groups() -> None:
    # group 2: W [4, 1, 3, 3] -> C_out = 2; MACs = 100 x 1 x 9 = 900
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4,5,5] x) => (float[1,2,11,11] y) <float[4,1,3,3] w = {1.0}> {
  y = ConvTranspose <strides=[2,2], group=2> (x, w)
}"""
    assert only_node(text).macs == 900


def test_fp16_conv_bytes_use_two_bytes_per_element() -> None:
    # 1x3x8x8 fp16 = 192 x 2 = 384 B; W 4x3x3x3 = 108 x 2 = 216 B; Y 1x4x6x6 = 144 x 2 = 288 B
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float16[1,3,8,8] x) => (float16[1,4,6,6] y) <float16[4,3,3,3] w = {1}> {
  y = Conv (x, w)
}"""
    n = only_node(text)
    assert (n.bytes_read, n.bytes_written) == (384 + 216, 288)
