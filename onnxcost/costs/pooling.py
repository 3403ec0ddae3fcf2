"""Pooling and resampling: MaxPool, AveragePool, LpPool, the Global pools, MaxRoiPool,
RoiAlign, MaxUnpool, Resize, Upsample, GridSample, AffineGrid.

Same rule as elementwise.py: one FLOP per primitive, a reduction of n values costs n - 1.
A pool window reads only the input elements it covers ("taps"); padding is never read, so
MaxPool costs taps - numel(Y) compares and AveragePool taps - numel(Y) adds plus numel(Y)
divides. Interpolation is separable: a 1-D filter over t taps costs 2t - 1 (t mul, t - 1
add; a linear lerp a + w (b - a) is 3), applied one axis at a time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from onnxcost.costs._closed_form import clamped_floor_sum
from onnxcost.costs._context import InvalidAttributeError, OpContext, as_int, dim_max, dim_min
from onnxcost.costs._registry import (
    AFTER_FIRST,
    Cost,
    Saved,
    needs_any,
    register,
    register_backward,
    register_zero,
    saves_inputs,
)


def _ints(ctx: OpContext, name: str, n: int, fill: int) -> list[int]:
    value = ctx.attr(name)
    if not value:
        return [fill] * n
    if len(value) != n:
        raise InvalidAttributeError(f"attribute {name} has {len(value)} values, not {n}")
    return [as_int(name, v) for v in value]


def _axis_taps(n_in: int, n_out: int, k: int, stride: int, dilation: int, pad_begin: int) -> int:
    """Input elements read by the ``n_out`` windows along one axis (padding excluded).

    Window o reads taps j in [0, k) at x = o s - p + j d, counted where 0 <= x < n_in. For
    each tap j the windows that read it are L(j) <= o <= U(j), with
    L(j) = ceil((p - j d) / s) and U(j) = floor((n_in - 1 + p - j d) / s), clamped to
    [0, n_out); summed over j in closed form (``clamped_floor_sum``), since k and n_out may
    be anything a model claims.
    """
    if stride < 1 or dilation < 1:
        raise InvalidAttributeError(f"stride {stride} and dilation {dilation} must be >= 1")
    if type(n_in) is not int or type(n_out) is not int or type(pad_begin) is not int:
        return _axis_taps_symbolic(n_in, n_out, k, stride, dilation, pad_begin)
    if k <= 0 or n_out <= 0 or n_in <= 0:
        return 0
    upper = clamped_floor_sum(k, stride, -dilation, n_in - 1 + pad_begin, -1, n_out - 1)
    # ceil(v / s) = -floor(-v / s): sum of L(j) clamped to [0, n_out] is minus this sum.
    minus_lower = clamped_floor_sum(k, stride, dilation, -pad_begin, -n_out, 0)
    return upper + minus_lower + k


_SYMBOLIC_TAPS_MAX = 1024
"""Most kernel taps summed one by one over symbolic sizes (a real kernel has a handful)."""


def _axis_taps_symbolic(
    n_in: int, n_out: int, k: int, stride: int, dilation: int, pad_begin: int
) -> int:
    """``_axis_taps`` over symbolic sizes (``SymDim``s; k, stride and dilation ints): the same
    sum, tap by tap, of U(j) clamped to [-1, n_out - 1] less L(j) clamped to [0, n_out], plus 1.

    Exact wherever n_in, n_out >= 0: at n_in = 0, U(j) = L(j) - 1 and every tap counts 0;
    at n_out = 0 both clamps pin U(j) to -1 and L(j) to 0.
    """
    if k > _SYMBOLIC_TAPS_MAX:
        raise ValueError(f"{k} kernel taps: too many to sum over symbolic sizes")
    total = 0
    for j in range(max(k, 0)):
        upper = (n_in - 1 + pad_begin - j * dilation) // stride
        lower = -((j * dilation - pad_begin) // stride)  # ceil((p - j d) / s)
        total += dim_min(n_out - 1, dim_max(-1, upper)) - dim_min(n_out, dim_max(0, lower)) + 1
    return total


def window_taps(ctx: OpContext) -> int:
    """Input elements read by all windows of a pool: N x C x prod over axes of the axis taps."""
    x = ctx.shape(0)
    y = ctx.out_shape()
    kernel = [as_int("kernel_shape", k) for k in ctx.attr("kernel_shape") or ()]
    nd = len(kernel)
    if not nd or len(x) != nd + 2 or len(y) != nd + 2:
        raise InvalidAttributeError(f"kernel_shape {kernel} does not match input rank {len(x)}")
    strides = _ints(ctx, "strides", nd, 1)
    dilations = _ints(ctx, "dilations", nd, 1)
    pads = _ints(ctx, "pads", 2 * nd, 0)
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    taps = y[0] * y[1]
    for d in range(nd):
        n_in, n_out = x[2 + d], y[2 + d]
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            total = dim_max(0, (n_out - 1) * strides[d] + (kernel[d] - 1) * dilations[d] + 1 - n_in)
            begin = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        elif auto_pad == "VALID":
            begin = 0
        else:
            begin = pads[d]
        taps *= _axis_taps(n_in, n_out, kernel[d], strides[d], dilations[d], begin)
    return taps


@register("MaxPool")
def max_pool(ctx: OpContext) -> Cost:
    """FLOPs = taps - numel(Y): n - 1 compares per window of n read elements.

    taps = input elements the windows read, so padding, dilation and ceil_mode are exact;
    without padding taps = numel(Y) x prod(kernel).
    """
    return Cost(flops=dim_max(0, window_taps(ctx) - ctx.out_numel()))


@register("AveragePool")
def average_pool(ctx: OpContext) -> Cost:
    """FLOPs = taps: n - 1 adds and one divide per window of n read elements.

    NB: with count_include_pad=1 the padded zeros change the divisor, not the adds: not counted.
    """
    return Cost(flops=window_taps(ctx))


@register("LpPool")
def lp_pool(ctx: OpContext) -> Cost:
    """FLOPs = 2 x taps: |x|^p per read element (one pow), n - 1 adds and one p-th root per window."""
    return Cost(flops=2 * window_taps(ctx))


@register("GlobalAveragePool")
def global_average_pool(ctx: OpContext) -> Cost:
    """FLOPs = numel(X): n - 1 adds and one divide per channel of n elements."""
    return Cost(flops=ctx.numel(0))


@register("GlobalMaxPool")
def global_max_pool(ctx: OpContext) -> Cost:
    """FLOPs = numel(X) - numel(Y): n - 1 compares per channel of n elements."""
    return Cost(flops=dim_max(0, ctx.numel(0) - ctx.out_numel()))


@register("GlobalLpPool")
def global_lp_pool(ctx: OpContext) -> Cost:
    """FLOPs = 2 x numel(X): |x|^p per element, n - 1 adds and one p-th root per channel."""
    return Cost(flops=2 * ctx.numel(0))


@register("MaxRoiPool", meta_inputs=(1,))
def max_roi_pool(ctx: OpContext) -> Cost:
    """FLOPs = numel(Y) x (ceil(H / ph) x ceil(W / pw) - 1): compares over each bin.

    NB: bin sizes depend on the ROI coordinates (runtime data); every ROI is counted as if
    it covered the whole feature map, an upper bound.
    """
    h, w = ctx.shape(0)[2:4]
    ph, pw = ctx.out_shape()[2:4]
    if not (ph and pw):
        return Cost()  # an empty output
    area = _ceil_ratio(h, ph) * _ceil_ratio(w, pw)
    return Cost(flops=ctx.out_numel() * dim_max(0, area - 1))


def _ceil_ratio(n: int, d: int) -> int:
    """ceil(n / d) for d >= 1: ``math.ceil`` on ints, a ``SymDim``'s ceiling division over
    a symbolic n (d a SymDim too raises: no formula)."""
    if type(n) is int and type(d) is int:
        return math.ceil(n / d)
    return n.ceil_div(d)  # type: ignore[attr-defined, no-any-return]


def separable_filter_flops(taps: Sequence[int]) -> int:
    """FLOPs per output of a separable filter with ``taps[i]`` taps on axis i (last axis first).

    Filtering axis i turns prod(taps[:i+1]) values into prod(taps[:i]) at 2 t_i - 1 each.
    """
    flops = 0
    for i in range(len(taps) - 1, -1, -1):
        flops += (2 * taps[i] - 1) * math.prod(taps[:i])
    return flops


@register("RoiAlign", meta_inputs=(1, 2))
def roi_align(ctx: OpContext) -> Cost:
    """FLOPs = numel(Y) x s x 10 (avg) or s x 10 - 1 (max): s samples per bin, 9 per bilinear sample, then mean or max.

    s = sampling_ratio^2. NB: sampling_ratio=0 (adaptive) depends on ROI sizes (runtime
    data): counted as if every ROI covered the whole feature map, ceil(H/oh) x ceil(W/ow).
    NB: the sample positions and bilinear weights, shared by all channels, are not counted.
    """
    h, w = ctx.shape(0)[2:4]
    oh, ow = ctx.out_shape()[2:4]
    ratio = ctx.int_attr("sampling_ratio", 0)
    if not (oh and ow):
        return Cost()  # an empty output
    samples = ratio * ratio if ratio > 0 else _ceil_ratio(h, oh) * _ceil_ratio(w, ow)
    per_output = samples * separable_filter_flops([2, 2])
    per_output += samples if ctx.attr("mode", "avg") == "avg" else samples - 1
    return Cost(flops=ctx.out_numel() * per_output)


register_zero(
    "MaxUnpool",
    reason="no arithmetic: scatters values to their recorded indices",
    meta_inputs=(1, 2),
)


_MODE_TAPS = {"nearest": 0, "linear": 2, "bilinear": 2, "cubic": 4, "bicubic": 4}


def _resampled_taps(ctx: OpContext, antialias: bool) -> list[int]:
    """Taps per resized axis (axes whose size changes); [] for nearest."""
    base = _MODE_TAPS.get(str(ctx.attr("mode", "nearest")), 0)
    if not base:
        return []
    taps = []
    for n_in, n_out in zip(ctx.shape(0), ctx.out_shape(), strict=True):
        if n_in == n_out or (type(n_out) is int and not n_out):
            continue  # unchanged, or empty (then so is the output)
        # NB: over symbolic dims (symbolic.node_costs), unlike dims are a resized axis:
        # floor(d x scale) is d only at d = 0 (an empty output, 0 FLOPs either way).
        # An antialiasing filter widens by the downscale factor.
        taps.append(math.ceil(base * n_in / n_out) if antialias and n_out < n_in else base)
    return taps


def _resample_cost(ctx: OpContext, antialias: bool) -> Cost:
    taps = _resampled_taps(ctx, antialias)
    return Cost(flops=ctx.out_numel() * separable_filter_flops(taps) if taps else 0)


@register("Resize", meta_inputs=AFTER_FIRST)
def resize(ctx: OpContext) -> Cost:
    """FLOPs = numel(Y) x separable filter over resized axes: nearest 0, linear 3 per lerp (bilinear 9), cubic 7 per 4 taps (bicubic 35).

    Only axes whose size changes are interpolated; antialias=1 widens a downscaled axis's
    filter to ceil(taps x in / out).
    NB: coordinate transforms and interpolation weights (per output index, not per element)
    are not counted; nearest is index arithmetic only, so 0.
    """
    return _resample_cost(ctx, bool(ctx.attr("antialias", 0)))


@register("Upsample", meta_inputs=(1,))
def upsample(ctx: OpContext) -> Cost:
    """FLOPs = numel(Y) x separable filter over resized axes: nearest 0, (bi)linear 3 per lerp.

    NB: as Resize: coordinates and weights not counted.
    """
    return _resample_cost(ctx, antialias=False)


@register("GridSample")
def grid_sample(ctx: OpContext) -> Cost:
    """FLOPs = numel(Y) x separable filter (bilinear 9, bicubic 35, nearest 0) + 3 x numel(grid).

    Each grid coordinate is mapped to pixels, ((g + 1) x size - 1) / 2: 3 FLOPs.
    NB: the interpolation weights and padding_mode's reflections are not counted.
    """
    out_spatial = len(ctx.out_shape()) - 2
    base = _MODE_TAPS.get(str(ctx.attr("mode", "linear")), 0)
    interp = separable_filter_flops([base] * out_spatial) if base else 0
    return Cost(flops=ctx.out_numel() * interp + 3 * ctx.numel(1))


@register("AffineGrid", meta_inputs=(1,))
def affine_grid(ctx: OpContext) -> Cost:
    """MACs = numel(grid) x (d + 1): each coordinate is theta's row dotted with (x, y[, z], 1); FLOPs = 2 x MACs.

    A batched MatMul, as in the ONNX function body, so it counts MACs.
    NB: generating the normalized base grid is not counted.
    """
    grid = ctx.out_shape()
    return Cost.contraction(ctx.out_numel() * (grid[-1] + 1))


# --- backward rules ---------------------------------------------------------------------------


@register_backward("MaxPool", saves=saves_inputs(0))
def max_pool_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX: numel(Y) adds, each window's g added at its argmax; keeps X (torch keeps X and the argmax indices)."""
    return Cost(flops=ctx.out_numel() if needs_any(needs, 0) else 0)


@register_backward("AveragePool")
def average_pool_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX = g / n spread over each window: one divide per output and one add per tap, taps FLOPs (the forward's)."""
    return Cost(flops=window_taps(ctx) if needs_any(needs, 0) else 0)


@register_backward("GlobalAveragePool")
def global_average_pool_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX = g / n broadcast over each channel: numel(Y) divides."""
    return Cost(flops=ctx.out_numel() if needs_any(needs, 0) else 0)


@register_backward("GlobalMaxPool", saves=lambda ctx, needs: Saved(inputs=(0,), outputs=(0,)))
def global_max_pool_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX = g where x == y: numel(X) compares; keeps X and Y."""
    return Cost(flops=ctx.numel(0) if needs_any(needs, 0) else 0)


@register_backward("Resize", "Upsample")
def resize_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX: the adjoint of the interpolation, the forward's FLOPs (each tap's weight times g, added back)."""
    if not needs_any(needs, 0):
        return Cost()
    return resize(ctx) if ctx.op_type == "Resize" else upsample(ctx)
