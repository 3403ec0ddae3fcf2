"""Rotary position tables an exporter folded into stored tensors: no params.

A rotary embedding multiplies each query and key by the cos and sin of its position times
``inv_freq`` (a buffer). Exported at a fixed length (torch's dynamo exporter's default), both
tables are constants, which the exporter folds and stores: ``unsqueeze_14`` and
``unsqueeze_15`` [1, 1, 8, 16] in a Mistral, Phi-3, Falcon, Qwen2 or Gemma at 8 positions;
GPT-J's and CodeGen's sin and cos side by side in one (``embed_positions``, ``index_4``
[1, 8, 8]). Counted as stored, they were 2 x seq x rotary dim params that torch does not have
(256 in each of those tiny models, 32,768 in a 7B model exported at 128 positions). Where an
exporter computes them in the graph instead, a Cos or Sin of constants, the weights walk
stops there (``weights._trigonometric``).

A pair of stored float tensors of one shape (initializers not named as a param's path, which
are the model's own and left unread; Constants), read only by the ops that apply or slice a
table (Mul, Split, Slice, Gather, Unsqueeze), whose elements c and s have c² + s² = 1
throughout (to their type's precision), each of three values or more, are rotary tables; so
is one such tensor whose last dim's halves are. No learned weight is so: its values are drawn,
not on the unit circle two by two. (GPT-J's ``embed_positions`` buffer is a Constant in its
TorchScript export.)
"""

from __future__ import annotations

import math
from itertools import combinations
from pathlib import Path

import numpy as np
import onnx

from onnxcost.load.graph import GraphView
from onnxcost.load.samples import as_floats, distinct, elements, stored_tensors
from onnxcost.load.tensors import PARAMETER_PATH

_TOLERANCE: dict[int, float] = {
    onnx.TensorProto.FLOAT: 1e-5,
    onnx.TensorProto.DOUBLE: 1e-9,
    onnx.TensorProto.FLOAT16: 4e-3,
    onnx.TensorProto.BFLOAT16: 3e-2,
}
"""How far from 1 c² + s² may be in each float type (float16 holds 11 significant bits)."""
_READERS = frozenset({"Mul", "Split", "Slice", "Gather", "Unsqueeze"})
"""The ops that apply a table to the queries and keys, or take the rows of the positions."""
_FIRST = 64
"""Elements read of each candidate first: a weight past 1 in size is left there."""
_MOST = 1 << 22
"""The most elements of a candidate read (a 16k-position table of 128 dims is 2 M)."""
_PAIRED = 16
"""The most candidates of one shape paired with each other."""


def rotary_tables(proto: onnx.ModelProto, view: GraphView, path: Path | None) -> frozenset[str]:
    """The stored tensors of ``proto``'s main graph (indexed by ``view``: initializers and
    Constants' outputs) that are rotary position tables (the module docstring)."""
    # what a Mul reads, and the data a Split, Slice, Gather or Unsqueeze takes (not an axes,
    # starts or indices Constant: each Constant looked at costs its attributes' reading)
    applied: set[str] = set()
    for op, ins in zip(view.op_types, view.inputs, strict=True):
        if op == "Mul":
            applied.update(ins)
        elif op in _READERS and ins:
            applied.add(ins[0])
    candidates = {
        name: t
        for name, t in stored_tensors(proto, view, applied)
        if t.data_type in _TOLERANCE
        and all(d > 0 for d in t.dims)
        and 2 <= math.prod(t.dims) <= _MOST
        and not PARAMETER_PATH.match(name)  # a model's own: left unread
    }
    if not candidates:
        return frozenset()
    readers = view.reader_ops(candidates)
    values: dict[str, np.ndarray] = {}
    for name, t in candidates.items():
        if not readers[name] <= _READERS:
            continue  # read by another op too: a weight
        numel = math.prod(t.dims)
        first = _values(t, np.arange(min(numel, _FIRST)), path)
        if first is None or bool((np.abs(first) > 1).any()):
            continue
        got = _values(t, np.arange(numel), path)
        if got is not None and not bool((np.abs(got) > 1).any()):
            values[name] = got.reshape(tuple(t.dims))
    found: set[str] = set()
    by_shape: dict[tuple[int, ...], list[str]] = {}
    for name, got in values.items():
        by_shape.setdefault(got.shape, []).append(name)
    for names in by_shape.values():
        for a, b in combinations(names[:_PAIRED], 2):
            if _on_the_circle(values[a], values[b], candidates[a].data_type):
                found.update((a, b))
    for name, got in values.items():
        half = got.shape[-1] // 2
        if name not in found and half and got.shape[-1] == 2 * half:
            sin, cos = got[..., :half], got[..., half:]
            if _on_the_circle(cos, sin, candidates[name].data_type):
                found.add(name)
    return frozenset(found)


def _values(t: onnx.TensorProto, positions: np.ndarray, path: Path | None) -> np.ndarray | None:
    """``t``'s elements at ``positions`` as float64 values; None where they cannot be read."""
    bits = elements(t, positions, path)
    return None if bits is None else as_floats(bits, t.data_type).astype(np.float64)


def _on_the_circle(cos: np.ndarray, sin: np.ndarray, elem_type: int) -> bool:
    """Whether cos² + sin² = 1 element by element, to ``elem_type``'s precision, and each of
    the two holds three values or more, as a table over positions does: a scale of ones
    beside a layer scale of 1e-5 (PoolFormer's, 1 + 1e-10) or a mask of ones beside a zero
    bias is none."""
    if distinct(cos, 3) < 3 or distinct(sin, 3) < 3:
        return False
    return bool(np.allclose(cos * cos + sin * sin, 1.0, rtol=0.0, atol=_TOLERANCE[elem_type]))


__all__ = ["rotary_tables"]
