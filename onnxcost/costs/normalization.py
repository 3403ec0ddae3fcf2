"""Normalizations: BatchNormalization, LayerNormalization, GroupNormalization,
InstanceNormalization, RMSNormalization, LpNormalization, MeanVarianceNormalization, LRN.

Same rule as elementwise.py: one FLOP per primitive per element, a transcendental (sqrt,
pow) counts 1, a reduction of n values costs n - 1 (a mean n: n - 1 adds and a divide).
Moment-based norms follow the ONNX function bodies: per group of n elements, mean (n),
x - mean (n), square (n), variance (n), then eps add, sqrt and reciprocal once per group,
then one multiply per element by the inverse deviation, plus the affine scale and bias.
"""

from __future__ import annotations

import math

from onnxcost.costs._closed_form import clamped_floor_sum
from onnxcost.costs._context import InvalidAttributeError, OpContext, numel_over
from onnxcost.costs._registry import Cost, Saved, needs_any, register, register_backward


def standardize_flops(numel: int, groups: int) -> int:
    """(x - mean) / sqrt(var + eps) over ``groups`` groups: 5 per element + 3 per group."""
    return 5 * numel + 3 * groups


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _bn_training(ctx: OpContext) -> bool:
    if ctx.opset >= 14:
        return bool(ctx.attr("training_mode", 0))
    # Before opset 14 the statistics outputs exist only in training graphs.
    return sum(o is not None for o in ctx.outputs) > 1


@register("BatchNormalization", stat_inputs=(3, 4))
def batch_norm(ctx: OpContext) -> Cost:
    """FLOPs = 4 x numel(X) + 2 x C: (x - mean) / sqrt(var + eps) x scale + B, sqrt(var + eps) once per channel.

    NB: the formula as written; a runtime that folds scale and shift into one multiply-add
    per element does 2 x numel(X). C is numel(scale) (C x spatial for the old spatial=0).
    NB: training mode adds the batch statistics, 4 x numel(X) (mean n; sub, square, mean n
    each), and the two running-average updates, 6 x C (mul, mul, add each).
    """
    numel = ctx.numel(0)
    channels = ctx.numel(1)
    flops = 4 * numel + 2 * channels
    if _bn_training(ctx):
        flops += 4 * numel + 6 * channels
    return Cost(flops=flops)


@register("LayerNormalization")
def layer_norm(ctx: OpContext) -> Cost:
    """FLOPs = 6 x numel(X) + 3 x rows (+ numel(X) with B); rows = prod(shape[:axis]).

    Standardize (5 per element, eps add, sqrt, reciprocal per row), multiply by Scale, add B.
    """
    shape = ctx.shape(0)
    rows = math.prod(shape[: _axis(ctx.int_attr("axis", -1), len(shape))])
    numel = math.prod(shape)
    flops = standardize_flops(numel, rows) + numel
    if ctx.has_input(2):
        flops += numel
    return Cost(flops=flops)


@register("GroupNormalization")
def group_norm(ctx: OpContext) -> Cost:
    """FLOPs = 7 x numel(X) + 3 x N x num_groups: standardize per (sample, group), then scale and bias."""
    shape = ctx.shape(0)
    numel = math.prod(shape)
    groups = shape[0] * ctx.int_attr("num_groups")
    return Cost(flops=standardize_flops(numel, groups) + 2 * numel)


@register("InstanceNormalization")
def instance_norm(ctx: OpContext) -> Cost:
    """FLOPs = 7 x numel(X) + 3 x N x C: standardize per (sample, channel), then scale and bias."""
    shape = ctx.shape(0)
    numel = math.prod(shape)
    return Cost(flops=standardize_flops(numel, shape[0] * shape[1]) + 2 * numel)


@register("RMSNormalization")
def rms_norm(ctx: OpContext) -> Cost:
    """FLOPs = 4 x numel(X) + 3 x rows; rows = prod(shape[:axis]).

    Square, mean (n per row), eps add, sqrt and reciprocal per row, multiply, multiply by scale.
    """
    shape = ctx.shape(0)
    rows = math.prod(shape[: _axis(ctx.int_attr("axis", -1), len(shape))])
    return Cost(flops=4 * math.prod(shape) + 3 * rows)


@register("LpNormalization")
def lp_norm(ctx: OpContext) -> Cost:
    """FLOPs = 3 x numel(X) for p=2 (square, sum, sqrt, div); 3 x numel(X) - rows for p=1 (abs, sum, div)."""
    shape = ctx.shape(0)
    numel = math.prod(shape)
    rows = numel_over(shape, (_axis(ctx.int_attr("axis", -1), len(shape)),))
    if ctx.int_attr("p", 2) == 1:
        return Cost(flops=3 * numel - rows)
    return Cost(flops=3 * numel)


@register("MeanVarianceNormalization")
def mean_variance_norm(ctx: OpContext) -> Cost:
    """FLOPs = 5 x numel(X) + 4 x groups; groups = numel(X) / prod(shape[axes]), axes default [0, 2, 3].

    As the ONNX function body: E[x], E[x]^2, x^2, E[x^2], variance, sqrt, x - E[x], add eps, div.
    """
    shape = ctx.shape(0)
    axes = ctx.attr("axes", [0, 2, 3])
    numel = math.prod(shape)
    groups = numel_over(shape, [_axis(int(a), len(shape)) for a in axes])
    return Cost(flops=5 * numel + 4 * groups)


def lrn_window_adds(channels: int, size: int) -> int:
    """Adds that sum the squares over each channel's window, clipped at the channel edges.

    sum over c in [0, C) of min(C - 1, c + hi) - max(0, c - lo), in closed form (C may be
    anything a model claims): each term is a clamped line, summed by ``clamped_floor_sum``.
    """
    if size < 1:
        raise InvalidAttributeError(f"attribute size={size} must be >= 1")
    if channels <= 0:
        return 0
    lo, hi = (size - 1) // 2, (size - 1) - (size - 1) // 2
    ends = clamped_floor_sum(channels, 1, 1, hi, min(hi, channels - 1), channels - 1)
    starts = clamped_floor_sum(channels, 1, 1, -lo, 0, max(0, channels - 1 - lo))
    return ends - starts


@register("LRN")
def lrn(ctx: OpContext) -> Cost:
    """FLOPs = 5 x numel(X) + (numel(X) / C) x window adds: square; window sum; x alpha/size, + bias, pow beta, div.

    The window of channel c spans [c - floor((size-1)/2), c + ceil((size-1)/2)], clipped to [0, C).
    """
    shape = ctx.shape(0)
    numel = math.prod(shape)
    channels = shape[1]
    per_channel = numel // channels if channels else 0
    return Cost(flops=5 * numel + per_channel * lrn_window_adds(channels, ctx.int_attr("size")))


# --- backward rules ---------------------------------------------------------------------------
# With x^ = (x - mean) rstd recomputed from the kept input and statistics (2 per element, once
# for dScale and dX): dBias = sum of g over the normalized rows (numel - features adds),
# dScale = sum of g x^ (numel multiplies + numel - features adds), and
# dX = rstd (g s - mean(g s) - x^ mean(g s x^)) with s the scale: g s (1), two row sums with
# their means (numel - rows + 1 per row, 2 numel - rows + 1 per row), then x^ times the mean,
# two subtractions and the rstd multiply (4) = 8 per element.
# Saved: X and two fp32 statistics (mean, rstd) per normalized row, as torch's native norms.

STAT_BYTES = 4
"""An fp32 statistic (mean, rstd) kept per normalized row."""


def norm_backward_flops(
    numel: int,
    features: int,
    needs_x: bool,
    needs_scale: bool,
    needs_bias: bool,
    *,
    moments: int = 2,
) -> int:
    """FLOPs of a norm's backward (see above); ``moments`` 1 for RMS (no mean: x^ costs 1, dX 6)."""
    flops = 0
    if needs_x or needs_scale:
        flops += moments * numel  # x^: (x - mean) rstd, or x rrms
    if needs_bias:
        flops += numel - features
    if needs_scale:
        flops += 2 * numel - features
    if needs_x:
        flops += (8 if moments == 2 else 6) * numel
    return flops


def _norm_saves(groups: int) -> Saved:
    return Saved(inputs=(0,), extra_bytes=2 * STAT_BYTES * groups)


def _ln_rows(ctx: OpContext) -> int:
    shape = ctx.shape(0)
    return math.prod(shape[: _axis(ctx.int_attr("axis", -1), len(shape))])


def _ln_features(ctx: OpContext) -> int:
    """D = numel / rows, 0 where rows is 0 (``numel_over``: over SymDims too)."""
    shape = ctx.shape(0)
    return numel_over(shape, range(_axis(ctx.int_attr("axis", -1), len(shape))))


@register_backward("LayerNormalization", saves=lambda ctx, needs: _norm_saves(_ln_rows(ctx)))
def layer_norm_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX: 8 x numel + x^ 2 x numel; dScale: 2 x numel - D; dB: numel - D (D = numel / rows); keeps X, mean and rstd per row."""
    numel = ctx.numel(0)
    features = _ln_features(ctx)
    return Cost(
        flops=norm_backward_flops(
            numel, features, needs_any(needs, 0), needs_any(needs, 1), needs_any(needs, 2)
        )
    )


@register_backward(
    "RMSNormalization",
    saves=lambda ctx, needs: Saved(inputs=(0,), extra_bytes=STAT_BYTES * _ln_rows(ctx)),
)
def rms_norm_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX: 6 x numel + x^ numel (no mean to subtract); dScale: 2 x numel - D; keeps X and rrms per row."""
    numel = ctx.numel(0)
    features = _ln_features(ctx)
    return Cost(
        flops=norm_backward_flops(
            numel, features, needs_any(needs, 0), needs_any(needs, 1), False, moments=1
        )
    )


def _channel_norm(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """Scale and bias per channel: their gradients sum n elements into C."""
    numel = ctx.numel(0)
    channels = ctx.shape(0)[1] if len(ctx.shape(0)) > 1 else 1
    return Cost(
        flops=norm_backward_flops(
            numel, channels, needs_any(needs, 0), needs_any(needs, 1), needs_any(needs, 2)
        )
    )


@register_backward("BatchNormalization", saves=lambda ctx, needs: _norm_saves(ctx.numel(1)))
def batch_norm_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """As LayerNorm over the N x spatial elements of each channel (training-mode statistics): dX 8 x numel + x^ 2 x numel; dScale 2 x numel - C; dB numel - C.

    NB: a step trains BatchNorm with batch statistics whatever mode the graph was exported in.
    """
    return _channel_norm(ctx, needs)


@register_backward(
    "GroupNormalization",
    saves=lambda ctx, needs: _norm_saves(ctx.shape(0)[0] * ctx.int_attr("num_groups")),
)
def group_norm_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """As LayerNorm per (sample, group): dX 8 x numel + x^ 2 x numel; dScale 2 x numel - C; dB numel - C."""
    return _channel_norm(ctx, needs)


@register_backward(
    "InstanceNormalization",
    saves=lambda ctx, needs: _norm_saves(ctx.shape(0)[0] * ctx.shape(0)[1]),
)
def instance_norm_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """As LayerNorm per (sample, channel): dX 8 x numel + x^ 2 x numel; dScale 2 x numel - C; dB numel - C."""
    return _channel_norm(ctx, needs)
