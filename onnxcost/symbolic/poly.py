"""Polynomials in a model's symbolic dims: ``Formula`` (exact integer coefficients,
evaluation, Python and pretty text), closed-form sums (``sum_over``), and the integer algebra
of Newton's forward formula that the search (``search.py``) interpolates with.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from onnxcost.errors import UsageError

_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


@dataclass(frozen=True, slots=True)
class Formula:
    """A polynomial with integer coefficients in ``symbols``, divided by ``denominator``
    (1 unless the cost is integer-valued with fractional coefficients, e.g. n(n-1)/2).

    ``terms``: (exponent of each symbol, coefficient), in ascending total degree.

    ``clamped``: the cost is max(0, polynomial): a count such as numel - 1 that is 0, not -1,
    where a dim is 0. ``parts``: clamped formulas added with a multiplicity, for a total that
    sums such nodes: polynomial + m1*max(0, p1) + ...
    """

    symbols: tuple[str, ...]
    terms: tuple[tuple[tuple[int, ...], int], ...]
    denominator: int = 1
    clamped: bool = False
    parts: tuple[tuple[int, Formula], ...] = ()

    def __call__(self, **values: int) -> int:
        return self.evaluate(values)

    def evaluate(self, values: Mapping[str, int]) -> int:
        """The cost at ``values`` (every symbol bound to an integer)."""
        missing = [s for s in self.symbols if s not in values]
        if missing:
            raise UsageError(f"bind every symbol: {', '.join(missing)} missing")
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
        return max((sum(e) for e, _c in self.terms), default=0)

    def _monomial(self, exps: tuple[int, ...], power: Callable[[str, int], str], sep: str) -> str:
        return sep.join(power(s, e) for s, e in zip(self.symbols, exps, strict=True) if e)

    def python(self) -> str:
        """Python syntax: ``52753152*batch*seq + 3072*batch*seq**2``."""

        def power(s: str, e: int) -> str:
            return s if e == 1 else f"{s}**{e}"

        text = self._join(lambda c: str(c), lambda e: self._monomial(e, power, "*"), "*")
        text = text if self.denominator == 1 else f"({text}) // {self.denominator}"
        return self._wrap(text, [(m, p.python()) for m, p in self.parts], "*")

    def pretty(self) -> str:
        """For people: ``52,753,152·batch·seq + 3,072·batch·seq²``."""

        def power(s: str, e: int) -> str:
            return s if e == 1 else s + str(e).translate(_SUPERSCRIPT)

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
        if not self.terms:
            return "0"
        parts: list[str] = []
        for exps, c in self.terms:
            mono = monomial(exps)
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

    def __str__(self) -> str:
        return self.python()


def sum_over(f: Formula, values: Mapping[str, int], symbol: str, first: int, last: int) -> int:
    """The sum of ``f`` at ``symbol`` = first, first + 1, ..., last (the other symbols at
    ``values``), exactly and in closed form: a billion decode steps cost as much as four.

    A polynomial p of degree d in ``symbol`` sums by Newton's forward formula,
    sum_{x=a}^{b} p(x) = sum_k D^k p(a) * C(b - a + 1, k + 1), from its values at a .. a + d.
    A clamped part, max(0, p), sums p over the runs where p >= 0, found exactly (``_runs``).
    """
    if last < first:
        return 0
    core = replace(f, clamped=False, parts=())
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
