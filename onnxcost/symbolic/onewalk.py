"""The formulas from one symbolic walk (issue 22): ``analyze --symbolic`` without sampling.

``symbolic.node_costs`` walks the model once with shapes that are polynomials in its
symbols and calls every node's own cost formula on them, so each node's MACs, FLOPs, bytes
read and bytes written come out as polynomials, and the nodes with the same op, attributes
and symbolic inputs share one class. What this module adds is the proof and the totals:

1. Checks. The polynomials hold where every symbol is at least 2 (a formula's test of a dim
   against 1, a broadcast, is false for a symbol); ``min``/``max`` with one answer over the
   model's domain are decided first (``within``). They are checked
   - at every symbol = 1 against the analysis reported (free): every node of a class must
     cost the same there, and a formula that misses is None (a Squeeze that drops a dim of
     1), with a warning naming the node;
   - at a random point past 1 against a concrete analysis of the model reduced to one node
     per class (``reduced.reduced_model``: a class's nodes have the same inputs at every
     point, so they cost the same; 88 of the 32-layer llama's 5,778 nodes). A miss there
     means the walk and ONNX's inference disagree: the sampler decides;
   - at each symbol = 0 by a walk of the reduced model with that symbol at 0, polynomials in
     the other symbols (``_check_zero``): the formula there, or ``max(0, formula)`` where a
     count stops at 0 (``n - 1`` adds at n = 0), or the walk's own min and max where
     ``within``'s reading is not the model's at that 0 (``_Class.raw``); a symbol whose 0
     breaks the model's shapes, or where a class still costs otherwise (x[:, -s:] at s =
     0), is reported, and the formulas hold from 1.
2. Totals: the sum of the nodes' formulas, a class's times its size, with the ``max(0, ...)``
   ones as parts; params and param bytes do not depend on the symbols.

A node the walk cannot carry (``NodeCosts.reasons``: an op without a symbolic shape rule, a
contrib op, a formula that needs a concrete dim), and every node after it that has no
carried shape, is a class of its own without formulas: the others are checked as above and
returned as a ``PartialWalk``, whose lost nodes the sampler (``search.py``) fills in. A cost
that stays a floor, min or max of the symbols has that exact expression as its formula
(``Formula.expression``).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from onnxcost.errors import OnnxcostError
from onnxcost.symbolic.dims import _derived_names, _dim_params, _standalone, with_derived
from onnxcost.symbolic.domain import _sign, substituted, within
from onnxcost.symbolic.least import (
    Least,
    least_from_floors,
    model_point,
    walked_inputs,
    walked_limit,
)
from onnxcost.symbolic.limits import PositionLimit, find_limit
from onnxcost.symbolic.lost import LostRegion, lost_region
from onnxcost.symbolic.peak import KEY as PEAK
from onnxcost.symbolic.peak import peak_formula
from onnxcost.symbolic.poly import Formula
from onnxcost.symbolic.reduced import _Reduced, reduced_model
from onnxcost.symbolic.result import NODE_KEYS, TOTAL_KEYS, SymbolicCosts
from onnxcost.symbolic.search import _bad_warnings
from onnxcost.symdim import Dim, SymDim, as_dim

if TYPE_CHECKING:
    from onnxcost.analysis.records import Convention, NodeRecord
    from onnxcost.analysis.result import Analysis
    from onnxcost.prepare import PreparedModel
    from onnxcost.symbolic.node_costs import WalkMemo
    from onnxcost.symbolic.shape_core import SymbolicShapes

MAX_ZERO_WALK = 200_000
"""The most classes walked at the symbols' 0s (symbols x classes, about 45 µs each): 9 s.
Past it (a hostile model with thousands of symbols) the formulas are left to the sampler,
which refuses more than 10 symbols of degree 1 in about a second."""
_WRITTEN = NODE_KEYS.index("bytes_written")
_SUMMED = TOTAL_KEYS[: len(NODE_KEYS)]
"""The totals that are sums of the node costs of the same name (macs .. bytes_written)."""


def formula_of(dim: Dim, symbols: tuple[str, ...]) -> Formula | None:
    """``dim`` as a Formula in ``symbols``: its terms where it is a polynomial, else the
    expression itself (a floor, min or max that did not simplify); None where it holds a
    symbol that is not one of ``symbols``."""
    if isinstance(dim, int):
        return Formula(symbols, (((0,) * len(symbols), dim),) if dim else ())
    if not dim.is_polynomial:
        return Formula(symbols, (), expression=dim) if dim.symbols <= set(symbols) else None
    terms: list[tuple[tuple[int, ...], int]] = []
    for mono, c in dim.terms.items():
        exps = [0] * len(symbols)
        for atom, e in mono:
            if not isinstance(atom, str) or atom not in symbols:
                return None
            exps[symbols.index(atom)] = e
        terms.append((tuple(exps), c))
    terms.sort(key=lambda t: (sum(t[0]), tuple(-e for e in t[0])))
    return Formula(symbols, tuple(terms))


@dataclass
class _Class:
    """One class of alike nodes: its costs (a SymDim or an int per NODE_KEYS, None where it
    has none), which are max(0, ...), and why one has none."""

    dims: list[Dim | None]
    raw: list[Dim | None]
    """The walk's costs before ``within``: ONNX's own min and max, as the formula where a
    symbol's 0 needs them (x[:, -1:] has ``s - max(0, s - 1)`` rows, 1 wherever s >= 1,
    the reading of ``dims``, but none at s = 0)."""
    size: int = 0
    clamped: list[bool] = field(default_factory=lambda: [False] * len(NODE_KEYS))
    misses: dict[int, str] = field(default_factory=dict)
    """NODE_KEYS index -> why its formula failed a check."""
    unread: set[int] = field(default_factory=set)
    """The keys whose formula is ``raw``, taken at a symbol's 0 after the 0s before it were
    checked: checked at those again (``_recheck_raw``)."""

    def value(self, q: int, values: Mapping[str, int]) -> int:
        dim = self.dims[q]
        assert dim is not None
        got = dim if isinstance(dim, int) else dim.evaluate(values)
        return max(0, got) if self.clamped[q] else got

    def check(self, q: int, values: Mapping[str, int], want: int, where: str) -> None:
        """Mark key q missed where its formula is not ``want`` at ``values``."""
        if q not in self.misses and self.dims[q] is not None and self.value(q, values) != want:
            self.misses[q] = "piecewise or not a polynomial" + where


def one_walk_costs(
    source: PreparedModel,
    base: Analysis,
    symbols: tuple[str, ...],
    *,
    input_shapes: Mapping[str, Sequence[int]],
    dims: Mapping[str, int],
    convention: Convention,
    allow_reshape: bool,
    seed: int = 0,
    offsets: Mapping[str, int] | None = None,
    find_least: bool = False,
) -> SymbolicCosts | PartialWalk | Least | str | None:
    """The formulas of ``base`` (the analysis with every symbol at 1) from one symbolic walk,
    checked as the module docstring says. ``offsets``: what each symbol with a least value
    above 1 is walked plus (``symbolic.least``): the formulas are then over the walk's
    symbols, each from 1, and the concrete analyses at the model's values (the walk's plus
    the offsets); a symbol with an offset is not checked at its 0. ``find_least``: where a
    walked size with a floor is below 1 at every symbol = 1 (``least.least_from_floors``),
    the least values (the model's) at which none is, instead of the formulas. Where the walk does not carry some nodes (an op
    without a symbolic rule and what follows it): the formulas of the others, checked the
    same way (``PartialWalk``), for the sampler to complete. Where the formulas are to be
    sampled instead: why, for a warning (the walk disagreeing with a concrete analysis, a
    bug), or None where there is nothing to say (no symbols, If/Loop bodies, too few
    positions for a check point, a reduced model that cannot be built)."""
    from onnxcost.analysis.walk import costs_at
    from onnxcost.symbolic.node_costs import node_costs

    n = len(source.view.order)
    if not symbols or len(base.nodes) != n:
        return None  # If/Loop bodies add records
    offsets = offsets or {}
    fixed = {**_unset(source, input_shapes, dims), **dims, **walked_inputs(offsets)}
    walked = node_costs(
        source,
        input_shapes=input_shapes,
        fixed=fixed,
        traffic=base.traffic,
        convention=convention,
        count_params=False,  # the reported analysis has them, and they do not vary
    )
    lost = frozenset(walked.reasons)  # nodes whose formulas the sampler is to find
    if find_least and walked.shapes is not None and _unresolved(base):
        least = least_from_floors(walked.shapes.shapes, symbols, offsets)
        if least is not None:
            return least
    if len(lost) == n:
        return _not_carried(walked.reasons, base)  # nothing the walk could add
    shown = find_limit(source.proto, input_shapes, dims, symbols, source.view)
    limit = walked_limit(shown, offsets)  # over the walk's symbols
    columns = (walked.macs, walked.flops, walked.bytes_read, walked.bytes_written)
    named = set(symbols)
    classes: dict[int, _Class] = {}
    renumbered: dict[int, int] = {}
    of_node: list[int] = []
    decided: dict[Dim, Dim] = {}  # within() of each distinct dim: the classes share a few
    for k, c in enumerate(walked.classes):
        # a node not carried is a class of its own (the reduced model keeps it as it is)
        unit = renumbered.setdefault(-1 - k if k in lost else c, len(renumbered))
        of_node.append(unit)
        if unit not in classes:
            found = [None if k in lost else col[k] for col in columns]
            classes[unit] = _Class(
                [None if d is None else _decided(d, decided, symbols, limit) for d in found],
                found,
            )
            for q, d in enumerate(classes[unit].dims):
                if isinstance(d, SymDim) and not d.symbols <= named:
                    classes[unit].misses[q] = "a dim that is not one of the symbols"
        classes[unit].size += 1
    units = [classes[u] for u in range(len(classes))]
    if len(symbols) * len(units) > MAX_ZERO_WALK:
        return None  # the sampler's bound on its grid refuses such a model in one line
    lost_units = frozenset(of_node[k] for k in lost)
    totals = base.totals
    reduced = reduced_model(source, of_node, (totals.params, totals.param_bytes))
    if reduced is None:
        return None
    ones = dict.fromkeys(symbols, 1)
    at_ones = ", ".join(f"{s}={v}" for s, v in model_point(ones, offsets).items())
    at_one: dict[int, tuple[int, int, int, int]] = {}
    for k, unit in enumerate(of_node):  # the whole model at 1: every node of a class alike
        if at_one.setdefault(unit, _costs(base.nodes[k])) != _costs(base.nodes[k]):
            return (
                f"node {base.nodes[k].name!r} costs otherwise than the walk's class of alike "
                f"nodes at {at_ones} (please report it)"
            )
    for unit, costs in at_one.items():
        for q, want in enumerate(costs):
            units[unit].check(q, ones, want, f" at {at_ones}")
    check = _check_point(random.Random(seed), symbols, limit)
    if check is None:
        return None  # too few positions: the sampler says so
    try:  # the concrete analysis at a random point, where every symbol is past 1
        point = with_derived(source.proto, input_shapes, {**dims, **model_point(check, offsets)})
        checked = costs_at(
            reduced.model,
            input_shapes=input_shapes,
            dims=point,
            convention=convention,
            allow_reshape=allow_reshape,
            traffic=base.traffic,
            whole_graph=True,  # every node of the reduced model is of its own kind
        )
    except OnnxcostError:
        return None  # the sampler names the node that breaks there
    if len(checked.nodes) != len(units):
        return None
    for alike, record in zip(units, checked.nodes, strict=True):
        for q, want in enumerate(_costs(record)):
            if alike.dims[q] is not None and alike.value(q, check) != want:
                at = ", ".join(f"{s}={v}" for s, v in model_point(check, offsets).items())
                return (
                    f"the walk's {NODE_KEYS[q]} of node {record.name!r} ({record.op_type}) is "
                    f"not a concrete analysis's at {at} (please report it)"
                )
    zero_allowed: dict[str, bool] = {}
    at_zeros: dict[str, _ZeroWalk] = {}
    warnings: list[str] = []
    below = _assumed_at_zero(walked.shapes, symbols)
    for sym in symbols:
        if sym in offsets:  # from its least value, not from 0
            zero_allowed[sym] = False
            continue
        if sym in below:  # the walk's floors are not ONNX's there: not checked
            zero_allowed[sym] = False
            warnings.append(
                f"{sym}=0 leaves {below[sym]} (ONNX's inference rounds its division toward "
                f"0, not down); the formulas hold for {sym} >= 1"
            )
            continue
        before = [(dict(unit.misses), list(unit.clamped)) for unit in units]
        at_zero = _check_zero(
            sym,
            units,
            reduced,
            symbols,
            limit,
            input_shapes,
            {**fixed, sym: 0},
            base,
            convention,
            walked.memo,
            lost_units,
        )
        missed = next(
            (j for j, unit in enumerate(units) if unit.misses.keys() - before[j][0].keys()), None
        )
        if at_zero is not None and missed is not None:
            # One class costs otherwise at this 0 than at every point from 1 (x[:, -s:] is
            # all of x at s = 0, where -0 is no count from the end): the formulas are kept,
            # for sym >= 1, and its 0 left out, rather than each such class's formulas null.
            for alike, (misses, clamped) in zip(units, before, strict=True):
                alike.misses, alike.clamped = misses, clamped
            at_zero = None
            k = of_node.index(missed)
            warnings.append(
                f"{sym}=0 is left out: node {base.nodes[k].name!r} ({base.nodes[k].op_type}) "
                f"costs otherwise there than its formula says; the formulas hold for {sym} >= 1"
            )
        elif at_zero is None:
            warnings.append(
                f"{sym}=0 is not a valid point of this model (shapes break there); the "
                f"formulas hold for {sym} >= 1"
            )
        zero_allowed[sym] = at_zero is not None
        _recheck_raw(units, at_zeros.values())  # the formulas made raw at this 0, at those before
        if at_zero is not None:
            at_zeros[sym] = at_zero
    made: dict[Dim, Formula | None] = {}  # the classes share a few dims: each made once
    for alike in units:
        for d in alike.dims:
            if d is not None and d not in made:
                made[d] = formula_of(d, symbols)
    node_formulas = [_formulas(unit, made) for unit in units]
    total_formulas: dict[str, Formula | None] = {
        key: _total(units, node_formulas, q) for q, key in enumerate(_SUMMED)
    }
    total_formulas["params"] = formula_of(totals.params, symbols)
    total_formulas["param_bytes"] = formula_of(totals.param_bytes, symbols)
    if not lost and walked.types is not None and walked.weights is not None:
        peak = peak_formula(
            source,
            walked.types.nbytes,
            walked.weights.constant,
            symbols,
            limit,
            check,
            [s for s in symbols if zero_allowed[s]],
            totals.peak_activation_bytes,
            sizes_missed=any(_WRITTEN in unit.misses for unit in units),
        )
        total_formulas[PEAK] = None if isinstance(peak, str) else formula_of(peak, symbols)
        if total_formulas[PEAK] is None:
            why = peak if isinstance(peak, str) else "a dim that is not one of the symbols"
            warnings.append(f"no exact formula for peak_activation_bytes: {why}")
    reasons = {
        len(TOTAL_KEYS) + len(NODE_KEYS) * u + q: why
        for u, unit in enumerate(units)
        for q, why in unit.misses.items()
    }
    names = tuple(r.name for r in base.nodes)
    warnings += _bad_warnings(reasons, names, reduced.units)
    if shown is not None:
        warnings.append(shown.warning())
    result = SymbolicCosts(
        symbols=symbols,
        totals=total_formulas,
        nodes=tuple(node_formulas[u] for u in of_node),
        zero_allowed=zero_allowed,
        analyses=1,
        warnings=tuple(warnings),
        reduced_analyses=1,
        reduced_nodes=len(units),
        limit=shown,
        shapes=walked.shapes.shapes if walked.shapes is not None and not lost else None,
    )
    if lost:
        region = None
        if walked.shapes is not None and walked.types is not None and walked.weights is not None:
            alone = lost_region(source, lost, walked.shapes, walked.types, walked.weights.constant)
            region = None if alone is None else (alone, reduced)
        return PartialWalk(result, lost, _not_carried(walked.reasons, base), region)
    return result


@dataclass(frozen=True)
class PartialWalk:
    """The walk's formulas where it does not carry every node: ``costs`` has None for the
    nodes in ``lost`` (and for every total), and its checked formula for each other node."""

    costs: SymbolicCosts
    lost: frozenset[int]
    """Indices of the nodes not carried: an op without a symbolic rule and what follows it."""
    why: str
    """The first nodes not carried, named for a warning (``_not_carried``)."""
    region: tuple[LostRegion, _Reduced] | None = None
    """The lost nodes as a model of their own and the reduced model (a class per node
    carried, every lost node kept) that the sampler analyses in place of the whole model
    (``symbolic.lost``); None where the region cannot be built."""


def _assumed_at_zero(shapes: SymbolicShapes | None, symbols: Sequence[str]) -> dict[str, str]:
    """Symbol -> the tensor whose walked size is not ONNX's at that symbol's 0 (the others
    at least 1), for the symbols where one may not be. The walk writes a division that ONNX
    rounds toward 0 (a Conv's or pool's output size, an integer Div) as the plain floor
    where what it divides is >= 0 wherever every symbol is at least 1
    (``shape_core.trunc_div``): a 3x3 Conv, stride 2, pad 1 over h is ``(h - 1) // 2 + 1``,
    0 at h = 0, where ONNX's rounds (0 - 1) / 2 to 0 and gives 1. Each such condition
    (``SymbolicShapes.assumed``) is decided at each of its symbols' 0 as ``within`` decides;
    where it may fail, the formulas hold from 1 in that symbol. Every other floor the walk
    writes is ONNX's at every point (a Resize's ``floor(d * scale)``, a truncation written
    with ``max``)."""
    found: dict[str, str] = {}
    if shapes is None:
        return found
    for condition, name in shapes.assumed.items():
        for sym in condition.symbols:
            if sym in found or sym not in symbols:
                continue
            others = sorted(condition.symbols - {sym})
            at_zero = as_dim(substituted(condition, {sym: 0}))
            if isinstance(at_zero, int) and at_zero >= 0:
                continue
            if isinstance(at_zero, SymDim) and _sign(at_zero, others, None) == 1:
                continue
            found[sym] = f"tensor {name!r} a size whose numerator, {condition}, is below 0"
    return found


def _unresolved(base: Analysis) -> bool:
    """Whether the analysis reported has nodes without shapes (where a symbol's least value
    may be what it lacks: ``least.least_from_floors``)."""
    return any(r.status == "unknown_shape" for r in base.nodes)


def _not_carried(reasons: Mapping[int, str], base: Analysis) -> str:
    """Why the walk leaves the formulas to the sampler: the first nodes it does not carry
    (their inputs' producers, not what follows them)."""
    starts = [
        (k, why) for k, why in sorted(reasons.items()) if "has no carried shape" not in why
    ] or sorted(reasons.items())
    named = [f"{base.nodes[k].name!r} ({base.nodes[k].op_type}: {why})" for k, why in starts]
    more = f" and {len(named) - 3} more" if len(named) > 3 else ""
    return f"the symbolic walk does not carry node {', '.join(named[:3])}{more}"


def _check_point(
    rng: random.Random, symbols: tuple[str, ...], limit: PositionLimit | None
) -> dict[str, int] | None:
    """A random point where every symbol is past 1 (the walk's polynomials hold from 2) and
    has its own value (no two nodes alike only there), within the model's positions: the
    limited symbols at 2, 3, ... with what the budget leaves added to the last; None where
    the positions are too few even for that."""
    limited = () if limit is None else limit.symbols
    least = {s: 2 + i for i, s in enumerate(limited)}
    spare = 0 if limit is None else limit.budget - sum(least.values())
    if spare < 0:
        return None
    if limited:
        least[limited[-1]] += rng.randint(0, min(9, spare))
    point = dict(least)
    for s in symbols:
        if s not in point:
            value = rng.randint(2, 14)
            while value in point.values():
                value += 1
            point[s] = value
    return {s: point[s] for s in symbols}


@dataclass(frozen=True)
class _ZeroWalk:
    """The reduced model's walk at ``sym`` = 0: each class's costs there (a column per
    NODE_KEYS), polynomials in the ``others``, read within ``limit``."""

    sym: str
    others: tuple[str, ...]
    limit: PositionLimit | None
    columns: tuple[Sequence[Dim | None], ...]
    at_zero: dict[Dim, Dim] = field(default_factory=dict)
    """Each dim of the classes at ``sym`` = 0 (``_at_zero``), once: they share a few."""

    def verdict(self, dim: Dim | None, j: int, q: int) -> str | None:
        """None where ``dim`` (class j's key q) with the symbol at 0 is the walk's there,
        ``"clamped"`` where the walk's is 0 and it is <= 0 (the formula is then max(0,
        ...)), else why it misses."""
        want = self.columns[q][j]
        assert dim is not None
        got = self.at_zero.get(dim)
        if got is None:
            got = self.at_zero[dim] = _at_zero(dim, self.sym, self.others, self.limit)
        if type(want) is not int:
            want = None if want is None else within(want, self.others, self.limit)
            if want is None or formula_of(want, self.others) is None:
                return f"not carried at {self.sym}=0"
        if got == want or SymDim.of(got) == SymDim.of(want):
            return None
        if want == 0 and _sign(SymDim.of(got), self.others, self.limit) == -1:
            return "clamped"
        return f"piecewise or not a polynomial at {self.sym}=0"


def _check_zero(
    sym: str,
    units: Sequence[_Class],
    reduced: _Reduced,
    symbols: tuple[str, ...],
    limit: PositionLimit | None,
    input_shapes: Mapping[str, Sequence[int]],
    fixed: Mapping[str, Dim],
    base: Analysis,
    convention: Convention,
    memo: WalkMemo | None = None,
    lost: frozenset[int] = frozenset(),
) -> _ZeroWalk | None:
    """The walk of the reduced model at ``sym`` = 0, None where the model does not keep its
    shapes there (the walk does not carry every node), after checking each class's formulas
    there: the walk at 0, a polynomial in the other symbols, must be the formula with
    ``sym`` at 0, or 0 where that is <= 0 (the formula is then max(0, ...)); else ONNX's own
    min and max (``_Class.raw``), where ``within``'s reading, every symbol >= 1, is what
    misses; else the formula misses. ``memo``: the whole model's walk's
    (``NodeCosts.memo``): a class whose inputs do not change with ``sym`` is a lookup."""
    from onnxcost.symbolic.node_costs import node_costs

    walked = node_costs(
        reduced.model,
        input_shapes=input_shapes,
        fixed=fixed,
        traffic=base.traffic,
        convention=convention,
        count_params=False,
        memo=memo,
        stop=lost,  # a node not carried at 0 that is carried at 1: the 0 breaks the shapes
    )
    if not walked.reasons.keys() <= lost or len(walked.macs) != len(units):
        return None  # (the classes not carried at 1 are the sampler's to check at 0)
    others = tuple(s for s in symbols if s != sym)
    rest = (
        None
        if limit is None
        else replace(limit, symbols=tuple(s for s in limit.symbols if s != sym))
    )
    at_zero = _ZeroWalk(
        sym, others, rest, (walked.macs, walked.flops, walked.bytes_read, walked.bytes_written)
    )
    for j, unit in enumerate(units):
        for q in range(len(NODE_KEYS)):
            if unit.dims[q] is None or q in unit.misses:
                continue
            verdict = at_zero.verdict(unit.dims[q], j, q)
            if verdict is not None and verdict != "clamped" and unit.raw[q] != unit.dims[q]:
                raw = at_zero.verdict(unit.raw[q], j, q)
                if raw is None or raw == "clamped":
                    unit.dims[q], unit.clamped[q], verdict = unit.raw[q], False, raw
                    unit.unread.add(q)
            if verdict == "clamped":
                unit.clamped[q] = True
            elif verdict is not None:
                unit.misses[q] = verdict
    return at_zero


def _recheck_raw(units: Sequence[_Class], checked: Iterable[_ZeroWalk]) -> None:
    """The formulas that became ``raw`` at the last symbol's 0, checked at the 0s checked
    before it (where ``dims`` held)."""
    walks = tuple(checked)
    for j, unit in enumerate(units):
        for q in unit.unread:
            for at_zero in walks:
                verdict = at_zero.verdict(unit.dims[q], j, q)
                if verdict == "clamped":
                    unit.clamped[q] = True
                elif verdict is not None:
                    unit.misses[q] = verdict
        unit.unread.clear()


def _decided(
    dim: Dim, decided: dict[Dim, Dim], symbols: tuple[str, ...], limit: PositionLimit | None
) -> Dim:
    """``within(dim, symbols, limit)``, made once for each dim (``decided``)."""
    found = decided.get(dim)
    if found is None:
        found = decided[dim] = within(dim, symbols, limit)
    return found


def _at_zero(dim: Dim | None, sym: str, others: Sequence[str], limit: PositionLimit | None) -> Dim:
    """``dim`` at ``sym`` = 0, a dim in the ``others``: a polynomial's terms without ``sym``;
    in a floor, min or max, ``sym`` set to 0 and the atom made again (folded where it then
    simplifies, decided by ``within`` where it then has one answer)."""
    assert dim is not None
    if isinstance(dim, int):
        return dim
    if dim.is_polynomial:
        kept = SymDim({m: c for m, c in dim.terms.items() if all(a != sym for a, _e in m)})
        return kept.constant if kept.is_constant else kept
    return as_dim(SymDim.of(within(substituted(dim, {sym: 0}), others, limit)))


def _unset(
    source: PreparedModel, input_shapes: Mapping[str, Sequence[int]], dims: Mapping[str, int]
) -> dict[str, int]:
    """The input dims that are neither set nor symbols (``batch-size``: one dim's name, not
    a difference of two), at 1 as the concrete analysis takes them (with its warning)."""
    standalone = _standalone(source.proto)
    return {
        p: 1
        for p in _dim_params(source.proto, input_shapes)
        if p not in dims and not p.isidentifier() and _derived_names(p, standalone) is None
    }


def _costs(record: NodeRecord) -> tuple[int, int, int, int]:
    return record.macs, record.flops, record.bytes_read, record.bytes_written


def _formulas(unit: _Class, made: Mapping[Dim, Formula | None]) -> dict[str, Formula | None]:
    """The class's formulas, from ``made`` (``formula_of`` of each of its dims)."""
    out: dict[str, Formula | None] = {}
    for q, key in enumerate(NODE_KEYS):
        dim = unit.dims[q]
        f = None if dim is None or q in unit.misses else made[dim]
        if f is not None and unit.clamped[q]:
            f = replace(f, clamped=True)
        out[key] = f
    return out


def _total(
    units: Sequence[_Class], formulas: Sequence[Mapping[str, Formula | None]], q: int
) -> Formula | None:
    """Total q: the sum of every class's formula times its size, one SymDim (a polynomial,
    or an expression with floors, mins or maxes); the clamped ones are parts
    (``Formula.parts``). None where a class has no formula."""
    key = NODE_KEYS[q]
    nodes: dict[Dim, int] = {}
    """Each dim of the classes not clamped -> how many nodes have it (a few dims, many
    classes: each added once)."""
    parts: dict[Formula, int] = {}
    symbols: tuple[str, ...] = ()
    for unit, made in zip(units, formulas, strict=True):
        f = made[key]
        if f is None:
            return None
        symbols = f.symbols
        if unit.clamped[q]:
            parts[f] = parts.get(f, 0) + unit.size
        else:
            dim = unit.dims[q]
            assert dim is not None
            nodes[dim] = nodes.get(dim, 0) + unit.size
    polynomial: SymDim | int = 0
    for dim, size in nodes.items():
        polynomial = polynomial + size * dim
    total = formula_of(polynomial, symbols)
    if total is None:
        return None
    return replace(total, parts=tuple((m, f) for f, m in parts.items()))


__all__ = ["PartialWalk", "formula_of", "one_walk_costs"]
