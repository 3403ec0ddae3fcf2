"""Aligning two models' compute layers by what they compute, never by name.

The sequences of compute nodes are aligned with Needleman-Wunsch. A pair scores by op family
(must agree), MACs ratio, weight shape (equal up to a transpose) and output shape; one node may
also stand for 2 to 4 consecutive nodes of the other model whose MACs add up to exactly its
own (a fused Q/K/V projection against three separate ones).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from onnxcost.analysis.records import ShapeOut
from onnxcost.compare.records import (
    AlignedPair,
    Alignment,
    AttrValue,
    ComparedModel,
    ComputeNode,
)
from onnxcost.units import shape_text

_Array = npt.NDArray[Any]
_MAX_MERGE = 4


def _ratio(x: int, y: int) -> float:
    if x == y:
        return 1.0
    if x <= 0 or y <= 0:
        return 0.0
    return min(x, y) / max(x, y)


def _squeezed(s: ShapeOut) -> tuple[str, ...] | None:
    """Dims other than 1, sorted: shapes equal up to layout and unit dims compare equal."""
    if s is None:
        return None
    return tuple(sorted(str(d) for d in s if d != 1))


def _weight_relation(a: ShapeOut, b: ShapeOut) -> Literal["same", "transposed", "different"]:
    if a is None or b is None:
        return "same" if a is None and b is None else "different"
    if tuple(a) == tuple(b):
        return "same"
    if len(a) == len(b) and sorted(map(str, a)) == sorted(map(str, b)):
        return "transposed"
    return "different"


def _similarity(a: ComputeNode, b: ComputeNode) -> float:
    """Pair score: 1 for the family, 2 x MACs ratio, 1 for the weight shape, 0.5 output, 0.25 op."""
    if a.family != b.family:
        return -1.0
    score = 1.0 + 2.0 * _ratio(a.macs, b.macs)
    if _weight_relation(a.weight_shape, b.weight_shape) != "different":
        score += 1.0
    if a.output_shape is not None and _squeezed(a.output_shape) == _squeezed(b.output_shape):
        score += 0.5
    if a.op_type == b.op_type:
        score += 0.25
    return score


def _merge_score(one: ComputeNode, group: Sequence[ComputeNode]) -> float:
    """One node against consecutive nodes of the same family whose MACs sum to exactly its own."""
    if one.macs <= 0 or any(n.family != one.family for n in group):
        return -1.0
    if sum(n.macs for n in group) != one.macs:
        return -1.0
    return 3.0 + (0.25 if all(n.op_type == one.op_type for n in group) else 0.0)


BAND = 1000
"""Half-width of the band of the alignment matrix that ``align`` explores: cells more than
BAND columns off the diagonal (scaled to the two lengths) are not. Up to BAND compute nodes
a side, the band is the whole matrix and the alignment the exact optimum."""

_STEPS: tuple[tuple[int, int], ...] = (
    (1, 1),
    (1, 0),
    (0, 1),
    *((1, k) for k in range(2, _MAX_MERGE + 1)),
    *((k, 1) for k in range(2, _MAX_MERGE + 1)),
)
"""The moves of the alignment, by the code ``align`` stores for each cell."""
_DIAG, _UP, _LEFT, _WIDE_B, _WIDE_A = 0, 1, 2, 3, 3 + _MAX_MERGE - 1


class _Codes:
    """Small integers for hashable keys (families, op types, shapes), shared by both sides."""

    def __init__(self) -> None:
        self._codes: dict[object, int] = {}

    def of(self, key: object) -> int:
        return self._codes.setdefault(key, len(self._codes))


class _Side:
    """One sequence as the recurrence reads it: per node, codes for what ``_similarity``
    compares (family, op type, weight shape up to a transpose, squeezed output shape) and
    MACs; and where merges can be, looked up by their MACs instead of tried at every cell."""

    def __init__(self, nodes: Sequence[ComputeNode], codes: _Codes, no_output: int) -> None:
        self.nodes = nodes
        self.family = np.array([codes.of(n.family) for n in nodes], dtype=np.int64)
        self.op = np.array([codes.of(n.op_type) for n in nodes], dtype=np.int64)
        self.weight = np.array(
            [codes.of(_weight_key(n.weight_shape)) for n in nodes], dtype=np.int64
        )
        self.output = np.array(
            [no_output if n.output_shape is None else codes.of(_squeezed(n.output_shape))
             for n in nodes],
            dtype=np.int64,
        )  # fmt: skip
        macs = [n.macs for n in nodes]
        exact = all(-(2**53) < v < 2**53 for v in macs)  # so ratios round as Python's do
        self.macs = np.array(macs, dtype=np.int64 if exact else object)
        self.window_ends: dict[tuple[int, int, str], list[int]] = {}
        """(k, MACs of the window, its one family) -> ends e of windows nodes[e-k:e], ascending."""
        for k in range(2, _MAX_MERGE + 1):
            for e in range(k, len(nodes) + 1):
                window = nodes[e - k : e]
                family = window[0].family
                if all(n.family == family for n in window):
                    key = (k, sum(n.macs for n in window), family)
                    self.window_ends.setdefault(key, []).append(e)
        self.positions: dict[tuple[int, str], list[int]] = {}
        """(MACs, family) -> positions of the nodes with MACs > 0, ascending."""
        for y, n in enumerate(nodes):
            if n.macs > 0:
                self.positions.setdefault((n.macs, n.family), []).append(y)


def _weight_key(s: ShapeOut) -> object:
    """Equal for two weight shapes exactly when ``_weight_relation`` says same or transposed."""
    return None if s is None else ("weight", tuple(sorted(map(str, s))))


def _between(found: Sequence[int], start: int, stop: int) -> Sequence[int]:
    """The values of the ascending ``found`` in [start, stop)."""
    return found[bisect_left(found, start) : bisect_left(found, stop)]


class _Row:
    """One row of the score matrix, stored for its band of columns [lo, lo + len(values))."""

    def __init__(self, lo: int, values: _Array) -> None:
        self.lo, self.values = lo, values

    def at(self, j: int) -> float:
        k = j - self.lo
        return float(self.values[k]) if 0 <= k < len(self.values) else -np.inf

    def window(self, start: int, stop: int) -> _Array:
        """Columns start..stop-1; -inf outside the band."""
        lo, values = self.lo, self.values
        if lo <= start and stop <= lo + len(values):
            return values[start - lo : stop - lo]
        out = np.full(stop - start, -np.inf)
        s, e = max(start, lo), min(stop, lo + len(values))
        if s < e:
            out[s - start : e - start] = values[s - lo : e - lo]
        return out


def _similarities(x: int, sa: _Side, sb: _Side, start: int, stop: int) -> _Array:
    """``_similarity(a[x], b[y])`` for y in [start, stop), with the same float operations."""
    xm, ym = sa.macs[x], sb.macs[start:stop]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.minimum(ym, xm) / np.maximum(ym, xm)
    ratio = np.where(ym == xm, 1.0, np.where((ym <= 0) | (xm <= 0), 0.0, ratio))
    score = 1.0 + 2.0 * ratio.astype(np.float64)
    score += np.where(sb.weight[start:stop] == sa.weight[x], 1.0, 0.0)
    score += np.where(sb.output[start:stop] == sa.output[x], 0.5, 0.0)
    score += np.where(sb.op[start:stop] == sa.op[x], 0.25, 0.0)
    return np.where(sb.family[start:stop] == sa.family[x], score, -1.0)


def align(
    a: Sequence[ComputeNode], b: Sequence[ComputeNode], *, band: int = BAND
) -> list[tuple[int, int, int, int]]:
    """Needleman-Wunsch over two compute sequences; gaps cost 0, pairs score by ``_similarity``.

    Returns steps in order as (i, di, j, dj): a[i:i+di] against b[j:j+dj], where one of di,
    dj is 0 for a node on one side only, both 1 for a pair, and one of them 2..4 for a merge.

    A cell (i, j) takes the best of: the pair (i-1, j-1), the merges (i-1, j-k) and
    (i-k, j-1), the gap above, the gap to the left; ties go to that order. Two things make it
    fast on long models: each row is computed at once with numpy (as gaps cost 0, the gap to
    the left is a running maximum), merges are looked up by their MACs rather than tried at
    every cell, and only ``band`` columns either side of the diagonal (scaled to the two
    lengths) are explored: O(n x band) time and memory for two sequences of n nodes.
    """
    n, m = len(a), len(b)
    if n == 0 or m == 0:
        return _gaps(n, m)
    codes = _Codes()
    sa, sb = _Side(a, codes, -1), _Side(b, codes, -2)
    half = max(band, -(-m // n) + 1)  # wide enough that consecutive rows' bands overlap
    width0 = min(m, half) + 1
    rows = [_Row(0, np.zeros(width0))]
    back = [_Row(0, np.full(width0, _LEFT, dtype=np.int8))]
    for i in range(1, n + 1):
        centre = i * m // n
        lo, hi = max(0, centre - half), min(m, centre + half) + 1
        first = max(lo, 1)  # column 0 only has the gap above
        prev = rows[i - 1]
        sim = _similarities(i - 1, sa, sb, first - 1, hi - 1)
        take = sim > 0
        best = np.full(hi - lo, -np.inf)
        best[first - lo :] = np.where(take, prev.window(first - 1, hi - 1) + sim, -np.inf)
        step = np.full(hi - lo, _UP, dtype=np.int8)
        step[first - lo :][take] = _DIAG
        x = a[i - 1]
        for k in range(2, _MAX_MERGE + 1):
            # a[i-1] against b[j-k:j], of a[i-1]'s family, whose MACs add up to its own
            if x.macs > 0:
                for j in _between(sb.window_ends.get((k, x.macs, x.family), ()), lo, hi):
                    same_op = all(y.op_type == x.op_type for y in b[j - k : j])
                    cand = prev.at(j - k) + 3.0 + (0.25 if same_op else 0.0)
                    if cand > best[j - lo]:
                        best[j - lo], step[j - lo] = cand, _WIDE_B + k - 2
            # a[i-k:i], of one family, against b[j-1] of that family with their MACs sum
            if i >= k:
                group = a[i - k : i]
                if all(g.family == group[0].family for g in group):
                    key = (sum(g.macs for g in group), group[0].family)
                    for y in _between(sb.positions.get(key, ()), first - 1, hi - 1):
                        same_op = all(g.op_type == b[y].op_type for g in group)
                        cand = rows[i - k].at(y) + 3.0 + (0.25 if same_op else 0.0)
                        if cand > best[y + 1 - lo]:
                            best[y + 1 - lo], step[y + 1 - lo] = cand, _WIDE_A + k - 2
        up = prev.window(lo, hi)
        above = up > best
        best = np.where(above, up, best)
        step[above] = _UP
        score = np.maximum.accumulate(best)
        step[1:][score[:-1] > best[1:]] = _LEFT
        rows.append(_Row(lo, score))
        back.append(_Row(lo, step))
        if i > _MAX_MERGE:
            rows[i - _MAX_MERGE - 1] = _Row(0, np.zeros(0))  # only the last rows are read again
    steps = []
    i, j = n, m
    while i or j:
        di, dj = _STEPS[int(back[i].values[j - back[i].lo])]
        steps.append((i - di, di, j - dj, dj))
        i, j = i - di, j - dj
    steps.reverse()
    return steps


def _gaps(n: int, m: int) -> list[tuple[int, int, int, int]]:
    """Steps when one side has no compute node: every node of the other on its own."""
    return [(i, 1, 0, 0) for i in range(n)] + [(n, 0, j, 1) for j in range(m)]


def fmt_value(v: AttrValue | None) -> str:
    if v is None:
        return "-"
    if isinstance(v, tuple):
        return "[" + ",".join(fmt_value(x) for x in v) + "]"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _differences(a: ComputeNode, b: ComputeNode) -> tuple[str, ...]:
    out = []
    if a.op_label != b.op_label:
        out.append(f"op {a.op_label} vs {b.op_label}")
    if a.op_type == b.op_type and a.domain == b.domain:
        for key in sorted(set(a.attrs) | set(b.attrs)):
            va, vb = a.attrs.get(key), b.attrs.get(key)
            if va != vb:
                out.append(f"{key} {fmt_value(va)} vs {fmt_value(vb)}")
    rel = _weight_relation(a.weight_shape, b.weight_shape)
    if a.op_type != b.op_type or a.domain != b.domain:
        for node in (a, b):
            trans = [f"{k}=1" for k in ("transA", "transB") if node.attrs.get(k) == 1]
            if trans:
                out.append(f"{node.op_type} {' '.join(trans)}")
    if rel != "same":
        what = " (transposed)" if rel == "transposed" else ""
        out.append(
            f"weight {shape_text(a.weight_shape) if a.weight_shape else 'none'} vs "
            f"{shape_text(b.weight_shape) if b.weight_shape else 'none'}{what}"
        )
    # Shapes that differ only by unit dims or order (a flattened batch) are shown, not flagged.
    for what, sa, sb in (
        ("input", a.input_shape, b.input_shape),
        ("output", a.output_shape, b.output_shape),
    ):
        if _squeezed(sa) != _squeezed(sb):
            out.append(f"{what} {shape_text(sa)} vs {shape_text(sb)}")
    return tuple(out)


def align_models(base: ComparedModel, cand: ComparedModel) -> Alignment:
    pairs = []
    for i, di, j, dj in align(base.compute, cand.compute):
        xa, xb = base.compute[i : i + di], cand.compute[j : j + dj]
        if di == 1 and dj == 1:
            pairs.append(AlignedPair(xa, xb, _differences(xa[0], xb[0]), _similarity(xa[0], xb[0])))
        elif di and dj:
            one, group = (xa[0], xb) if di == 1 else (xb[0], xa)
            diff = f"{di} node{'s' if di > 1 else ''} vs {dj}: MACs add up to the same"
            pairs.append(AlignedPair(xa, xb, (diff,), _merge_score(one, group)))
        else:
            pairs.append(AlignedPair(xa, xb, (), 0.0))
    return Alignment(base.label, cand.label, tuple(pairs))
