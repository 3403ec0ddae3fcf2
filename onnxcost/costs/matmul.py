"""Matrix products: MatMul, Gemm, Einsum."""

from __future__ import annotations

import math
import re

from onnxcost.costs._context import OpContext, UnknownShapeError, dim_max
from onnxcost.costs._registry import (
    Cost,
    Saved,
    broadcast_sum,
    needs_any,
    register,
    register_backward,
)


def matmul_macs(a_shape: tuple[int, ...], y_shape: tuple[int, ...]) -> int:
    """numel(Y) x K, K = last dim of A (numpy matmul semantics, 1-D and broadcast included)."""
    return math.prod(y_shape) * a_shape[-1]


@register("MatMul")
def matmul(ctx: OpContext) -> Cost:
    """MACs = numel(Y) x K; FLOPs = 2 x MACs."""
    return Cost.contraction(matmul_macs(ctx.shape(0), ctx.out_shape()))


@register("Gemm", bias_inputs=(2,))
def gemm(ctx: OpContext) -> Cost:
    """MACs = M x N x K; FLOPs = 2 x MACs + M x N per alpha != 1 and per bias add (beta != 1 adds M x N).

    NB: broadcasting C costs one add per output element, whatever C's shape.
    """
    a = ctx.shape(0)
    k = a[0] if ctx.attr("transA", 0) else a[1]
    y = ctx.out_numel()
    extra = 0
    if float(ctx.attr("alpha", 1.0)) != 1.0:
        extra += y
    if ctx.has_input(2) and float(ctx.attr("beta", 1.0)) != 0.0:
        extra += y
        if float(ctx.attr("beta", 1.0)) != 1.0:
            extra += y
    return Cost.contraction(y * k, extra)


_EINSUM_TERM = re.compile(r"^(\.\.\.)?[A-Za-z]*(\.\.\.)?[A-Za-z]*$")


def _expand_term(term: str, rank: int, ellipsis_letters: str) -> str:
    if "..." not in term:
        return term
    n = rank - (len(term) - 3)
    return term.replace("...", ellipsis_letters[len(ellipsis_letters) - n :] if n else "")


def einsum_sizes(
    equation: str, shapes: list[tuple[int, ...]]
) -> tuple[dict[str, int], list[str], str]:
    """Letter sizes, the input terms and the output term of an einsum, ellipses expanded."""
    eq = equation.replace(" ", "")
    lhs, _, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes) or not all(_EINSUM_TERM.match(t) for t in terms):
        raise UnknownShapeError(f"einsum equation {equation!r} does not match {len(shapes)} inputs")
    # Upper-case Greek-free letters not used by the equation stand for ellipsis dims.
    spare = "".join(
        c for c in "ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqponmlkjihgfedcba" if c not in eq
    )
    max_ell = max(
        (len(s) - (len(t) - 3) for t, s in zip(terms, shapes, strict=True) if "..." in t), default=0
    )
    ell = spare[:max_ell][::-1]
    sizes: dict[str, int] = {}
    expanded = []
    for term, shape in zip(terms, shapes, strict=True):
        letters = _expand_term(term, len(shape), ell)
        expanded.append(letters)
        for letter, dim in zip(letters, shape, strict=True):
            # Broadcast: a dim of 1 yields to the other (0 included: an empty batch), equal
            # dims are that dim (a symbolic batch, not max(1, batch)); others are unequal
            # only in a malformed model, or symbolic ones that may differ: their max.
            seen = sizes.get(letter)
            if seen is None or seen == 1:
                sizes[letter] = dim
            elif dim != 1 and dim != seen:
                sizes[letter] = dim_max(seen, dim)
    if "->" in eq:
        out = _expand_term(rhs, max_ell + len(rhs) - 3, ell) if "..." in rhs else rhs
    else:
        counts = {c: sum(t.count(c) for t in expanded) for c in sizes}
        out = ell + "".join(sorted(c for c in sizes if counts[c] == 1 and c not in ell))
    return sizes, expanded, out


@register("Einsum")
def einsum(ctx: OpContext) -> Cost:
    """n >= 2 operands: MACs = prod(all index sizes) x (n - 1); one operand: FLOPs = numel(X) - numel(Y).

    NB: the naive evaluation order; an optimised contraction path can be cheaper for n >= 3.
    """
    shapes = [t.concrete_shape for t in ctx.present_inputs()]
    sizes, _terms, _out = einsum_sizes(str(ctx.attr("equation")), shapes)
    if len(shapes) == 1:
        return Cost(flops=dim_max(0, math.prod(shapes[0]) - ctx.out_numel()))
    return Cost.contraction(math.prod(sizes.values()) * (len(shapes) - 1))


# --- backward rules: each operand's gradient is one more contraction of the forward's size ----


def _other_operands(ctx: OpContext, needs: tuple[bool, ...]) -> Saved:
    """A product keeps, for each operand's gradient, the other operands (A for dB, B for dA)."""
    n = min(len(needs), 2) if ctx.op_type != "Einsum" else len(needs)
    kept = sorted({j for i in range(n) if needs[i] for j in range(n) if j != i})
    return Saved(inputs=tuple(kept))


@register_backward("MatMul", saves=_other_operands)
def matmul_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dA = g B^T, dB = A^T g: MACs = numel(Y) x K each (the forward's), broadcast batches summed in."""
    macs = matmul_macs(ctx.shape(0), ctx.out_shape())
    return Cost.contraction(macs * sum(1 for n in needs[:2] if n))


@register_backward("Gemm", saves=_other_operands)
def gemm_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dA, dB: M x N x K MACs each; dC = beta g summed to C's shape: numel(Y) - numel(C) adds (+ numel(C) if beta != 1); numel(Y) more to scale g by alpha != 1."""
    a = ctx.shape(0)
    k = a[0] if ctx.attr("transA", 0) else a[1]
    y = ctx.out_numel()
    products = sum(1 for n in needs[:2] if n)
    extra = y if products and float(ctx.attr("alpha", 1.0)) != 1.0 else 0
    if needs_any(needs, 2):
        extra += broadcast_sum(ctx, 2)
        if float(ctx.attr("beta", 1.0)) != 1.0:
            extra += ctx.numel(2)
    return Cost.contraction(y * k * products, extra)


@register_backward("Einsum", saves=_other_operands)
def einsum_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """n >= 2 operands: each operand's gradient is an einsum of g and the others, the forward's MACs each; one operand: 0 (a broadcast of g)."""
    shapes = [t.concrete_shape for t in ctx.present_inputs()]
    if len(shapes) == 1:
        return Cost()
    sizes, _terms, _out = einsum_sizes(str(ctx.attr("equation")), shapes)
    macs = math.prod(sizes.values()) * (len(shapes) - 1)
    return Cost.contraction(macs * sum(1 for n in needs if n))
