"""The symbols' domain: where every symbol is at least 1, and a model's position table bounds
the sum of its sequence symbols (``limits.PositionLimit``). ``within`` decides each ``min``
and ``max`` of a dim that has one answer there; the symbolic walk's formulas and its shape
rules (a broadcast of two dims equal wherever the model is valid) read dims through it."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from onnxcost.symdim import Dim, SymDim, _Floor, _MinMax, _Monomial, as_dim, sym_max, sym_min

if TYPE_CHECKING:
    from onnxcost.symbolic.limits import PositionLimit


def within(
    dim: Dim, symbols: Sequence[str], limit: PositionLimit | None, zeros: Sequence[str] = ()
) -> Dim:
    """``dim`` with each ``min``/``max`` whose comparison has one answer over the domain
    (every symbol >= 1; the symbols of ``limit``, a model's positions, summing to its
    budget at most) replaced by the side it takes: GPT-2's causal mask, ``min(64, seq +
    past_seq)`` rows of a 64-row table, is ``seq + past_seq`` wherever the model is valid,
    and a softmax's ``min(1, seq)`` rows of length ``seq`` is 1. Decided as ``_sign``
    decides; the others stay (and the dim is then no polynomial). ``zeros``: the symbols
    whose 0 is in the domain too (each alone, the others >= 1): a side is taken only where
    it is also the answer there (a bias gradient's ``max(0, 8·b·h·w - 8)`` adds stay, 0 at
    b = 0 where ``8·b·h·w - 8`` is -8; a crop's ``min(2·⌊(h + 1)/2⌋, h)`` is h)."""
    if isinstance(dim, int) or dim.is_polynomial:
        return dim
    total: Dim = 0
    for mono, c in dim.terms.items():
        term: Dim = c
        for atom, e in mono:
            if isinstance(atom, str):
                base: Dim = SymDim.of(atom)
            elif isinstance(atom, _MinMax):
                p = within(atom.p, symbols, limit, zeros)
                q = within(atom.q, symbols, limit, zeros)
                kept = sym_min(p, q) if atom.op == "min" else sym_max(p, q)
                sign = _sign(SymDim.of(p) - q, symbols, limit)
                if sign is None:
                    base = kept
                else:  # sign >= 0: p >= q everywhere
                    base = (q if sign >= 0 else p) if atom.op == "min" else (p if sign >= 0 else q)
                    if zeros and _differs_at(base, kept, tuple(symbols), limit, tuple(zeros)):
                        base = kept
            else:
                base = SymDim({((atom, 1),): 1})
            for _ in range(e):
                term = term * base
        total = total + term
    return total if isinstance(total, int) or not total.is_constant else total.constant


@functools.lru_cache(maxsize=4096)
def _differs_at(
    side: Dim,
    kept: Dim,
    symbols: tuple[str, ...],
    limit: PositionLimit | None,
    zeros: tuple[str, ...],
) -> bool:
    """Whether a min's or max's ``side`` is not the whole ``kept`` at one of ``zeros`` (the
    same atoms recur in a model's every step: each once)."""
    return any(_at(side, z, symbols, limit) != _at(kept, z, symbols, limit) for z in zeros)


def _at(d: Dim, zero: str, symbols: Sequence[str], limit: PositionLimit | None) -> Dim:
    """``d`` at ``zero`` = 0, read within the domain of the other symbols."""
    if isinstance(d, int):
        return d
    others = tuple(x for x in symbols if x != zero)
    rest = None
    if limit is not None:
        rest = replace(limit, symbols=tuple(x for x in limit.symbols if x != zero))
    return within(as_dim(substituted(d, {zero: 0})), others, rest)


def _sign(d: SymDim, symbols: Sequence[str], limit: PositionLimit | None) -> int | None:
    """1 where ``d`` >= 0 over the domain of ``within``, -1 where it is <= 0, None where it
    may take both signs: decided where every coefficient but the constant has one sign
    (its least or most is at every symbol = 1), where its negative terms are covered by
    positive ones (``_covered``), or ``d`` is linear (an interval, or a simplex for the
    limited symbols); one with floors, mins or maxes where it or ``-d``
    rises (``_rising``: its least at every symbol = 1)."""
    if not d.is_polynomial:  # its least at every symbol = 1 where it rises
        ones = dict.fromkeys(d.symbols, 1)
        if _rising(d, ones) and d.evaluate(ones) >= 0:
            return 1
        if _rising(-d, ones) and d.evaluate(ones) <= 0:
            return -1
        for side, sign in ((d, 1), (-d, -1)):
            below = _below(side, symbols, limit)
            if below is not None and _sign(below, symbols, limit) == 1:
                return sign
        return None
    at_one = sum(d.terms.values())  # every monomial is 1 there, and no less anywhere else
    signs = {c > 0 for mono, c in d.terms.items() if mono}
    if signs <= {True} and at_one >= 0:
        return 1
    if signs <= {False} and at_one <= 0:
        return -1
    if _covered(d.terms):
        return 1
    if _covered({mono: -c for mono, c in d.terms.items()}):
        return -1
    if limit is not None:  # each negative term's positions capped: covered then?
        if _covered(_capped(d.terms, limit)):
            return 1
        if _covered(_capped({mono: -c for mono, c in d.terms.items()}, limit)):
            return -1
    if any(sum(e for _a, e in mono) > 1 for mono in d.terms):
        return None
    coefficient = {mono[0][0]: c for mono, c in d.terms.items() if mono}
    lowest: float = d.terms.get((), 0)
    highest: float = lowest
    limited = () if limit is None else limit.symbols
    for sym, a in coefficient.items():
        if sym in limited:
            continue
        if a > 0:  # least at 1, no most
            lowest, highest = lowest + a, math.inf
        else:
            lowest, highest = -math.inf, highest + a
    if limit is not None:
        # x_i >= 1 and sum x_i <= budget: a simplex, whose vertices are every x_i at 1, or
        # one of them at budget - (k - 1)
        spare = limit.budget - len(limited)
        all_at_one = sum(coefficient.get(s, 0) for s in limited)
        steps = [coefficient.get(s, 0) * spare for s in limited]
        lowest += all_at_one + min(0, *steps)
        highest += all_at_one + max(0, *steps)
    if lowest >= 0:
        return 1
    if highest <= 0:
        return -1
    return None


def _below(d: SymDim, symbols: Sequence[str], limit: PositionLimit | None) -> SymDim | None:
    """A polynomial that is at most ``d`` times a positive constant over the domain, where
    ``d``'s atoms are floors of polynomials: each floor ``(p // k)`` in a term with a
    positive coefficient at least ``(p - k + 1) / k``, in one with a negative coefficient
    at most ``p / k``, both bounds >= 0 there (so a product of them bounds the product of
    the floors), all times the product of the divisors. A Conv's output area
    ``((h + 1) // 2)·((w + 1) // 2)`` is at least ``h·w / 4``: so ``480·b·((h + 1) // 2)·
    ((w + 1) // 2) - 12·b·h·w`` is at least ``(480·b·h·w - 48·b·h·w) / 4``, >= 0. None where
    an atom is a min or max, or a bound may be negative."""
    powers: dict[_Floor, int] = {}
    for mono in d.terms:
        for atom, e in mono:
            if isinstance(atom, _MinMax) or (isinstance(atom, _Floor) and not atom.p.is_polynomial):
                return None
            if isinstance(atom, _Floor):
                powers[atom] = max(powers.get(atom, 0), e)
    for atom in powers:
        if _sign(atom.p - (atom.d - 1), symbols, limit) != 1:
            return None  # the lower bound may be negative (and so the upper one too)
    scale = math.prod(atom.d**e for atom, e in powers.items())
    total = SymDim.of(0)
    for mono, c in d.terms.items():
        term = SymDim.of(c * scale // math.prod(a.d**e for a, e in mono if isinstance(a, _Floor)))
        for atom, e in mono:
            if isinstance(atom, str):
                base = SymDim.of(atom)
            else:
                assert isinstance(atom, _Floor)
                base = atom.p - (atom.d - 1) if c > 0 else atom.p
            for _ in range(e):
                term = term * base
        total = total + term
    return total


def _covered(terms: Mapping[_Monomial, int]) -> bool:
    """Whether a polynomial's terms sum to >= 0 wherever every symbol is >= 1 because each
    negative term is paid for by positive ones whose monomials are at least its own there
    (each exponent at least its own: ``16*b*s**2 + 17968*b*s - 8*s`` is >= 0, as ``b*s``
    >= ``s``). Greedy, the highest-degree negative terms first, each from the lowest-degree
    positive terms that cover it: sufficient, not necessary."""
    budget = {mono: c for mono, c in terms.items() if c > 0}
    debts = [(mono, -c) for mono, c in terms.items() if c < 0]
    if not debts:
        return sum(budget.values()) >= 0
    payers = sorted(budget, key=lambda m: sum(e for _a, e in m))  # lowest degree first
    exponents = {m: dict(m) for m in payers}
    for mono, need in sorted(debts, key=lambda t: -sum(e for _a, e in t[0])):
        for m in payers:
            if not budget[m] or any(exponents[m].get(a, 0) < e for a, e in mono):
                continue
            paid = min(need, budget[m])
            budget[m] -= paid
            need -= paid
            if not need:
                break
        if need:
            return False
    return True


def _capped(terms: Mapping[_Monomial, int], limit: PositionLimit) -> dict[_Monomial, int]:
    """A polynomial at most ``terms`` over the domain: in each negative term, each position
    symbol's power ``p**e`` raised to ``cap**(e - 1)·p``, as 1 <= p <= cap (the budget
    less 1 for each other position symbol). GPT-2's logits against its attention scores,
    ``204,100·b·s - 12,288·b·s - 96·b·s²`` over s <= 1,024, is at least ``(191,812 -
    98,304)·b·s``, which ``_covered`` finds >= 0."""
    cap = limit.budget - (len(limit.symbols) - 1)
    out: dict[_Monomial, int] = {}
    for mono, c in terms.items():
        if c < 0:
            scale = 1
            kept: list[tuple[str | _Floor | _MinMax, int]] = []
            for atom, e in mono:
                if atom in limit.symbols and e > 1:
                    scale *= cap ** (e - 1)
                    e = 1
                kept.append((atom, e))
            mono, c = tuple(kept), c * scale
        out[mono] = out.get(mono, 0) + c
    return out


def _rising(d: SymDim, at: Mapping[str, int]) -> bool:
    """Whether ``d`` is non-decreasing in every symbol from ``at`` on: every coefficient but
    the constant positive, and every floor, min or max of non-decreasing sides and >= 0 at
    ``at`` (so a product of them does not fall)."""
    for mono, c in d.terms.items():
        if mono and c < 0:
            return False
        for atom, _e in mono:
            if isinstance(atom, str):
                continue
            sides = (atom.p,) if isinstance(atom, _Floor) else (atom.p, atom.q)
            if not all(_rising(side, at) for side in sides) or atom.value(at) < 0:
                return False
    return True


def _has_floor(d: SymDim) -> bool:
    """Whether ``d`` has a floor, in its atoms too."""
    for mono in d.terms:
        for atom, _e in mono:
            if isinstance(atom, _Floor):
                return True
            if isinstance(atom, _MinMax) and (_has_floor(atom.p) or _has_floor(atom.q)):
                return True
    return False


def substituted(dim: SymDim, values: Mapping[str, Dim]) -> SymDim:
    """``dim`` with each symbol named in ``values`` replaced by its value there (an int, or a
    Dim: ``length + 19`` for a symbol walked from its least value), inside its floors, mins
    and maxes too, each made again (and so folded where it then simplifies)."""
    total = SymDim.of(0)
    for mono, c in dim.terms.items():
        term = SymDim.of(c)
        for atom, e in mono:
            if isinstance(atom, str):
                base = SymDim.of(values.get(atom, atom))
            elif isinstance(atom, _Floor):
                base = substituted(atom.p, values) // atom.d
            else:
                p, q = substituted(atom.p, values), substituted(atom.q, values)
                base = SymDim.of(sym_min(p, q) if atom.op == "min" else sym_max(p, q))
            for _ in range(e):
                term = term * base
        total = total + term
    return total


__all__ = ["substituted", "within"]
