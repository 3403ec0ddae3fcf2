"""Symbolic dims: integer polynomials in a model's symbols, with floor-division, ceil-division,
min and max kept as atoms where they do not simplify (issue 22: the algebra the symbolic
shape pass carries; it imports nothing of onnxcost and sits in the bottom layer).

A ``SymDim`` is a sum of terms ``c * a1**e1 * a2**e2 ...`` with integer ``c``, each atom a
symbol name or a ``floor(p / d)`` (``p`` a SymDim, ``d`` an int >= 1), ``min(p, q)`` or
``max(p, q)``. The form is canonical (terms keyed by their sorted atoms, no zero
coefficient), so two SymDims that are the same polynomial over the same atoms are equal and
hash alike. Simplifications are exact for every integer value of the symbols:

- ``(a + d*b) // d == a // d + b`` for a polynomial b with integer coefficients (the terms
  whose coefficients d divides leave the floor); a constant floor is folded;
- ``ceil(p / d) == -((-p) // d)``; ``(floor(q / a) + j) // d == (q + a*j) // (a*d)``;
- ``min(p, p + k) == p`` for a constant k >= 0 (two constants, and p and p, too), and
  ``max`` alike.

Python ints throughout (no numpy), so counts never overflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Union

Atom = Union[str, "_Floor", "_MinMax"]
"""A symbol's name, or an operation that does not simplify."""
_Monomial = tuple[tuple[Atom, int], ...]
"""Atoms with their exponents, sorted by the atoms' text; () for the constant term."""


@dataclass(frozen=True, slots=True)
class _Floor:
    """``floor(p / d)``, d >= 2, p with at least one coefficient d does not divide."""

    p: SymDim
    d: int

    def value(self, values: Mapping[str, int]) -> int:
        return self.p.evaluate(values) // self.d

    def __str__(self) -> str:
        return f"(({self.p}) // {self.d})"


@dataclass(frozen=True, slots=True)
class _MinMax:
    """``min(p, q)`` or ``max(p, q)``, p and q not both constant, p != q; stored sorted."""

    op: str
    p: SymDim
    q: SymDim

    def value(self, values: Mapping[str, int]) -> int:
        pick = min if self.op == "min" else max
        return pick(self.p.evaluate(values), self.q.evaluate(values))

    def __str__(self) -> str:
        return f"{self.op}({self.p}, {self.q})"


def _atom_key(atom: Atom) -> str:
    return atom if isinstance(atom, str) else _atom_text(atom)


@lru_cache(maxsize=1 << 16)
def _atom_text(atom: _Floor | _MinMax) -> str:
    """A floor's, min's or max's text, once: it orders every product and sum that holds it,
    and each text holds its sides' texts (a nested ``max`` was made again at every level)."""
    return str(atom)


def _mono_key(mono: _Monomial) -> tuple[int, str]:
    """Terms of lower degree first, then by text: a stable order for printing."""
    return sum(e for _a, e in mono), "*".join(f"{_atom_key(a)}^{e}" for a, e in mono)


def _mono_mul(x: _Monomial, y: _Monomial) -> _Monomial:
    if not x:
        return y
    if not y:
        return x
    exps: dict[Atom, int] = dict(x)
    for a, e in y:
        exps[a] = exps.get(a, 0) + e
    return tuple(sorted(exps.items(), key=lambda ae: _atom_key(ae[0])))


class SymDim:
    """An integer polynomial in symbols and atoms (see the module docstring)."""

    __slots__ = ("_hash", "terms")

    terms: dict[_Monomial, int]
    _hash: int | None

    def __init__(self, terms: Mapping[_Monomial, int] | None = None) -> None:
        self.terms = {m: c for m, c in (terms or {}).items() if c != 0}
        self._hash = None  # computed on first use: most dims made in a walk are never hashed

    @staticmethod
    def _made(terms: dict[_Monomial, int]) -> SymDim:
        """A SymDim of ``terms`` as they are (no zero coefficient: the caller's word)."""
        new = object.__new__(SymDim)
        new.terms = terms
        new._hash = None
        return new

    # --- construction -------------------------------------------------------------------

    @staticmethod
    def of(value: int | str | SymDim) -> SymDim:
        """A constant, a symbol by name, or ``value`` itself."""
        if isinstance(value, SymDim):
            return value
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise TypeError(f"a SymDim is made of an int or a symbol's name, not {value!r}")
        if isinstance(value, str):
            return SymDim._made({((value, 1),): 1})
        return SymDim._made({(): value} if value else {})

    @staticmethod
    def _atom(atom: Atom) -> SymDim:
        return SymDim({((atom, 1),): 1})

    # --- queries ------------------------------------------------------------------------

    @property
    def is_constant(self) -> bool:
        terms = self.terms
        return not terms or (len(terms) == 1 and () in terms)

    @property
    def constant(self) -> int:
        """The value of a constant SymDim; ValueError for one with symbols."""
        if not self.is_constant:
            raise ValueError(f"{self} is not a constant")
        return self.terms.get((), 0)

    @property
    def symbols(self) -> frozenset[str]:
        """Every symbol's name in it, inside atoms too."""
        out: set[str] = set()
        for mono in self.terms:
            for a, _e in mono:
                if isinstance(a, str):
                    out.add(a)
                elif isinstance(a, _Floor):
                    out |= a.p.symbols
                else:
                    out |= a.p.symbols | a.q.symbols
        return frozenset(out)

    @property
    def is_polynomial(self) -> bool:
        """Whether every atom is a symbol (no floor, min or max)."""
        for mono in self.terms:  # loops, not all() over a generator: half the time
            for a, _e in mono:
                if type(a) is not str:
                    return False
        return True

    def evaluate(self, values: Mapping[str, int]) -> int:
        """The dim at ``values`` (every symbol bound to an int); KeyError names a missing one."""
        total = 0
        for mono, c in self.terms.items():
            term = c
            for a, e in mono:
                base = values[a] if isinstance(a, str) else a.value(values)
                term *= base**e
            total += term
        return total

    # --- arithmetic ---------------------------------------------------------------------

    def __add__(self, other: int | SymDim) -> SymDim:
        terms = dict(self.terms)
        if type(other) is int:  # the usual case, without a SymDim made of it
            c = terms.get((), 0) + other
            if c:
                terms[()] = c
            else:
                terms.pop((), None)
            return SymDim._made(terms)
        for m, c in SymDim.of(other).terms.items():
            terms[m] = terms.get(m, 0) + c
        return SymDim(terms)

    __radd__ = __add__

    def __neg__(self) -> SymDim:
        return SymDim({m: -c for m, c in self.terms.items()})

    def __sub__(self, other: int | SymDim) -> SymDim:
        return self + (-SymDim.of(other))

    def __rsub__(self, other: int | SymDim) -> SymDim:
        return SymDim.of(other) + (-self)

    def __mul__(self, other: int | SymDim) -> SymDim:
        if type(other) is int:  # the usual case: a scale
            return SymDim._made({m: c * other for m, c in self.terms.items()} if other else {})
        o = SymDim.of(other)
        terms: dict[_Monomial, int] = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in o.terms.items():
                m = _mono_mul(m1, m2)
                terms[m] = terms.get(m, 0) + c1 * c2
        return SymDim(terms)

    __rmul__ = __mul__

    def __floordiv__(self, d: int) -> SymDim:
        """``floor(self / d)`` for an int d >= 1: the terms d divides leave the floor."""
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ValueError(f"a SymDim is divided by an int >= 1, not {d!r}")
        if d == 1:
            return self
        out = {m: c // d for m, c in self.terms.items() if c % d == 0}
        rest = SymDim({m: c for m, c in self.terms.items() if c % d != 0})
        if not rest.terms:
            return SymDim(out)
        if rest.is_constant:
            return SymDim(out) + rest.constant // d
        # The constant's multiple of d leaves too: floor((p + k) / d) with 0 <= k < d.
        k = rest.terms.get((), 0)
        inner = rest - (k - k % d)
        whole = SymDim(out) + (k - k % d) // d
        nested = [m for m in inner.terms if m]
        if len(nested) == 1 and inner.terms[nested[0]] == 1 and len(nested[0]) == 1:
            ((atom, e),) = nested[0]
            if e == 1 and isinstance(atom, _Floor):
                # floor((floor(q / a) + j) / d) == floor((q + a*j) / (a*d)) for an integer
                # q: a stride-2 stage after a stride-2 stage is one floor by 4
                return whole + (atom.p + atom.d * inner.terms.get((), 0)) // (atom.d * d)
        return whole + SymDim._atom(_Floor(inner, d))

    def ceil_div(self, d: int) -> SymDim:
        """``ceil(self / d)`` for an int d >= 1."""
        return -((-self) // d)

    def unbounded(self) -> SymDim:
        """This dim with every ``min(c, p)`` of a constant c read as ``p``: what it is
        wherever p <= c (a sequence within a model's positions)."""
        total = SymDim.of(0)
        for mono, c in self.terms.items():
            term = SymDim.of(c)
            for a, e in mono:
                if isinstance(a, str):
                    base = SymDim.of(a)
                elif isinstance(a, _Floor):
                    base = a.p.unbounded() // a.d
                elif a.op == "min" and a.p.is_constant:
                    base = a.q.unbounded()
                elif a.op == "min" and a.q.is_constant:
                    base = a.p.unbounded()
                else:
                    base = SymDim._atom(a)
                for _ in range(e):
                    term = term * base
            total = total + term
        return total

    # --- comparison and text ------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if isinstance(other, int) and not isinstance(other, bool):
            other = SymDim.of(other)
        return isinstance(other, SymDim) and self.terms == other.terms

    def __hash__(self) -> int:
        found = self._hash
        if found is None:
            found = self._hash = hash(frozenset(self.terms.items()))
        return found

    def __bool__(self) -> bool:
        """A constant's truth; TypeError for a dim with symbols, whose truth depends on their
        values (``if n`` in a formula must not silently take the non-zero branch)."""
        if not self.is_constant:
            raise TypeError(f"the truth of {self} depends on its symbols")
        return self.constant != 0

    def __str__(self) -> str:
        """Python syntax (``2*batch*seq + 3``), evaluable with ``min`` and ``max`` bound."""
        if not self.terms:
            return "0"
        parts = []
        for mono in sorted(self.terms, key=_mono_key, reverse=True):
            c = self.terms[mono]
            factors = [_atom_key(a) if e == 1 else f"{_atom_key(a)}**{e}" for a, e in mono]
            if not factors:
                text = str(abs(c))
            elif abs(c) == 1:
                text = "*".join(factors)
            else:
                text = "*".join([str(abs(c)), *factors])
            parts.append(("- " if c < 0 else "+ ") + text)
        first = parts[0]
        head = "-" + first[2:] if first.startswith("- ") else first[2:]
        return " ".join([head, *parts[1:]])

    def __repr__(self) -> str:
        return f"SymDim({str(self)!r})"


Dim = int | SymDim
"""A dim the symbolic shape pass carries: an int where it is known, else a SymDim."""


def as_dim(value: int | SymDim) -> Dim:
    """``value`` as an int where it is a constant, else the SymDim."""
    if isinstance(value, SymDim) and value.is_constant:
        return value.constant
    return value


def _min_max(op: str, p: int | SymDim, q: int | SymDim) -> Dim:
    a, b = SymDim.of(p), SymDim.of(q)
    if a == b:
        return as_dim(a)
    difference = a - b
    if difference.is_constant:  # both constants, or p = q + k: the order is known
        smaller = a if difference.constant <= 0 else b
        return as_dim(smaller if op == "min" else (b if smaller is a else a))
    first, second = sorted((a, b), key=str)
    return SymDim._atom(_MinMax(op, first, second))


def sym_min(p: int | SymDim, q: int | SymDim) -> Dim:
    """``min(p, q)``: folded where both are constants or equal, else an atom."""
    return _min_max("min", p, q)


def sym_max(p: int | SymDim, q: int | SymDim) -> Dim:
    """``max(p, q)``: folded where both are constants or equal, else an atom."""
    return _min_max("max", p, q)


__all__ = ["Dim", "SymDim", "as_dim", "sym_max", "sym_min"]
