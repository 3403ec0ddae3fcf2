"""Convolutions: Conv, ConvTranspose, DeformConv.

MACs count multiply-accumulates of the contraction only; the bias is one add per output
element (FLOPs, not MACs), as in fvcore and torch.utils.flop_counter.
"""

from __future__ import annotations

import math

from onnxcost.costs._context import InvalidAttributeError, OpContext
from onnxcost.costs._registry import (
    Cost,
    Saved,
    broadcast_sum,
    needs_any,
    register,
    register_backward,
)


def check_group(ctx: OpContext, c_in: int, in_per_group: int, out_channels: int) -> None:
    """The formulas read C_in / group off W; a group that does not split the channels (0, 3
    for 4 channels, 2**62) would be costed as another: InvalidAttributeError instead."""
    group = ctx.int_attr("group", 1)
    if group < 1 or c_in != in_per_group * group or out_channels % group:
        raise InvalidAttributeError(
            f"group={group} does not split {c_in} input channels into groups of "
            f"{in_per_group} and {out_channels} output channels evenly"
        )


def conv_macs(ctx: OpContext, x: int = 0, w: int = 1) -> int:
    """numel(Y) x (C_in / group) x prod(kernel), read off W = [C_out, C_in/group, *kernel]."""
    w_shape = ctx.shape(w)
    x_shape = ctx.shape(x)  # X must be known too: its shape sets the output
    if len(x_shape) >= 2 and len(w_shape) >= 2:
        check_group(ctx, x_shape[1], w_shape[1], w_shape[0])
    return ctx.out_numel() * math.prod(w_shape[1:])


def conv_transpose_macs(ctx: OpContext, x: int = 0, w: int = 1) -> int:
    """numel(X) x (C_out / group) x prod(kernel), read off W = [C_in, C_out/group, *kernel].

    Each input element is scattered into C_out/group x prod(kernel) outputs; counting from
    the output side instead double-counts strided positions (the classic ConvTranspose bug).
    """
    w_shape = ctx.shape(w)
    x_shape = ctx.shape(x)
    if len(x_shape) >= 2 and len(w_shape) >= 2:
        # W = [C_in, C_out / group, ...]: C_in must split into the groups too.
        check_group(ctx, x_shape[1], w_shape[0] // max(1, ctx.int_attr("group", 1)), w_shape[0])
    return ctx.numel(x) * math.prod(w_shape[1:])


def _bias_flops(ctx: OpContext, b: int) -> int:
    return ctx.out_numel() if ctx.has_input(b) else 0


@register("Conv", bias_inputs=(2,))
def conv(ctx: OpContext) -> Cost:
    """MACs = numel(Y) x C_in/group x prod(k); FLOPs = 2 x MACs + numel(Y) if bias."""
    return Cost.contraction(conv_macs(ctx), _bias_flops(ctx, 2))


@register("ConvTranspose", bias_inputs=(2,))
def conv_transpose(ctx: OpContext) -> Cost:
    """MACs = numel(X) x C_out/group x prod(k); FLOPs = 2 x MACs + numel(Y) if bias."""
    return Cost.contraction(conv_transpose_macs(ctx), _bias_flops(ctx, 2))


@register("DeformConv", bias_inputs=(3,))
def deform_conv(ctx: OpContext) -> Cost:
    """MACs = numel(Y) x C_in/group x prod(k); FLOPs add 8 per sampled value (bilinear) + mask + bias.

    NB: each of the N x C_in x prod(out) x prod(k) sampled values is a bilinear blend of four
    neighbours (4 multiply-adds = 8 FLOPs), plus one multiply when a mask is given.
    """
    macs = conv_macs(ctx)
    n, c_in = ctx.shape(0)[:2]
    out_spatial = math.prod(ctx.out_shape()[2:])
    samples = n * c_in * out_spatial * math.prod(ctx.shape(1)[2:])
    extra = samples * (8 + (1 if ctx.has_input(4) else 0)) + _bias_flops(ctx, 3)
    return Cost.contraction(macs, extra)


# --- backward rules ---------------------------------------------------------------------------
# dX is a transposed convolution of g with W and dW a correlation of X with g: each costs the
# forward's MACs, groups included (each group's weight gradient sees only its own channels).
# NB: torch's FlopCounterMode counts a grouped convolution's weight gradient `groups` times
# (torch 2.13, docs/training.md); these rules count it once.


def _conv_saves(ctx: OpContext, needs: tuple[bool, ...]) -> Saved:
    """A convolution keeps X for dW and W for dX."""
    kept = ([0] if needs_any(needs, 1) else []) + ([1] if needs_any(needs, 0) else [])
    return Saved(inputs=tuple(kept))


def _bias_grad(ctx: OpContext, needs: tuple[bool, ...], b: int) -> int:
    """dB = g summed over batch and space: numel(Y) - C_out adds, none for an empty batch
    (``broadcast_sum``: not -C_out)."""
    return broadcast_sum(ctx, b) if needs_any(needs, b) and ctx.has_input(b) else 0


@register_backward("Conv", saves=_conv_saves)
def conv_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX, dW: numel(Y) x C_in/group x prod(k) MACs each (the forward's); dB: numel(Y) - C_out adds."""
    products = int(needs_any(needs, 0)) + int(needs_any(needs, 1))
    macs = conv_macs(ctx) if products else 0
    return Cost.contraction(macs * products, _bias_grad(ctx, needs, 2))


@register_backward("ConvTranspose", saves=_conv_saves)
def conv_transpose_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX, dW: numel(X) x C_out/group x prod(k) MACs each (the forward's); dB: numel(Y) - C_out adds."""
    products = int(needs_any(needs, 0)) + int(needs_any(needs, 1))
    macs = conv_transpose_macs(ctx) if products else 0
    return Cost.contraction(macs * products, _bias_grad(ctx, needs, 2))
