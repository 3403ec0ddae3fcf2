"""Relative position biases an exporter gathered and stored expanded: counted as their table.

Swin's attention adds to each window's scores one bias a head for each pair of positions,
gathered from a learned table by a constant index, ``table[index[i, j]]``: the table has
(2M - 1)² rows a head for an M x M window (169 for M = 7), one per offset (dy, dx) of the
pair. The gather is constant at export, so both torch exporters fold it and store what it
gives, [heads, M², M²] (2,401 a head at M = 7): torchvision's swin_t counted 308,016 params
more than its 138 heads' tables hold, timm's as many, MaxViT's grid and block attention
alike. LeViT's and EfficientFormer's biases are indexed by (|dy|, |dx|): M² rows a head.
BEiT's window has a class token first, N = M² + 1 positions, and 3 rows more (the token to
each patch, each patch to the token, the token to itself): its 4 heads at M = 8 counted
31,976 params more than their tables' 912.

A float initializer read only on the way to the scores (by an Add, a Reshape, an
Unsqueeze), shaped [..., heads, N, N] with N = M² or M² + 1 (M of 3 or more) or [N², heads] (the
gather's result, as torch's dynamo exporter stores Swin's later stages' biases), and whose
values for each head are equal wherever two pairs have the same offset,
counts as the table it was gathered from: heads x M² where the offsets' sizes (|dy|, |dx|)
already decide its values, else heads x (2M - 1)². Its values are read whole (at most
``_MOST`` elements: Swin-L's 48 heads at M = 12 hold 995,328). One of fewer than three
values is left as stored: a zero-initialised bias says nothing of its table, and a mask
(two values; a causal one is a function of the offset too) is none.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np
import onnx

from onnxcost.load.graph import GraphView
from onnxcost.load.samples import distinct, elements
from onnxcost.load.tensors import FLOAT_TYPES

_LEAST_SIDE = 3
"""The smallest window side M read (Swin's are 7 to 24, LeViT's resolutions 4 to 14)."""
_READERS = frozenset({"Add", "Reshape", "Unsqueeze"})
"""The ops that read a bias on its way to the scores it is added to (a weight is transposed
or multiplied)."""
_VALUES = 3
"""The fewest distinct values of a bias counted as its table: a mask has two (0 where a
position may attend, -inf or -100 where not), a zero-initialised bias one, and a causal
mask's values are a function of the offset as well (i - j = M dy + dx)."""
_MOST = 1 << 21
"""The most elements of a candidate read (8 MiB of float32)."""


def gathered_tables(proto: onnx.ModelProto, view: GraphView, path: Path | None) -> dict[str, int]:
    """The initializers of ``proto``'s main graph (indexed by ``view``) that are position
    biases gathered from a table (the module docstring) -> the table's elements."""
    candidates = {
        t.name: (t, n)
        for t in proto.graph.initializer
        if t.data_type in FLOAT_TYPES
        and all(d > 0 for d in t.dims)
        and math.prod(t.dims) <= _MOST
        and (n := _pairs(t.dims)) > 0
    }
    if not candidates:
        return {}
    readers = view.reader_ops(candidates)
    found = {}
    for name, (t, n) in candidates.items():
        if not readers.get(name, {""}) <= _READERS:
            continue
        pairs_last = t.dims[-1] == n
        # each patch with itself: offset 0, one row (a class token first has a row of its own)
        diagonal = np.arange(0 if _side(n) else 1, n) * (n + 1)
        first = elements(t, diagonal if pairs_last else diagonal * t.dims[-1], path)
        if first is None or bool((first != first[0]).any()):
            continue  # (a weight: its first head's diagonal is no one value)
        got = elements(t, np.arange(math.prod(t.dims)), path)
        if got is None:
            continue
        # each head's N x N, from [..., heads, N, N] or from [pairs, heads]
        heads = got.reshape(-1, n, n) if pairs_last else got.reshape(n * n, -1).T.reshape(-1, n, n)
        for rows, index in _offsets(n):
            table = np.empty((heads.shape[0], rows), heads.dtype)
            table[:, index] = heads  # (of the pairs at one offset, the last is kept)
            if np.array_equal(table[:, index], heads):
                if distinct(table, _VALUES) >= _VALUES:
                    found[name] = table.size
                break
    return found


def _pairs(dims: Sequence[int]) -> int:
    """N where ``dims`` may hold a bias for each pair of an M x M window's N = M² positions,
    each head's N x N last ([heads, N, N], [1, heads, N, N]: a square weight, [N, N], has no
    heads) or each pair's heads last ([N², heads]: the gather's own result, reshaped and
    transposed where it is added); else 0."""
    if len(dims) >= 3 and dims[-1] == dims[-2] and _window(dims[-1]):
        return dims[-1]
    side = _side(dims[0]) if len(dims) == 2 else 0
    return side if side and _window(side) else 0


def _side(n: int) -> int:
    """M where ``n`` is M² (M of ``_LEAST_SIDE`` or more), else 0."""
    m = math.isqrt(n)
    return m if m * m == n and m >= _LEAST_SIDE else 0


def _window(n: int) -> int:
    """M where ``n`` positions are an M x M window, or one with a class token first (BEiT's:
    M² + 1), else 0."""
    return _side(n) or _side(n - 1)


@cache
def _offsets(n: int) -> tuple[tuple[int, np.ndarray], ...]:
    """For ``n`` positions: each pair's row in each table it may be gathered from, with the
    rows' count first. An M x M window: one indexed by (|dy|, |dx|) (M² rows), and one by
    (dy, dx) ((2M - 1)² rows). A class token first and an M x M window (BEiT's): (dy, dx)
    between two patches, then a row for the token to each patch, one for each patch to the
    token, one for the token to itself ((2M - 1)² + 3 rows)."""
    m = _side(n) or _side(n - 1)
    y, x = np.divmod(np.arange(m * m), m)
    dy, dx = y[:, None] - y[None, :], x[:, None] - x[None, :]
    by_offset = (dy + m - 1) * (2 * m - 1) + (dx + m - 1)
    rows = (2 * m - 1) ** 2
    if m * m == n:
        return (m * m, np.abs(dy) * m + np.abs(dx)), (rows, by_offset)
    with_class = np.empty((n, n), by_offset.dtype)
    with_class[1:, 1:] = by_offset
    with_class[0, :], with_class[:, 0], with_class[0, 0] = rows, rows + 1, rows + 2
    return ((rows + 3, with_class),)


__all__ = ["gathered_tables"]
