"""Quantized operators: Q/DQ, integer and QLinear convolutions and products, block-quantized weights.

ONNX: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearConv, QLinearMatMul,
ConvInteger, MatMulInteger. com.microsoft: the same Q/DQ and QLinearConv, MatMulNBits,
MatMulBnb4, DynamicQuantizeMatMul, MatMulIntegerToFloat, QGemm, QLinearAdd/Mul, QLinearSigmoid,
QLinearLeakyRelu, QLinearSoftmax, QLinearConcat, QLinearGlobalAveragePool, QLinearAveragePool,
QLinearWhere, GatherBlockQuantized.

Counting rules shared by every formula here:

* An integer product counts its multiply-accumulates as MACs, like its float twin.
* Quantizing one element, ``saturate(round(x / scale) + zero_point)``, is QUANTIZE_FLOPS = 4
  (divide, round, add, clamp); requantizing an int32 accumulator is the same 4 (the divide
  becomes a multiply by the combined scale).
* Dequantizing one element, ``(q - zero_point) * scale``, is DEQUANTIZE_FLOPS = 2.
* Zero-point corrections of integer products (row and column sums of the operands) are not
  counted: they cost O(M K + K N), against the O(M N K) contraction.

Scales and zero points are quantization params (``quant_inputs``), never parameters.

Formulas of com.microsoft ops read their input shapes only: ONNX shape inference does not
know those ops, so their outputs may have no shape.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import onnx

from onnxcost.costs._context import OpContext, UnknownShapeError, numel_over
from onnxcost.costs._registry import Cost, register, register_reads
from onnxcost.costs.conv import check_group, conv_macs
from onnxcost.costs.matmul import matmul_macs
from onnxcost.shapes.rules import broadcast_shape, matmul_shape, window_spatial

MS = "com.microsoft"

QUANTIZE_FLOPS = 4
"""divide by the scale, round, add the zero point, clamp to the integer range."""
DEQUANTIZE_FLOPS = 2
"""subtract the zero point, multiply by the scale."""
MINMAX_FLOPS = 2
"""a running min and a running max per element (dynamic quantization's range)."""

# Elementwise primitives of the QLinear activations, one FLOP each (a transcendental counts 1).
_SIGMOID_FLOPS = 4  # neg, exp, add, div
_LEAKY_RELU_FLOPS = 2  # compare, multiply


def softmax_flops(numel: int, rows: int) -> int:
    """Softmax over ``rows`` rows of numel / rows: max (n - 1), subtract, exp, sum (n - 1), divide
    per row of n: 5 n - 2, as reduction.py counts ONNX Softmax."""
    return 5 * numel - 2 * rows


def softmax_rows(shape: Sequence[int], axis: int, *, coerced_2d: bool) -> int:
    """Rows a softmax normalises: prod(shape[:axis]) for the 2-D coerced form (Softmax before
    opset 13), else numel / shape[axis]."""
    axis = axis + len(shape) if axis < 0 else axis
    if coerced_2d:
        return math.prod(shape[:axis])
    return numel_over(shape, (axis,))


def given(ctx: OpContext, i: int) -> bool:
    """Whether the node names input ``i``: an optional input omitted with '' is not given.

    Unlike ``ctx.has_input``, true for a given input whose shape is unknown, so a formula that
    only needs to know an input is there (a mask, a bias) does not miss it.
    """
    return i < len(ctx.node.input) and bool(ctx.node.input[i])


# --- shape helpers: contrib ops have no ONNX shape inference, so outputs are derived here ---


def matmul_in_out_macs(ctx: OpContext, a: int = 0, b: int = 1) -> tuple[int, int]:
    """(MACs, numel(Y)) of numpy ``matmul(input a, input b)``, from the input shapes alone."""
    a_shape = ctx.shape(a)
    y_shape = matmul_shape(a_shape, ctx.shape(b))
    return matmul_macs(a_shape, y_shape), math.prod(y_shape)


def pool_output_spatial(
    ctx: OpContext,
    in_spatial: Sequence[int],
    kernel: Sequence[int],
    *,
    default_dilation: int = 1,
) -> tuple[int, ...]:
    """Spatial output dims of a convolution or pooling window from its attributes.

    Reads ``strides``, ``pads``, ``dilations``, ``auto_pad`` and ``ceil_mode`` (all with their
    ONNX defaults), so it serves contrib convolutions and pools that shape inference skips.
    """
    return window_spatial(
        in_spatial,
        kernel,
        strides=ctx.attr("strides", None),
        pads=ctx.attr("pads", None),
        dilations=ctx.attr("dilations", None) or [default_dilation] * len(in_spatial),
        auto_pad=str(ctx.attr("auto_pad", "NOTSET")),
        ceil_mode=ctx.int_attr("ceil_mode", 0),
    )


def conv_output_numel(
    ctx: OpContext, x: int = 0, w: int = 1, *, channels_last: bool = False
) -> int:
    """numel(Y) of a convolution computed from X, W and the attributes (NCHW or NHWC)."""
    x_shape, w_shape = ctx.shape(x), ctx.shape(w)
    spatial = x_shape[1:-1] if channels_last else x_shape[2:]
    kernel = ctx.attr("kernel_shape", None) or w_shape[2:]
    return x_shape[0] * w_shape[0] * math.prod(pool_output_spatial(ctx, spatial, kernel))


def conv_in_out_macs(
    ctx: OpContext, x: int = 0, w: int = 1, *, channels_last: bool = False
) -> tuple[int, int]:
    """(MACs, numel(Y)) of a convolution: numel(Y) x C_in/group x prod(k), Y from the inputs."""
    y = conv_output_numel(ctx, x, w, channels_last=channels_last)
    x_shape, w_shape = ctx.shape(x), ctx.shape(w)
    if len(x_shape) >= 2 and len(w_shape) >= 2:
        check_group(ctx, x_shape[-1] if channels_last else x_shape[1], w_shape[1], w_shape[0])
    return y * math.prod(w_shape[1:]), y


# --- quantize / dequantize ---------------------------------------------------------------------


@register("QuantizeLinear", quant_inputs=(1, 2))
@register("QuantizeLinear", domain=MS, quant_inputs=(1, 2))
def quantize_linear(ctx: OpContext) -> Cost:
    """FLOPs = 4 x numel(x): divide, round, add zero point, saturate.

    NB: the zero-point add is counted whether or not a zero point is given.
    """
    return Cost(flops=QUANTIZE_FLOPS * ctx.numel(0))


@register("DequantizeLinear", quant_inputs=(1, 2))
@register("DequantizeLinear", domain=MS, quant_inputs=(1, 2))
def dequantize_linear(ctx: OpContext) -> Cost:
    """FLOPs = 2 x numel(x): subtract zero point, multiply by scale.

    NB: the zero-point subtract is counted whether or not a zero point is given.
    """
    return Cost(flops=DEQUANTIZE_FLOPS * ctx.numel(0))


@register("DynamicQuantizeLinear")
def dynamic_quantize_linear(ctx: OpContext) -> Cost:
    """FLOPs = 6 x numel(x): min and max for the range, then divide, round, add, saturate.

    NB: the scale and zero-point arithmetic (a handful of scalar ops) is not counted.
    """
    return Cost(flops=(MINMAX_FLOPS + QUANTIZE_FLOPS) * ctx.numel(0))


# --- integer and QLinear convolutions and products --------------------------------------------


@register("ConvInteger", quant_inputs=(2, 3))
def conv_integer(ctx: OpContext) -> Cost:
    """MACs = numel(Y) x C_in/group x prod(k); FLOPs = 2 x MACs (int32 accumulators).

    NB: zero-point corrections are not counted.
    """
    return Cost.contraction(conv_macs(ctx, 0, 1))


@register("QLinearConv", quant_inputs=(1, 2, 4, 5, 6, 7))
def qlinear_conv(ctx: OpContext) -> Cost:
    """MACs = numel(Y) x C_in/group x prod(k); FLOPs = 2 x MACs + numel(Y) if bias + 4 x numel(Y) requantize.

    NB: zero-point corrections are not counted.
    """
    macs = conv_macs(ctx, 0, 3)
    y = ctx.out_numel()
    return Cost.contraction(macs, (y if given(ctx, 8) else 0) + QUANTIZE_FLOPS * y)


@register("QLinearConv", domain=MS, quant_inputs=(1, 2, 4, 5, 6, 7))
def qlinear_conv_ms(ctx: OpContext) -> Cost:
    """MACs = numel(Y) x C_in/group x prod(k); FLOPs = 2 x MACs + numel(Y) if bias + 4 x numel(Y) requantize.

    NB: zero-point corrections are not counted; the ``channels_last`` attribute selects NHWC.
    """
    macs, y = conv_in_out_macs(ctx, 0, 3, channels_last=bool(ctx.attr("channels_last", 0)))
    return Cost.contraction(macs, (y if given(ctx, 8) else 0) + QUANTIZE_FLOPS * y)


@register("MatMulInteger", quant_inputs=(2, 3))
def matmul_integer(ctx: OpContext) -> Cost:
    """MACs = numel(Y) x K; FLOPs = 2 x MACs (int32 accumulators).

    NB: zero-point corrections are not counted.
    """
    return Cost.contraction(matmul_in_out_macs(ctx)[0])


@register("QLinearMatMul", quant_inputs=(1, 2, 4, 5, 6, 7))
def qlinear_matmul(ctx: OpContext) -> Cost:
    """MACs = numel(Y) x K; FLOPs = 2 x MACs + 4 x numel(Y) requantize.

    NB: zero-point corrections are not counted.
    """
    macs, y = matmul_in_out_macs(ctx, 0, 3)
    return Cost.contraction(macs, QUANTIZE_FLOPS * y)


@register("MatMulIntegerToFloat", domain=MS, quant_inputs=(2, 3, 4, 5))
def matmul_integer_to_float(ctx: OpContext) -> Cost:
    """MACs = numel(Y) x K; FLOPs = 2 x MACs + numel(Y) scale multiply + numel(Y) if bias.

    NB: zero-point corrections are not counted.
    """
    macs, y = matmul_in_out_macs(ctx)
    return Cost.contraction(macs, y + (y if given(ctx, 6) else 0))


@register("DynamicQuantizeMatMul", domain=MS, quant_inputs=(2, 3))
def dynamic_quantize_matmul(ctx: OpContext) -> Cost:
    """MACs = numel(Y) x K; FLOPs = 2 x MACs + 6 x numel(A) quantize A + numel(Y) rescale + numel(Y) if bias.

    NB: zero-point corrections are not counted.
    """
    macs, y = matmul_in_out_macs(ctx)
    extra = (MINMAX_FLOPS + QUANTIZE_FLOPS) * ctx.numel(0) + y + (y if given(ctx, 4) else 0)
    return Cost.contraction(macs, extra)


@register("QGemm", domain=MS, quant_inputs=(1, 2, 4, 5, 7, 8))
def qgemm(ctx: OpContext) -> Cost:
    """MACs = M x N x K; FLOPs = 2 x MACs + M x N rescale + M x N if C + 3 x M x N if y_scale (round, add, clamp).

    NB: zero-point corrections are not counted; alpha folds into the rescale multiply.
    """
    a, b = ctx.shape(0), ctx.shape(3)
    m, k = (a[1], a[0]) if ctx.int_attr("transA", 0) else (a[0], a[1])
    n = b[0] if ctx.int_attr("transB", 0) else b[1]
    y = m * n
    requantize = (QUANTIZE_FLOPS - 1) * y if given(ctx, 7) else 0
    extra = y + (y if given(ctx, 6) else 0) + requantize
    return Cost.contraction(m * n * k, extra)


# --- block-quantized weights -----------------------------------------------------------------


def matmul_nbits_weights(ctx: OpContext) -> int:
    """Logical weight count of MatMulNBits / MatMulBnb4: N x K (B holds them bit-packed)."""
    return ctx.int_attr("N", 0) * ctx.int_attr("K", 0)


def _a_rows(ctx: OpContext) -> int:
    """Rows of A: numel(A) / K (A is [..., K])."""
    k = ctx.int_attr("K", 0)
    a = ctx.shape(0)
    if not k or a[-1] != k:
        raise UnknownShapeError(f"{ctx.node.name}: A's last dim {a[-1]} is not K={k}")
    return math.prod(a[:-1])


@register(
    "MatMulNBits",
    domain=MS,
    meta_inputs=(4,),
    quant_inputs=(2, 3),
    param_elements={1: lambda ctx: matmul_nbits_weights(ctx)},
)
def matmul_nbits(ctx: OpContext) -> Cost:
    """MACs = rows(A) x N x K; FLOPs = 2 x MACs + 2 x N x K dequantize + rows(A) x N if bias.

    NB: each weight is dequantized once per call ((q - zp) x scale); kernels that dequantize per
    tile, or quantize A (accuracy_level 4), do more or different work.
    """
    n, rows = ctx.int_attr("N", 0), _a_rows(ctx)
    macs = rows * n * ctx.int_attr("K", 0)
    extra = DEQUANTIZE_FLOPS * matmul_nbits_weights(ctx) + (rows * n if given(ctx, 5) else 0)
    return Cost.contraction(macs, extra)


@register(
    "MatMulBnb4",
    domain=MS,
    quant_inputs=(2,),
    param_elements={1: lambda ctx: matmul_nbits_weights(ctx)},
)
def matmul_bnb4(ctx: OpContext) -> Cost:
    """MACs = rows(A) x N x K; FLOPs = 2 x MACs + N x K dequantize (table lookup, x absmax).

    NB: the FP4/NF4 table lookup is free; one multiply by the block's absmax per weight.
    """
    n, rows = ctx.int_attr("N", 0), _a_rows(ctx)
    return Cost.contraction(rows * n * ctx.int_attr("K", 0), matmul_nbits_weights(ctx))


_FLOAT_CODES = {
    getattr(onnx.TensorProto, name)
    for name in ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "FLOAT4E2M1")
    if hasattr(onnx.TensorProto, name)
}


def gather_block_quantized_data_shape(ctx: OpContext) -> tuple[int, ...]:
    """Logical shape of GatherBlockQuantized's data: uint8 with bits < 8 packs 8/bits per byte (last axis)."""
    data = ctx.input(0)
    shape = data.concrete_shape
    bits = ctx.int_attr("bits", 4)
    if data.elem_type == onnx.TensorProto.UINT8 and bits < 8 and shape:
        return (*shape[:-1], shape[-1] * (8 // bits))
    return shape


@register(
    "GatherBlockQuantized",
    domain=MS,
    meta_inputs=(1,),
    quant_inputs=(2, 3),
    param_elements={0: lambda ctx: math.prod(gather_block_quantized_data_shape(ctx))},
)
def gather_block_quantized(ctx: OpContext) -> Cost:
    """FLOPs = 2 x numel(Y) dequantize (1 for FP8/FP4 data: scale only); numel(Y) = numel(indices) x numel(data) / data[gather_axis].

    NB: only the gathered rows are dequantized; the table is never expanded.
    """
    data = gather_block_quantized_data_shape(ctx)
    axis = ctx.int_attr("gather_axis", 0) % len(data)
    y = ctx.numel(1) * math.prod(d for i, d in enumerate(data) if i != axis)
    per = 1 if ctx.input(0).elem_type in _FLOAT_CODES else DEQUANTIZE_FLOPS
    return Cost(flops=per * y)


@register_reads("GatherBlockQuantized", domain=MS)
def gather_block_quantized_reads(ctx: OpContext) -> tuple[int, ...]:
    """Bytes read = ceil(bytes(T) x numel(indices) / data[gather_axis]) of data, scales and zero points (T), the indices whole.

    The rows gathered, with their blocks' scales and zero points, not the whole table.
    NB: a scale or zero point tensor not split along gather_axis (the quantize axis) is read whole.
    """
    data = ctx.shape(0)
    axis = ctx.int_attr("gather_axis", 0) % len(data)
    rows, picked = data[axis], ctx.numel(1)
    out: list[int] = []
    for i, t in enumerate(ctx.inputs):
        if t is None:
            out.append(0)
        elif i == 1:
            out.append(t.nbytes)
        else:
            shape = t.concrete_shape
            split = rows > 0 and len(shape) == len(data) and shape[axis] == rows
            out.append(-(-t.nbytes * picked // rows) if split else t.nbytes)
    return tuple(out)


# --- QLinear elementwise, concat and pools ---------------------------------------------------


@register("QLinearAdd", "QLinearMul", domain=MS, quant_inputs=(1, 2, 4, 5, 6, 7))
def qlinear_binary(ctx: OpContext) -> Cost:
    """FLOPs = 9 x numel(Y): dequantize A and B (2 + 2), the add or multiply (1), quantize (4).

    NB: numel(Y) is the broadcast of A and B.
    """
    y = math.prod(broadcast_shape(ctx.shape(0), ctx.shape(3)))
    return Cost(flops=(2 * DEQUANTIZE_FLOPS + 1 + QUANTIZE_FLOPS) * y)


@register("QLinearWhere", domain=MS, quant_inputs=(2, 3, 5, 6, 7, 8))
def qlinear_where(ctx: OpContext) -> Cost:
    """FLOPs = 7 x numel(Z): select (1), dequantize (2) and requantize (4) to Z's scale.

    NB: numel(Z) is the broadcast of condition, X and Y; onnxruntime requantizes through
    lookup tables; the count is the arithmetic as written.
    """
    z = math.prod(broadcast_shape(ctx.shape(0), ctx.shape(1), ctx.shape(4)))
    return Cost(flops=(1 + DEQUANTIZE_FLOPS + QUANTIZE_FLOPS) * z)


@register("QLinearSigmoid", domain=MS, quant_inputs=(1, 2, 3, 4))
def qlinear_sigmoid(ctx: OpContext) -> Cost:
    """FLOPs = 10 x numel(X): dequantize (2), sigmoid (4: neg, exp, add, div), quantize (4).

    NB: onnxruntime evaluates 8-bit inputs through a 256-entry lookup table; the count is the arithmetic as written.
    """
    return Cost(flops=(DEQUANTIZE_FLOPS + _SIGMOID_FLOPS + QUANTIZE_FLOPS) * ctx.numel(0))


@register("QLinearLeakyRelu", domain=MS, quant_inputs=(1, 2, 3, 4))
def qlinear_leaky_relu(ctx: OpContext) -> Cost:
    """FLOPs = 8 x numel(X): dequantize (2), compare and multiply (2), quantize (4).

    NB: onnxruntime evaluates 8-bit inputs through a 256-entry lookup table; the count is the arithmetic as written.
    """
    return Cost(flops=(DEQUANTIZE_FLOPS + _LEAKY_RELU_FLOPS + QUANTIZE_FLOPS) * ctx.numel(0))


@register("QLinearSoftmax", domain=MS, quant_inputs=(1, 2, 3, 4))
def qlinear_softmax(ctx: OpContext) -> Cost:
    """FLOPs = 11 x numel(X) - 2 x rows: dequantize (2), softmax (5 n - 2 per row of n), quantize (4).

    The ``opset`` attribute picks the Softmax semantics: before 13, 2-D coerced at ``axis``
    (default 1); from 13, one axis (default -1).
    NB: onnxruntime looks exp up in a table for 8-bit inputs; the count is the arithmetic as written.
    """
    x = ctx.shape(0)
    coerced = ctx.int_attr("opset", 13) < 13
    rows = softmax_rows(x, ctx.int_attr("axis", 1 if coerced else -1), coerced_2d=coerced)
    numel = math.prod(x)
    return Cost(flops=(DEQUANTIZE_FLOPS + QUANTIZE_FLOPS) * numel + softmax_flops(numel, rows))


# QLinearConcat: Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) triplets.
_QCONCAT_QUANT = frozenset(i for i in range(2 + 3 * 256) if i < 2 or (i - 2) % 3)


@register("QLinearConcat", domain=MS, quant_inputs=_QCONCAT_QUANT)
def qlinear_concat(ctx: OpContext) -> Cost:
    """FLOPs = 6 x numel(Y): each element dequantized (2) and requantized (4) to Y's scale.

    NB: an input already at Y's scale and zero point is a plain copy in onnxruntime; counted the same.
    """
    total = sum(ctx.numel(i) for i in range(2, len(ctx.node.input), 3) if given(ctx, i))
    return Cost(flops=(DEQUANTIZE_FLOPS + QUANTIZE_FLOPS) * total)


@register("QLinearGlobalAveragePool", domain=MS, quant_inputs=(1, 2, 3, 4))
def qlinear_global_average_pool(ctx: OpContext) -> Cost:
    """FLOPs = numel(X) sums + 7 x N x C (dequantize 2, divide 1, quantize 4 per output)."""
    x = ctx.shape(0)
    channels = x[-1] if ctx.int_attr("channels_last", 0) else x[1]
    return Cost(flops=ctx.numel(0) + (DEQUANTIZE_FLOPS + 1 + QUANTIZE_FLOPS) * x[0] * channels)


@register("QLinearAveragePool", domain=MS, quant_inputs=(1, 2, 3, 4))
def qlinear_average_pool(ctx: OpContext) -> Cost:
    """FLOPs = numel(Y) x (prod(kernel) + 6): window sum and divide, dequantize (2), quantize (4).

    NB: windows clipped by padding are counted at full size.
    """
    x = ctx.shape(0)
    channels_last = bool(ctx.attr("channels_last", 0))
    kernel = [int(k) for k in ctx.attr("kernel_shape", None) or ()]
    if not kernel:
        raise UnknownShapeError(f"{ctx.node.name}: QLinearAveragePool has no kernel_shape")
    spatial = x[1:-1] if channels_last else x[2:]
    channels = x[-1] if channels_last else x[1]
    y = x[0] * channels * math.prod(pool_output_spatial(ctx, spatial, kernel))
    return Cost(flops=y * (math.prod(kernel) + DEQUANTIZE_FLOPS + QUANTIZE_FLOPS))
