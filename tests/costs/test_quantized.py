"""Quantized ops: Q/DQ, integer and QLinear products, MatMulNBits, GatherBlockQuantized.

Quantize = 4 FLOPs per element (divide, round, add zero point, clamp), dequantize = 2
(subtract zero point, multiply by scale); requantizing an accumulator = 4. Scales and zero
points are metadata, never params.
"""

from __future__ import annotations

import pytest
from onnxcost_testing import only_node
from test_contrib import ms_node

MS = '["" : 17, "com.microsoft" : 1]'


def test_quantize_linear_per_axis_scale_is_not_a_param() -> None:
    # x [2, 3, 4] = 24 elements x 4 = 96 FLOPs; the per-channel scale [3] and zero point are meta
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3,4] x) => (uint8[2,3,4] y) <float[3] s = {1.0, 2.0, 3.0}, uint8[3] z = {0, 0, 0}> {
  y = QuantizeLinear <axis=1> (x, s, z)
}"""
    n = only_node(text)
    assert (n.macs, n.flops, n.params, n.status) == (0, 96, 0, "ok")


@pytest.mark.parametrize(
    ("dtype", "bytes_read"),
    [
        # int8 weight [16, 8]: 128 bytes + scale 8 x 4 = 32 -> 160
        ("int8", 160),
        # int4 weight [16, 8]: 128 elements packed two per byte = 64 bytes + 32 -> 96
        ("int4", 96),
    ],
)
def test_dequantize_linear_of_a_weight(dtype: str, bytes_read: int) -> None:
    # DQ of a quantized weight: the weight counts as params (128 elements, whatever the bits);
    # FLOPs = 2 x 128 = 256
    text = f"""
<ir_version: 10, opset_import: ["" : 21]>
g () => (float[16,8] y) <{dtype}[16,8] w = {{1}}, float[8] s = {{1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0}}> {{
  y = DequantizeLinear <axis=1> (w, s)
}}"""
    n = only_node(text, traffic="all-inputs")
    assert (n.flops, n.params, n.bytes_read, n.bytes_written) == (256, 128, bytes_read, 512)
    # Under the runtime rule the DQ of a constant is folded at load: no bytes per run.
    n = only_node(text)
    assert (n.flops, n.params, n.bytes_read, n.bytes_written) == (256, 128, 0, 0)


def test_dynamic_quantize_linear() -> None:
    # x [4, 10] = 40 elements x (min, max + divide, round, add, clamp = 6) = 240
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[4,10] x) => (uint8[4,10] y, float s, uint8 z) {
  y, s, z = DynamicQuantizeLinear (x)
}"""
    assert only_node(text).flops == 240


QLINEAR_CONV = """
<ir_version: 8, opset_import: {opsets}>
g (uint8[1,3,8,8] x) => (uint8[{y}] y) <float xs = {{0.1}}, uint8 xz = {{128}}, int8[4,3,3,3] w = {{1}},
    float[4] ws = {{0.1, 0.1, 0.1, 0.1}}, int8[4] wz = {{0, 0, 0, 0}}, float ys = {{0.2}}, uint8 yz = {{128}},
    int32[4] b = {{1, 2, 3, 4}}> {{
  {out} = {op} <pads=[1,1,1,1]> (x, xs, xz, w, ws, wz, ys, yz, b)
  {tail}
}}"""


@pytest.mark.parametrize("domain", ["", "com.microsoft"])
def test_qlinear_conv(domain: str) -> None:
    # 1x3x8x8 -> 1x4x8x8 (k3, p1): MACs = 256 x 27 = 6,912
    # FLOPs = 13,824 + int32 bias 256 + requantize 4 x 256 = 1,024 -> 15,104
    # params = W 108 + bias 4 = 112 (per-channel w scale / zero point are meta)
    if domain:
        text = QLINEAR_CONV.format(
            opsets=MS, y="", out="q", op="com.microsoft.QLinearConv", tail="y = Identity (q)"
        )
        n = ms_node(text, "QLinearConv")
    else:
        text = QLINEAR_CONV.format(
            opsets='["" : 17]', y="1,4,8,8", out="y", op="QLinearConv", tail=""
        )
        n = only_node(text)
    assert (n.macs, n.flops, n.params, n.status) == (6_912, 15_104, 112, "ok")


def test_conv_integer() -> None:
    # 1x3x8x8 -> 1x4x8x8 (k3, p1): MACs = 256 x 27 = 6,912, FLOPs = 2 x MACs; the zero point is meta
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (uint8[1,3,8,8] x) => (int32[1,4,8,8] y) <uint8[4,3,3,3] w = {1}, uint8 xz = {128}, uint8[4] wz = {1, 1, 1, 1}> {
  y = ConvInteger <pads=[1,1,1,1]> (x, w, xz, wz)
}"""
    n = only_node(text)
    assert (n.macs, n.flops, n.params) == (6_912, 13_824, 108)


def test_qlinear_matmul() -> None:
    # a [2, 8, 16] . b [16, 32]: MACs = 2 x 8 x 32 x 16 = 8,192; FLOPs = 16,384 + 4 x 512 = 18,432
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (uint8[2,8,16] a) => (uint8[2,8,32] y) <float as = {0.1}, uint8 az = {128}, int8[16,32] b = {1},
    float[32] bs = {0.1}, int8[32] bz = {0}, float ys = {0.2}, uint8 yz = {128}> {
  y = QLinearMatMul (a, as, az, b, bs, bz, ys, yz)
}"""
    n = only_node(text)
    assert (n.macs, n.flops, n.params) == (8_192, 18_432, 512)


def test_matmul_integer() -> None:
    # a [8, 16] . b [16, 4]: MACs = 8 x 4 x 16 = 512
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (uint8[8,16] a) => (int32[8,4] y) <int8[16,4] b = {1}, uint8 az = {3}> {
  y = MatMulInteger (a, b, az)
}"""
    n = only_node(text)
    assert (n.macs, n.flops, n.params) == (512, 1_024, 64)


def test_matmul_integer_to_float() -> None:
    # a [2, 8, 16] . b [16, 32]: MACs 8,192; FLOPs = 16,384 + scale 512 + bias 512 = 17,408
    # params = b 512 + bias 32 (b_scale [32] is meta)
    text = f"""
<ir_version: 8, opset_import: {MS}>
g (uint8[2,8,16] a) => (float[] out) <int8[16,32] b = {{1}}, float as = {{0.1}}, float[32] bs = {{0.1}},
    uint8 az = {{128}}, float[32] bias = {{0.0}}> {{
  y = com.microsoft.MatMulIntegerToFloat (a, b, as, bs, az, , bias)
  out = Identity (y)
}}"""
    n = ms_node(text, "MatMulIntegerToFloat")
    assert (n.macs, n.flops, n.params, n.status) == (8_192, 17_408, 544, "ok")


def test_dynamic_quantize_matmul() -> None:
    # A float [2, 8, 16] . B int8 [16, 32]: MACs 8,192 -> 16,384
    # + quantize A 6 x 256 = 1,536 + rescale 512 + bias 512 -> 18,944; params = 512 + 32
    text = f"""
<ir_version: 8, opset_import: {MS}>
g (float[2,8,16] a) => (float[] out) <int8[16,32] b = {{1}}, float[32] bs = {{0.1}}, int8[32] bz = {{0}},
    float[32] bias = {{0.0}}> {{
  y = com.microsoft.DynamicQuantizeMatMul (a, b, bs, bz, bias)
  out = Identity (y)
}}"""
    n = ms_node(text, "DynamicQuantizeMatMul")
    assert (n.macs, n.flops, n.params) == (8_192, 18_944, 544)


def nbits_model(bits: int, bias: bool) -> str:
    # K = 64, N = 32, block 32: 2 blocks per column; blob = 32 x bits / 8 bytes
    blob = 32 * bits // 8
    zp_cols = (2 * bits + 7) // 8
    b_decl, b_in = (", float[32] bias = {0.0}", ", , bias") if bias else ("", "")
    return f"""
<ir_version: 8, opset_import: {MS}>
g (float[2,8,64] a) => (float[] out) <uint8[32,2,{blob}] w = {{1}}, float[32,2] s = {{0.1}}, uint8[32,{zp_cols}] z = {{8}}{b_decl}> {{
  y = com.microsoft.MatMulNBits <K=64, N=32, bits={bits}, block_size=32> (a, w, s, z{b_in})
  out = Identity (y)
}}"""


@pytest.mark.parametrize(
    ("bits", "bias", "flops", "b_bytes"),
    [
        # MACs = 16 rows x 32 x 64 = 32,768 -> 65,536; dequantize 2 x 32 x 64 = 4,096 -> 69,632
        # B is 32 x 2 x 16 = 1,024 bytes: 2,048 weights at 4 bits
        (4, False, 69_632, 1_024),
        # 8 bits: B is 32 x 2 x 32 = 2,048 bytes; + bias 16 x 32 = 512
        (8, True, 70_144, 2_048),
    ],
)
def test_matmul_nbits(bits: int, bias: bool, flops: int, b_bytes: int) -> None:
    n = ms_node(nbits_model(bits, bias), "MatMulNBits")
    # bytes_read = A 2x8x64x4 = 4,096 + B + scales 32x2x4 = 256 + zero points 32 x zp_cols
    zp_bytes = 32 * ((2 * bits + 7) // 8)
    b_bytes_total = 4_096 + b_bytes + 256 + zp_bytes + (128 if bias else 0)
    assert (n.macs, n.flops, n.bytes_read, n.status) == (32_768, flops, b_bytes_total, "ok")


def test_matmul_nbits_4_bit_params_are_n_times_k() -> None:
    # 4 bits: N x K = 32 x 64 = 2,048 weights, stored as 1,024 packed bytes
    assert ms_node(nbits_model(4, False), "MatMulNBits").params == 2_048


def test_matmul_nbits_8_bit_params() -> None:
    # 8 bits: one weight per byte, N x K = 2,048 = numel(B) (+ bias 32)
    assert ms_node(nbits_model(8, True), "MatMulNBits").params == 2_048 + 32


def gather_bq_model(data: str) -> str:
    # 50 x 64 table, 4-bit, blocks of 32 along axis 1: scales [50, 2]; indices [2, 8]
    return f"""
<ir_version: 10, opset_import: ["" : 21, "com.microsoft" : 1]>
g (int64[2,8] ids) => (float[] out) <{data} t = {{1}}, float[50,2] s = {{0.1}}> {{
  y = com.microsoft.GatherBlockQuantized <gather_axis=0, quantize_axis=1, block_size=32, bits=4> (t, ids, s)
  out = Identity (y)
}}"""


@pytest.mark.parametrize(
    "data",
    [
        # int4 table [50, 64]: 3,200 weights in 1,600 bytes
        "int4[50,64]",
        # uint8 table [50, 32] with bits=4: the same 3,200 weights packed two per byte
        "uint8[50,32]",
    ],
)
def test_gather_block_quantized(data: str) -> None:
    # output [2, 8, 64] = 1,024 elements, each dequantized: 2 x 1,024 = 2,048 FLOPs
    # all inputs whole: bytes_read = table 1,600 + ids 16 x 8 = 128 + scales 400 = 2,128
    n = ms_node(gather_bq_model(data), "GatherBlockQuantized", traffic="all-inputs")
    assert (n.flops, n.bytes_read, n.status) == (2_048, 2_128, "ok")
    # runtime: the 16 rows gathered of 50: table 1,600 x 16 / 50 = 512, scales 400 x 16 / 50
    # = 128, ids 128 -> 768; of it weights (table and scales) 640
    n = ms_node(gather_bq_model(data), "GatherBlockQuantized")
    assert (n.flops, n.bytes_read, n.bytes_read_weights, n.status) == (2_048, 768, 640, "ok")


def test_gather_block_quantized_int4_params() -> None:
    assert ms_node(gather_bq_model("int4[50,64]"), "GatherBlockQuantized").params == 3_200


def test_gather_block_quantized_packed_uint8_params() -> None:
    assert ms_node(gather_bq_model("uint8[50,32]"), "GatherBlockQuantized").params == 3_200


@pytest.mark.parametrize(
    ("outputs", "flops"),
    [
        # A [4, 16] . B^T, B [10, 16]: MACs = 4 x 10 x 16 = 640 -> 1,280
        # + rescale 40 + C add 40 + requantize (round, add, clamp) 3 x 40 = 120 -> 1,480
        ("ys, yz", 1_480),
        # float output (no y_scale): 1,280 + 40 + 40 = 1,360
        ("", 1_360),
    ],
)
def test_qgemm(outputs: str, flops: int) -> None:
    tail = f", {outputs}" if outputs else ""
    text = f"""
<ir_version: 8, opset_import: {MS}>
g (uint8[4,16] a) => (float[] out) <float as = {{0.1}}, uint8 az = {{128}}, int8[10,16] b = {{1}}, float bs = {{0.1}},
    int8 bz = {{0}}, int32[10] c = {{0}}, float ys = {{0.2}}, uint8 yz = {{128}}> {{
  y = com.microsoft.QGemm <transB=1> (a, as, az, b, bs, bz, c{tail})
  out = Identity (y)
}}"""
    n = ms_node(text, "QGemm")
    assert (n.macs, n.flops, n.params) == (640, flops, 170)


QSCALARS = "float s = {0.1}, uint8 z = {128}"


@pytest.mark.parametrize(
    ("node", "flops"),
    [
        # A [1, 8, 4, 4] + B [1, 8, 1, 1] broadcast to 128: (2 + 2 + 1 + 4) = 9 x 128 = 1,152
        ("y = com.microsoft.QLinearAdd (a, s, z, b, s, z, s, z)", 1_152),
        ("y = com.microsoft.QLinearMul (a, s, z, b, s, z, s, z)", 1_152),
        # sigmoid: dequantize 2 + sigmoid 4 + quantize 4 = 10 x 128 = 1,280
        ("y = com.microsoft.QLinearSigmoid (a, s, z, s, z)", 1_280),
        # leaky relu: 2 + 2 + 4 = 8 x 128 = 1,024
        ("y = com.microsoft.QLinearLeakyRelu <alpha=0.1> (a, s, z, s, z)", 1_024),
        # softmax over the last axis, 32 rows of 4: 11 x 128 - 2 x 32 = 1,344
        ("y = com.microsoft.QLinearSoftmax <opset=13, axis=-1> (a, s, z, s, z)", 1_344),
        # opset 12 semantics, axis 1: 2-D coerced [1, 128], one row: 11 x 128 - 2 = 1,406
        ("y = com.microsoft.QLinearSoftmax <opset=12, axis=1> (a, s, z, s, z)", 1_406),
        # concat of two [1, 8, 4, 4]: requantize each element, (2 + 4) x 256 = 1,536
        ("y = com.microsoft.QLinearConcat <axis=1> (s, z, a, s, z, a, s, z)", 1_536),
        # global average pool: 128 sums + (2 + 1 + 4) x 8 outputs = 184
        ("y = com.microsoft.QLinearGlobalAveragePool (a, s, z, s, z)", 184),
    ],
)
def test_qlinear_elementwise(node: str, flops: int) -> None:
    text = f"""
<ir_version: 8, opset_import: {MS}>
g (uint8[1,8,4,4] a, uint8[1,8,1,1] b) => (uint8[] out) <{QSCALARS}> {{
  {node}
  out = Identity (y)
}}"""
    op = node.split("com.microsoft.")[1].split(" ")[0]
    n = ms_node(text, op)
    assert (n.flops, n.status) == (flops, "ok")


def test_qlinear_global_average_pool_channels_last() -> None:
    # NHWC [1, 4, 4, 8]: 128 sums + 7 x 8 channels = 184, as NCHW
    text = f"""
<ir_version: 8, opset_import: {MS}>
g (uint8[1,4,4,8] a) => (uint8[] out) <{QSCALARS}> {{
  y = com.microsoft.QLinearGlobalAveragePool <channels_last=1> (a, s, z, s, z)
  out = Identity (y)
}}"""
    assert ms_node(text, "QLinearGlobalAveragePool").flops == 184


@pytest.mark.parametrize(
    ("attrs", "flops"),
    [
        # [1, 8, 16, 16], k2 s2 -> [1, 8, 8, 8] = 512 outputs x (4 window + 2 + 4) = 5,120
        ("kernel_shape=[2,2], strides=[2,2]", 5_120),
        # k3 s1 p1 -> [1, 8, 16, 16] = 2,048 x (9 + 6) = 30,720
        ("kernel_shape=[3,3], pads=[1,1,1,1]", 30_720),
    ],
)
def test_qlinear_average_pool(attrs: str, flops: int) -> None:
    text = f"""
<ir_version: 8, opset_import: {MS}>
g (uint8[1,8,16,16] a) => (uint8[] out) <{QSCALARS}> {{
  y = com.microsoft.QLinearAveragePool <{attrs}> (a, s, z, s, z)
  out = Identity (y)
}}"""
    assert ms_node(text, "QLinearAveragePool").flops == flops


def test_ms_quantize_dequantize() -> None:
    # com.microsoft QuantizeLinear on [2, 16]: 4 x 32 = 128; DequantizeLinear on [2, 16]: 2 x 32 = 64
    text = f"""
<ir_version: 8, opset_import: {MS}>
g (float[2,16] x, uint8[2,16] xq) => (float[] out) <{QSCALARS}> {{
  q = com.microsoft.QuantizeLinear (x, s, z)
  y = com.microsoft.DequantizeLinear (xq, s, z)
  out = Identity (y)
}}"""
    assert ms_node(text, "QuantizeLinear").flops == 128
    assert ms_node(text, "DequantizeLinear").flops == 64
