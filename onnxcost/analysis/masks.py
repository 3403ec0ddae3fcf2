"""Additive attention masks an exporter folded into initializers: no params.

Exported at fixed shapes (torch's dynamo exporter without ``dynamic_shapes``, its default;
the TorchScript exporter without ``dynamic_axes``), a decoder's causal mask is computed from
constants only, so the exporter stores it: ``val_160`` [2, 1, 8, 8] in a tiny GPT-2, 0 where a
position may attend and float32's lowest value (Hugging Face's ``torch.finfo(dtype).min``) or
-inf where it may not. Counted as stored, it was 128 params of a model that has none there,
and a mask grows with batch x seq².

No learned weight holds -inf or its type's lowest value, so a float initializer that does, at
one of its first ``_SAMPLES`` elements (a causal mask's second already; a padding mask's
first row), is a mask. Those elements lie together: a few pages of a tensor left in the file.
Only the tensors an Add, Sub, Where or Min reads (or an Unsqueeze, Reshape, Cast ... before
it), named as an exporter names what it computes
(``val_160``, ``onnx::Add_123``, ``/Constant_output_0``), not as a param's path, are read: a
model's own weights are left unread.

A mask filled with another value than the lowest, 0 where a position may attend and -1 or
less where it may not (Swin's shifted windows, ``masked_fill(m != 0, -100.0)``: the
TorchScript exporter stores timm's as a Constant, the dynamo exporter as the buffer it is,
``layers.0.blocks.1.attn_mask``, unsqueezed before the Add), is one as well (``_filled``);
of the tensors named as a param's path, only one whose last part holds ``mask`` is read.

A mask of zeros only, no position masked at the traced shape (an encoder's padding mask from
a mask of ones: ``val_74`` [2, 1, 8, 8] in a static BERT, RoBERTa or DistilBERT, [2, 1, 17,
17] in a ViT), is one as well where it is shaped as one, [B, 1, S, T], one for every head
(``_zeros``): a zero-initialised attention bias has a row per head ([heads, N, N]: T5's zero
position bias of cross-attention, [2, 4, 4, 8], counts), a GroupNorm's bias [C, 1, 1], and
a weight the exporter computed and named is read by a MatMul or Conv, not added. Its
elements are all read up to ``_ALL`` of them, else the first ``_SAMPLES`` and ``_SAMPLES``
spread over the rest.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx

from onnxcost.load.graph import GraphView
from onnxcost.load.samples import as_floats, elements, stored_tensors
from onnxcost.load.tensors import PARAMETER_PATH

_SAMPLES = 4096
"""Elements read of each candidate, from its first."""
_ALL = 65_536
"""A candidate of zeros up to this many elements is read whole."""


_LOWEST: dict[int, tuple[int, int]] = {
    # element type -> the bit patterns of its -inf and of its lowest finite value
    onnx.TensorProto.FLOAT: (0xFF800000, 0xFF7FFFFF),
    onnx.TensorProto.FLOAT16: (0xFC00, 0xFBFF),
    onnx.TensorProto.BFLOAT16: (0xFF80, 0xFF7F),
    onnx.TensorProto.DOUBLE: (0xFFF0000000000000, 0xFFEFFFFFFFFFFFFF),
}


_CARRIED_BY = frozenset({"Unsqueeze", "Reshape", "Squeeze", "Expand", "Cast", "Identity"})
"""Ops through which a stored mask reaches the op that applies it (timm's Swin: an Unsqueeze)."""
_CARRIED_MAX = 4
"""The most such ops followed back from the op that applies a mask."""
_APPLIED_BY = frozenset({"Add", "Sub", "Where", "Min"})
"""The ops that apply an additive mask (or select by it): a tensor no such op reads is no mask,
and is not read (a convolution's weights)."""


def additive_masks(proto: onnx.ModelProto, view: GraphView, path: Path | None) -> frozenset[str]:
    """The initializers of the main graph of ``proto`` (indexed by ``view``) that are additive
    masks (the module docstring)."""
    applied = {
        name
        for op, ins in zip(view.op_types, view.inputs, strict=True)
        if op in _APPLIED_BY
        for name in ins
    }
    for name in list(applied):  # a mask unsqueezed, reshaped or cast first
        for _ in range(_CARRIED_MAX):
            k = view.writer.get(name)
            if k is None:
                break
            op, ins = view.op_types[k], view.inputs[k]
            if op not in _CARRIED_BY or not ins or not ins[0]:
                break
            name = ins[0]
            applied.add(name)
    found = set()
    for name, t in stored_tensors(proto, view, applied):
        if t.data_type not in _LOWEST:
            continue
        buffer = PARAMETER_PATH.match(name) is not None
        if buffer and "mask" not in name.rpartition(".")[2].lower():
            continue  # a param's path: a model's own weight, left unread
        numel = math.prod(t.dims)
        if numel < 2:
            continue
        got = elements(t, np.arange(min(numel, _SAMPLES)), path)
        if got is None:
            continue
        minus_inf, lowest = _LOWEST[t.data_type]
        exporters = not buffer and (
            bool(((got == minus_inf) | (got == lowest)).any()) or _zeros(t, got, path)
        )
        if exporters or _filled(t, got, path):
            found.add(name)
    return frozenset(found)


def _filled(t: onnx.TensorProto, first: np.ndarray, path: Path | None) -> bool:
    """Whether ``t`` holds 0 where a position may attend and a fill of -1 or less where it
    may not, both, and nothing else, as far as read (``first`` and ``_SAMPLES`` spread over
    the rest): Swin's shifted windows, ``masked_fill(m != 0, -100.0)`` (timm stores them as
    the buffer ``layers.0.blocks.1.attn_mask``, the TorchScript exporter as a Constant). No
    learned weight is so: its values are spread, of both signs."""
    rest = _rest(t, first, path, whole=False)
    if rest is None:
        return False
    values = as_floats(np.concatenate([first, rest]), t.data_type)
    zero, fill = values == 0, values <= -1
    return bool((zero | fill).all() and zero.any() and fill.any())


def _zeros(t: onnx.TensorProto, first: np.ndarray, path: Path | None) -> bool:
    """Whether ``t`` is shaped as an attention mask, [B, 1, S, T] (4 dims or more, one for
    every head, T above 1), and holds zeros only (+0 or -0), as far as read: its first
    elements (``first``, their bit patterns) and the rest whole, or spread. A learned zero
    shaped otherwise is no mask: a GroupNorm's bias as [C, 1, 1] (PoolFormer's), a
    zero-initialised attention bias expanded to [heads, N, N] (LeViT's, EfficientFormer's), a
    position table [1, N, D]."""
    dims = t.dims
    if len(dims) < 4 or dims[-3] != 1 or dims[-1] < 2 or bool((first << 1).any()):
        return False  # (a sign bit alone is -0.0)
    got = _rest(t, first, path, whole=True)
    return got is not None and not bool((got << 1).any())


def _rest(
    t: onnx.TensorProto, first: np.ndarray, path: Path | None, *, whole: bool
) -> np.ndarray | None:
    """``t``'s elements past its ``first`` (bit patterns; None where they cannot be read):
    all of them where ``whole`` and there are at most ``_ALL``, else ``_SAMPLES`` spread."""
    numel = math.prod(t.dims)
    if numel <= len(first):
        return first[:0]
    positions = (
        np.arange(len(first), numel)
        if whole and numel <= _ALL
        else np.linspace(len(first), numel - 1, _SAMPLES).astype(np.int64)
    )
    return elements(t, positions, path)


__all__ = ["additive_masks"]
