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
from onnxcost.costs._context import InvalidAttributeError, OpContext
from onnxcost.costs._registry import Cost, register


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
    n = shape[_axis(ctx.int_attr("axis", -1), len(shape))]
    rows = numel // n if n else 0
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
    reduced = math.prod(shape[_axis(int(a), len(shape))] for a in axes)
    numel = math.prod(shape)
    groups = numel // reduced if reduced else 0
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
