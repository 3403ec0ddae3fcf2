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
and (3, 5) on the grid = 9. Every analysis but the reported one is ``walk.costs_at``:
the same walk, without the summaries.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from onnxcost.errors import ShapeError
from onnxcost.load.kv import CACHE_BRANCH, cache_branch_symbol, first_step
from onnxcost.load.model import ModelSource
from onnxcost.prepare import PreparedModel, prepare
from onnxcost.symbolic.dims import model_symbols, with_derived
from onnxcost.symbolic.least import model_point, walked_limit
from onnxcost.symbolic.limits import PositionLimit, find_limit
from onnxcost.symbolic.lost import LostRegion, LostSampler, reduced_sample
from onnxcost.symbolic.poly import (
    Formula,
    _binomial_rows,
    _differences,
    _evaluate_all,
    _formula,
    _newton_at,
)
from onnxcost.symbolic.reduced import (
    _light,
    _Reduced,
    _Sample,
    _Sampler,
    _Units,
)
from onnxcost.symbolic.result import (
    NODE_KEYS,
    TOTAL_KEYS,
    SymbolicCosts,
)

if TYPE_CHECKING:
    from onnxcost.analysis.records import Convention
    from onnxcost.analysis.result import Analysis


MAX_GRID = 1024
"""The most points of the interpolation grid (the product of degree + 1 over the symbols):
10 symbols of degree 1 in 2 s on a toy model. The points grow as 2**symbols; past this the
search is refused, not run for minutes (GPT-2 in batch and seq takes 6)."""
_FIRST_BASE = 2
"""The base point gives symbol i the value 2 + i: past the special case 1 (broadcasting),
distinct per symbol."""


# --- interpolation on the grid --------------------------------------------------------------------


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


# --- the search -----------------------------------------------------------------------------------


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
    wanted: frozenset[int] | None = None,
    region: tuple[LostRegion, _Reduced] | None = None,
    offsets: Mapping[str, int] | None = None,
) -> SymbolicCosts:
    """``symbolic_costs``, one try: choose the points, find each symbol's degree, interpolate
    on the grid, verify beyond it and at the 0s, then make the formulas. ``wanted``: the
    nodes whose formulas are wanted (the others come from the symbolic walk): the warnings
    name only those, and no total. ``region``: the ``wanted`` nodes as a model of their own
    and the walk's reduced model, analysed in place of the whole model (``symbolic.lost``):
    the formulas of the other nodes and of the totals are then not the model's (0 for a
    node), and ``analyses`` is 0. ``offsets``: what each symbol with a least value above 1
    is sampled plus (``symbolic.least``): the formulas are over those values, each from 1,
    and such a symbol is not tried at its 0."""
    from onnxcost.analysis.walk import costs_at

    source = _light(prepare(model))
    symbols = model_symbols(source.proto, input_shapes, dims)
    offsets = offsets or {}
    merged = cache_branch_symbol(source.proto.graph)
    branched = merged[1] if merged is not None and merged[1] in symbols else None
    if branched is not None:  # another branch at its 0: sampled from 1, as from a least value
        offsets = {**offsets, branched: offsets.get(branched, 0)}

    def run_on(
        prepared: PreparedModel, values: dict[str, int], *, whole_graph: bool = False
    ) -> Analysis:
        point = with_derived(source.proto, input_shapes, {**dims, **model_point(values, offsets)})
        return costs_at(
            prepared,
            input_shapes=input_shapes,
            dims=point,
            convention=convention,
            allow_reshape=allow_reshape,
            traffic=base.traffic,  # the bytes counted as the base analysis counts them
            whole_graph=whole_graph,
        )

    names = tuple(n.name for n in base.nodes)
    units = _Units.nodes(len(names))
    sampler: _Sampler
    if region is None:
        sampler = _Sampler(partial(run_on, source), run_on, symbols, names, units)
    else:
        sampler = _lost_sampler(region, run_on, base, wanted or frozenset(), symbols, names)
    sampler.offsets = offsets
    start = tuple(_FIRST_BASE + i for i in range(len(symbols)))
    limit = find_limit(source.proto, input_shapes, dims, symbols, source.view)
    checks = _choose_points(
        sampler,
        source,
        base,
        start,
        max_degree,
        verify,
        seed,
        reduce and region is None,
        _Bound.of(walked_limit(limit, offsets), symbols),
    )
    if isinstance(sampler, LostSampler):
        sampler.checked = frozenset(checks)  # the region against the reduced model there
    n_costs = len(TOTAL_KEYS) + len(NODE_KEYS) * len(sampler.units.sizes)
    misses = _Misses(np.zeros(n_costs, dtype=bool), np.zeros(n_costs, dtype=bool))
    degrees = _degrees(sampler, start, max_degree, misses)
    fitted = _interpolate(sampler, start, degrees)
    for point in checks:
        _verify(sampler, point, fitted, misses, "")
    at_ones = ", ".join(
        f"{s}={v}" for s, v in model_point(dict.fromkeys(symbols, 1), offsets).items()
    )
    _verify(sampler, (1,) * len(symbols), fitted, misses, f" at {at_ones}")
    zero_allowed, zeros, warnings = _verify_at_zeros(sampler, start, fitted, misses)
    if branched is not None:
        warnings.append(
            f"{first_step(branched)}, which runs its branch without the cache there "
            f"({CACHE_BRANCH} false): the formulas are those of the branch with the cache, for "
            f"{branched} >= 1 (analyze --dim {branched}=0 for the first step)"
        )
    totals, per_unit = _formulas(sampler, fitted, misses, zeros)
    reasons = misses.reasons
    if wanted is not None:
        members = sampler.units.members()
        reasons = {
            q: why
            for q, why in reasons.items()
            if q >= len(TOTAL_KEYS)
            and not wanted.isdisjoint(members[(q - len(TOTAL_KEYS)) // len(NODE_KEYS)])
        }
    warnings += _bad_warnings(reasons, names, sampler.units)
    if limit is not None:
        warnings.append(limit.warning())
    return SymbolicCosts(
        symbols=symbols,
        totals=totals,
        nodes=tuple(per_unit[u] for u in sampler.units.of_node),
        zero_allowed=zero_allowed,
        analyses=0 if isinstance(sampler, LostSampler) else len(sampler.whole_points),
        reduced_analyses=(
            sampler.runs if isinstance(sampler, LostSampler) else len(sampler.reduced_samples)
        ),
        reduced_nodes=(
            len(region[0].kept)
            if region is not None
            else len(sampler.units.sizes)
            if sampler.reduced is not None
            else 0
        ),
        warnings=tuple(warnings),
        limit=limit,
    )


def _lost_sampler(
    region: tuple[LostRegion, _Reduced],
    run_on: Callable[..., Analysis],
    base: Analysis,
    lost: frozenset[int],
    symbols: tuple[str, ...],
    names: tuple[str, ...],
) -> LostSampler:
    """The sampler over the lost nodes alone (``symbolic.lost``), checked against the walk's
    reduced model."""
    nodes, reduced = region
    params = (base.totals.params, base.totals.param_bytes)

    def at_region(values: dict[str, int]) -> _Sample:
        return nodes.sample(
            run_on(nodes.model_at(values), values, whole_graph=True), len(names), params
        )

    def at_check(values: dict[str, int]) -> _Sample:
        return reduced_sample(
            reduced, run_on(reduced.model, values, whole_graph=True), lost, len(names)
        )

    def unused(*_args: object) -> Analysis:
        raise AssertionError("the lost nodes' sampler runs its region or the reduced model")

    return LostSampler(
        unused,
        unused,
        symbols,
        names,
        _Units.nodes(len(names)),
        region=at_region,
        check=at_check,
        lost=lost,
    )


@dataclass
class _Misses:
    """What the search found against the polynomials, per cost (``_Sample.values``)."""

    bad: np.ndarray
    """Costs with no formula: too high a degree, or failed verification."""
    clamp: np.ndarray
    """Node costs that are max(0, polynomial): negative at a 0 where the analysis gives 0."""
    reasons: dict[int, str] = field(default_factory=dict)
    """Why a cost has no formula."""


def _choose_points(
    sampler: _Sampler,
    source: PreparedModel,
    base: Analysis,
    start: tuple[int, ...],
    max_degree: int,
    verify: int,
    seed: int,
    reduce: bool,
    bound: _Bound | None = None,
) -> list[tuple[int, ...]]:
    """The random points the formulas are checked at; the first one, with the reported
    point (every symbol at 1), also sorts the nodes into classes (``use_reduced``)."""
    rng = random.Random(seed)
    # The checks lie beyond every point the degrees and the grid can reach (base + degree
    # + 1 at most). Their symbols take distinct values, so that no two of them coincide
    # there (nodes alike only because batch = past there would make a class that fails
    # later).
    checks = [_check_point(rng, start, max_degree, bound) for _ in range(verify if start else 0)]
    ones = (1,) * len(start)
    if reduce and checks:
        sampler.use_reduced(source, (ones, base), checks[:1])
    else:
        sampler.whole(ones, base)
    return checks


def _zero(start: tuple[int, ...], i: int) -> tuple[int, ...]:
    """Symbol i at 0, the others at the base point: on the line symbol i is probed on."""
    return tuple(0 if j == i else v for j, v in enumerate(start))


def _allowed(sampler: _Sampler, start: tuple[int, ...], sample: _Sample | None) -> bool:
    """Whether the model analyses at a point with a 0 (every node keeps its shapes)."""
    base_sample = sampler(start)
    return sample is not None and base_sample is not None and sample.unknown <= base_sample.unknown


def _degrees(
    sampler: _Sampler, start: tuple[int, ...], max_degree: int, misses: _Misses
) -> tuple[int, ...]:
    """Each symbol's degree: the highest of its costs' (``_degree``), at most ``max_degree``.
    ShapeError as soon as the grid of the degrees found so far is too big."""
    degrees: list[int] = []
    for i in range(len(start)):
        degrees.append(_degree(sampler, start, i, max_degree, misses))
        _check_grid(sampler.symbols, degrees)  # refused as soon as it is too big, not at the end
    return tuple(degrees)


def _degree(
    sampler: _Sampler, start: tuple[int, ...], i: int, max_degree: int, misses: _Misses
) -> int:
    """Symbol i's degree: the analysis along the line through the base point, one more point
    at a time until the highest forward difference of every cost is 0. A cost whose
    difference is still not 0 past ``max_degree`` has no formula."""
    rows: list[list[int]] = []
    for m in range(max_degree + 2):
        # The point at 0, run anyway to check the formulas there, confirms the degree as a
        # next point along the line would, where every cost is on the polynomial through
        # the points so far (not where a count stops at 0: max(0, n - 1)).
        if m >= 2 and sampler.symbols[i] not in sampler.offsets:  # (from its least value)
            at_zero = sampler.whole(_zero(start, i))
            if (
                at_zero is not None
                and _allowed(sampler, start, at_zero)
                and _newton_at(_differences(rows), -start[i]) == at_zero.values
            ):
                break
        point = tuple(v + (m if j == i else 0) for j, v in enumerate(start))
        rows.append(sampler.need(point))
        if m >= 2 and not any(_differences(rows)[-1]):
            break
    else:
        over = np.array([v != 0 for v in _differences(rows)[-1]], dtype=bool)
        for q in np.flatnonzero(over & ~misses.bad):
            misses.reasons[int(q)] = (
                f"not a polynomial of degree <= {max_degree} in {sampler.symbols[i]}"
            )
        misses.bad |= over
    diffs = _differences(rows)
    for j in range(len(diffs) - 1, 0, -1):
        if (np.array([v != 0 for v in diffs[j]], dtype=bool) & ~misses.bad).any():
            return min(j, max_degree)
    return 0


def _verify_at_zeros(
    sampler: _Sampler,
    start: tuple[int, ...],
    fitted: tuple[np.ndarray, int, _Columns],
    misses: _Misses,
) -> tuple[dict[str, bool], list[tuple[int, ...]], list[str]]:
    """Verify the formulas at each symbol = 0 where the model analyses there (finding the
    clamped node costs); returns, per symbol, whether it may be 0, the points at 0 the model
    analyses at, and a warning for each symbol that may not be 0."""
    zero_allowed: dict[str, bool] = {}
    zeros: list[tuple[int, ...]] = []
    warnings: list[str] = []
    for i, sym in enumerate(sampler.symbols):
        if sym in sampler.offsets:  # from its least value, not from 0
            zero_allowed[sym] = False
            continue
        point = _zero(start, i)
        zero_allowed[sym] = _allowed(sampler, start, sampler.whole(point))
        if zero_allowed[sym]:
            zeros.append(point)
            _verify(sampler, point, fitted, misses, f" at {sym}=0", clamped=True)
        else:
            warnings.append(
                f"{sym}=0 is not a valid point of this model (shapes break there); the "
                f"formulas hold for {sym} >= 1"
            )
    return zero_allowed, zeros, warnings


def _formulas(
    sampler: _Sampler,
    fitted: tuple[np.ndarray, int, _Columns],
    misses: _Misses,
    zeros: Sequence[tuple[int, ...]],
) -> tuple[dict[str, Formula | None], list[dict[str, Formula | None]]]:
    """The formulas of the totals and of each unit's NODE_KEYS (None: no formula). A total
    that missed only at a 0, where some node costs are clamped, is made of its polynomial
    and those nodes' max(0, polynomial) (``_with_clamped_parts``) where that matches."""
    coefficients, denominator, columns = fitted
    made: dict[tuple[int, bool], Formula] = {}

    def formula(q: int) -> Formula | None:
        if misses.bad[q]:
            return None
        key = (columns.of[q], bool(misses.clamp[q]))
        if key not in made:
            made[key] = _formula(sampler.symbols, coefficients[..., key[0]], denominator, key[1])
        return made[key]

    offset, n_costs = len(TOTAL_KEYS), len(misses.bad)
    totals = {key: formula(q) for q, key in enumerate(TOTAL_KEYS)}
    for t, key in enumerate(TOTAL_KEYS[: len(NODE_KEYS)]):
        units_of_key = range(offset + t, n_costs, len(NODE_KEYS))
        clamp, reasons = misses.clamp, misses.reasons
        if totals[key] is None and reasons.get(t, "").endswith("=0") and clamp[units_of_key].any():
            clamped = [q for q in units_of_key if clamp[q] and not misses.bad[q]]
            totals[key] = _with_clamped_parts(sampler, zeros, t, clamped, formula, fitted)
            if totals[key] is not None:
                del reasons[t]
    per_unit = [
        {key: formula(offset + len(NODE_KEYS) * u + q) for q, key in enumerate(NODE_KEYS)}
        for u in range(len(sampler.units.sizes))
    ]
    return totals, per_unit


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


@dataclass(frozen=True, slots=True)
class _Bound:
    """The symbols (by index) whose sum may not pass ``budget``: the model's positions."""

    limited: tuple[int, ...]
    budget: int
    limit: PositionLimit

    @staticmethod
    def of(limit: PositionLimit | None, symbols: Sequence[str]) -> _Bound | None:
        if limit is None:
            return None
        return _Bound(tuple(symbols.index(s) for s in limit.symbols), limit.budget, limit)


def _check_point(
    rng: random.Random, start: tuple[int, ...], max_degree: int, bound: _Bound | None = None
) -> tuple[int, ...]:
    """A random point past the grid (each symbol at its base + ``max_degree`` + 1 to 9 more),
    its symbols at distinct values; with ``bound``, the bound symbols sum to its budget at
    most (a model's positions), taking what is left of it in turn. ShapeError where even
    the least point past the grid passes the budget."""
    lowest = [b + max_degree + 1 for b in start]
    limited = () if bound is None else bound.limited
    spare = 0 if bound is None else bound.budget - sum(lowest[i] for i in limited)
    if bound is not None and spare < 0:
        names = " + ".join(bound.limit.symbols)
        raise ShapeError(
            f"--symbolic: the model has {bound.limit.positions} positions (its position table), "
            f"too few to check the formulas past the interpolation grid ({names} = "
            f"{sum(lowest[i] for i in limited)} at least, {bound.budget} allowed); fix one of "
            f"them with --dim SYMBOL=N"
        )
    taken = {lowest[i] for i in limited}  # the bound symbols' least values stay free
    point = []
    for i, low in enumerate(lowest):
        if i not in limited:
            value = low + rng.randint(1, 9)
            while value in taken:
                value += 1
        else:  # low itself is past the grid; more only as far as the budget allows
            extra = rng.randint(0, min(9, spare))
            value = low + extra
            while value in taken - {low} and value > low:
                value -= 1
            spare -= value - low
        taken.add(value)
        point.append(value)
    return tuple(point)


def _verify(
    sampler: _Sampler,
    point: tuple[int, ...],
    fitted: tuple[np.ndarray, int, _Columns],
    misses: _Misses,
    where: str,
    *,
    clamped: bool = False,
) -> None:
    """Mark the costs whose formula misses the analysis at ``point``; with ``clamped`` (a
    point with a 0), a node cost the analysis gives as 0 where its polynomial is negative is
    max(0, polynomial) instead."""
    coefficients, denominator, columns = fitted
    actual = sampler.need(point, whole=True)
    predicted = _evaluate_all(coefficients, denominator, point)
    for q, (c, want) in enumerate(zip(columns.of, actual, strict=True)):
        got = predicted[c]
        if clamped and misses.clamp[q]:
            got = max(0, got)
        if got == want or misses.bad[q]:
            continue
        if clamped and want == 0 and got < 0 and q >= len(TOTAL_KEYS):
            misses.clamp[q] = True
            continue
        misses.bad[q] = True
        misses.reasons[q] = "piecewise or not a polynomial" + where


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
