"""Recurrent layers: RNN, GRU, LSTM, com.microsoft DynamicQuantizeLSTM, and the stateful
causal convolution CausalConvWithState (ONNX and com.microsoft).

Per time step, direction and batch row, each of the G gates (RNN 1, GRU 3, LSTM 4) multiplies
X_t by W^T (input_size x hidden) and H_{t-1} by R^T (hidden x hidden):

    MACs = D x T x B x G x H x (I + H)

FLOPs = 2 x MACs + per step, direction and batch row (H = hidden size, f/g/h the
activations' per-element FLOPs from contrib.ACTIVATION_FLOPS, defaults Sigmoid 4, Tanh 1; a
name it does not list counts 1):

* RNN:  H (X.W + H.R)             + f H                                      = (1 + f) H
* GRU:  3H (X.W + H.R) + H (r * .) + 4H ((1 - z) * h~ + z * h) + 2 f H + g H = (8 + 2f + g) H
* LSTM: 4H (X.W + H.R) + 3H (c = f * c + i * c~) + H (o * h(c)) + 3 f H + g H + h H
        = (8 + 3f + g + h) H
* + 2 G H bias adds (Wb and Rb) when B is given, + 6H for LSTM peepholes (P: multiply and
  add on i, f, o), + 2 G H for clip (a min and a max per gate element).

GRU's linear_before_reset moves the reset multiply after R_h's product; the count is the same.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from onnxcost.costs._context import OpContext, element_bits
from onnxcost.costs._registry import Cost, Saved, needs_any, register, register_backward
from onnxcost.costs.contrib import SILU_FLOPS, activation_flops
from onnxcost.costs.quantized import MINMAX_FLOPS, QUANTIZE_FLOPS, given

MS = "com.microsoft"


@dataclass(frozen=True, slots=True)
class RnnDims:
    """Sizes of a recurrent layer: D directions, T steps, B batch, I input, H hidden."""

    directions: int
    seq: int
    batch: int
    input_size: int
    hidden: int

    def macs(self, gates: int) -> int:
        """D x T x B x G x H x (I + H)."""
        return (
            self.directions
            * self.seq
            * self.batch
            * gates
            * self.hidden
            * (self.input_size + self.hidden)
        )

    @property
    def rows(self) -> int:
        """Batch rows stepped over all steps and directions: D x T x B."""
        return self.directions * self.seq * self.batch


def rnn_dims(ctx: OpContext, *, batch_first: bool, weights_transposed: bool = False) -> RnnDims:
    """Read D, T, B, I, H off X [T, B, I] (or [B, T, I]) and R [D, G H, H] (or [D, H, G H])."""
    x, r = ctx.shape(0), ctx.shape(2)
    seq, batch = (x[1], x[0]) if batch_first else (x[0], x[1])
    hidden = r[1] if weights_transposed else r[2]
    return RnnDims(directions=r[0], seq=seq, batch=batch, input_size=x[2], hidden=hidden)


def _activations(ctx: OpContext, defaults: Sequence[str], directions: int) -> list[list[int]]:
    """Per-element FLOPs of the activations (f, g, h) of each direction, defaults filling gaps.

    One list per direction when the attribute names each direction's own; otherwise one
    list that every direction shares (``_per_direction_sum`` weighs it by D, so a model
    claiming 2**30 directions costs one list, not 2**30).
    """
    raw = ctx.attr("activations", None) or ()
    given = [a.decode() if isinstance(a, bytes) else str(a) for a in raw]
    n = len(defaults)
    own = len(given) >= n * directions  # bounded by the attribute's length
    out = []
    for d in range(directions if own else 1):
        names = given[d * n : (d + 1) * n] if own else given[:n]
        names = [*names, *defaults[len(names) :]]
        out.append([activation_flops(name) for name in names])
    return out


def _per_direction_sum(per_direction: Sequence[int], directions: int) -> int:
    """Sum over the D directions of a per-direction figure (a shared one counts D times)."""
    if len(per_direction) == directions:
        return sum(per_direction)
    return directions * per_direction[0]


def _elementwise(ctx: OpContext, dims: RnnDims, gates: int, per_direction: Sequence[int]) -> int:
    """Non-contraction FLOPs: ``per_direction[d]`` per hidden unit and step, plus bias, peephole and clip."""
    steps = dims.seq * dims.batch * dims.hidden
    flops = steps * _per_direction_sum(per_direction, dims.directions)
    per_unit = 0
    if given(ctx, 3):
        per_unit += 2 * gates  # Wb and Rb
    if ctx.op_type in ("LSTM", "DynamicQuantizeLSTM") and given(ctx, 7):
        per_unit += 6  # peepholes on i, f, o
    if ctx.attr("clip", None) is not None:
        per_unit += 2 * gates
    return flops + dims.directions * steps * per_unit


def _batch_first(ctx: OpContext) -> bool:
    return ctx.opset >= 14 and ctx.int_attr("layout", 0) == 1


@register("RNN", meta_inputs=(4, 5))
def rnn(ctx: OpContext) -> Cost:
    """MACs = D x T x B x H x (I + H); FLOPs = 2 x MACs + D x T x B x H x (1 + f) (+ 2H bias, + 2H clip).

    NB: every sequence runs all T steps (sequence_lens is not read).
    """
    dims = rnn_dims(ctx, batch_first=_batch_first(ctx))
    acts = _activations(ctx, ("Tanh",), dims.directions)
    return Cost.contraction(dims.macs(1), _elementwise(ctx, dims, 1, [1 + f for (f,) in acts]))


@register("GRU", meta_inputs=(4, 5))
def gru(ctx: OpContext) -> Cost:
    """MACs = D x T x B x 3H x (I + H); FLOPs = 2 x MACs + D x T x B x H x (8 + 2f + g) (+ 6H bias, + 6H clip).

    NB: every sequence runs all T steps (sequence_lens is not read).
    """
    dims = rnn_dims(ctx, batch_first=_batch_first(ctx))
    acts = _activations(ctx, ("Sigmoid", "Tanh"), dims.directions)
    return Cost.contraction(
        dims.macs(3), _elementwise(ctx, dims, 3, [8 + 2 * f + g for f, g in acts])
    )


def _lstm_per_unit(acts: list[list[int]]) -> list[int]:
    return [8 + 3 * f + g + h for f, g, h in acts]


@register("LSTM", meta_inputs=(4, 5, 6))
def lstm(ctx: OpContext) -> Cost:
    """MACs = D x T x B x 4H x (I + H); FLOPs = 2 x MACs + D x T x B x H x (8 + 3f + g + h) (+ 8H bias, + 6H peephole, + 8H clip).

    NB: every sequence runs all T steps (sequence_lens is not read); input_forget still counts the forget gate.
    """
    dims = rnn_dims(ctx, batch_first=_batch_first(ctx))
    acts = _activations(ctx, ("Sigmoid", "Tanh", "Tanh"), dims.directions)
    return Cost.contraction(dims.macs(4), _elementwise(ctx, dims, 4, _lstm_per_unit(acts)))


@register("DynamicQuantizeLSTM", domain=MS, meta_inputs=(4, 5, 6), quant_inputs=(8, 9, 10, 11))
def dynamic_quantize_lstm(ctx: OpContext) -> Cost:
    """As LSTM (W [D, I, 4H], R [D, H, 4H] int8) + 6 x numel(X) + D x T x B x 14H: quantize X and each H_t (6), rescale both products (2 x 4H).

    NB: every sequence runs all T steps; zero-point corrections are not counted.
    """
    dims = rnn_dims(ctx, batch_first=False, weights_transposed=True)
    acts = _activations(ctx, ("Sigmoid", "Tanh", "Tanh"), dims.directions)
    extra = _elementwise(ctx, dims, 4, _lstm_per_unit(acts))
    quant = MINMAX_FLOPS + QUANTIZE_FLOPS
    extra += quant * ctx.numel(0) + dims.rows * dims.hidden * (quant + 2 * 4)
    return Cost.contraction(dims.macs(4), extra)


@register("CausalConvWithState", since=27, meta_inputs=(3,))
@register("CausalConvWithState", domain=MS, meta_inputs=(3,))
def causal_conv_with_state(ctx: OpContext) -> Cost:
    """MACs = numel(input) x prod(k) (depthwise, weight [C, 1, k...]); FLOPs = 2 x MACs + numel if bias + 5 x numel with SiLU."""
    numel = ctx.numel(0)
    macs = numel * math.prod(ctx.shape(1)[2:])
    act = str(ctx.attr("activation", "none")).lower()
    extra = numel * (int(given(ctx, 2)) + (SILU_FLOPS if act in ("silu", "swish") else 0))
    return Cost.contraction(macs, extra)


# --- backward rules: back-propagation through time --------------------------------------------
# Per step the gate gradients dG (G x H per row) come from the gradient of H_t, which needs the
# recurrent product dG.R back to H_{t-1} whenever any gradient is needed. Then dX = dG.W,
# dW = dG^T X and dR = dG^T H_{t-1}, each a product of the forward's size:
#   MACs = D x T x B x G x H x (H [dH_{t-1}] + I [dX] + I [dW] + H [dR])
# FLOPs = 2 x MACs + 2 x the forward's elementwise FLOPs (each gate's derivative and the
# products of the cell, about twice the forward's per element) + 2 G H per step for dB.
# NB: the elementwise factor 2 is an estimate, not a derivation per activation.
# Kept: X, every H_t (Y) and the G gate activations of every step.

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _rnn_saves(ctx: OpContext, needs: tuple[bool, ...]) -> Saved:
    dims = rnn_dims(ctx, batch_first=_batch_first(ctx))
    size = element_bits(ctx.input(0).elem_type) // 8
    gates = dims.rows * _GATES[ctx.op_type] * dims.hidden
    return Saved(inputs=(0,), outputs=(0,), extra_bytes=gates * size)


@register_backward("RNN", "GRU", "LSTM", saves=_rnn_saves)
def rnn_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """MACs = D x T x B x G x H x (H + I [dX] + I [dW] + H [dR]); FLOPs = 2 x MACs + 2 x forward elementwise + 2 G H per step for dB."""
    if not any(needs):
        return Cost()
    dims = rnn_dims(ctx, batch_first=_batch_first(ctx))
    gates = _GATES[ctx.op_type]
    unit = dims.rows * gates * dims.hidden
    macs = unit * (
        dims.hidden
        + dims.input_size * (int(needs_any(needs, 0)) + int(needs_any(needs, 1)))
        + dims.hidden * int(needs_any(needs, 2))
    )
    forward = {"RNN": rnn, "GRU": gru, "LSTM": lstm}[ctx.op_type](ctx)
    elementwise = forward.flops - 2 * forward.macs
    bias = 2 * unit if needs_any(needs, 3) else 0
    return Cost.contraction(macs, 2 * elementwise + bias)
