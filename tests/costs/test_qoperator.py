"""QOperator models: onnxcost's own shape rules for the com.microsoft ops of onnxruntime's
quantizer (ONNX has no schema for them) agree with what onnxruntime outputs, and a model
quantized by ``quantize_static`` keeps its float original's MACs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper
import onnx.parser
import pytest

import onnxcost

MODELS = Path(__file__).resolve().parents[2] / "models"
HEAD = '<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>'
# scalar scales and zero points shared by the cases
Q = "float sa = {0.1}, uint8 za = {128}, float sb = {0.2}, uint8 zb = {120}, float sy = {0.3}, uint8 zy = {100}"

CASES = {
    # C = broadcast of A [1, 4, 3, 3] and B [1, 4, 1, 1]
    "QLinearAdd": (
        f"g (uint8[1,4,3,3] a, uint8[1,4,1,1] b) => (uint8 y) <{Q}> {{"
        " y = com.microsoft.QLinearAdd (a, sa, za, b, sb, zb, sy, zy) }"
    ),
    "QLinearMul": (
        f"g (uint8[2,1,5] a, uint8[3,1] b) => (uint8 y) <{Q}> {{"
        " y = com.microsoft.QLinearMul (a, sa, za, b, sb, zb, sy, zy) }"
    ),
    "QLinearSigmoid": (
        f"g (uint8[2,7] a) => (uint8 y) <{Q}> {{"
        " y = com.microsoft.QLinearSigmoid (a, sa, za, sy, zy) }"
    ),
    "QLinearLeakyRelu": (
        f"g (uint8[2,7] a) => (uint8 y) <{Q}> {{"
        " y = com.microsoft.QLinearLeakyRelu <alpha = 0.1> (a, sa, za, sy, zy) }"
    ),
    "QLinearSoftmax": (
        f"g (uint8[2,3,7] a) => (uint8 y) <{Q}> {{"
        " y = com.microsoft.QLinearSoftmax <axis = -1, opset = 13> (a, sa, za, sy, zy) }"
    ),
    # Y concatenates [1, 2, 3, 3] and [1, 4, 3, 3] on axis 1: [1, 6, 3, 3]
    "QLinearConcat": (
        f"g (uint8[1,2,3,3] a, uint8[1,4,3,3] b) => (uint8 y) <{Q}> {{"
        " y = com.microsoft.QLinearConcat <axis = 1> (sy, zy, a, sa, za, b, sb, zb) }"
    ),
    # 5 x 5, kernel 2, stride 2: floor(3 / 2) + 1 = 2
    "QLinearAveragePool": (
        f"g (uint8[1,4,5,5] a) => (uint8 y) <{Q}> {{"
        " y = com.microsoft.QLinearAveragePool <kernel_shape = [2, 2], strides = [2, 2]>"
        " (a, sa, za, sy, zy) }"
    ),
    # ceil_mode and pads: ceil((5 + 1 + 1 - 3) / 2) + 1 = 3
    "QLinearAveragePool_ceil_pads": (
        f"g (uint8[1,4,5,5] a) => (uint8 y) <{Q}> {{"
        " y = com.microsoft.QLinearAveragePool <kernel_shape = [3, 3], strides = [2, 2],"
        " pads = [1, 1, 1, 1], ceil_mode = 1> (a, sa, za, sy, zy) }"
    ),
    "QLinearGlobalAveragePool": (
        f"g (uint8[2,4,5,5] a) => (uint8 y) <{Q}> {{"
        " y = com.microsoft.QLinearGlobalAveragePool (a, sa, za, sy, zy) }"
    ),
    "QLinearGlobalAveragePool_nhwc": (
        f"g (uint8[2,5,5,4] a) => (uint8 y) <{Q}> {{"
        " y = com.microsoft.QLinearGlobalAveragePool <channels_last = 1> (a, sa, za, sy, zy) }"
    ),
    # Y [3, 4] from A [3, 8] and B [8, 4]; quantized with y_scale, float without
    "QGemm": (
        f"g (uint8[3,8] a) => (uint8 y) <{Q}, uint8[8,4] w = {{1}}> {{"
        " y = com.microsoft.QGemm (a, sa, za, w, sb, zb, , sy, zy) }"
    ),
    "QGemm_float_transB": (
        f"g (uint8[3,8] a) => (float y) <{Q}, uint8[4,8] w = {{1}}> {{"
        " y = com.microsoft.QGemm <transB = 1> (a, sa, za, w, sb, zb) }"
    ),
    "QLinearWhere": (
        f"g (bool[2,3] c, uint8[2,3] a, uint8[1,3] b) => (uint8 y) <{Q}> {{"
        " y = com.microsoft.QLinearWhere (c, a, sa, za, b, sb, zb, sy, zy) }"
    ),
    "DynamicQuantizeMatMul": (
        "g (float[2,3,8] a) => (float y) <uint8[8,4] w = {1}, float sw = {0.1}, uint8 zw = {1}> {"
        " y = com.microsoft.DynamicQuantizeMatMul (a, w, sw, zw) }"
    ),
    "MatMulIntegerToFloat": (
        f"g (uint8[2,8] a) => (float y) <{Q}, uint8[8,4] w = {{1}}> {{"
        " y = com.microsoft.MatMulIntegerToFloat (a, w, sa, sb, za, zb) }"
    ),
    # K 64, N 32, blocks of 16: B uint8 [32, 4, 8]; Y [2, 32]
    "MatMulNBits": (
        "g (float[2,64] a) => (float y) <uint8[32,4,8] w = {1}, float[128] s = {0.1}> {"
        " y = com.microsoft.MatMulNBits <K = 64, N = 32, bits = 4, block_size = 16> (a, w, s) }"
    ),
    # data uint8 [16, 32] holds 4-bit [16, 64]; indices [2, 3]: Y [2, 3, 64]
    "GatherBlockQuantized": (
        "g (int64[2,3] i) => (float y) <uint8[16,32] w = {1}, float[16,2] s = {0.1}> {"
        " y = com.microsoft.GatherBlockQuantized <block_size = 32> (w, i, s) }"
    ),
    # 2 heads, hidden 8 (W [8, 24]): output [2, 3, 8]
    "QAttention": (
        f"g (uint8[2,3,8] a) => (float y) <{Q}, uint8[8,24] w = {{1}}, float[24] bias = {{0.0}}> {{"
        " y = com.microsoft.QAttention <num_heads = 2> (a, w, bias, sa, sb, , za, zb) }"
    ),
    # T 3, B 2, I 4, H 5, forward: Y [3, 1, 2, 5], Y_h and Y_c [1, 2, 5]
    "DynamicQuantizeLSTM": (
        "g (float[3,2,4] x) => (float y, float h, float c) <int8[1,4,20] w = {1},"
        " int8[1,5,20] r = {1}, float[1] sw = {0.1}, int8[1] zw = {0}, float[1] sr = {0.1},"
        " int8[1] zr = {0}> {"
        " y, h, c = com.microsoft.DynamicQuantizeLSTM <hidden_size = 5>"
        " (x, w, r, , , , , , sw, zw, sr, zr) }"
    ),
    # B 2, S 3, word table uint8 [100, 8]: layernorm_out [2, 3, 8] float, mask_index_out [2]
    "QEmbedLayerNormalization": (
        f"g (int32[2,3] ids, int32[2,3] mask) => (float y, int32 m) <{Q}, uint8[100,8] we = {{1}},"
        " uint8[16,8] pe = {1}, uint8[8] gamma = {1}, uint8[8] beta = {1}> {"
        " y, m = com.microsoft.QEmbedLayerNormalization <epsilon = 0.00001>"
        " (ids, , we, pe, , gamma, beta, mask, sa, sb, , sy, sa, za, zb, , zy, za) }"
    ),
    "QuantizeLinear_ms": (
        f"g (float[2,5] a) => (uint8 y) <{Q}> {{ y = com.microsoft.QuantizeLinear (a, sa, za) }}"
    ),
    "DequantizeLinear_ms": (
        f"g (uint8[2,5] a) => (float y) <{Q}> {{ y = com.microsoft.DequantizeLinear (a, sa, za) }}"
    ),
}


def _model(case: str) -> onnx.ModelProto:
    """The case's model, each initializer written with one value filled to its shape (with
    1, or 0.1 for a float)."""
    model = onnx.parser.parse_model(f"{HEAD}\n{CASES[case]}")
    for i, t in enumerate(model.graph.initializer):
        if t.dims and int(np.prod(t.dims)) > 1:
            dtype = onnx.helper.tensor_dtype_to_np_dtype(t.data_type)
            fill = 0.1 if np.issubdtype(dtype, np.floating) else 1
            full = np.full(tuple(t.dims), fill, dtype=dtype)
            model.graph.initializer[i].CopyFrom(onnx.numpy_helper.from_array(full, t.name))
    return model


def _feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    feeds = {}
    for vi in model.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        if dtype == np.bool_:
            feeds[vi.name] = rng.integers(0, 2, shape).astype(np.bool_)
        elif dtype == np.int64:
            feeds[vi.name] = rng.integers(0, 16, shape).astype(np.int64)
        elif np.issubdtype(dtype, np.integer):
            feeds[vi.name] = rng.integers(0, 100, shape).astype(dtype)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


@pytest.mark.ort
@pytest.mark.parametrize("case", sorted(CASES))
def test_shape_rule_matches_onnxruntime(case: str) -> None:
    import onnxruntime as ort

    model = _model(case)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, _feeds(model))
    a = onnxcost.analyze(model)
    ours = [(t.dtype, t.shape) for t in a.outputs]
    theirs = [
        (onnxcost.load.tensors.dtype_name(onnx.helper.np_dtype_to_tensor_dtype(v.dtype)), v.shape)
        for v in got
    ]
    assert ours == theirs
    (node,) = a.nodes
    assert node.status == "ok", node.note


def _quantized(fmt: str, tmp_path: Path) -> Path:
    """models/resnet20_torch_dynamo.onnx quantized by onnxruntime's quantize_static in
    ``fmt`` (QOperator or QDQ), calibrated on two random inputs."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    class Random(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            rng = np.random.default_rng(0)
            self.data = iter(
                [{"input": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)}] * 2
            )

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.data, None)

    out = tmp_path / f"resnet20_{fmt}.onnx"
    quantize_static(
        MODELS / "resnet20_torch_dynamo.onnx", out, Random(), quant_format=QuantFormat[fmt]
    )
    return out


@pytest.mark.ort
@pytest.mark.parametrize("fmt", ["QOperator", "QDQ"])
def test_quantized_resnet20_keeps_the_float_macs(fmt: str, tmp_path: Path) -> None:
    a = onnxcost.analyze(_quantized(fmt, tmp_path))
    # the fp32 model's 40,813,184 MACs (README, Built-in and shipped models)
    assert a.totals.macs == onnxcost.analyze(MODELS / "resnet20_torch_dynamo.onnx").totals.macs
    assert a.totals.macs == 40_813_184
    assert {n.status for n in a.nodes} <= {"ok", "zero"}
    # the weights stay 271,690 params, now int8 (conv, gemm) and int32 (biases)
    assert a.totals.params == 271_690
    # and every MAC (21 convolutions, 1 Gemm) runs int8 x int8, the quantizer's default types,
    # in both formats (QDQ: read through the DequantizeLinear in front of each operand)
    top = a.by_dtype[0]
    assert (top.dtype, top.macs) == ("int8 x int8", 40_813_184)


def test_qlinear_where_flops() -> None:
    # Z = broadcast of condition [2, 3], X [2, 3], Y [1, 3]: 6 elements x (select 1 +
    # dequantize 2 + quantize 4) = 42 FLOPs; the scalar scales and zero points: 6 quant params
    a = onnxcost.analyze(_model("QLinearWhere"))
    (node,) = a.nodes
    assert (node.macs, node.flops, node.params, a.totals.quant_params) == (0, 42, 0, 6)


def test_qembed_layer_norm_adds_its_dequantizing() -> None:
    # over EmbedLayerNormalization of the same shapes: the gathered word and position rows
    # dequantized, 2 x 2 x (2 x 3 x 8) = 192, and gamma and beta, 2 x 2 x 8 = 32: 224 FLOPs
    quantized = onnxcost.analyze(_model("QEmbedLayerNormalization"))
    plain = onnxcost.analyze(
        onnx.parser.parse_model(f"""{HEAD}
g (int32[2,3] ids, int32[2,3] mask) => (float y, int32 m) <float[100,8] we = {{1.0}},
  float[16,8] pe = {{1.0}}, float[8] gamma = {{1.0}}, float[8] beta = {{1.0}}> {{
  y, m = com.microsoft.EmbedLayerNormalization <epsilon = 0.00001>
    (ids, , we, pe, , gamma, beta, mask)
}}""")
    )
    assert quantized.totals.flops == plain.totals.flops + 224
    # the same 800 + 128 + 8 + 8 = 944 weights; its 8 scale and zero-point inputs read 6
    # stored scalars (sa and za twice), each counted once
    assert (quantized.totals.params, quantized.totals.quant_params) == (944, 6)
