"""Reductions and transforms along axes: Reduce*, ArgMax/ArgMin, CumSum/CumProd, TopK, the
Softmax family, the loss ops, Det, DFT, STFT, NonMaxSuppression, TfIdfVectorizer.

Same rule as elementwise.py: one FLOP per primitive per element, a transcendental counts 1,
and a reduction of n values to one costs n - 1. A reduction's cost depends only on
numel(X) and numel(Y) (numel(X) - numel(Y) for a plain sum), so the axes, whether
attribute or input, and keepdims never need to be read.
Softmax follows the ONNX function body, max-subtracted: per row of n, max (n - 1),
x - max (n), exp (n), sum (n - 1), divide (n): 5n - 2.
"""

from __future__ import annotations

import math

from onnxcost.costs._context import InvalidAttributeError, OpContext, dim_max, dim_min, numel_over
from onnxcost.costs._registry import (
    Cost,
    Saved,
    needs_any,
    no_gradient,
    register,
    register_backward,
    saves_inputs,
    saves_outputs,
)


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _is_noop(ctx: OpContext) -> bool:
    """noop_with_empty_axes=1 and no axes: the output is the input, unreduced."""
    if not ctx.attr("noop_with_empty_axes", 0):
        return False
    return not ctx.has_input(1) or ctx.shape(1) == (0,)


def _reduced(ctx: OpContext) -> int:
    """numel(X) - numel(Y): the n - 1 binary ops of every output's reduction."""
    return dim_max(0, ctx.numel(0) - ctx.out_numel())


@register("ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", meta_inputs=(1,))
def reduce_plain(ctx: OpContext) -> Cost:
    """FLOPs = numel(X) - numel(Y): n - 1 adds (compares, multiplies) per output of n inputs."""
    if _is_noop(ctx):
        return Cost()
    return Cost(flops=_reduced(ctx))


@register("ReduceMean", "ReduceLogSum", meta_inputs=(1,))
def reduce_then_map(ctx: OpContext) -> Cost:
    """FLOPs = numel(X): n - 1 adds and one divide (ReduceMean) or log (ReduceLogSum) per output."""
    if _is_noop(ctx):
        return Cost()
    return Cost(flops=_reduced(ctx) + ctx.out_numel())


@register("ReduceL1", "ReduceSumSquare", meta_inputs=(1,))
def reduce_map_then_sum(ctx: OpContext) -> Cost:
    """FLOPs = 2 x numel(X) - numel(Y): abs (L1) or square (SumSquare) per element, then n - 1 adds."""
    if _is_noop(ctx):
        return Cost()
    return Cost(flops=ctx.numel(0) + _reduced(ctx))


@register("ReduceL2", "ReduceLogSumExp", meta_inputs=(1,))
def reduce_map_sum_map(ctx: OpContext) -> Cost:
    """FLOPs = 2 x numel(X): square (L2) or exp (LogSumExp) per element, n - 1 adds, sqrt or log per output.

    NB: LogSumExp as the ONNX function body, without the max shift a stable kernel adds.
    """
    if _is_noop(ctx):
        return Cost()
    return Cost(flops=ctx.numel(0) + _reduced(ctx) + ctx.out_numel())


@register("ArgMax", "ArgMin")
def arg_reduce(ctx: OpContext) -> Cost:
    """FLOPs = numel(X) - numel(Y): n - 1 compares per output."""
    return Cost(flops=_reduced(ctx))


@register("CumSum", "CumProd", meta_inputs=(1,))
def cumulative(ctx: OpContext) -> Cost:
    """FLOPs = numel(X): one add (multiply) per element.

    NB: the axis is an input, not read here; a line of n elements needs n - 1 ops, so this
    overcounts by numel(X) / n.
    """
    return Cost(flops=ctx.numel(0))


@register("TopK", meta_inputs=(1,))
def top_k(ctx: OpContext) -> Cost:
    """FLOPs = numel(X) x ceil(log2(k + 1)): every element compared down a k-element heap.

    k is read off the output shape. NB: worst case, one compare per heap level; sorting the
    k results (k log k per row) is not counted.
    """
    x = ctx.shape(0)
    k = ctx.out_shape()[_axis(ctx.int_attr("axis", -1), len(x))]
    return Cost(flops=math.prod(x) * math.ceil(math.log2(k + 1)))


def _rows_along(shape: tuple[int, ...], axis: int) -> int:
    """Rows of a softmax along one axis (opset 13+): numel / shape[axis]."""
    return numel_over(shape, (_axis(axis, len(shape)),))


def _rows_coerced(shape: tuple[int, ...], axis: int) -> int:
    """Rows of a softmax on the input coerced to 2-D (opset < 13): prod(shape[:axis]), 0
    where the rows are empty (prod(shape[axis:]) = 0), as ``_rows_along`` counts them: rows
    of no element cost nothing, where 5 numel - 2 rows would be negative."""
    return numel_over(shape, range(_axis(axis, len(shape)), len(shape)))


@register("Softmax", until=12)
def softmax_2d(ctx: OpContext) -> Cost:
    """FLOPs = 5 x numel(X) - 2 x rows; rows = prod(shape[:axis]) (input coerced to 2-D, axis default 1)."""
    x = ctx.shape(0)
    return Cost(flops=5 * math.prod(x) - 2 * _rows_coerced(x, ctx.int_attr("axis", 1)))


@register("Softmax", since=13)
def softmax(ctx: OpContext) -> Cost:
    """FLOPs = 5 x numel(X) - 2 x rows; rows = numel(X) / shape[axis]: max, sub, exp, sum, div."""
    x = ctx.shape(0)
    return Cost(flops=5 * math.prod(x) - 2 * _rows_along(x, ctx.int_attr("axis", -1)))


@register("LogSoftmax", until=12)
def log_softmax_2d(ctx: OpContext) -> Cost:
    """FLOPs = 5 x numel(X) - rows; rows = prod(shape[:axis]) (input coerced to 2-D, axis default 1)."""
    x = ctx.shape(0)
    return Cost(flops=5 * math.prod(x) - _rows_coerced(x, ctx.int_attr("axis", 1)))


@register("LogSoftmax", since=13)
def log_softmax(ctx: OpContext) -> Cost:
    """FLOPs = 5 x numel(X) - rows; rows = numel(X) / shape[axis]: max, sub, exp, sum, log per row, sub."""
    x = ctx.shape(0)
    return Cost(flops=5 * math.prod(x) - _rows_along(x, ctx.int_attr("axis", -1)))


@register("Hardmax", until=12)
def hardmax_2d(ctx: OpContext) -> Cost:
    """FLOPs = numel(X) - rows; rows = prod(shape[:axis]) (input coerced to 2-D): an argmax per row."""
    x = ctx.shape(0)
    return Cost(flops=math.prod(x) - _rows_coerced(x, ctx.int_attr("axis", 1)))


@register("Hardmax", since=13)
def hardmax(ctx: OpContext) -> Cost:
    """FLOPs = numel(X) - rows; rows = numel(X) / shape[axis]: an argmax (n - 1 compares) per row."""
    x = ctx.shape(0)
    return Cost(flops=math.prod(x) - _rows_along(x, ctx.int_attr("axis", -1)))


def nll_flops(ctx: OpContext, targets: int, weighted: bool) -> int:
    """Negate (and weight) each picked log-probability, then reduce ('none', 'sum', 'mean')."""
    flops = targets * (2 if weighted else 1)
    reduction = ctx.attr("reduction", "mean")
    if reduction in ("sum", "mean"):
        flops += dim_max(0, targets - 1)
    if reduction == "mean":
        # Divide by the count, or by the sum of the picked weights.
        flops += 1 + (dim_max(0, targets - 1) if weighted else 0)
    return flops


@register("NegativeLogLikelihoodLoss", meta_inputs=(1,))
def nll_loss(ctx: OpContext) -> Cost:
    """FLOPs = T (+T with weights) + reduction: T - 1 adds for sum; + 1 divide (+ T - 1 weight adds) for mean; T = numel(target).

    NB: comparisons with ignore_index are not counted.
    """
    return Cost(flops=nll_flops(ctx, ctx.numel(1), ctx.has_input(2)))


@register("SoftmaxCrossEntropyLoss", meta_inputs=(1,))
def softmax_cross_entropy(ctx: OpContext) -> Cost:
    """FLOPs = LogSoftmax over C (5 x numel(scores) - T) + NegativeLogLikelihoodLoss on T = numel(labels).

    NB: comparisons with ignore_index are not counted.
    """
    targets = ctx.numel(1)
    log_softmax_flops = 5 * ctx.numel(0) - targets
    return Cost(flops=log_softmax_flops + nll_flops(ctx, targets, ctx.has_input(2)))


@register("Det")
def det(ctx: OpContext) -> Cost:
    """FLOPs = batch x (n(n-1)/2 + n(n-1)(2n-1)/3 + n - 1): LU elimination (divides, multiply-subtracts), product of the pivots.

    NB: partial pivoting's compares and row swaps are not counted.
    """
    x = ctx.shape(0)
    n = x[-1]
    per_matrix = n * (n - 1) // 2 + n * (n - 1) * (2 * n - 1) // 3 + dim_max(0, n - 1)
    return Cost(flops=math.prod(x[:-2]) * per_matrix)


def fft_flops(n: int) -> int:
    """5 N log2 N, the classic radix-2 FFT count for one complex transform of length N."""
    return round(5 * n * math.log2(n)) if n > 1 else 0


def _dft_axis(ctx: OpContext, x: tuple[int, ...], y: tuple[int, ...]) -> int:
    if ctx.opset < 20:
        return _axis(ctx.int_attr("axis", 1), len(x))
    if ctx.has_input(2):
        # The axis is a runtime input: take the signal axis whose length changed.
        changed = [i for i in range(len(x) - 1) if x[i] != y[i]]
        if changed:
            return changed[0]
    return len(x) - 2


@register("DFT", meta_inputs=(1, 2))
def dft(ctx: OpContext) -> Cost:
    """FLOPs = transforms x 5 N log2 N; N = dft_length (else the axis length), transforms = numel(X) / (N_in x components).

    NB: real and one-sided transforms are counted as full complex ones, non-power-of-two N
    at the same rate. From opset 20 the axis is an input: the axis whose length changes,
    else the default -2.
    """
    x = ctx.shape(0)
    y = ctx.out_shape()
    axis = _dft_axis(ctx, x, y)
    if not ctx.has_input(1):
        n = x[axis]
    elif ctx.attr("onesided", 0):
        n = max(1, 2 * (y[axis] - 1))
    else:
        n = y[axis]
    transforms = math.prod(d for i, d in enumerate(x[:-1]) if i != axis)
    return Cost(flops=transforms * fft_flops(n))


@register("STFT", meta_inputs=(1, 2, 3))
def stft(ctx: OpContext) -> Cost:
    """FLOPs = batch x frames x (5 N log2 N + N with a window); N = frame length.

    N is the window's length, else read off the bins (onesided: 2 x (bins - 1)).
    NB: real and one-sided transforms are counted as full complex ones.
    """
    batch, frames, bins = ctx.out_shape()[:3]
    if ctx.has_input(2):
        n = ctx.shape(2)[0]
    elif ctx.attr("onesided", 1):
        n = max(1, 2 * (bins - 1))
    else:
        n = bins
    window = n if ctx.has_input(2) else 0
    return Cost(flops=batch * frames * (fft_flops(n) + window))


# Per box pair: intersection (4 min/max, 2 sub, 2 clamps, 1 mul), union (add, sub), divide, compare.
_IOU_FLOPS = 13


@register("NonMaxSuppression", meta_inputs=(2, 3, 4))
def non_max_suppression(ctx: OpContext) -> Cost:
    """FLOPs = B x C x (n ceil(log2 n) + n + 13 n(n-1)/2) + 3 B n: sort, score threshold, IoU of every pair; box areas.

    NB: worst case: no box is filtered or suppressed and max_output_boxes_per_class does
    not stop the search early; the real count depends on the scores (runtime data).
    """
    batch, classes, n = ctx.shape(1)
    sort = n * math.ceil(math.log2(n)) if n > 1 else 0
    per_class = sort + n + _IOU_FLOPS * n * (n - 1) // 2
    return Cost(flops=batch * classes * per_class + 3 * batch * n)


@register("TfIdfVectorizer")
def tf_idf_vectorizer(ctx: OpContext) -> Cost:
    """FLOPs = rows x sum over n in [min_gram, max_gram] of (L - n + 1) count increments, + numel(Y) for TFIDF weighting.

    NB: upper bound, every n-gram counted as found in the pool; skip-grams
    (max_skip_count > 0) are not counted; IDF mode replaces counts by weights (a select).
    """
    x = ctx.shape(0)
    length = x[-1]
    rows = math.prod(x[:-1])
    lo = ctx.int_attr("min_gram_length", 1)
    hi = ctx.int_attr("max_gram_length", 1)
    if lo < 1:
        raise InvalidAttributeError(f"attribute min_gram_length={lo} must be >= 1")
    # sum over n in [lo, hi] of max(0, L - n + 1): an arithmetic series up to n = L + 1.
    top = dim_min(hi, length + 1)
    count = dim_max(0, top - lo + 1)
    grams = count * (length + 1) - (lo + top) * count // 2
    weighting = ctx.out_numel() if ctx.attr("mode", "TF") == "TFIDF" else 0
    return Cost(flops=rows * grams + weighting)


# --- backward rules ---------------------------------------------------------------------------


def _reduce_grad(ctx: OpContext, needs: tuple[bool, ...], per_input: int, per_output: int) -> Cost:
    if not needs_any(needs, 0) or _is_noop(ctx):
        return Cost()
    return Cost(flops=per_input * ctx.numel(0) + per_output * ctx.out_numel())


@register_backward("ReduceSum")
def reduce_sum_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX = g broadcast back over the reduced axes: 0."""
    return Cost()


@register_backward("ReduceMean")
def reduce_mean_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX = g / n broadcast: numel(Y) divides."""
    return _reduce_grad(ctx, needs, 0, 1)


@register_backward("ReduceLogSum", saves=saves_outputs(0))
def reduce_log_sum_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX = g / exp(y) broadcast: 2 x numel(Y) (exp, divide); keeps Y."""
    return _reduce_grad(ctx, needs, 0, 2)


@register_backward(
    "ReduceMax", "ReduceMin", saves=lambda ctx, needs: Saved(inputs=(0,), outputs=(0,))
)
def reduce_max_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX = g where x == y: numel(X) compares; keeps X and Y."""
    return _reduce_grad(ctx, needs, 1, 0)


@register_backward("ReduceProd", saves=lambda ctx, needs: Saved(inputs=(0,), outputs=(0,)))
def reduce_prod_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX = g y / x: 2 x numel(X); keeps X and Y."""
    return _reduce_grad(ctx, needs, 2, 0)


@register_backward("ReduceSumSquare", "ReduceL1", saves=saves_inputs(0))
def reduce_sum_square_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX = 2 x g (SumSquare) or sign(x) g (L1): 2 x numel(X); keeps X."""
    return _reduce_grad(ctx, needs, 2, 0)


@register_backward(
    "ReduceL2", "ReduceLogSumExp", saves=lambda ctx, needs: Saved(inputs=(0,), outputs=(0,))
)
def reduce_l2_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX = g x / y (L2: mul, div) or g exp(x - y) (LogSumExp: sub, exp, mul): 2 or 3 x numel(X); keeps X and Y."""
    return _reduce_grad(ctx, needs, 2 if ctx.op_type == "ReduceL2" else 3, 0)


@register_backward("CumSum", "CumProd", saves=lambda ctx, needs: Saved(inputs=(0,), outputs=(0,)))
def cumulative_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """CumSum: dX is the reversed cumulative sum of g, numel(X); CumProd: g y / x summed in reverse, 3 x numel(X)."""
    return _reduce_grad(ctx, needs, 1 if ctx.op_type == "CumSum" else 3, 0)


@register_backward("TopK", saves=saves_outputs(1))
def top_k_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX: g scattered into the selected positions, 0 arithmetic; keeps the indices."""
    return Cost()


def _softmax_backward(ctx: OpContext, needs: tuple[bool, ...], rows: int) -> Cost:
    return Cost(flops=4 * ctx.numel(0) - rows) if needs_any(needs, 0) else Cost()


@register_backward("Softmax", until=12, saves=saves_outputs(0))
def softmax_2d_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX = y (g - sum(g y)): 4 x numel - rows (g y, row sum, sub, mul); keeps Y. Rows as the forward (2-D coerced)."""
    return _softmax_backward(ctx, needs, _rows_coerced(ctx.shape(0), ctx.int_attr("axis", 1)))


@register_backward("Softmax", since=13, saves=saves_outputs(0))
def softmax_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX = y (g - sum(g y)): 4 x numel - rows (g y, row sum, sub, mul); keeps Y."""
    return _softmax_backward(ctx, needs, _rows_along(ctx.shape(0), ctx.int_attr("axis", -1)))


@register_backward("LogSoftmax", until=12, saves=saves_outputs(0))
def log_softmax_2d_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX = g - exp(y) sum(g): 4 x numel - rows (row sum, exp, mul, sub); keeps Y. Rows as the forward (2-D coerced)."""
    return _softmax_backward(ctx, needs, _rows_coerced(ctx.shape(0), ctx.int_attr("axis", 1)))


@register_backward("LogSoftmax", since=13, saves=saves_outputs(0))
def log_softmax_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX = g - exp(y) sum(g): 4 x numel - rows (row sum, exp, mul, sub); keeps Y."""
    return _softmax_backward(ctx, needs, _rows_along(ctx.shape(0), ctx.int_attr("axis", -1)))


@register_backward("SoftmaxCrossEntropyLoss", saves=saves_inputs(0, 1))
def softmax_cross_entropy_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dScores = (softmax(x) - onehot) g: softmax 5 x numel - T, subtract at the T targets, scale by g numel: 6 x numel; keeps scores and labels."""
    return Cost(flops=6 * ctx.numel(0)) if needs_any(needs, 0) else Cost()


@register_backward("NegativeLogLikelihoodLoss", saves=saves_inputs(1))
def nll_loss_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX = -g (x weight) at each of the T targets, 0 elsewhere: T (2 T with weights); keeps the targets."""
    if not needs_any(needs, 0):
        return Cost()
    return Cost(flops=ctx.numel(1) * (2 if ctx.has_input(2) else 1))


no_gradient("ArgMax", "ArgMin", "Hardmax")
