"""Polynomials in a model's symbolic dims: ``Formula`` (exact integer coefficients, or an
exact expression with floors, ``min`` and ``max`` from the one walk; evaluation, Python and
pretty text), closed-form sums (``sum_over``), and the integer algebra of Newton's forward
formula that the search (``search.py``) interpolates with.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from onnxcost.errors import OnnxcostError, UsageError
from onnxcost.symdim import SymDim, _Floor, _MinMax, _Monomial

_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


@dataclass(frozen=True, slots=True)
class Formula:
    """A polynomial with integer coefficients in ``symbols``, divided by ``denominator``
    (1 unless the cost is integer-valued with fractional coefficients, e.g. n(n-1)/2).

    ``terms``: (exponent of each symbol, coefficient), in ascending total degree.

    ``clamped``: the cost is max(0, polynomial): a count such as numel - 1 that is 0, not -1,
    where a dim is 0. ``parts``: clamped formulas added with a multiplicity, for a total that
    sums such nodes: polynomial + m1*max(0, p1) + ...

    ``expression``: where the cost is no polynomial in the symbols (a floor, ``min`` or
    ``max`` of them: a Conv's output size over a symbolic height at stride 2), the exact
    expression the one walk found, in place of ``terms`` (then ``()``) and ``denominator``
    (then 1); ``clamped`` and ``parts`` apply to it as to a polynomial.
    """

    symbols: tuple[str, ...]
    terms: tuple[tuple[tuple[int, ...], int], ...]
    denominator: int = 1
    clamped: bool = False
    parts: tuple[tuple[int, Formula], ...] = ()
    expression: SymDim | None = None

    def __repr__(self) -> str:  # a polynomial's as before ``expression`` was added
        more = "" if self.expression is None else f", expression={self.expression!r}"
        return (
            f"Formula(symbols={self.symbols!r}, terms={self.terms!r}, "
            f"denominator={self.denominator!r}, clamped={self.clamped!r}, "
            f"parts={self.parts!r}{more})"
        )

    def __call__(self, **values: int) -> int:
        return self.evaluate(values)

    def evaluate(self, values: Mapping[str, int]) -> int:
        """The cost at ``values`` (every symbol bound to an integer)."""
        missing = [s for s in self.symbols if s not in values]
        if missing:
            raise UsageError(f"bind every symbol: {', '.join(missing)} missing")
        if self.expression is not None:
            value = _evaluate(self.expression, {s: int(values[s]) for s in self.symbols}, {})
        else:
            x = [values[s] for s in self.symbols]
            total = 0
            for exps, c in self.terms:
                total += c * math.prod([int(v) ** e for v, e in zip(x, exps, strict=True)])
            value = total // self.denominator
        if self.clamped:
            value = max(0, value)
        return value + sum(m * part.evaluate(values) for m, part in self.parts)

    @property
    def degree(self) -> int:
        """The total degree; of an ``expression``, each atom counted at its inner degree
        (``floor((h + 1) / 2)``: 1), so a formula of degree 0 is a constant."""
        if self.expression is not None:
            return _degree(self.expression)
        return max((sum(e) for e, _c in self.terms), default=0)

    def _monomial(self, exps: tuple[int, ...], power: Callable[[str, int], str], sep: str) -> str:
        return sep.join(power(s, e) for s, e in zip(self.symbols, exps, strict=True) if e)

    def python(self) -> str:
        """Python syntax: ``52753152*batch*seq + 3072*batch*seq**2``."""

        def power(s: str, e: int) -> str:
            return s if e == 1 else f"{s}**{e}"

        if self.expression is not None:
            text = _render(self.expression, self.symbols, pretty=False)
        else:
            text = self._join(lambda c: str(c), lambda e: self._monomial(e, power, "*"), "*")
            text = text if self.denominator == 1 else f"({text}) // {self.denominator}"
        return self._wrap(text, [(m, p.python()) for m, p in self.parts], "*")

    def pretty(self) -> str:
        """For people: ``52,753,152·batch·seq + 3,072·batch·seq²``."""

        def power(s: str, e: int) -> str:
            return s if e == 1 else s + str(e).translate(_SUPERSCRIPT)

        if self.expression is not None:
            text = _render(self.expression, self.symbols, pretty=True)
        else:
            text = self._join(lambda c: f"{c:,}", lambda e: self._monomial(e, power, "·"), "·")
            text = text if self.denominator == 1 else f"({text}) / {self.denominator:,}"
        return self._wrap(text, [(m, p.pretty()) for m, p in self.parts], "·")

    def _wrap(self, text: str, parts: list[tuple[int, str]], sep: str) -> str:
        if self.clamped:
            text = f"max(0, {text})"
        if not parts:
            return text
        added = " + ".join(
            part if m == 1 else f"{m:,}{sep}{part}" if sep == "·" else f"{m}{sep}{part}"
            for m, part in parts
        )
        return added if text == "0" else f"{text} + {added}"

    def _join(
        self, number: Callable[[int], str], monomial: Callable[[tuple[int, ...]], str], sep: str
    ) -> str:
        return _joined([(monomial(exps), c) for exps, c in self.terms], number, sep)

    def __str__(self) -> str:
        return self.python()


def _joined(terms: Sequence[tuple[str, int]], number: Callable[[int], str], sep: str) -> str:
    """``2·b - h`` from (monomial's text, coefficient) pairs in order; "" is the constant."""
    if not terms:
        return "0"
    parts: list[str] = []
    for mono, c in terms:
        magnitude = abs(c)
        body = (
            number(magnitude)
            if not mono
            else (mono if magnitude == 1 else f"{number(magnitude)}{sep}{mono}")
        )
        if not parts:
            parts.append(f"-{body}" if c < 0 else body)
        else:
            parts.append(f"- {body}" if c < 0 else f"+ {body}")
    return " ".join(parts)


def _evaluate(dim: SymDim, values: Mapping[str, int], memo: dict[object, int]) -> int:
    """``dim`` at ``values``, each floor, min and max computed once (``memo``): a pooled
    CNN's FLOPs repeat the same nested floors in tens of terms."""
    total = 0
    for mono, c in dim.terms.items():
        term = c
        for atom, e in mono:
            if isinstance(atom, str):
                base = values[atom]
            else:
                found = memo.get(atom)
                if found is None:
                    if isinstance(atom, _Floor):
                        found = _evaluate(atom.p, values, memo) // atom.d
                    else:
                        pick = min if atom.op == "min" else max
                        found = pick(
                            _evaluate(atom.p, values, memo), _evaluate(atom.q, values, memo)
                        )
                    memo[atom] = found
                base = found
            term *= base**e
        total += term
    return total


def _degree(dim: SymDim) -> int:
    """The total degree of ``dim``, an atom at its inner degree (a floor's, or the larger
    of a min's or max's sides)."""
    return max((_mono_degree(mono) for mono in dim.terms), default=0)


def _mono_degree(mono: _Monomial) -> int:
    total = 0
    for atom, e in mono:
        if isinstance(atom, str):
            total += e
        elif isinstance(atom, _Floor):
            total += e * _degree(atom.p)
        else:
            total += e * max(_degree(atom.p), _degree(atom.q))
    return total


def _render(dim: SymDim, symbols: Sequence[str], *, pretty: bool) -> str:
    """``dim`` as text, its terms in a Formula's order (ascending degree, then the symbols'
    exponents in their order, highest first, then the atoms' text), each monomial's symbols
    in their order before its atoms. Python: ``((h + 1) // 2)``, ``min(p, q)``, ``*`` and
    ``**``, evaluable with ``min`` and ``max`` bound; pretty: ``⌊(1 + h)/2⌋``, ``·``,
    superscript exponents and thousands separators."""
    sep = "·" if pretty else "*"
    order = {s: i for i, s in enumerate(symbols)}
    rendered: list[tuple[tuple[int, tuple[int, ...], tuple[str, ...]], str, int]] = []
    for mono, c in dim.terms.items():
        exps = dict.fromkeys(symbols, 0)
        named: list[tuple[int, str]] = []
        atoms: list[str] = []
        for atom, e in mono:
            power = "" if e == 1 else str(e).translate(_SUPERSCRIPT) if pretty else f"**{e}"
            if isinstance(atom, str):
                exps[atom] = e
                named.append((order.get(atom, len(order)), atom + power))
            else:
                atoms.append(_atom_text(atom, symbols, pretty) + power)
        atoms.sort()
        key = (_mono_degree(mono), tuple(-exps[s] for s in symbols), tuple(atoms))
        rendered.append((key, sep.join([t for _i, t in sorted(named)] + atoms), c))
    rendered.sort(key=lambda r: r[0])
    number: Callable[[int], str] = (lambda c: f"{c:,}") if pretty else str
    return _joined([(text, c) for _k, text, c in rendered], number, sep)


def _atom_text(atom: _Floor | _MinMax, symbols: Sequence[str], pretty: bool) -> str:
    """A floor, min or max as a factor: ``((h + 1) // 2)``, ``⌊(1 + h)/2⌋``, ``min(p, q)``."""
    if isinstance(atom, _Floor):
        inner = _render(atom.p, symbols, pretty=pretty)
        simple = len(atom.p.terms) == 1 and (inner.isidentifier() or inner.isdigit())
        if pretty:
            return f"⌊{inner if simple else f'({inner})'}/{atom.d:,}⌋"
        return f"({inner if simple else f'({inner})'} // {atom.d})"
    sides = [_render(side, symbols, pretty=pretty) for side in _flattened(atom)]
    return f"{atom.op}({', '.join(sides)})"


def _flattened(atom: _MinMax) -> list[SymDim]:
    """The sides of a min or max, a side that is itself one min or max of the same kind
    opened up: ``max(a, max(b, c))`` reads ``max(a, b, c)`` (a peak over several steps)."""
    out: list[SymDim] = []
    for side in (atom.p, atom.q):
        inner = _lone_atom(side)
        if isinstance(inner, _MinMax) and inner.op == atom.op:
            out += _flattened(inner)
        else:
            out.append(side)
    return out


def _lone_atom(d: SymDim) -> object:
    """The atom ``d`` is, where it is one atom to the power 1 times 1, else None."""
    if len(d.terms) != 1:
        return None
    ((mono, c),) = d.terms.items()
    return mono[0][0] if c == 1 and len(mono) == 1 and mono[0][1] == 1 else None


SUM_BY_POINT = 4096
"""The most points ``sum_over`` sums one by one where the summed symbol is inside a floor,
``min`` or ``max`` (no closed form): about 10 µs each."""


class NoClosedFormError(OnnxcostError):
    """``sum_over`` of a formula whose summed symbol is inside a floor, ``min`` or ``max``,
    over more than ``SUM_BY_POINT`` points: the caller sums otherwise (``llm`` step by step)."""


def polynomial(f: Formula) -> SymDim | int:
    """A plain polynomial Formula (integer coefficients) as a SymDim."""
    total: SymDim | int = 0
    for exps, c in f.terms:
        term: SymDim | int = c
        for sym, e in zip(f.symbols, exps, strict=True):
            for _ in range(e):
                term = term * SymDim.of(sym)
        total = total + term
    return total


def sum_over(f: Formula, values: Mapping[str, int], symbol: str, first: int, last: int) -> int:
    """The sum of ``f`` at ``symbol`` = first, first + 1, ..., last (the other symbols at
    ``values``), exactly and in closed form: a billion decode steps cost as much as four.

    A polynomial p of degree d in ``symbol`` sums by Newton's forward formula,
    sum_{x=a}^{b} p(x) = sum_k D^k p(a) * C(b - a + 1, k + 1), from its values at a .. a + d.
    A clamped part, max(0, p), sums p over the runs where p >= 0, found exactly (``_runs``).
    An ``expression`` whose floors, mins and maxes do not hold ``symbol`` is a polynomial in
    it once the others are bound, and sums alike; one where they do is summed point by point
    up to ``SUM_BY_POINT`` points, and NoClosedFormError past them.
    """
    if last < first:
        return 0
    if _inside_atom(f, symbol):
        if last - first + 1 > SUM_BY_POINT:
            raise NoClosedFormError(
                f"{symbol} is inside a floor, min or max of the formula {f.python()}: its sum "
                f"over {symbol} = {first:,} .. {last:,} has no closed form here (at most "
                f"{SUM_BY_POINT:,} points are summed one by one)"
            )
        return sum(f.evaluate({**values, symbol: x}) for x in range(first, last + 1))
    core = replace(f, clamped=False, parts=())
    if f.expression is not None:
        degree = max((e for mono in f.expression.terms for a, e in mono if a == symbol), default=0)
    else:
        index = f.symbols.index(symbol) if symbol in f.symbols else -1
        degree = max((e[index] for e, _c in f.terms), default=0) if index >= 0 else 0

    def at(x: int) -> int:
        return core.evaluate({**values, symbol: x})

    if f.clamped:
        total = sum(
            _poly_sum(at, degree, a, b)
            for a, b, positive in _runs(at, degree, first, last)
            if positive
        )
    else:
        total = _poly_sum(at, degree, first, last)
    return total + sum(m * sum_over(part, values, symbol, first, last) for m, part in f.parts)


def _inside_atom(f: Formula, symbol: str) -> bool:
    """Whether ``symbol`` is inside a floor, min or max of ``f`` or of one of its parts."""
    inside = f.expression is not None and any(
        not isinstance(a, str) and symbol in SymDim._atom(a).symbols
        for mono in f.expression.terms
        for a, _e in mono
    )
    return inside or any(_inside_atom(part, symbol) for _m, part in f.parts)


def _poly_sum(p: Callable[[int], int], degree: int, first: int, last: int) -> int:
    """sum_{x=first}^{last} p(x) for p a polynomial of degree <= ``degree`` on the integers."""
    n = last - first + 1
    if n <= degree + 1:
        return sum(p(x) for x in range(first, last + 1))
    row = [p(first + k) for k in range(degree + 1)]
    total = 0
    binomial = n  # C(n, k + 1)
    for k in range(degree + 1):
        total += row[0] * binomial
        row = [b - a for a, b in itertools.pairwise(row)]
        binomial = binomial * (n - k - 1) // (k + 2)
    return total


def _runs(
    p: Callable[[int], int], degree: int, first: int, last: int
) -> list[tuple[int, int, bool]]:
    """first .. last cut into runs (a, b, p >= 0 there): p, a polynomial of degree <=
    ``degree``, is monotone on the integers where its forward difference keeps a sign (the
    difference's own runs), and changes sign at most once on such a stretch, where a
    bisection finds it. O(degree**2 * log(last - first)) values of p."""
    if degree <= 1 or last == first:
        stretches = [(first, last)]
    else:
        starts = [a for a, _b, _s in _runs(lambda x: p(x + 1) - p(x), degree - 1, first, last - 1)]
        stretches = list(zip(starts, [*(s - 1 for s in starts[1:]), last], strict=True))
    out: list[tuple[int, int, bool]] = []
    for a, b in stretches:
        sign = p(a) >= 0
        if (p(b) >= 0) != sign:  # monotone: one change, between a and b
            lo, hi = a, b  # p(lo) has the sign, p(hi) has not
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if (p(mid) >= 0) == sign else (lo, mid)
            pieces = [(a, lo, sign), (hi, b, not sign)]
        else:
            pieces = [(a, b, sign)]
        for piece in pieces:
            if out and out[-1][2] == piece[2]:
                out[-1] = (out[-1][0], piece[1], piece[2])
            else:
                out.append(piece)
    return out


# --- interpolation ----------------------------------------------------------------------------


def _differences(rows: Sequence[Sequence[int]]) -> list[np.ndarray]:
    """Forward differences D^0 .. D^(n-1) of f at the first point, each a vector over costs."""
    table = np.array(rows, dtype=object)
    out = [table[0].copy()]
    for _ in range(1, len(rows)):
        table = table[1:] - table[:-1]
        out.append(table[0].copy())
    return out


def _newton_at(differences: Sequence[np.ndarray], x: int) -> list[int]:
    """Newton's forward formula at offset ``x`` from the first point: sum_j D^j f * C(x, j),
    for every cost (integers: C(x, j) is one for negative x too)."""
    total = np.zeros(len(differences[0]), dtype=object)
    binomial = 1  # C(x, j) = x (x - 1) ... (x - j + 1) / j!
    for j, d in enumerate(differences):
        total = total + d * binomial
        binomial = binomial * (x - j) // (j + 1)
    return [int(v) for v in total]


def _binomial_rows(a: int, d: int) -> np.ndarray:
    """Row j: the monomial coefficients (x^0 .. x^d) of C(x - a, j) * d!, integers."""
    rows = np.zeros((d + 1, d + 1), dtype=object)
    poly = [1]  # prod_{m < j} (x - a - m), lowest power first
    for j in range(d + 1):
        scale = math.factorial(d) // math.factorial(j)
        for e, c in enumerate(poly):
            rows[j, e] = c * scale
        shift = -(a + j)
        poly = [
            (poly[e - 1] if e else 0) + shift * (poly[e] if e < len(poly) else 0)
            for e in range(len(poly) + 1)
        ]
    return rows


def _formula(
    symbols: tuple[str, ...], coefficients: np.ndarray, denominator: int, clamped: bool = False
) -> Formula:
    terms = [
        (tuple(int(e) for e in exps), int(coefficients[exps]))
        for exps in np.ndindex(*coefficients.shape)
        if coefficients[exps] != 0
    ]
    common = math.gcd(denominator, *(c for _e, c in terms)) if terms else denominator
    terms.sort(key=lambda t: (sum(t[0]), tuple(-e for e in t[0])))
    return Formula(
        symbols,
        tuple((e, c // common) for e, c in terms),
        denominator // common,
        clamped,
    )


def _evaluate_all(coefficients: np.ndarray, denominator: int, point: tuple[int, ...]) -> list[int]:
    """Every cost's polynomial at ``point``."""
    weights = np.empty(coefficients.shape[:-1], dtype=object)
    for exps in np.ndindex(*weights.shape):
        weights[exps] = math.prod(v**e for v, e in zip(point, exps, strict=True))
    flat = coefficients.reshape(-1, coefficients.shape[-1])
    return [int(v) // denominator for v in weights.reshape(-1).dot(flat)]
