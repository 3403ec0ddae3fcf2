"""Elementwise ops: math, comparisons, logic, activations, variadic ops, generators.

Counting rule (shared by normalization, pooling, reduction and data_movement): one FLOP per
primitive per element; add, sub, mul, div, compare, min, max, abs, floor and a transcendental
(exp, log, pow, sqrt, tanh, erf, sin, ...) each count 1. A reduction of n values to one
costs n - 1. No op here is a contraction, so MACs are 0. Binary ops broadcast, so they count the output, numel(Y).
A conditional formula counts its compare and the work of its costlier branch for every
element; choosing between precomputed values (a select) costs nothing.
"""

from __future__ import annotations

import math

from onnxcost.costs._context import OpContext
from onnxcost.costs._registry import (
    OPSET_MAX,
    REGISTRY,
    Cost,
    Saved,
    broadcast_sum,
    needs_any,
    no_gradient,
    register,
    register_backward,
    register_zero,
    saves_inputs,
)


def per_element(ctx: OpContext, flops_each: int) -> Cost:
    """``flops_each`` FLOPs for every element of the first output."""
    return Cost(flops=flops_each * ctx.out_numel())


def _present(ctx: OpContext) -> int:
    return len(ctx.present_inputs())


@register(
    # unary math: one primitive (a transcendental counts 1)
    "Abs",
    "Neg",
    "Reciprocal",
    "Sqrt",
    "Exp",
    "Log",
    "Erf",
    "Sin",
    "Cos",
    "Tan",
    "Asin",
    "Acos",
    "Atan",
    "Sinh",
    "Cosh",
    "Tanh",
    "Asinh",
    "Acosh",
    "Atanh",
    "Sign",
    "Round",
    "Floor",
    "Ceil",
    "IsNaN",
    "IsInf",
    "Relu",
    "ThresholdedRelu",
    # logic and bitwise
    "Not",
    "BitwiseNot",
    "And",
    "Or",
    "Xor",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "BitShift",
    # binary arithmetic and comparisons
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Mod",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
)
def one_per_element(ctx: OpContext) -> Cost:
    """FLOPs = numel(Y): one primitive per output element (the broadcast output for binary ops).

    NB: Relu is one max, ThresholdedRelu one compare; Pow, Erf and the trig ops count 1 each.
    """
    return per_element(ctx, 1)


@register("LeakyRelu")
def leaky_relu(ctx: OpContext) -> Cost:
    """FLOPs = 2 x numel(Y): compare, multiply by the slope alpha."""
    return per_element(ctx, 2)


@register("PRelu", bias_inputs=(1,))
def prelu(ctx: OpContext) -> Cost:
    """FLOPs = 2 x numel(Y): compare, multiply by the broadcast slope tensor (a learned one
    of one element, torch's ``PReLU()``, is a param)."""
    return per_element(ctx, 2)


@register("Shrink")
def shrink(ctx: OpContext) -> Cost:
    """FLOPs = 3 x numel(Y): compare with -lambd, compare with lambd, add or subtract the bias."""
    return per_element(ctx, 3)


@register("Elu")
def elu(ctx: OpContext) -> Cost:
    """FLOPs = 4 x numel(Y): compare, exp, subtract 1, multiply by alpha."""
    return per_element(ctx, 4)


@register("Selu")
def selu(ctx: OpContext) -> Cost:
    """FLOPs = 5 x numel(Y): compare, exp, multiply by alpha, subtract alpha, multiply by gamma."""
    return per_element(ctx, 5)


@register("Celu")
def celu(ctx: OpContext) -> Cost:
    """FLOPs = 7 x numel(Y): max(0, x) + min(0, alpha x (exp(x / alpha) - 1)): max, div, exp, sub, mul, min, add."""
    return per_element(ctx, 7)


@register("Sigmoid")
def sigmoid(ctx: OpContext) -> Cost:
    """FLOPs = 4 x numel(Y): 1 / (1 + exp(-x)) is neg, exp, add, div."""
    return per_element(ctx, 4)


@register("HardSigmoid")
def hard_sigmoid(ctx: OpContext) -> Cost:
    """FLOPs = 4 x numel(Y): max(0, min(1, alpha x + beta)) is mul, add, min, max."""
    return per_element(ctx, 4)


@register("HardSwish")
def hard_swish(ctx: OpContext) -> Cost:
    """FLOPs = 5 x numel(Y): x x HardSigmoid(x) is HardSigmoid's 4 plus a multiply."""
    return per_element(ctx, 5)


@register("Softplus")
def softplus(ctx: OpContext) -> Cost:
    """FLOPs = 3 x numel(Y): log(exp(x) + 1) is exp, add, log."""
    return per_element(ctx, 3)


@register("Softsign")
def softsign(ctx: OpContext) -> Cost:
    """FLOPs = 3 x numel(Y): x / (1 + |x|) is abs, add, div."""
    return per_element(ctx, 3)


@register("Mish")
def mish(ctx: OpContext) -> Cost:
    """FLOPs = 5 x numel(Y): x x tanh(softplus(x)) is softplus's 3, tanh, mul."""
    return per_element(ctx, 5)


@register("Swish")
def swish(ctx: OpContext) -> Cost:
    """FLOPs = 5 x numel(Y) (6 if alpha != 1): x x sigmoid(alpha x) is sigmoid's 4, a multiply, and alpha x."""
    return per_element(ctx, 5 if float(ctx.attr("alpha", 1.0)) == 1.0 else 6)


@register("Gelu")
def gelu(ctx: OpContext) -> Cost:
    """FLOPs = 5 x numel(Y) exact, 8 x numel(Y) with approximate='tanh'.

    Exact: 0.5 x x x (1 + erf(x / sqrt(2))) is div, erf, add, mul, mul. Tanh form:
    0.5 x x x (1 + tanh(sqrt(2/pi) x (x + 0.044715 x^3))) is pow, mul, add, mul, tanh, add, mul, mul.
    NB: x^3 counts as one pow, as the ONNX function body and the Pow op do.
    """
    return per_element(ctx, 8 if ctx.attr("approximate", "none") == "tanh" else 5)


@register("Clip", until=10, meta_inputs=(1, 2))
def clip_attrs(ctx: OpContext) -> Cost:
    """FLOPs = 2 x numel(Y): a min and a max per element (bounds are attributes, default +-FLT_MAX)."""
    return per_element(ctx, 2)


@register("Clip", since=11, meta_inputs=(1, 2))
def clip(ctx: OpContext) -> Cost:
    """FLOPs = numel(Y) per bound given (min, max inputs): 0 to 2 per element."""
    return per_element(ctx, int(ctx.has_input(1)) + int(ctx.has_input(2)))


@register("Sum", "Max", "Min")
def variadic(ctx: OpContext) -> Cost:
    """FLOPs = (n - 1) x numel(Y) for n inputs, broadcast to Y."""
    return per_element(ctx, max(0, _present(ctx) - 1))


@register("Mean")
def mean(ctx: OpContext) -> Cost:
    """FLOPs = n x numel(Y) for n >= 2 inputs: n - 1 adds and one divide per element; 0 for one input."""
    n = _present(ctx)
    return per_element(ctx, n if n > 1 else 0)


register_zero(
    "Where",
    reason="no arithmetic: selects elements by a precomputed boolean mask",
    meta_inputs=(0,),
)


@register("Range", meta_inputs=(0, 1, 2))
def range_(ctx: OpContext) -> Cost:
    """FLOPs = numel(Y): one add per element (the running sum of the ONNX function body)."""
    return per_element(ctx, 1)


@register("RandomUniform", "RandomNormal")
def random(ctx: OpContext) -> Cost:
    """FLOPs = 2 x numel(Y): scale and shift each draw (low + (high - low) u, mean + scale z).

    NB: the generator's own arithmetic (PRNG state, Box-Muller) is not counted.
    """
    return per_element(ctx, 2)


@register("RandomUniformLike", "RandomNormalLike", meta_inputs=(0,))
def random_like(ctx: OpContext) -> Cost:
    """FLOPs = 2 x numel(Y): scale and shift each draw; only the input's shape and type are read.

    NB: the generator's own arithmetic (PRNG state, Box-Muller) is not counted.
    """
    return per_element(ctx, 2)


@register("Bernoulli")
def bernoulli(ctx: OpContext) -> Cost:
    """FLOPs = numel(Y): one compare of a uniform draw with the probability.

    NB: the generator's own arithmetic is not counted.
    """
    return per_element(ctx, 1)


@register("Multinomial")
def multinomial(ctx: OpContext) -> Cost:
    """FLOPs = batch x (2C - 1 + samples x (1 + ceil(log2 C))): exp and running sum of C logits; per sample scale a draw, binary search.

    NB: the generator's own arithmetic is not counted.
    """
    batch, classes = ctx.shape(0)
    samples = ctx.out_shape()[1]
    search = math.ceil(math.log2(classes)) if classes > 1 else 0
    return Cost(flops=batch * (max(0, 2 * classes - 1) + samples * (1 + search)))


@register("HannWindow", "HammingWindow", meta_inputs=(0,))
def cosine_window(ctx: OpContext) -> Cost:
    """FLOPs = 4 x numel(Y): a0 - a1 cos(2 pi n / N) is mul (angle), cos, mul, sub."""
    return per_element(ctx, 4)


@register("BlackmanWindow", meta_inputs=(0,))
def blackman_window(ctx: OpContext) -> Cost:
    """FLOPs = 8 x numel(Y): a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N) is 2 angle muls, 2 cos, 2 muls, sub, add."""
    return per_element(ctx, 8)


@register("MelWeightMatrix", meta_inputs=(0, 1, 2, 3, 4))
def mel_weight_matrix(ctx: OpContext) -> Cost:
    """FLOPs = 2 x numel(Y): each weight is a triangle slope (sub, div).

    NB: entries outside a triangle are counted as if on a slope; converting the
    num_mel_bins + 2 band edges to and from the mel scale (O(num_mel_bins)) is not counted.
    """
    return per_element(ctx, 2)


# --- backward rules ---------------------------------------------------------------------------
# g is the gradient of the output; every rule counts what computes the gradient of each input
# that needs one, with the same one-FLOP-per-primitive rule as the forward. A broadcast input's
# gradient is summed back to its shape: numel(Y) - numel(X) adds (``broadcast_sum``).

_UNARY_BACKWARD: dict[str, tuple[int, str, str]] = {
    # op: (FLOPs per element of dX, what it keeps: "x" its input, "y" its output, "" nothing,
    # dX as computed from g, the output's gradient)
    "Neg": (1, "", "-g"),
    "Abs": (2, "x", "sign(x) g"),
    "Reciprocal": (3, "y", "-g y^2: mul, mul, neg"),
    "Sqrt": (2, "y", "g / (2 y): mul, div"),
    "Exp": (1, "y", "g y"),
    "Log": (1, "x", "g / x"),
    "Erf": (5, "x", "g 2/sqrt(pi) exp(-x^2): square, neg, exp, mul, mul"),
    "Sin": (2, "x", "g cos(x)"),
    "Cos": (3, "x", "-g sin(x)"),
    "Tan": (3, "y", "g (1 + y^2)"),
    "Asin": (4, "x", "g / sqrt(1 - x^2): square, sub, sqrt, div"),
    "Acos": (5, "x", "-g / sqrt(1 - x^2)"),
    "Atan": (3, "x", "g / (1 + x^2)"),
    "Sinh": (2, "x", "g cosh(x)"),
    "Cosh": (2, "x", "g sinh(x)"),
    "Tanh": (3, "y", "g (1 - y^2): square, sub, mul"),
    "Asinh": (4, "x", "g / sqrt(x^2 + 1)"),
    "Acosh": (4, "x", "g / sqrt(x^2 - 1)"),
    "Atanh": (3, "x", "g / (1 - x^2)"),
    "Relu": (1, "y", "g where y > 0: a compare (the select is free)"),
    "ThresholdedRelu": (1, "x", "g where x > alpha"),
    "LeakyRelu": (2, "x", "g (x > 0 ? 1 : alpha): compare, mul"),
    "Shrink": (2, "x", "g where |x| > lambd: two compares"),
    "Elu": (3, "y", "y > 0 ? g : g (y + alpha): compare, add, mul"),
    "Selu": (3, "y", "y > 0 ? gamma g : g (y + gamma alpha): compare, add, mul"),
    "Celu": (4, "y", "y > 0 ? g : g (y / alpha + 1): compare, div, add, mul"),
    "Sigmoid": (3, "y", "g y (1 - y): sub, mul, mul"),
    "HardSigmoid": (3, "x", "g alpha where 0 < alpha x + beta < 1: two compares, mul"),
    "HardSwish": (6, "x", "two compares, g (2x + 3) / 6: mul, add, div, mul"),
    "Softplus": (5, "x", "g sigmoid(x): sigmoid's 4, mul"),
    "Softsign": (4, "x", "g / (1 + |x|)^2: abs, add, square, div"),
    "Mish": (14, "x", "tanh(sp) + x sech^2(sp) sigmoid(x): sp 3, tanh, sigmoid 4, 6 more, g"),
    "Swish": (9, "x", "s (1 + x (1 - s)) g: sigmoid 4, sub, mul, add, mul, mul"),
    "Gelu": (11, "x", "g (Phi(x) + x phi(x)): Phi 4, phi 4, mul, add, mul (tanh form: 17)"),
}


def _unary_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX = f'(x) g: k FLOPs per element, k from the op's derivative (docs/training.md).

    NB: Gelu with approximate='tanh' counts 17 (the tanh form's derivative), Swish with
    alpha != 1 one more (alpha x)."""
    if not (needs and needs[0]):
        return Cost()
    k = _UNARY_BACKWARD[ctx.op_type][0]
    if ctx.op_type == "Gelu" and ctx.attr("approximate", "none") == "tanh":
        k = 17
    elif ctx.op_type == "Swish" and float(ctx.attr("alpha", 1.0)) != 1.0:
        k += 1
    return per_element(ctx, k)


def _unary_saves(ctx: OpContext, needs: tuple[bool, ...]) -> Saved:
    kept = _UNARY_BACKWARD[ctx.op_type][1]
    return Saved(inputs=(0,)) if kept == "x" else Saved(outputs=(0,)) if kept == "y" else Saved()


_KEEPS = {"x": "; keeps X", "y": "; keeps Y", "": ""}
for _op, (_k, _kept, _expr) in _UNARY_BACKWARD.items():
    REGISTRY.attach(
        "",
        _op,
        1,
        OPSET_MAX,
        backward=_unary_backward,
        saves=_unary_saves,
        backward_summary=f"dX = {_expr}: {_k} x numel(Y) FLOPs{_KEEPS[_kept]}",
    )


@register_backward("PRelu", saves=saves_inputs(0, 1))
def prelu_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX = g (x > 0 ? 1 : slope): 2 per element; dSlope = sum(g x where x < 0): 2 per element + broadcast sum."""
    flops = 0
    if needs_any(needs, 0):
        flops += 2 * ctx.out_numel()
    if needs_any(needs, 1):
        flops += 2 * ctx.out_numel() + broadcast_sum(ctx, 1)
    return Cost(flops=flops)


@register_backward("Add", "Sum")
def add_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX_i = g, summed back to X_i's shape where broadcast: numel(Y) - numel(X_i) adds."""
    return Cost(flops=sum(broadcast_sum(ctx, i) for i, n in enumerate(needs) if n))


@register_backward("Sub")
def sub_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dA = g, dB = -g (numel(Y) negations), each summed back to its shape where broadcast."""
    flops = broadcast_sum(ctx, 0) if needs_any(needs, 0) else 0
    if needs_any(needs, 1):
        flops += ctx.out_numel() + broadcast_sum(ctx, 1)
    return Cost(flops=flops)


@register_backward("Mean")
def mean_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX_i = g / n: numel(Y) per input that needs it, plus its broadcast sum."""
    return Cost(
        flops=sum(ctx.out_numel() + broadcast_sum(ctx, i) for i, n in enumerate(needs) if n)
    )


def _other_operand(ctx: OpContext, needs: tuple[bool, ...]) -> Saved:
    """Mul keeps B for dA and A for dB."""
    kept = tuple(sorted({1 - i for i, n in enumerate(needs[:2]) if n}))
    return Saved(inputs=kept)


@register_backward("Mul", saves=_other_operand)
def mul_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dA = g B, dB = g A: numel(Y) multiplies each, plus its broadcast sum."""
    return Cost(
        flops=sum(ctx.out_numel() + broadcast_sum(ctx, i) for i, n in enumerate(needs[:2]) if n)
    )


def _div_saves(ctx: OpContext, needs: tuple[bool, ...]) -> Saved:
    """Div keeps B for both gradients, and Y for dB."""
    return Saved(inputs=(1,), outputs=(0,) if needs_any(needs, 1) else ())


@register_backward("Div", saves=_div_saves)
def div_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dA = g / B: 1 per element; dB = -g Y / B: 3 per element (mul, div, neg); each plus its broadcast sum."""
    flops = ctx.out_numel() + broadcast_sum(ctx, 0) if needs_any(needs, 0) else 0
    if needs_any(needs, 1):
        flops += 3 * ctx.out_numel() + broadcast_sum(ctx, 1)
    return Cost(flops=flops)


def _pow_saves(ctx: OpContext, needs: tuple[bool, ...]) -> Saved:
    """Pow keeps A and B for dA, and A and Y for dB (Y only there: an exponent that trains)."""
    return Saved(inputs=(0, 1), outputs=(0,) if needs_any(needs, 1) else ())


@register_backward("Pow", saves=_pow_saves)
def pow_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dA = g B A^(B-1): 4 per element (sub, pow, mul, mul); dB = g Y log(A): 3 per element; plus broadcast sums."""
    flops = 4 * ctx.out_numel() + broadcast_sum(ctx, 0) if needs_any(needs, 0) else 0
    if needs_any(needs, 1):
        flops += 3 * ctx.out_numel() + broadcast_sum(ctx, 1)
    return Cost(flops=flops)


@register_backward("Mod", saves=saves_inputs(0, 1))
def mod_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dA = g; dB = -g floor(A / B): 4 per element (div, floor, mul, neg); plus broadcast sums."""
    flops = broadcast_sum(ctx, 0) if needs_any(needs, 0) else 0
    if needs_any(needs, 1):
        flops += 4 * ctx.out_numel() + broadcast_sum(ctx, 1)
    return Cost(flops=flops)


@register_backward(
    "Max", "Min", saves=lambda ctx, needs: Saved(inputs=tuple(range(len(needs))), outputs=(0,))
)
def max_min_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX_i = g where X_i == Y: one compare per element for each input that needs it, plus its broadcast sum."""
    return Cost(
        flops=sum(ctx.out_numel() + broadcast_sum(ctx, i) for i, n in enumerate(needs) if n)
    )


@register_backward("Clip", saves=saves_inputs(0))
def clip_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX = g where min <= x <= max: one compare per element per bound (2 with attribute bounds, before opset 11)."""
    if not needs_any(needs, 0):
        return Cost()
    bounds = 2 if ctx.opset < 11 else int(ctx.has_input(1)) + int(ctx.has_input(2))
    return per_element(ctx, bounds)


@register_backward("Where", saves=saves_inputs(0))
def where_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX = where(cond, g, 0), dY = where(cond, 0, g): selects (free), plus broadcast sums."""
    return Cost(flops=sum(broadcast_sum(ctx, i) for i in (1, 2) if needs_any(needs, i)))


no_gradient(
    "Sign", "Round", "Floor", "Ceil", "IsNaN", "IsInf", "Not", "BitwiseNot", "And", "Or", "Xor",
    "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitShift", "Equal", "Less", "Greater",
    "LessOrEqual", "GreaterOrEqual", "Range", "RandomUniform", "RandomNormal",
    "RandomUniformLike", "RandomNormalLike", "Bernoulli", "Multinomial", "HannWindow",
    "HammingWindow", "BlackmanWindow", "MelWeightMatrix",
)  # fmt: skip
