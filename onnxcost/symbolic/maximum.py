"""The largest of many byte counts over the model's domain, as a formula: a peak of live
bytes over the steps of a pass (``training_walk``: the training step's; ``peak``: the
inference's), each step's bytes a polynomial in the symbols.

The step that is largest moves as the symbols grow (a decoder's attention scores overtake
its MLP as seq grows), so the peak is the ``max`` of the few steps that no other is proven
at least (``domain._sign``) wherever the model is valid; past ``MAX_PEAK_TERMS`` of them,
no formula.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from onnxcost.symbolic.domain import _sign, substituted, within
from onnxcost.symbolic.limits import PositionLimit
from onnxcost.symdim import Dim, SymDim, as_dim, sym_max


class Maximum:
    """The maximum of the candidates (each step's live bytes; a ``most`` for
    ``analysis.training.train``) over the model's domain (``within``'s: every symbol >= 1,
    the position symbols within ``limit``; and each symbol's 0 in ``zeros``), kept to as few
    candidates as prove it. For each part of the domain (``_kept``): the candidates largest
    at one of its corners (``_corners``: the forward's peak for short sequences, the
    backward's for long ones), and any that none of those is proven at least; then less
    those that another kept one is at least. Every
    candidate left out is at most one kept, in each part, so their max is every candidate's.
    One kept: that candidate; up to ``MAX_PEAK_TERMS``: their ``max``; more: 0 and
    ``decided`` False."""

    def __init__(
        self,
        symbols: tuple[str, ...],
        limit: PositionLimit | None,
        probe: Mapping[str, int],
        zeros: Sequence[str] = (),
    ) -> None:
        self.symbols = symbols
        self.limit = limit
        self.probe = probe
        self.zeros = tuple(zeros)
        """The symbols whose 0 the model allows: a comparison must hold there too."""
        self.decided = True
        self.monomials: dict[object, Dim] = {}
        self.dims: dict[Dim, Dim] = {}
        """Each candidate's ``decided_dim`` (many steps hold the same live bytes)."""

    def decided_dim(self, dim: Dim) -> Dim:
        """``within(dim)``, each monomial with a min or max decided once (every step of the
        forward's holds the tensors live then, the same few atoms); a min or max as it is
        where that reading (every symbol >= 1) is not its value at an allowed 0 (x[:, -1:]
        over s has ``s - max(0, s - 1)`` rows, 1 from s = 1 and none at s = 0: ``within``'s
        ``zeros``)."""
        if isinstance(dim, int) or dim.is_polynomial:
            return dim
        found = self.dims.get(dim)
        if found is None:
            found = self.dims[dim] = self._decided(dim)
        return found

    def _decided(self, dim: SymDim) -> Dim:
        total: Dim = 0
        for mono, c in dim.terms.items():
            found = self.monomials.get(mono)
            if found is None:
                found = self.monomials[mono] = within(
                    SymDim({mono: 1}), self.symbols, self.limit, self.zeros
                )
            total = total + c * found
        return as_dim(SymDim.of(total))

    def at_least(self, a: Dim, b: Dim) -> bool:
        """Whether a >= b over the domain is decided (``_sign``), first where every
        coefficient of a - b but the constant is >= 0 and a - b >= 0 at every symbol = 1."""
        if isinstance(a, SymDim) and isinstance(b, SymDim) and a.is_polynomial and b.is_polynomial:
            ta, tb = a.terms, b.terms
            if (
                sum(ta.values()) >= sum(tb.values())
                and all(ta.get(m, 0) >= c for m, c in tb.items() if m)
                and all(c >= 0 or m in tb for m, c in ta.items() if m)
            ):
                return True
        d = SymDim.of(a) - b
        if d.is_constant:
            return d.constant >= 0
        return _sign(d, self.symbols, self.limit) == 1

    def __call__(self, candidates: list[int]) -> int:
        dims: list[Dim] = list(dict.fromkeys(map(self.decided_dim, candidates)))
        ones = dict.fromkeys(self.symbols, 1)
        at_ones = [_value(d, ones) for d in dims]
        order = sorted(range(len(dims)), key=lambda k: -at_ones[k])
        kept: list[int] = []
        for zero in (None, *self.zeros):  # every symbol >= 1, then each allowed 0
            found = self._kept(dims, order, zero, kept)
            if len(found) > MAX_PEAK_TERMS:
                self.decided = False
                return 0
            kept = found
        peak: Dim = dims[kept[0]]
        for w in kept[1:]:
            peak = sym_max(peak, dims[w])
        return peak  # type: ignore[return-value]

    def _kept(
        self, dims: Sequence[Dim], order: Sequence[int], zero: str | None, prior: Sequence[int]
    ) -> list[int]:
        """``prior`` and the candidates that are the maximum over the part of the domain
        where ``zero`` is 0 (every symbol >= 1 where None): those largest at a corner of it
        (``_corners``), and any candidate none of them and of ``prior`` is at least there;
        of the new ones, those no other is at least (the max of what is kept is every
        candidate's there: each one left out is at most one kept). Candidates equal there
        (most, at batch = 0) are one."""
        corners = [self.probe, *_corners(self.symbols, self.limit)]
        if zero is None:
            values: Sequence[Dim] = dims
            proven = self.at_least
        else:
            corners = [{**c, zero: 0} for c in corners]
            values = [_without(d, zero) for d in dims]
            others = tuple(x for x in self.symbols if x != zero)
            rest = None
            if self.limit is not None:
                rest = replace(
                    self.limit, symbols=tuple(x for x in self.limit.symbols if x != zero)
                )

            def proven(a: Dim, b: Dim) -> bool:
                d = SymDim.of(a) - b
                return d.constant >= 0 if d.is_constant else _sign(d, others, rest) == 1

        first: dict[Dim, int] = {}
        for k in (*prior, *order):
            first.setdefault(values[k], k)
        alike = list(first.values())  # one per value, prior's first
        table = {k: [_value(dims[k], corner) for corner in corners] for k in {*alike, *prior}}
        tops: list[int] = list(prior)
        for c in range(len(corners)):
            top = max(table[k][c] for k in alike)
            tops += [k for k in alike if table[k][c] == top and k not in tops]

        def at_least(w: int, k: int) -> bool:  # first at the corners: cheap, and necessary
            high, low = table[w], table[k]
            return all(h >= v for h, v in zip(high, low, strict=True)) and proven(
                values[w],
                values[k],
            )

        pool = tops + [k for k in alike if k not in tops and not any(at_least(w, k) for w in tops)]
        kept = list(prior)
        fresh = [k for k in pool if k not in prior]
        for i, w in enumerate(fresh):
            if not any(at_least(v, w) for v in (*kept, *fresh[i + 1 :])):
                kept.append(w)
                if len(kept) > MAX_PEAK_TERMS:
                    break  # no formula: the rest need not be proven
        return kept


def _without(d: Dim, zero: str) -> Dim:
    """``d`` at ``zero`` = 0 (inside its floors, mins and maxes too)."""
    if isinstance(d, int):
        return d
    if d.is_polynomial:
        kept = {m: c for m, c in d.terms.items() if all(x != zero for x, _e in m)}
        return as_dim(SymDim(kept))
    return as_dim(substituted(d, {zero: 0}))


MAX_PEAK_TERMS = 8
"""The most steps a peak's formula is the max of; past it, no formula (a warning says so)."""

_CORNER = 1 << 12
"""A symbol's value at a corner of the domain (``_corners``) where it is not bounded."""


def _corners(symbols: Sequence[str], limit: PositionLimit | None) -> list[dict[str, int]]:
    """Points at the domain's extremes: every symbol at 1; each symbol alone large (as far
    as the model's positions allow a position symbol, the others at 1); all large at once
    (the position symbols sharing the positions)."""
    limited = () if limit is None else limit.symbols
    room = 1 if limit is None else max(1, limit.budget - (len(limited) - 1))
    ones = dict.fromkeys(symbols, 1)
    corners = [ones]
    for s in symbols:
        corners.append({**ones, s: room if s in limited else _CORNER})
    share = 1 if not limited or limit is None else max(1, limit.budget // len(limited))
    corners.append({s: share if s in limited else _CORNER for s in symbols})
    return corners


def _value(d: Dim, point: Mapping[str, int]) -> int:
    return d if isinstance(d, int) else d.evaluate(point)


__all__ = ["MAX_PEAK_TERMS", "Maximum"]
