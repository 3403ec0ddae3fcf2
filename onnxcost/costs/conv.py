"""Convolutions: Conv, ConvTranspose, DeformConv.

MACs count multiply-accumulates of the contraction only; the bias is one add per output
element (FLOPs, not MACs), as in fvcore and torch.utils.flop_counter.
"""

from __future__ import annotations

import math

from onnxcost.costs._context import InvalidAttributeError, OpContext
from onnxcost.costs._registry import Cost, register


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


@register("Conv")
def conv(ctx: OpContext) -> Cost:
    """MACs = numel(Y) x C_in/group x prod(k); FLOPs = 2 x MACs + numel(Y) if bias."""
    return Cost.contraction(conv_macs(ctx), _bias_flops(ctx, 2))


@register("ConvTranspose")
def conv_transpose(ctx: OpContext) -> Cost:
    """MACs = numel(X) x C_out/group x prod(k); FLOPs = 2 x MACs + numel(Y) if bias."""
    return Cost.contraction(conv_transpose_macs(ctx), _bias_flops(ctx, 2))


@register("DeformConv")
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
