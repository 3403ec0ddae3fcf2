"""by_dtype: costs by the element types the arithmetic runs in."""

from __future__ import annotations

from onnxcost_testing import analyze_text

import onnxcost


def test_float_int4_and_integer_arithmetic_apart() -> None:
    # MatMul fp32 [8,64] x fp32 W [64,32]: 8 x 64 x 32 = 16,384 MACs, 2,048 params -> float32;
    # MatMul of the same x with an int4 weight dequantized (DQ with fp32 per-column scales):
    # 16,384 MACs, 2,048 params -> float32 x int4; the DQ itself runs on int4: 2 x 2,048 FLOPs;
    # MatMulInteger uint8 [8,64] x int8 [64,32]: 16,384 MACs, 2,048 params -> uint8 x int8
    a = analyze_text("""
<ir_version: 10, opset_import: ["" : 21]>
g (float[8,64] x, uint8[8,64] q) => (float[8,32] y, float[8,32] z, int32[8,32] k)
  <float[64,32] w = {0.5}, int4[64,32] w4 = {1}, float[32] s = {0.5}, int8[64,32] w8 = {1}> {
  y = MatMul (x, w)
  wd = DequantizeLinear <axis = 1> (w4, s)
  z = MatMul (x, wd)
  k = MatMulInteger (q, w8)
}""")
    rows = {r.dtype: (r.count, r.macs, r.flops, r.params) for r in a.by_dtype}
    assert rows == {
        "float32": (1, 16_384, 32_768, 2_048),
        "float32 x int4": (1, 16_384, 32_768, 2_048),
        "uint8 x int8": (1, 16_384, 32_768, 2_048),
        "int4": (1, 0, 4_096, 0),
    }
    assert [r.dtype for r in a.by_dtype][-1] == "int4"  # no MACs: last
    assert a.to_dict()["by_dtype"][0]["macs"] == 16_384


def test_matmul_nbits_is_int4_weights() -> None:
    # MatMulNBits K 64, N 32, 4 bits: 8 x 64 x 32 = 16,384 MACs on fp32 activations
    a = analyze_text("""
<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
g (float[8,64] x) => (float[8,32] y) <uint8[32,4,8] b = {1}, float[128] s = {1.0}> {
  y = com.microsoft.MatMulNBits <K = 64, N = 32, bits = 4, block_size = 16> (x, b, s)
}""")
    assert [(r.dtype, r.macs, r.params) for r in a.by_dtype] == [("float32 x int4", 16_384, 2_048)]


def test_reports_show_the_table() -> None:
    from onnxcost.report.as_text import to_markdown

    a = onnxcost.analyze("resnet18")
    md = to_markdown(a, a.nodes)
    assert "## By arithmetic type" in md
    # every one of ResNet-18's 1,814,073,344 MACs (torchvision) runs in float32
    assert "| float32 |" in md
    assert a.by_dtype[0].macs == 1_814_073_344
