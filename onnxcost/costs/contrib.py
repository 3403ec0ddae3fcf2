"""Fused transformer and CNN ops: com.microsoft contrib ops (and their ONNX-domain twins
that onnxruntime's optimizer emits: SimplifiedLayerNormalization, SwiGLU).

Same counting rule as elementwise.py and normalization.py: one FLOP per primitive per
element, a transcendental counts 1. A fused op costs the sum of the ops it fuses:

* activations as elementwise.py counts them (Relu 1, Tanh 1, Sigmoid 4, LeakyRelu 2,
  HardSigmoid 4, Clip 2, Swish/SiLU 5, Gelu 5, tanh-Gelu 8 with x^3 as one pow);
* LayerNorm as normalization.py: standardize 5 per element + 3 per row, scale 1, bias 1;
  RMS norm 4 per element + 3 per row;
* a bias, skip or residual add: 1 per element.

Formulas read input shapes only: ONNX shape inference does not know these ops, so their
outputs may have no shape.
"""

from __future__ import annotations

import math

from onnxcost.costs._context import OpContext, UnknownShapeError, tensor_bytes
from onnxcost.costs._registry import (
    Cost,
    Saved,
    needs_any,
    register,
    register_backward,
    register_reads,
)
from onnxcost.costs.normalization import STAT_BYTES, norm_backward_flops, standardize_flops
from onnxcost.costs.quantized import (
    DEQUANTIZE_FLOPS,
    conv_in_out_macs,
    given,
    softmax_flops,
    softmax_rows,
)
from onnxcost.shapes.rules import broadcast_shape, matmul_shape

MS = "com.microsoft"

SIGMOID_FLOPS = 4  # neg, exp, add, div
SILU_FLOPS = SIGMOID_FLOPS + 1  # x x sigmoid(x)
GELU_FLOPS = 5  # div, erf, add, mul, mul
TANH_GELU_FLOPS = 8  # pow, mul, add, mul, tanh, add, mul, mul
QUICK_GELU_FLOPS = SIGMOID_FLOPS + 2  # x x sigmoid(alpha x): alpha x, sigmoid, multiply
RMS_NORM_FLOPS = 4  # per element: square, mean, multiply by 1/rms, multiply by scale

ACTIVATION_FLOPS: dict[str, int] = {
    "Relu": 1,
    "Tanh": 1,
    "Sigmoid": SIGMOID_FLOPS,
    "Affine": 2,
    "LeakyRelu": 2,
    "ThresholdedRelu": 1,
    "ScaledTanh": 3,
    "HardSigmoid": 4,
    "HardSwish": 5,
    "Elu": 4,
    "Softsign": 3,
    "Softplus": 3,
    "Clip": 2,
    "Swish": SILU_FLOPS,
    "SiLU": SILU_FLOPS,
    "Silu": SILU_FLOPS,
    "Gelu": GELU_FLOPS,
    "FastGelu": TANH_GELU_FLOPS,
    "Identity": 0,
    "": 0,
}
"""Per-element FLOPs of the activations fused ops and recurrent layers name by string."""


def activation_flops(name: str) -> int:
    """FLOPs per element of activation ``name`` (case-insensitive; an unknown name counts 1)."""
    for key, flops in ACTIVATION_FLOPS.items():
        if key.lower() == name.lower():
            return flops
    return 1


def _rows(shape: tuple[int, ...]) -> int:
    """Rows of a last-axis normalization: numel / last dim."""
    return math.prod(shape[:-1])


def _norm_rows(ctx: OpContext, shape: tuple[int, ...]) -> int:
    axis = ctx.int_attr("axis", -1)
    return math.prod(shape[: axis + len(shape) if axis < 0 else axis])


# --- fused contractions ----------------------------------------------------------------------


@register("FusedConv", "NhwcFusedConv", domain=MS)
def fused_conv(ctx: OpContext) -> Cost:
    """MACs = numel(Y) x C_in/group x prod(k); FLOPs = 2 x MACs + numel(Y) per bias and Z (sum) + activation x numel(Y).

    NB: NhwcFusedConv reads X as NHWC; an unknown activation name counts 1 per element.
    """
    macs, y = conv_in_out_macs(ctx, channels_last=ctx.op_type == "NhwcFusedConv")
    act = activation_flops(str(ctx.attr("activation", "")))
    extra = y * (int(given(ctx, 2)) + int(given(ctx, 3)) + act)
    return Cost.contraction(macs, extra)


@register("NhwcConv", domain=MS)
def nhwc_conv(ctx: OpContext) -> Cost:
    """MACs = numel(Y) x C_in/group x prod(k) (X is NHWC); FLOPs = 2 x MACs + numel(Y) if bias."""
    macs, y = conv_in_out_macs(ctx, channels_last=True)
    return Cost.contraction(macs, y if given(ctx, 2) else 0)


def fused_matmul_dims(ctx: OpContext) -> tuple[int, int]:
    """(numel(Y), K) of FusedMatMul / TransposeMatMul.

    transBatchA moves A's first dim next to its last: (d0, b..., dl) is read as (b..., d0, dl);
    transA then swaps the matrix dims. Likewise for B.
    """
    a, b = ctx.shape(0), ctx.shape(1)

    def matrix(shape: tuple[int, ...], trans: str, batch: str) -> tuple[int, ...]:
        if len(shape) >= 3 and ctx.int_attr(batch, 0):
            shape = (*shape[1:-1], shape[0], shape[-1])
        if len(shape) >= 2 and ctx.int_attr(trans, 0):
            shape = (*shape[:-2], shape[-1], shape[-2])
        return shape

    a2, b2 = matrix(a, "transA", "transBatchA"), matrix(b, "transB", "transBatchB")
    return math.prod(matmul_shape(a2, b2)), a2[-1]


@register("FusedMatMul", "TransposeMatMul", domain=MS)
def fused_matmul(ctx: OpContext) -> Cost:
    """MACs = numel(Y) x K (after transA/transB and batch transposes); FLOPs = 2 x MACs + numel(Y) if alpha != 1."""
    y, k = fused_matmul_dims(ctx)
    return Cost.contraction(y * k, y if float(ctx.attr("alpha", 1.0)) != 1.0 else 0)


@register("FusedGemm", domain=MS)
def fused_gemm(ctx: OpContext) -> Cost:
    """MACs = M x N x K; FLOPs = 2 x MACs + M x N per alpha != 1, per C, per beta != 1 + activation x M x N.

    NB: as matmul.py's Gemm; an unknown activation name counts 1 per element.
    """
    a, b = ctx.shape(0), ctx.shape(1)
    m, k = (a[1], a[0]) if ctx.int_attr("transA", 0) else (a[0], a[1])
    n = b[0] if ctx.int_attr("transB", 0) else b[1]
    y = m * n
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    extra = y * (int(alpha != 1.0) + activation_flops(str(ctx.attr("activation", ""))))
    if given(ctx, 2) and beta != 0.0:
        extra += y * (1 + int(beta != 1.0))
    return Cost.contraction(m * n * k, extra)


@register("GemmFastGelu", domain=MS)
def gemm_fast_gelu(ctx: OpContext) -> Cost:
    """MACs = numel(Y) x K; FLOPs = 2 x MACs + numel(Y) if bias + 8 x numel(Y) tanh-Gelu."""
    y_shape = matmul_shape(ctx.shape(0), ctx.shape(1))
    y = math.prod(y_shape)
    return Cost.contraction(y * ctx.shape(0)[-1], y * (int(given(ctx, 2)) + TANH_GELU_FLOPS))


# --- fused activations -----------------------------------------------------------------------


@register("Gelu", domain=MS)
def ms_gelu(ctx: OpContext) -> Cost:
    """FLOPs = 5 x numel(X): 0.5 x x x (1 + erf(x / sqrt(2))) is div, erf, add, mul, mul."""
    return Cost(flops=GELU_FLOPS * ctx.numel(0))


@register("BiasGelu", domain=MS)
def bias_gelu(ctx: OpContext) -> Cost:
    """FLOPs = 6 x numel(A): bias add, then exact Gelu (5)."""
    return Cost(flops=(1 + GELU_FLOPS) * math.prod(broadcast_shape(ctx.shape(0), ctx.shape(1))))


@register("FastGelu", domain=MS)
def fast_gelu(ctx: OpContext) -> Cost:
    """FLOPs = 8 x numel(X) tanh-Gelu (+ numel(X) with a bias).

    NB: X x X x X counts as one pow, as elementwise.py's Gelu(approximate='tanh').
    """
    return Cost(flops=(TANH_GELU_FLOPS + int(given(ctx, 1))) * ctx.numel(0))


@register("QuickGelu", domain=MS)
def quick_gelu(ctx: OpContext) -> Cost:
    """FLOPs = 6 x numel(X): alpha x, sigmoid (4), multiply by x; 5 x numel(X) with alpha 1 (SiLU).

    NB: alpha = 1 is how onnxruntime's optimizer fuses SiLU (Sigmoid, Mul: 5 per element); a
    multiply by 1 is not counted, so the fused model costs what the unfused one does.
    """
    alpha = float(ctx.attr("alpha", 1.0))
    return Cost(flops=(QUICK_GELU_FLOPS - int(alpha == 1.0)) * ctx.numel(0))


@register("SwiGLU", since=28)
def swiglu(ctx: OpContext) -> Cost:
    """FLOPs = 6 x numel(A) (7 if alpha != 1): Swish(A) (5, + alpha A) times B (1)."""
    swish = SILU_FLOPS + int(float(ctx.attr("alpha", 1.0)) != 1.0)
    return Cost(flops=(swish + 1) * ctx.numel(0))


@register("BiasSplitGelu", domain=MS)
def bias_split_gelu(ctx: OpContext) -> Cost:
    """FLOPs = numel(X) bias add + numel(X)/2 x 6: exact Gelu (5) of the right half times the left half (1)."""
    x = ctx.numel(0)
    return Cost(flops=x + x // 2 * (GELU_FLOPS + 1))


@register("BiasAdd", domain=MS)
def bias_add(ctx: OpContext) -> Cost:
    """FLOPs = 2 x numel(X): bias add, then skip add."""
    return Cost(flops=2 * ctx.numel(0))


@register("BiasDropout", domain=MS, meta_inputs=(3, 4))
def bias_dropout(ctx: OpContext) -> Cost:
    """FLOPs = numel(X) bias add + numel(X) if residual.

    NB: inference: dropout is a copy. Training mode would add a draw, a compare and a scale per element.
    """
    return Cost(flops=(1 + int(given(ctx, 2))) * ctx.numel(0))


@register("BiasSoftmax", domain=MS)
def bias_softmax(ctx: OpContext) -> Cost:
    """FLOPs = 6 x numel - 2 x rows: bias add, softmax (5 n - 2 per row) over dims axis.. (rows = prod(shape[:axis]))."""
    x = ctx.shape(0)
    numel = math.prod(x)
    rows = softmax_rows(x, ctx.int_attr("axis", 1), coerced_2d=True)
    return Cost(flops=numel + softmax_flops(numel, rows))


# --- fused normalizations --------------------------------------------------------------------


@register("SkipLayerNormalization", domain=MS)
def skip_layer_norm(ctx: OpContext) -> Cost:
    """FLOPs = numel x (1 skip + 1 if bias + 6 + 1 if beta) + 3 x rows: skip add, LayerNorm over the last axis."""
    shape = ctx.shape(0)
    numel = math.prod(shape)
    # skip add, bias add, times gamma, plus beta
    per = 1 + int(given(ctx, 4)) + 1 + int(given(ctx, 3))
    return Cost(flops=standardize_flops(numel, _rows(shape)) + per * numel)


@register("SkipSimplifiedLayerNormalization", domain=MS)
def skip_simplified_layer_norm(ctx: OpContext) -> Cost:
    """FLOPs = numel x (1 skip + 1 if bias + 4) + 3 x rows: skip add, RMS norm over the last axis."""
    shape = ctx.shape(0)
    numel = math.prod(shape)
    adds = 1 + int(given(ctx, 3))
    return Cost(flops=(adds + RMS_NORM_FLOPS) * numel + 3 * _rows(shape))


@register("SimplifiedLayerNormalization")
@register("SimplifiedLayerNormalization", domain=MS)
def simplified_layer_norm(ctx: OpContext) -> Cost:
    """FLOPs = 4 x numel(X) + 3 x rows (rows = prod(shape[:axis])): RMS norm, as ONNX RMSNormalization.

    onnxruntime registers this op in the default domain (its optimizer emits it there).
    """
    shape = ctx.shape(0)
    return Cost(flops=RMS_NORM_FLOPS * math.prod(shape) + 3 * _norm_rows(ctx, shape))


def _simplified_saves(ctx: OpContext, needs: tuple[bool, ...]) -> Saved:
    return Saved(inputs=(0,), extra_bytes=STAT_BYTES * _norm_rows(ctx, ctx.shape(0)))


@register_backward("SimplifiedLayerNormalization", saves=_simplified_saves)
@register_backward("SimplifiedLayerNormalization", domain=MS, saves=_simplified_saves)
def simplified_layer_norm_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """As RMSNormalization's: dX 6 x numel + x^ numel; dScale 2 x numel - D; keeps X and rrms per row."""
    shape = ctx.shape(0)
    numel = math.prod(shape)
    rows = _norm_rows(ctx, shape)
    features = numel // rows if rows else 0
    return Cost(
        flops=norm_backward_flops(
            numel, features, needs_any(needs, 0), needs_any(needs, 1), False, moments=1
        )
    )


@register("EmbedLayerNormalization", domain=MS, meta_inputs=(0, 1, 7, 8))
def embed_layer_norm(ctx: OpContext) -> Cost:
    """FLOPs = B x S x D x (1 or 2 adds + 7) + 3 x B x S + numel(mask): embeddings summed, LayerNorm, mask index.

    The word, position (and segment) lookups are gathers, free; mask_index sums the mask (numel(mask)).
    """
    batch, seq = ctx.shape(0)
    hidden = ctx.shape(2)[-1]
    rows = batch * seq
    numel = rows * hidden
    adds = 1 + int(given(ctx, 4) and given(ctx, 1))  # word + position (+ segment)
    mask = ctx.numel(7) if given(ctx, 7) else 0
    return Cost(flops=standardize_flops(numel, rows) + (adds + 2) * numel + mask)


@register("QEmbedLayerNormalization", domain=MS, meta_inputs=(0, 1, 7), quant_inputs=range(8, 18))
def qembed_layer_norm(ctx: OpContext) -> Cost:
    """As EmbedLayerNormalization + 2 x B x S x D per table gathered (word, position, segment) + 2 x 2 x D: each uint8 row, gamma and beta dequantized.

    NB: dequantization counted on the gathered rows only, as onnxruntime's kernel does it.
    """
    batch, seq = ctx.shape(0)
    hidden = ctx.shape(2)[-1]
    tables = 2 + int(given(ctx, 4) and given(ctx, 1))
    dequantized = tables * batch * seq * hidden + 2 * hidden
    return embed_layer_norm(ctx) + Cost(flops=DEQUANTIZE_FLOPS * dequantized)


@register_reads("EmbedLayerNormalization", "QEmbedLayerNormalization", domain=MS)
def embed_layer_norm_reads(ctx: OpContext) -> tuple[int, ...]:
    """Bytes read = B x S rows of each embedding table given (word, position, segment: inputs 2-4), every other input whole.

    Each token reads its row of each table, not the table.
    NB: a position row shared by the batch is counted once per sequence.
    """
    batch, seq = ctx.shape(0)
    out: list[int] = []
    for i, t in enumerate(ctx.inputs):
        if t is None:
            out.append(0)
        elif i in (2, 3, 4):
            out.append(tensor_bytes(batch * seq * t.concrete_shape[-1], t.elem_type))
        else:
            out.append(t.nbytes)
    return tuple(out)


@register("GroupNorm", "SkipGroupNorm", domain=MS)
def ms_group_norm(ctx: OpContext) -> Cost:
    """FLOPs = 7 x numel(X) + 3 x N x groups (+ numel(X) per skip and bias add) + 5 x numel(X) with SiLU.

    X is NHWC (channels_last = 1, the default) or NCHW.
    """
    shape = ctx.shape(0)
    numel = math.prod(shape)
    groups = ctx.int_attr("groups", 0)
    if groups <= 0:
        raise UnknownShapeError(f"{ctx.node.name}: GroupNorm without groups")
    flops = standardize_flops(numel, shape[0] * groups) + 2 * numel
    if ctx.op_type == "SkipGroupNorm":
        flops += numel * (1 + int(given(ctx, 4)))  # skip, bias
    if ctx.int_attr("activation", 0):
        flops += SILU_FLOPS * numel
    return Cost(flops=flops)
