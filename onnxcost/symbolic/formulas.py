"""Costs as exact formulas in the model's symbolic dims (``onnxcost analyze --symbolic``).

Every cost the analysis counts is, for a fixed graph, a function of the input dims. Where it
is a polynomial (almost everywhere: products of dims, summed), it is recovered exactly by
interpolating the concrete analysis:

1. Degree: along each symbol x_i, with the others at a base point, the analysis is run at
   x_i = a_i, a_i + 1, ... until the k-th forward difference of every cost is 0 (k at most
   ``max_degree`` + 1); the highest non-zero difference is the cost's degree d_i in x_i.
2. Interpolation: on the grid a_i .. a_i + d_i of every symbol (the points already run are
   reused), the tensor-product forward differences D^J f(a) give
   f(x) = sum_J D^J f(a) * prod_i C(x_i - a_i, j_i) (Newton's forward formula), which is
   expanded into monomials with exact integer arithmetic.
3. Verification: every formula is checked against the analysis at ``verify`` random points
   beyond the grid, at every symbol = 1 (the analysis reported, where a dim of 1 may
   broadcast) and, for each symbol, at 0 with the others at the base point. A cost that does
   not match (a Loop whose trip count depends on a symbol in a non-polynomial way, a clamped
   Slice, a data-dependent shape, a Squeeze that drops a dim of 1) has no formula (None) and
   a warning names the node.

The point at 0 lies on the line symbol i is probed on: where the model analyses there and
every cost is on the polynomial through the points so far, it confirms the degree in place of
the next point along the line (a count such as n - 1, 0 and not -1 at 0, needs that point).

Where the formulas are checked (every symbol at 1, the random point, the points at 0), the
whole model is analysed. At the other points, on a model whose nodes are mostly alike, the
reduced model is (``_Reduced``): one node per class of nodes with the same op, attributes,
and input and output types and values at every symbol = 1 and at the random point. Each
layer of a decoder is like every other, so a point costs the analysis of about one layer's
nodes (88 for GPT-2 small, of 2,030). Where the whole model is analysed, the reduced model
must agree with it: every node has its class's kind there, or the reduced model, run there
too, gives the same costs; where it does not, the search is made again on the whole model.

For GPT-2 in (batch, seq) of degrees (1, 2), from the base point (2, 3): the whole model at
(1, 1) (the analysis reported), the random point, (0, 3) and (2, 0) = 4 analyses; the
reduced model at (1, 1) (once, to check how it is wired), at (2, 3) and (3, 3) along batch,
where (0, 3), on the line through 2 and 3, confirms degree 1 in place of batch 4, at (2, 4),
(2, 5), (2, 6) along seq (its 0 breaks the model's shapes, which is found so, and where
the shapes break the kinds prove nothing: it is run at (2, 0) to compare), and at (3, 4)
and (3, 5) on the grid = 9. Every analysis but the reported one is ``analyze.costs_at``:
the same walk, without the summaries.
"""

from __future__ import annotations

import ast
import itertools
import math
import operator
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import onnx

from onnxcost.analysis.records import Layout, to_jsonable
from onnxcost.errors import OnnxcostError, ShapeError, UsageError
from onnxcost.load.graph import build
from onnxcost.load.model import VIRTUAL_LOCATION_PREFIX, ModelSource
from onnxcost.load.tensors import name_text
from onnxcost.prepare import PreparedModel, prepare
from onnxcost.shapes.infer import dim_param

if TYPE_CHECKING:
    from onnxcost.analysis.records import Convention
    from onnxcost.analysis.walk import Analysis

TOTAL_KEYS = ("macs", "flops", "bytes_read", "bytes_written", "params", "param_bytes")
"""The totals that get formulas."""
NODE_KEYS = ("macs", "flops", "bytes_read", "bytes_written")
"""The per-node costs that get formulas."""

_LABELS = {
    "macs": "MACs",
    "flops": "FLOPs",
    "bytes_read": "bytes read",
    "bytes_written": "bytes written",
    "params": "params",
    "param_bytes": "param bytes",
}
_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
MAX_GRID = 1024
"""The most points of the interpolation grid (the product of degree + 1 over the symbols):
10 symbols of degree 1 in 2 s on a toy model. The points grow as 2**symbols; past this the
search is refused, not run for minutes (GPT-2 in batch and seq takes 6)."""
_FIRST_BASE = 2
"""The base point gives symbol i the value 2 + i: past the special case 1 (broadcasting),
distinct per symbol."""


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


@dataclass(frozen=True, slots=True)
class SymbolicCosts:
    """Formulas for the totals and for every node of an analysis (None: no exact formula)."""

    symbols: tuple[str, ...]
    totals: dict[str, Formula | None]
    """Keys ``TOTAL_KEYS``."""
    nodes: tuple[dict[str, Formula | None], ...]
    """One per record of ``Analysis.nodes``, in the same order; keys ``NODE_KEYS``."""
    zero_allowed: dict[str, bool]
    """Per symbol, whether the model analyses at 0 (every node keeps its shapes)."""
    analyses: int
    """Concrete analyses of the whole model run to find and check the formulas."""
    warnings: tuple[str, ...] = ()
    reduced_analyses: int = 0
    """Analyses of the model reduced to one node per class (``_Reduced``), which found the
    polynomials at the other points; 0 where no reduced model was used."""
    reduced_nodes: int = 0
    """The reduced model's nodes (0: none used)."""

    def at(self, **values: int) -> FormulaTotals:
        """The totals at a point: every symbol bound to an integer >= 0."""
        found = {k: (None if f is None else f.evaluate(values)) for k, f in self.totals.items()}
        return FormulaTotals(**found)

    def node_formulas(self, index: int) -> dict[str, str | None]:
        """The JSON ``formulas`` of node ``index``."""
        return _strings(self.nodes[index])

    def describe(self) -> list[str]:
        """A heading, then ``MACs = 52,753,152·batch·seq + 3,072·batch·seq²`` per total."""
        syms = self.symbols
        lines = [
            f"Formulas in {', '.join(syms)} (exact; the counts are at "
            f"{', '.join(f'{s}=1' for s in syms)})"
            if syms
            else "Formulas: the model has no free symbolic dim; every cost is a constant"
        ]
        for key, f in self.totals.items():
            text = "none (see warnings)" if f is None else f.pretty()
            lines.append(f"{_LABELS[key]} = {text}")
        return lines

    JSON_LAYOUT: ClassVar[Layout] = ("symbols", ("formulas", "total_texts"))
    """Merged into ``onnxcost.analysis/1`` by ``analyze(..., symbolic=True)``."""

    @property
    def total_texts(self) -> dict[str, str | None]:
        """The totals' formulas as Python expressions (None: no exact formula)."""
        return _strings(self.totals)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class FormulaTotals:
    """Totals evaluated from the formulas at one point (None where a total has none)."""

    macs: int | None
    flops: int | None
    bytes_read: int | None
    bytes_written: int | None
    params: int | None
    param_bytes: int | None


def _strings(formulas: Mapping[str, Formula | None]) -> dict[str, str | None]:
    return {k: (None if f is None else f.python()) for k, f in formulas.items()}


# --- the model's symbols ----------------------------------------------------------------------


def model_symbols(
    proto: onnx.ModelProto,
    input_shapes: Mapping[str, Sequence[int]],
    dims: Mapping[str, int],
) -> tuple[str, ...]:
    """The dim_params of the graph inputs, in order of first use, less those fixed by
    ``dims`` or by an ``input_shapes`` entry."""
    out: dict[str, None] = {}
    standalone = _standalone(proto)
    for owner, param in _input_dim_params(proto, input_shapes):
        if param in dims:
            continue
        if param.isidentifier():
            out[param] = None
        else:  # a derived dim such as 'past_seq + seq': the names in it are symbols
            names = _derived_names(param, standalone, owner) or ()
            out.update(dict.fromkeys(n for n in names if n not in dims))
    return tuple(out)


def _standalone(proto: onnx.ModelProto) -> set[str]:
    """The dim_params of the graph inputs that are names of their own (``seq``)."""
    return {p for p in _dim_params(proto, {}) if p.isidentifier()}


def _derived_names(param: str, standalone: set[str], owner: str = "") -> list[str] | None:
    """The symbols a derived dim is computed from (``past_seq + seq``: past_seq and seq), or
    None where ``param`` is no such dim: not integer arithmetic of names, or a name in it
    that no input has as a dim of its own (``batch-size`` is one symbol's name, not a
    difference). ShapeError naming input ``owner`` for arithmetic too long to read."""
    names = _expression_names(param, owner)
    if names is None or not all(n in standalone for n in names):
        return None
    return names


def _dim_params(proto: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]]) -> list[str]:
    return [param for _input, param in _input_dim_params(proto, input_shapes)]


def _input_dim_params(
    proto: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]]
) -> list[tuple[str, str]]:
    """(input, dim_param) of every symbolic dim of the graph inputs not fixed by
    ``input_shapes``, as text."""
    inits = {t.name for t in proto.graph.initializer}
    return [
        (name_text(vi.name), dim_param(d))  # text: protobuf hands out bytes for non-UTF-8
        for vi in proto.graph.input
        if vi.name not in inits and vi.name not in input_shapes
        for d in vi.type.tensor_type.shape.dim
        if d.HasField("dim_param") and d.dim_param
    ]


_OPS: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
}
MAX_DERIVED_CHARS = 256
"""The longest dim_param read as arithmetic (optimum's longest, 'past_sequence_length +
sequence_length', has 40 characters). Python's parser recurses once per term, so a longer
one (3,000 terms) is refused, not parsed."""
_ARITHMETIC = re.compile(r"[\w\s+\-*/()]*[+\-*/][\w\s+\-*/()]*", re.ASCII)
"""The characters of integer arithmetic of names, with an operator among them."""
_MAX_DIM = 2**62
"""The largest dim, as --dim and --input-shape take them."""


def _expression_names(text: str, owner: str = "") -> list[str] | None:
    """The names in a derived dim (``past_sequence_length + sequence_length``, optimum's
    attention_mask), or None when ``text`` is not integer arithmetic (+ - * //) of names.
    ShapeError for arithmetic longer than ``MAX_DERIVED_CHARS``."""
    if len(text) > MAX_DERIVED_CHARS:
        if _ARITHMETIC.fullmatch(text):
            raise _too_long(text, owner)
        return None  # no arithmetic: one (long) name
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.append(node.id)
        elif isinstance(node, ast.BinOp):
            if type(node.op) not in _OPS:
                return None
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, int):
                return None
        elif not isinstance(node, ast.Expression | ast.Load | ast.operator):
            return None  # calls, attributes, comparisons: not a dim
    return names


def _too_long(text: str, owner: str) -> ShapeError:
    where = f"input {owner!r}: its" if owner else "the"
    return ShapeError(
        f"{where} derived dim {text[:40]!r}... has {len(text):,} characters, more than "
        f"onnxcost reads as arithmetic ({MAX_DERIVED_CHARS}); fix that input's shape with "
        f"--input-shape {owner or 'NAME'}=DIMS"
    )


def _magnitude(value: int) -> str:
    """``value`` in digits, or as a power of ten where it has more than 20."""
    digits = len(str(abs(value)))
    return f"{value:,}" if digits <= 20 else f"{'-' if value < 0 else ''}about 10**{digits - 1}"


def _evaluate(node: ast.expr, values: Mapping[str, int]) -> int:
    if isinstance(node, ast.Name):
        return values[node.id]
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    assert isinstance(node, ast.BinOp)
    return _OPS[type(node.op)](_evaluate(node.left, values), _evaluate(node.right, values))


def derived_value(name: str, param: str, names: Sequence[str], dims: Mapping[str, int]) -> int:
    """The value of derived dim ``param`` of input ``name`` at ``dims``; ShapeError where it
    divides by 0 or falls outside 0 .. 2**62 (a dim's range)."""
    at = ", ".join(f"{n}={dims[n]}" for n in dict.fromkeys(names))
    fix = f"or give the dim a value of its own with --dim '{param}=N'"
    try:
        value = _evaluate(ast.parse(param, mode="eval").body, dims)
    except ZeroDivisionError:
        raise ShapeError(
            f"input {name!r}: its derived dim {param!r} divides by 0 at {at}; pass values that "
            f"make the divisor 1 or more (--dim SYMBOL=N with N >= 1) {fix}"
        ) from None
    if not 0 <= value <= _MAX_DIM:
        raise ShapeError(
            f"input {name!r}: its derived dim {param!r} is {_magnitude(value)} at {at}, outside a "
            f"dim's range 0 .. 2**62; pass smaller --dim values {fix}"
        )
    return value


def with_derived(
    proto: onnx.ModelProto,
    input_shapes: Mapping[str, Sequence[int]],
    dims: Mapping[str, int],
) -> dict[str, int]:
    """``dims`` plus the value of every derived input dim whose names they all bind: an
    optimum decoder's attention_mask [batch, 'past_sequence_length + sequence_length'] gets
    the sum, not the default 1. ShapeError where one divides by 0 or leaves a dim's range."""
    out = dict(dims)
    standalone = _standalone(proto)
    for name, param in _input_dim_params(proto, input_shapes):
        if param in out or param.isidentifier():
            continue
        names = _derived_names(param, standalone, name)
        if names is not None and all(n in dims for n in names):
            out[param] = derived_value(name, param, names, dims)
    return out


def _light(prepared: PreparedModel) -> PreparedModel:
    """The prepared model, its large inline weights made to point at no data: each analysis
    copies the model, and sizes are all it reads of a weight."""
    heavy = [
        t
        for t in prepared.proto.graph.initializer
        if t.data_location != onnx.TensorProto.EXTERNAL and math.prod(t.dims) > 1 << 16
    ]
    if not heavy:
        return prepared
    light = prepared.working_copy()
    for t in light.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL or math.prod(t.dims) <= 1 << 16:
            continue  # small tensors may be folded as shapes: keep them
        for name in ("raw_data", "float_data", "int32_data", "int64_data", "double_data"):
            t.ClearField(name)
        t.data_location = onnx.TensorProto.EXTERNAL
        del t.external_data[:]
        entry = t.external_data.add()
        entry.key, entry.value = "location", VIRTUAL_LOCATION_PREFIX + "formulas"
    return replace(prepared, proto=light)


# --- sampling the concrete analysis -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Sample:
    values: list[int]
    """TOTAL_KEYS, then NODE_KEYS of each unit (``_Units``)."""
    unknown: frozenset[int]
    """Indices of the units with status unknown_shape."""


@dataclass(frozen=True)
class _Units:
    """What the samples hold NODE_KEYS for: every node, or, with the reduced model, every
    class of alike nodes (each node's formulas are then its class's)."""

    of_node: tuple[int, ...]
    """Node -> its unit."""
    first: tuple[int, ...]
    """Unit -> its first node."""
    sizes: tuple[int, ...]
    """Unit -> how many nodes it stands for."""

    @classmethod
    def nodes(cls, n: int) -> _Units:
        return cls(tuple(range(n)), tuple(range(n)), (1,) * n)

    def members(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in self.sizes]
        for node, unit in enumerate(self.of_node):
            out[unit].append(node)
        return out


class _ReducedMissError(Exception):
    """The reduced model, or the classes it stands for, missed the whole model's costs at a
    point where the whole model was analysed."""


def _vector(a: Analysis, units: _Units) -> _Sample:
    """The sample of a whole model's analysis. Raises _ReducedMissError where two nodes of
    one unit cost differently."""
    t = a.totals
    values = [t.macs, t.flops, t.bytes_read, t.bytes_written, t.params, t.param_bytes]
    costs = [(n.macs, n.flops, n.bytes_read, n.bytes_written) for n in a.nodes]
    for node in units.first:
        values += costs[node]
    if len(units.first) < len(costs) and any(
        cost != costs[units.first[unit]] for cost, unit in zip(costs, units.of_node, strict=True)
    ):
        raise _ReducedMissError("nodes of one class cost differently")
    unknown = frozenset(
        units.of_node[k] for k, n in enumerate(a.nodes) if n.status == "unknown_shape"
    )
    return _Sample(values, unknown)


@dataclass(frozen=True)
class _Reduced:
    """The model cut down to one node per class, where a class is the nodes with the same op,
    attributes, and input and output types and values (``ShapeResult.kinds``) at two points
    that differ in every symbol (every symbol at 1, and the random point). Such nodes are
    taken to stay alike at every point: a 32-layer decoder's layers become one, and each
    point costs the analysis of ~100 nodes rather than of thousands. The sampler checks it
    wherever the whole model is analysed."""

    model: PreparedModel
    units: _Units
    """The classes: the reduced model's node j is the whole model's node ``units.first[j]``."""
    params: tuple[int, int]
    """The totals' params and param bytes, the same at every point (see ``_reduce``)."""

    def sample(self, a: Analysis) -> _Sample:
        """The whole model's costs from the reduced model's analysis."""
        per_class = [(r.macs, r.flops, r.bytes_read, r.bytes_written) for r in a.nodes]
        totals = [0, 0, 0, 0]
        values: list[int] = []
        for costs, size in zip(per_class, self.units.sizes, strict=True):
            values += costs
            for key, value in enumerate(costs):
                totals[key] += size * value
        unknown = frozenset(c for c, r in enumerate(a.nodes) if r.status == "unknown_shape")
        return _Sample([*totals, *self.params, *values], unknown)

    def agrees(self, kinds: Sequence[int]) -> bool:
        """Whether every node has its class's first node's kind (``ShapeResult.kinds``) at a
        point: then every node costs as that node does, and the reduced model's costs are
        the whole model's there, node for node."""
        first = self.units.first
        return len(kinds) == len(self.units.of_node) and all(
            kind >= 0 and kind == kinds[first[unit]]
            for kind, unit in zip(kinds, self.units.of_node, strict=True)
        )


def _reduce(
    prepared: PreparedModel,
    analyses: Sequence[Analysis],
    params: tuple[int, int],
    min_saving: float = 0.5,
) -> _Reduced | None:
    """The reduced model from the whole model's analyses at two or more points, or None where
    it would not pay (fewer than ``min_saving`` of the nodes merged) or cannot be built: a
    model with If/Loop/Scan bodies (no kinds), or params that differ between the points (a
    weight generated at a symbolic size: the reduced model reads fewer weights, so its
    params are not the whole model's, and they are taken from these analyses)."""
    view = prepared.view
    n = len(view.order)
    if any(len(a._kinds) != n or len(a.nodes) != n for a in analyses):
        return None
    first_params = [r.params for r in analyses[0].nodes]
    for a in analyses:
        if (a.totals.params, a.totals.param_bytes) != params or [
            r.params for r in a.nodes
        ] != first_params:
            return None
    classes: dict[tuple[int, ...], int] = {}
    of_node: list[int] = []
    sizes: list[int] = []
    first: list[int] = []
    renamed: dict[str, str] = {}
    """A merged node's output -> the same output of its class's first node."""
    for k in range(n):
        kinds = tuple(a._kinds[k] for a in analyses)
        key = kinds if min(kinds) >= 0 else (-1 - k,)  # -1: this node shares with none
        c = classes.setdefault(key, len(classes))
        if c == len(sizes):
            sizes.append(0)
            first.append(k)
        else:
            kept = view.outputs[first[c]]
            renamed.update((o, r) for o, r in zip(view.outputs[k], kept, strict=True) if o)
        sizes[c] += 1
        of_node.append(c)
    if len(sizes) > (1 - min_saving) * n:
        return None
    whole = prepared.proto.graph
    proto = onnx.ModelProto(
        ir_version=prepared.proto.ir_version, opset_import=prepared.proto.opset_import
    )  # the fields an analysis reads; functions are inlined already
    graph = proto.graph
    graph.name = name_text(whole.name)  # protobuf hands out bytes for non-UTF-8; text here
    graph.input.extend(whole.input)
    read: set[str] = set()
    for k in first:
        node = graph.node.add()
        node.CopyFrom(view.order[k])
        for i, name in enumerate(node.input):
            if name in renamed:
                node.input[i] = renamed[name]
        read.update(node.input)
    outputs = [o for o in whole.output if o.name not in renamed]
    read.update(o.name for o in outputs)
    graph.initializer.extend(t for t in whole.initializer if t.name in read)
    graph.output.extend(outputs)
    graph.value_info.extend(vi for vi in whole.value_info if vi.name not in renamed)
    try:
        view = build(graph, name_unnamed=False)
    except OnnxcostError:
        return None  # a graph the whole model's index took but this one does not: go without
    model = replace(prepared, proto=proto, view=view)
    return _Reduced(model, _Units(tuple(of_node), tuple(first), tuple(sizes)), params)


@dataclass
class _Sampler:
    """The costs at each point: from the whole model's analysis (``run``), or, once
    ``reduced`` is set, from the reduced model's (``run_reduced``), except at the points the
    formulas are checked at (``whole``). There the whole model is analysed, and the reduced
    model must agree with it: every node has its class's kind (``_Reduced.agrees``), or the
    reduced model, run there too, gives the same costs; else _ReducedMissError."""

    run: Callable[[dict[str, int]], Analysis]
    run_reduced: Callable[[PreparedModel, dict[str, int]], Analysis]
    symbols: tuple[str, ...]
    names: tuple[str, ...]
    units: _Units
    samples: dict[tuple[int, ...], _Sample | None] = field(default_factory=dict)
    whole_points: set[tuple[int, ...]] = field(default_factory=set)
    """The points ``samples`` holds the whole model's costs at."""
    reduced: _Reduced | None = None
    reduced_samples: dict[tuple[int, ...], _Sample | None] = field(default_factory=dict)
    why_not: dict[tuple[int, ...], str] = field(default_factory=dict)
    """Why the whole model does not analyse at a point, where it does not."""

    def __call__(self, point: tuple[int, ...]) -> _Sample | None:
        """The costs at ``point``; None where the model does not analyse there."""
        if point not in self.samples:
            if self.reduced is None:
                return self.whole(point)
            sample = self._reduced_at(point)
            if sample is None:
                return self.whole(point)  # the whole model must not analyse there either
            self.samples[point] = sample
        return self.samples[point]

    def whole(self, point: tuple[int, ...], analysis: Analysis | None = None) -> _Sample | None:
        """The whole model's costs at ``point`` (its ``analysis`` there, when run already)."""
        if point in self.whole_points:
            return self.samples[point]
        self.whole_points.add(point)
        a = analysis or self.analysis(point)
        sample = None
        if a is not None and tuple(n.name for n in a.nodes) == self.names:
            sample = _vector(a, self.units)  # else another walk (a different If branch)
        unproven = self.reduced is not None and (a is None or not self.reduced.agrees(a._kinds))
        if unproven and self._reduced_at(point) != sample:
            raise _ReducedMissError(point)
        self.samples[point] = sample
        return sample

    def analysis(self, point: tuple[int, ...]) -> Analysis | None:
        """The whole model's analysis at ``point`` (None where it does not analyse)."""
        try:
            return self.run(self._values(point))
        except OnnxcostError as e:
            self.why_not[point] = e.node if isinstance(e, ShapeError) and e.node else str(e)
            return None

    def use_reduced(
        self,
        source: PreparedModel,
        reported: tuple[tuple[int, ...], Analysis],
        points: Sequence[tuple[int, ...]],
    ) -> None:
        """Analyse the whole model at ``points`` and, where its analyses there and the
        ``reported`` one (every symbol at 1) make a reduced model that pays (``_reduce``),
        with the same params at every node, use it from now on. Its wiring is checked once,
        at the reported point."""
        at_one, base = reported
        analyses = {p: self.analysis(p) for p in points}
        found = [a for a in analyses.values() if a is not None]
        params = [r.params for r in base.nodes]
        if len(found) == len(points) and all([r.params for r in a.nodes] == params for a in found):
            totals = (base.totals.params, base.totals.param_bytes)
            reduced = _reduce(source, [base, *found], totals)
            if reduced is not None:
                self.reduced, self.units = reduced, reduced.units
        for p, a in analyses.items():
            if a is None:
                self.whole_points.add(p)
                self.samples[p] = None
            else:
                self.whole(p, a)
        self.whole(at_one, base)
        if self.reduced is not None and self._reduced_at(at_one) != self.samples[at_one]:
            raise _ReducedMissError(at_one)

    def _values(self, point: tuple[int, ...]) -> dict[str, int]:
        return dict(zip(self.symbols, point, strict=True))

    def _reduced_at(self, point: tuple[int, ...]) -> _Sample | None:
        assert self.reduced is not None
        if point not in self.reduced_samples:
            try:
                found = self.reduced.sample(
                    self.run_reduced(self.reduced.model, self._values(point))
                )
            except OnnxcostError:
                found = None
            self.reduced_samples[point] = found
        return self.reduced_samples[point]

    def need(self, point: tuple[int, ...], *, whole: bool = False) -> list[int]:
        sample = self.whole(point) if whole else self(point)
        if sample is None:
            at = ", ".join(f"{s}={v}" for s, v in zip(self.symbols, point, strict=True))
            why = f" ({self.why_not[point]})" if point in self.why_not else ""
            raise ShapeError(
                f"--symbolic: the model does not analyse at {at}{why}; a dim its exporter "
                f"fixed may still be named as a symbol: fix the symbols that break it with "
                f"--dim SYMBOL=N"
            )
        return sample.values


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


class _Columns:
    """The distinct costs on the grid: many nodes cost the same at every point (every zero-cost
    node, every layer's twin), so each distinct column is interpolated once."""

    def __init__(self, rows: Sequence[Sequence[int]]) -> None:
        index: dict[tuple[int, ...], int] = {}
        self.of = [index.setdefault(col, len(index)) for col in zip(*rows, strict=True)]
        """Cost -> its distinct column."""
        self.columns = list(index)


def _interpolate(
    sampler: _Sampler, base: tuple[int, ...], degrees: tuple[int, ...]
) -> tuple[np.ndarray, int, _Columns]:
    """Monomial coefficients of every distinct cost on the grid base_i .. base_i + degrees_i.

    Returns (coefficients with shape (d_1+1, ..., d_k+1, distinct costs), their common
    denominator, the distinct costs)."""
    shape = tuple(d + 1 for d in degrees)
    offsets = list(np.ndindex(*shape))
    rows = [sampler.need(tuple(b + o for b, o in zip(base, off, strict=True))) for off in offsets]
    columns = _Columns(rows)
    grid = np.array([list(c) for c in columns.columns], dtype=object).T
    grid = grid.reshape((*shape, len(columns.columns)))
    for axis, d in enumerate(degrees):  # forward differences along each axis, in place
        for level in range(1, d + 1):
            for m in range(d, level - 1, -1):
                hi = tuple(m if a == axis else slice(None) for a in range(grid.ndim))
                lo = tuple(m - 1 if a == axis else slice(None) for a in range(grid.ndim))
                grid[hi] = grid[hi] - grid[lo]
    denominator = 1
    for axis, d in enumerate(degrees):  # Newton basis -> monomials, one axis at a time
        binomials = _binomial_rows(base[axis], d)
        grid = np.moveaxis(np.tensordot(binomials.T, np.moveaxis(grid, axis, 0), axes=1), 0, axis)
        denominator *= math.factorial(d)
    return grid, denominator, columns


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


# --- the whole search -------------------------------------------------------------------------


def symbolic_analysis(
    model: ModelSource | PreparedModel,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    convention: Convention = "onnxcost",
    max_degree: int = 3,
    allow_reshape: bool = False,
) -> Analysis:
    """``analyze(..., symbolic=True)``: the analysis with the free symbols at 1, plus the
    formulas (``Analysis.formulas``, ``Analysis.at``, per node ``Analysis.symbolic.nodes``)."""
    from onnxcost.analysis.walk import count

    dims = dict(dims or {})
    source = _light(prepare(model))  # loaded, indexed (and a built-in model built) once
    symbols = model_symbols(source.proto, input_shapes or {}, dims)
    at_one = with_derived(source.proto, input_shapes or {}, {**dims, **dict.fromkeys(symbols, 1)})
    base = count(
        source,
        input_shapes=input_shapes,
        dims=at_one,
        convention=convention,
        allow_reshape=allow_reshape,
    )
    costs = symbolic_costs(
        source,
        base,
        input_shapes=input_shapes,
        dims=dims,
        convention=convention,
        max_degree=max_degree,
        allow_reshape=allow_reshape,
    )
    return replace(base, symbolic=costs, warnings=(*base.warnings, *costs.warnings))


def symbolic_costs(
    model: ModelSource | PreparedModel,
    base: Analysis,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    convention: Convention = "onnxcost",
    max_degree: int = 3,
    verify: int = 1,
    seed: int = 0,
    allow_reshape: bool = False,
    reduce: bool = True,
) -> SymbolicCosts:
    """Formulas in the model's free symbolic dims for the totals and every node of ``base``,
    the analysis of ``model`` with ``dims`` and every free symbol at 1 (one of the points the
    formulas are checked at). ``reduce``: find the polynomials on the model reduced to one
    node per class (``_Reduced``) where that pays; the formulas are checked on the whole
    model, and where the reduced model misses the whole model's costs at a point both were
    run, the search is made again on the whole model alone."""
    options = (
        dict(input_shapes or {}),
        dict(dims or {}),
        convention,
        max_degree,
        verify,
        seed,
        allow_reshape,
    )
    try:
        return _search(model, base, *options, reduce=reduce)
    except _ReducedMissError:
        return _search(model, base, *options, reduce=False)


def _search(
    model: ModelSource | PreparedModel,
    base: Analysis,
    input_shapes: dict[str, Sequence[int]],
    dims: dict[str, int],
    convention: Convention,
    max_degree: int,
    verify: int,
    seed: int,
    allow_reshape: bool,
    *,
    reduce: bool,
) -> SymbolicCosts:
    """``symbolic_costs``, one try."""
    from onnxcost.analysis.walk import costs_at

    source = _light(prepare(model))
    symbols = model_symbols(source.proto, input_shapes, dims)

    def run_on(prepared: PreparedModel, values: dict[str, int]) -> Analysis:
        point = with_derived(source.proto, input_shapes, {**dims, **values})
        return costs_at(
            prepared,
            input_shapes=input_shapes,
            dims=point,
            convention=convention,
            allow_reshape=allow_reshape,
        )

    names = tuple(n.name for n in base.nodes)

    sampler = _Sampler(partial(run_on, source), run_on, symbols, names, _Units.nodes(len(names)))
    ones = (1,) * len(symbols)
    k = len(symbols)
    start = tuple(_FIRST_BASE + i for i in range(k))
    rng = random.Random(seed)
    # The checks lie beyond every point the degrees and the grid can reach (base + degree
    # + 1 at most); the first one, with the reported point, also sorts the nodes into
    # classes. Its symbols take distinct values, so that no two of them coincide there
    # (nodes alike only because batch = past there would make a class that fails later).
    checks = [_check_point(rng, start, max_degree) for _ in range(verify if k else 0)]
    if reduce and checks:
        sampler.use_reduced(source, (ones, base), checks[:1])
    else:
        sampler.whole(ones, base)
    units = sampler.units
    n_costs = len(TOTAL_KEYS) + len(NODE_KEYS) * len(units.sizes)
    bad = np.zeros(n_costs, dtype=bool)
    """Costs with no formula: too high a degree, or failed verification."""
    reasons: dict[int, str] = {}
    degrees: list[int] = []

    def zero(i: int) -> tuple[int, ...]:
        """Symbol i at 0, the others at the base point: on the line symbol i is probed on."""
        return tuple(0 if j == i else v for j, v in enumerate(start))

    def allowed(sample: _Sample | None) -> bool:
        """Whether the model analyses at a point with a 0 (every node keeps its shapes)."""
        base_sample = sampler(start)
        return (
            sample is not None and base_sample is not None and sample.unknown <= base_sample.unknown
        )

    for i, sym in enumerate(symbols):
        rows: list[list[int]] = []
        degree = 0
        for m in range(max_degree + 2):
            # The point at 0, run anyway to check the formulas there, confirms the degree
            # as a next point along the line would, where every cost is on the polynomial
            # through the points so far (not where a count stops at 0: max(0, n - 1)).
            if m >= 2:
                at_zero = sampler.whole(zero(i))
                if (
                    at_zero is not None
                    and allowed(at_zero)
                    and _newton_at(_differences(rows), -start[i]) == at_zero.values
                ):
                    break
            point = tuple(v + (m if j == i else 0) for j, v in enumerate(start))
            rows.append(sampler.need(point))
            if m < 2:
                continue
            diffs = _differences(rows)
            if not any(diffs[-1]):
                break
        else:
            over = np.array([v != 0 for v in diffs[-1]], dtype=bool)
            for q in np.flatnonzero(over & ~bad):
                reasons[int(q)] = f"not a polynomial of degree <= {max_degree} in {sym}"
            bad |= over
        diffs = _differences(rows)
        for j in range(len(diffs) - 1, 0, -1):
            nonzero = np.array([v != 0 for v in diffs[j]], dtype=bool) & ~bad
            if nonzero.any():
                degree = j
                break
        degrees.append(min(degree, max_degree))
        _check_grid(symbols, degrees)  # refused as soon as it is too big, not at the end
    coefficients, denominator, columns = _interpolate(sampler, start, tuple(degrees))
    fitted = (coefficients, denominator, columns)
    for point in checks:
        _verify(sampler, point, fitted, bad, reasons, "")
    at_ones = ", ".join(f"{s}=1" for s in symbols)
    _verify(sampler, ones, fitted, bad, reasons, f" at {at_ones}")
    zero_allowed: dict[str, bool] = {}
    warnings: list[str] = []
    clamp = np.zeros(n_costs, dtype=bool)
    """Node costs that are max(0, polynomial): negative at a 0 where the analysis gives 0."""
    zeros: list[tuple[int, ...]] = []
    for i, sym in enumerate(symbols):
        point = zero(i)
        zero_allowed[sym] = allowed(sampler.whole(point))
        if zero_allowed[sym]:
            zeros.append(point)
            _verify(sampler, point, fitted, bad, reasons, f" at {sym}=0", clamp)
        else:
            warnings.append(
                f"{sym}=0 is not a valid point of this model (shapes break there); the "
                f"formulas hold for {sym} >= 1"
            )

    made: dict[tuple[int, bool], Formula] = {}

    def formula(q: int) -> Formula | None:
        if bad[q]:
            return None
        key = (columns.of[q], bool(clamp[q]))
        if key not in made:
            made[key] = _formula(symbols, coefficients[..., key[0]], denominator, key[1])
        return made[key]

    offset = len(TOTAL_KEYS)
    totals = {key: formula(q) for q, key in enumerate(TOTAL_KEYS)}
    for t, key in enumerate(TOTAL_KEYS[: len(NODE_KEYS)]):
        units_of_key = range(offset + t, n_costs, len(NODE_KEYS))
        if totals[key] is None and reasons.get(t, "").endswith("=0") and clamp[units_of_key].any():
            totals[key] = _with_clamped_parts(
                sampler,
                zeros,
                t,
                [q for q in units_of_key if clamp[q] and not bad[q]],
                formula,
                fitted,
            )
            if totals[key] is not None:
                del reasons[t]
    per_unit = [
        {key: formula(offset + len(NODE_KEYS) * u + q) for q, key in enumerate(NODE_KEYS)}
        for u in range(len(units.sizes))
    ]
    warnings += _bad_warnings(reasons, names, units)
    return SymbolicCosts(
        symbols=symbols,
        totals=totals,
        nodes=tuple(per_unit[u] for u in units.of_node),
        zero_allowed=zero_allowed,
        analyses=len(sampler.whole_points),
        reduced_analyses=len(sampler.reduced_samples),
        reduced_nodes=len(units.sizes) if sampler.reduced is not None else 0,
        warnings=tuple(warnings),
    )


def _check_grid(symbols: Sequence[str], degrees: Sequence[int]) -> None:
    """ShapeError where the grid of the degrees found so far has more than MAX_GRID points."""
    grid = math.prod(d + 1 for d in degrees)
    if grid > MAX_GRID:
        varying = [f"{s} ({d})" for s, d in zip(symbols, degrees, strict=False) if d]
        more = ", ..." if len(varying) > 8 or len(degrees) < len(symbols) else ""
        raise ShapeError(
            f"--symbolic: the model has {len(symbols)} free symbols (the costs' degree in each: "
            f"{', '.join(varying[:8])}{more}), whose interpolation grid takes {grid:,} "
            f"analyses or more, over the limit of {MAX_GRID:,}; fix all but a few of them "
            f"with --dim SYMBOL=N"
        )


def _check_point(rng: random.Random, start: tuple[int, ...], max_degree: int) -> tuple[int, ...]:
    """A random point past the grid (each symbol at its base + ``max_degree`` + 1 to 9 more),
    its symbols at distinct values."""
    lowest = [b + max_degree + 1 for b in start]
    taken: set[int] = set()
    point = []
    for low in lowest:
        value = low + rng.randint(1, 9)
        while value in taken:
            value += 1
        taken.add(value)
        point.append(value)
    return tuple(point)


def _verify(
    sampler: _Sampler,
    point: tuple[int, ...],
    fitted: tuple[np.ndarray, int, _Columns],
    bad: np.ndarray,
    reasons: dict[int, str],
    where: str,
    clamp: np.ndarray | None = None,
) -> None:
    """Mark the costs whose formula misses the analysis at ``point``; with ``clamp`` (a point
    with a 0), a node cost the analysis gives as 0 where its polynomial is negative is
    max(0, polynomial) instead."""
    coefficients, denominator, columns = fitted
    actual = sampler.need(point, whole=True)
    predicted = _evaluate_all(coefficients, denominator, point)
    for q, (c, want) in enumerate(zip(columns.of, actual, strict=True)):
        got = predicted[c]
        if clamp is not None and clamp[q]:
            got = max(0, got)
        if got == want or bad[q]:
            continue
        if clamp is not None and want == 0 and got < 0 and q >= len(TOTAL_KEYS):
            clamp[q] = True
            continue
        bad[q] = True
        reasons[q] = "piecewise or not a polynomial" + where


def _with_clamped_parts(
    sampler: _Sampler,
    zeros: Sequence[tuple[int, ...]],
    total: int,
    clamped: Sequence[int],
    formula: Callable[[int], Formula | None],
    fitted: tuple[np.ndarray, int, _Columns],
) -> Formula | None:
    """Total ``total`` as (its polynomial less the clamped nodes') + each clamped node's
    max(0, polynomial), if that matches the analysis at every point with a 0. ``clamped``:
    columns of units, each as many nodes as the unit stands for."""
    coefficients, denominator, columns = fitted
    base = coefficients[..., columns.of[total]].copy()
    groups: dict[int, list[int]] = {}
    for q in clamped:
        groups.setdefault(columns.of[q], []).append(q)
    sizes = sampler.units.sizes
    parts: list[tuple[int, Formula]] = []
    for c, members in groups.items():
        count = sum(sizes[(q - len(TOTAL_KEYS)) // len(NODE_KEYS)] for q in members)
        base = base - count * coefficients[..., c]
        part = formula(members[0])
        if part is None:
            return None
        parts.append((count, part))
    whole = replace(_formula(sampler.symbols, base, denominator), parts=tuple(parts))
    for point in zeros:
        values = dict(zip(sampler.symbols, point, strict=True))
        if whole.evaluate(values) != sampler.need(point, whole=True)[total]:
            return None
    return whole


def _bad_warnings(reasons: Mapping[int, str], names: Sequence[str], units: _Units) -> list[str]:
    """One warning per reason, naming the nodes (the first five) and which of their costs."""
    members = units.members()
    by_node: list[tuple[int, int, str]] = []
    """(node, key, reason) of every node cost without a formula: each unit's, for its nodes."""
    by_reason: dict[str, dict[str, list[str]]] = {}
    for q, reason in sorted(reasons.items()):
        if q < len(TOTAL_KEYS):
            by_reason.setdefault(reason, {}).setdefault("(totals)", []).append(TOTAL_KEYS[q])
        else:
            unit, index = divmod(q - len(TOTAL_KEYS), len(NODE_KEYS))
            by_node += [(node, index, reason) for node in members[unit]]
    for node, index, reason in sorted(by_node):
        by_reason.setdefault(reason, {}).setdefault(names[node], []).append(NODE_KEYS[index])
    out = []
    for reason, owners in by_reason.items():
        listed = [f"{o!r} ({', '.join(keys)})" for o, keys in owners.items()]
        more = f" and {len(listed) - 5} more" if len(listed) > 5 else ""
        out.append(f"no exact formula ({reason}) for node {', '.join(listed[:5])}{more}: null")
    return out


__all__ = [
    "NODE_KEYS",
    "TOTAL_KEYS",
    "Formula",
    "FormulaTotals",
    "SymbolicCosts",
    "model_symbols",
    "sum_over",
    "symbolic_analysis",
    "symbolic_costs",
    "with_derived",
]
