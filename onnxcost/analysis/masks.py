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
Only the tensors an Add, Sub, Where or Min reads, named as an exporter names what it computes
(``val_160``, ``onnx::Add_123``, ``/Constant_output_0``), not as a param's path, are read: a
model's own weights are left unread.

A mask of zeros only, no position masked at the traced shape (an encoder's padding mask from
a mask of ones: ``val_74`` [2, 1, 8, 8] in a static BERT, RoBERTa or DistilBERT, [2, 1, 17,
17] in a ViT, T5's zero position bias of cross-attention [2, 4, 4, 8]), is one as well where
it has 3 dims or more: a bias has one, and a weight the exporter computed and named is read
by a MatMul or Conv, not added. Its elements are all read up to ``_ALL`` of them, else the
first ``_SAMPLES`` and ``_SAMPLES`` spread over the rest.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx

from onnxcost.load.graph import GraphView
from onnxcost.load.samples import elements
from onnxcost.load.tensors import PARAMETER_PATH

_SAMPLES = 4096
"""Elements read of each candidate, from its first."""
_ALL = 65_536
"""A candidate of zeros up to this many elements is read whole."""


_LOWEST = {
    # element type -> the bit patterns of its -inf and of its lowest finite value
    onnx.TensorProto.FLOAT: (0xFF800000, 0xFF7FFFFF),
    onnx.TensorProto.FLOAT16: (0xFC00, 0xFBFF),
    onnx.TensorProto.BFLOAT16: (0xFF80, 0xFF7F),
    onnx.TensorProto.DOUBLE: (0xFFF0000000000000, 0xFFEFFFFFFFFFFFFF),
}


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
    found = set()
    for t in proto.graph.initializer:
        if t.name not in applied or t.data_type not in _LOWEST or PARAMETER_PATH.match(t.name):
            continue
        numel = math.prod(t.dims)
        if numel < 2:
            continue
        got = elements(t, np.arange(min(numel, _SAMPLES)), path)
        if got is None:
            continue
        minus_inf, lowest = _LOWEST[t.data_type]
        if bool(((got == minus_inf) | (got == lowest)).any()) or _zeros(t, got, path):
            found.add(t.name)
    return frozenset(found)


def _zeros(t: onnx.TensorProto, first: np.ndarray, path: Path | None) -> bool:
    """Whether ``t``, of 3 dims or more, holds zeros only (+0 or -0), as far as read: its
    first elements (``first``, their bit patterns) and the rest whole, or spread."""
    if len(t.dims) < 3 or bool((first << 1).any()):  # a sign bit alone is -0.0
        return False
    numel = math.prod(t.dims)
    if numel <= len(first):
        return True
    rest = (
        np.arange(len(first), numel)
        if numel <= _ALL
        else np.linspace(len(first), numel - 1, _SAMPLES).astype(np.int64)
    )
    got = elements(t, rest, path)
    return got is not None and not bool((got << 1).any())


__all__ = ["additive_masks"]
