"""Costs as exact formulas in the model's symbolic dims (``onnxcost analyze --symbolic``):
the public entry points.

How the formulas are found (degrees, interpolation, verification, the reduced model):
``search.py``. The polynomials: ``poly.py``; the model's symbols and derived dims:
``dims.py``; the result: ``result.py``; the reduced model: ``reduced.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from onnxcost.errors import OnnxcostError, ShapeError
from onnxcost.load.graph import build
from onnxcost.load.model import ModelSource
from onnxcost.prepare import PreparedModel, prepare
from onnxcost.shapes.derived import python_names
from onnxcost.shapes.overrides import stated_dims, unnamed_dims
from onnxcost.symbolic.dims import model_symbols, with_derived
from onnxcost.symbolic.domain import substituted
from onnxcost.symbolic.least import (
    Least,
    checked_least,
    least_from_floors,
    model_point,
    offsets_of,
    walked_inputs,
)
from onnxcost.symbolic.onewalk import PartialWalk, _unset, formula_of, one_walk_costs
from onnxcost.symbolic.peak import KEY as PEAK
from onnxcost.symbolic.poly import Formula, polynomial, sum_over
from onnxcost.symbolic.reduced import _light, _ReducedMissError
from onnxcost.symbolic.result import (
    NODE_KEYS,
    TOTAL_KEYS,
    FormulaTotals,
    SymbolicCosts,
)
from onnxcost.symbolic.search import _search
from onnxcost.symdim import Dim, SymDim, as_dim

if TYPE_CHECKING:
    from onnxcost.analysis.records import Convention
    from onnxcost.analysis.result import Analysis
    from onnxcost.analysis.traffic import Traffic
    from onnxcost.analysis.training import TrainingOptions


def symbolic_analysis(
    model: ModelSource | PreparedModel,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    least: Mapping[str, int] | None = None,
    convention: Convention = "onnxcost",
    max_degree: int = 3,
    allow_reshape: bool = False,
    training: TrainingOptions | None = None,
    traffic: Traffic = "runtime",
) -> Analysis:
    """``analyze(..., symbolic=True)``: the analysis with the free symbols at their least
    values, plus the formulas (``Analysis.formulas``, ``Analysis.at``, per node
    ``Analysis.symbolic.nodes``). A symbol's least value is 1, or as ``least`` gives it
    (``--dim length>=400``), or as the walk finds the model needs (``least.least_from_floors``:
    wav2vec2's length, 20): the analysis is then made again there. ShapeError where a least
    value given is below the one the walk finds."""
    from onnxcost.analysis.walk import count

    dims = dict(dims or {})
    source = _light(prepare(model))  # loaded, indexed (and a built-in model built) once
    source, names, named = _named_dims(source, input_shapes or {}, dims)
    symbols = model_symbols(source.proto, input_shapes or {}, dims)
    given = checked_least({names.get(s, s): v for s, v in (least or {}).items()}, symbols, dims)
    start, why = dict(given), dict[str, str]()
    for find in (True, False):  # again only where the walk finds least values above 1
        point = {**dims, **{s: start.get(s, 1) for s in symbols}}
        found: SymbolicCosts | Least | None
        try:
            base = count(
                source,
                input_shapes=input_shapes,
                dims=with_derived(source.proto, input_shapes or {}, point),
                convention=convention,
                allow_reshape=allow_reshape,
                training=training,
                traffic=traffic,
            )
        except ShapeError as error:  # the walk may say which least values the model needs
            found = _walked_least(source, input_shapes, dims, symbols, start, convention, traffic)
            if not find or found is None:
                raise _at_least_point(error, point, symbols, why, dims) from None
        else:
            found = _symbolic_costs(
                source,
                base,
                input_shapes=input_shapes,
                dims=dims,
                convention=convention,
                max_degree=max_degree,
                allow_reshape=allow_reshape,
                least=start,
                why=why,
                find_least=find,
            )
            if isinstance(found, SymbolicCosts):
                break
        _check_given(given, found)
        start, why = {**start, **found.values}, found.why
    assert isinstance(found, SymbolicCosts)
    costs = found
    if training is not None and symbols:
        costs = _with_training(
            source, costs, base, input_shapes, dims, convention, allow_reshape, training
        )
    return replace(base, symbolic=costs, warnings=(*named, *base.warnings, *costs.warnings))


def _named_dims(
    source: PreparedModel, input_shapes: Mapping[str, Sequence[int]], dims: Mapping[str, int]
) -> tuple[PreparedModel, dict[str, str], tuple[str, ...]]:
    """The model with each free graph-input dim named as a symbol of the formulas, a warning
    for each, and {the model's dim_param: the formulas' name}; ``source`` itself where every
    one has a Python name. A dim with neither a value nor a name (skl2onnx's batch) is named
    as ``--dim`` names it (``shapes.overrides.unnamed_dims``); a name that is no Python name
    (paddle2onnx's ``DynamicDimension.0``) is renamed one (``dims.python_names``:
    ``DynamicDimension_0``) in the declared shapes of the inputs, outputs and value_info,
    where it was taken as 1 with every cost a constant in it."""
    unnamed = unnamed_dims(source.proto.graph, input_shapes)
    every = stated_dims(source.proto.graph, input_shapes, dims)
    renamed = {
        p: named
        for p, named in python_names(source.proto.graph).items()
        if p not in every and named[1] not in input_shapes
    }
    if not unnamed and not renamed:
        return source, {}, ()
    proto = source.working_copy()
    warnings = []
    for k, axis, name in unnamed:
        vi = proto.graph.input[k]
        vi.type.tensor_type.shape.dim[axis].dim_param = name
        warnings.append(
            f"dim {axis} of input {vi.name!r} has no name in the model: the formulas call it "
            f"{name} (set it with --dim {name}=N)"
        )
    g = proto.graph
    for vi in (*g.input, *g.output, *g.value_info):
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param in renamed:
                d.dim_param = renamed[d.dim_param][0]
    for param, (name, owner) in renamed.items():
        warnings.append(
            f"dim {param!r} of input {owner!r} is no Python name: the formulas call it {name} "
            f"(set it with --dim {param}=N)"
        )
    names = {param: name for param, (name, _owner) in renamed.items()}
    return replace(source, proto=proto, view=build(proto.graph)), names, tuple(warnings)


def _walked_least(
    source: PreparedModel,
    input_shapes: Mapping[str, Sequence[int]] | None,
    dims: Mapping[str, int],
    symbols: tuple[str, ...],
    least: Mapping[str, int],
    convention: Convention,
    traffic: Traffic,
) -> Least | None:
    """The least values the walk finds the model to need (``least.least_from_floors``), for a
    model that does not analyse at those given (or at 1), if any."""
    from onnxcost.symbolic.node_costs import node_costs

    offsets = offsets_of(least)
    walked = node_costs(
        source,
        input_shapes=input_shapes,
        fixed={**_unset(source, input_shapes or {}, dims), **dims, **walked_inputs(offsets)},
        traffic=traffic,
        convention=convention,
        count_params=False,
    )
    if walked.shapes is None:
        return None
    return least_from_floors(walked.shapes.shapes, symbols, offsets)


def _at_least_point(
    error: ShapeError,
    point: Mapping[str, int],
    symbols: Sequence[str],
    why: Mapping[str, str],
    dims: Mapping[str, int],
) -> ShapeError:
    """``error`` where the model's shapes break at the point ``--symbolic`` chose (each free
    symbol at its least value), not at one the user gave: its message blamed ``--dim`` flags
    the user may never have passed (``--dim s10=1, --dim s21=4``)."""
    if not error.node or not symbols:
        return error
    chosen = ", ".join(f"{s}={point[s]}" for s in symbols)
    fixed = ", ".join(f"--dim {s}={v}" for s, v in dims.items())
    found = "".join(f"; {s}={point[s]}: {why[s]}" for s in symbols if s in why)
    return ShapeError(
        f"--symbolic: the model's shapes break at {chosen}{f' (with {fixed})' if fixed else ''}, "
        f"the least value of each free symbol (1, or as --dim SYMBOL>=N gives it{found}): "
        f"{error.node}; set the symbols where the model is valid with --dim SYMBOL=N or "
        f"--dim SYMBOL>=N",
        node=error.node,
    )


def _check_given(given: Mapping[str, int], found: Least) -> None:
    """ShapeError where the walk finds a symbol's least value above the one given."""
    for s, v in found.values.items():
        if s in given and v > given[s]:
            raise ShapeError(
                f"--dim {s}>={given[s]}: the model's shapes do not resolve there; every size "
                f"is 1 or more from {s}={v} ({found.why[s]}): pass --dim {s}>={v} or more"
            )


def _with_training(
    source: PreparedModel,
    costs: SymbolicCosts,
    base: Analysis,
    input_shapes: Mapping[str, Sequence[int]] | None,
    dims: Mapping[str, int],
    convention: Convention,
    allow_reshape: bool,
    training: TrainingOptions,
) -> SymbolicCosts:
    """``costs`` with the formulas of the training totals: from one training pass over the
    symbolic walk (``symbolic.training_walk``) where the forward formulas came from the walk
    and it checks, else sampled (``symbolic.training``) with a warning saying why."""
    from onnxcost.analysis.walk import costs_at
    from onnxcost.symbolic.training import training_formulas, training_vector
    from onnxcost.symbolic.training_walk import walk_training

    offsets = offsets_of(costs.least)
    walked = (
        walk_training(
            source,
            base,
            costs,
            input_shapes=dict(input_shapes or {}),
            dims=dims,
            convention=convention,
            allow_reshape=allow_reshape,
            training=training,
        )
        if not offsets
        else "the training pass over the walk takes every symbol from 1, not from a least value"
    )
    if isinstance(walked, tuple):
        found_walked, warnings_walked, runs_walked = walked
        return replace(
            costs,
            totals={**costs.totals, **found_walked},
            warnings=(*costs.warnings, *warnings_walked),
            analyses=costs.analyses + runs_walked,
        )

    def run(values: dict[str, int]) -> list[int] | None:  # the symbols from their least values
        point = with_derived(
            source.proto, input_shapes or {}, {**dims, **model_point(values, offsets)}
        )
        a = costs_at(
            source,
            input_shapes=input_shapes,
            dims=point,
            convention=convention,
            allow_reshape=allow_reshape,
            training=training,
        )
        return training_vector(a.totals.training)

    at_one = training_vector(base.totals.training)
    assert at_one is not None
    found, warnings, runs = training_formulas(costs.symbols, run, at_one)
    back = _back(costs.least)
    found = {k: _unshifted_formula(f, back) for k, f in found.items()}
    if walked is not None:
        warnings.append(f"training: the training formulas were sampled ({runs} analyses): {walked}")
    return replace(
        costs,
        totals={**costs.totals, **found},
        warnings=(*costs.warnings, *warnings),
        analyses=costs.analyses + runs,
    )


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
    walk: bool = True,
    least: Mapping[str, int] | None = None,
) -> SymbolicCosts:
    """Formulas in the model's free symbolic dims for the totals and every node of ``base``,
    the analysis of ``model`` with ``dims`` and every free symbol at its least value (1, or
    as ``least`` gives it: ``least.checked_least``), one of the points the formulas are
    checked at. ``reduce``: find the polynomials on the model reduced to one node per class
    (``_Reduced``) where that pays; the formulas are checked on the whole model, and where
    the reduced model misses the whole model's costs at a point both were run, the search is
    made again on the whole model alone. ``walk``: first try the one symbolic walk
    (``onewalk.py``), which needs no sampling where it carries every node."""
    found = _symbolic_costs(
        model,
        base,
        input_shapes=input_shapes,
        dims=dims,
        convention=convention,
        max_degree=max_degree,
        verify=verify,
        seed=seed,
        allow_reshape=allow_reshape,
        reduce=reduce,
        walk=walk,
        least=least or {},
    )
    assert isinstance(found, SymbolicCosts)  # (least values are found only when asked)
    return found


def _symbolic_costs(
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
    walk: bool = True,
    least: Mapping[str, int],
    why: Mapping[str, str] | None = None,
    find_least: bool = False,
) -> SymbolicCosts | Least:
    """``symbolic_costs``, over the walk's symbols (each from 1: a symbol with a least value
    L is walked and sampled as s + L - 1, ``symbolic.least``) and put back in the model's
    (``_unshifted``, with ``why``: how each least value was found). With ``find_least``: the
    least values the walk finds the model to need (``Least``), where they are above those
    given, for the caller to analyse there and ask again."""
    source = _light(prepare(model))
    offsets = offsets_of(least)
    walked: SymbolicCosts | PartialWalk | Least | str | None = None
    if walk:
        symbols = model_symbols(source.proto, input_shapes or {}, dims or {})
        walked = one_walk_costs(
            source,
            base,
            symbols,
            input_shapes=dict(input_shapes or {}),
            dims=dict(dims or {}),
            convention=convention,
            allow_reshape=allow_reshape,
            seed=seed,
            offsets=offsets,
            find_least=find_least,
        )
        if isinstance(walked, Least):
            return walked
        if isinstance(walked, SymbolicCosts):
            return _unshifted(walked, least, why or {})
    options = (
        dict(input_shapes or {}),
        dict(dims or {}),
        convention,
        max_degree,
        verify,
        seed,
        allow_reshape,
    )
    wanted = walked.lost if isinstance(walked, PartialWalk) else None
    found = (
        _lost_only(source, base, options, walked, offsets)
        if isinstance(walked, PartialWalk)
        else None
    )
    if found is None:
        try:
            found = _search(source, base, *options, reduce=reduce, wanted=wanted, offsets=offsets)
        except _ReducedMissError:
            found = _search(source, base, *options, reduce=False, wanted=wanted, offsets=offsets)
    if isinstance(walked, PartialWalk):
        found = _completed(walked, found)
    elif isinstance(walked, str):
        said = f"the formulas were sampled ({found.analyses} analyses): {walked}"
        found = replace(found, warnings=(*found.warnings, said))
    return _unshifted(_with_peak(found, base.totals.peak_activation_bytes), least, why or {})


def _lost_only(
    source: PreparedModel,
    base: Analysis,
    options: tuple[dict[str, Sequence[int]], dict[str, int], Convention, int, int, int, bool],
    walked: PartialWalk,
    offsets: Mapping[str, int],
) -> SymbolicCosts | None:
    """The lost nodes' formulas sampled on them alone (``symbolic.lost``): where every other
    node has the walk's formulas, and the sampler finds every lost node's (so that no total
    is the sampler's). None where not: the whole model is then sampled. ``offsets``: as
    ``_search`` takes them."""
    if walked.region is None:
        return None
    lost = walked.lost
    if any(
        f is None
        for k, node in enumerate(walked.costs.nodes)
        if k not in lost
        for f in node.values()
    ):
        return None
    try:
        found = _search(
            source,
            base,
            *options,
            reduce=False,
            wanted=lost,
            region=walked.region,
            offsets=offsets,
        )
    except (_ReducedMissError, OnnxcostError):
        return None  # the whole model's sampling says what breaks, if anything does
    if any(f is None for k in lost for f in found.nodes[k].values()):
        return None
    return found


def _with_peak(found: SymbolicCosts, peak: int) -> SymbolicCosts:
    """``found`` (sampled) with the peak's formula: the analysis' peak where the model has
    no symbol; else None, with a warning: the peak is a maximum over the steps, which the
    sampler's polynomials do not give (``peak.py`` finds it from the one walk)."""
    if not found.symbols:
        return replace(found, totals={**found.totals, PEAK: formula_of(peak, ())})
    why = (
        "no exact formula for peak_activation_bytes: it comes from the one symbolic walk, "
        "and these formulas were sampled"
    )
    return replace(found, totals={**found.totals, PEAK: None}, warnings=(*found.warnings, why))


def _completed(walked: PartialWalk, sampled: SymbolicCosts) -> SymbolicCosts:
    """The walk's formulas where it carried a node (and has one), the sampler's for the rest
    (the nodes not carried and what follows them); each total the sum of its nodes'
    formulas where every node has one, else the sampler's. Both sides were checked where
    they were found; a symbol's 0 is allowed where both allow it."""
    walk = walked.costs
    nodes = tuple(
        {
            key: (sampler[key] if k in walked.lost or mine[key] is None else mine[key])
            for key in NODE_KEYS
        }
        for k, (mine, sampler) in enumerate(zip(walk.nodes, sampled.nodes, strict=True))
    )
    totals = dict(sampled.totals)
    for key in NODE_KEYS:
        summed = _sum_of(walk.symbols, [f[key] for f in nodes])
        if summed is not None:
            totals[key] = summed
    said = set(sampled.warnings)
    missing = [key for key in TOTAL_KEYS if totals[key] is None]
    if missing:
        said.add(
            f"no exact formula (a node's formula is null, and the sampler found none for the "
            f"sum) for node '(totals)' ({', '.join(missing)}): null"
        )
    runs = (
        f"{sampled.analyses} analyses"
        if sampled.analyses
        else f"{sampled.reduced_analyses} analyses of those nodes alone or of the reduced model"
    )
    why = (
        f"the formulas of {len(walked.lost)} of {len(nodes)} nodes were sampled "
        f"({runs}), the others' come from the symbolic walk: {walked.why}"
    )
    return replace(
        sampled,
        totals=totals,
        nodes=nodes,
        zero_allowed={
            s: ok and walk.zero_allowed.get(s, True) for s, ok in sampled.zero_allowed.items()
        },
        analyses=walk.analyses + sampled.analyses,
        warnings=tuple(dict.fromkeys((*sampled.warnings, *walk.warnings, *said, why))),
        reduced_analyses=walk.reduced_analyses + sampled.reduced_analyses,
    )


def _back(least: Mapping[str, int]) -> dict[str, Dim]:
    """What puts a formula over the walk's symbols back in the model's: s - (L - 1) for
    each symbol s of least value L above 1 (``symbolic.least``)."""
    return {s: SymDim.of(s) - (v - 1) for s, v in least.items() if v > 1}


def _unshifted(
    costs: SymbolicCosts, least: Mapping[str, int], why: Mapping[str, str]
) -> SymbolicCosts:
    """``costs``, found over the walk's symbols (each from 1), in the model's (``_back``):
    every formula and walked shape, none of those symbols allowed at 0, and a warning per
    such symbol (``why``: how its least value was found, where the walk found it)."""
    back = _back(least)
    if not back:
        return costs
    formulas: dict[int, dict[str, Formula | None]] = {}
    for node in costs.nodes:  # a class's nodes share one dict: each is put back once
        if id(node) not in formulas:
            formulas[id(node)] = {k: _unshifted_formula(f, back) for k, f in node.items()}
    shapes = None
    if costs.shapes is not None:
        dims: dict[Dim, Dim] = {}
        shapes = {
            name: tuple(_dim(d, back, dims) for d in shape) for name, shape in costs.shapes.items()
        }
    ordered = [s for s in costs.symbols if s in back]
    warnings = [
        f"the formulas hold for {s} >= {least[s]} ("
        + (
            f"the least {s} at which every size is 1 or more: {why[s]}"
            if s in why
            else "the least value given"
        )
        + f"); the counts are at {s}={least[s]}"
        for s in ordered
    ]
    return replace(
        costs,
        totals={k: _unshifted_formula(f, back) for k, f in costs.totals.items()},
        nodes=tuple(formulas[id(node)] for node in costs.nodes),
        zero_allowed={s: ok and s not in back for s, ok in costs.zero_allowed.items()},
        warnings=(*costs.warnings, *warnings),
        shapes=shapes,
        least={s: least[s] for s in ordered},
    )


def _dim(d: Dim, back: Mapping[str, Dim], seen: dict[Dim, Dim]) -> Dim:
    if isinstance(d, int) or d.symbols.isdisjoint(back):
        return d
    found = seen.get(d)
    if found is None:
        found = seen[d] = as_dim(substituted(d, back))
    return found


def _unshifted_formula(f: Formula | None, back: Mapping[str, Dim]) -> Formula | None:
    """``f`` with each symbol in ``back`` replaced by its value there (a polynomial, so the
    result is again a Formula of the same kind: its denominator, clamp and parts kept)."""
    if f is None or not any(s in back for s in f.symbols):
        return f
    parts = tuple((m, _unshifted_part(p, back)) for m, p in f.parts)
    if f.expression is not None:
        inner: SymDim | int = f.expression
    else:
        inner = polynomial(f)
    made = formula_of(as_dim(substituted(SymDim.of(inner), back)), f.symbols)
    assert made is not None  # the same symbols
    return replace(
        made,
        denominator=f.denominator,
        clamped=f.clamped,
        parts=parts,
    )


def _unshifted_part(f: Formula, back: Mapping[str, Dim]) -> Formula:
    found = _unshifted_formula(f, back)
    assert found is not None
    return found


def _sum_of(symbols: tuple[str, ...], formulas: Sequence[Formula | None]) -> Formula | None:
    """The sum of ``formulas`` as one Formula: the plain ones (a polynomial with integer
    coefficients, or an expression) added up, the others (clamped, with a denominator or
    parts) kept as parts, alike ones counted once with their multiplicity. None where one is
    None."""
    total: SymDim | int = 0
    parts: dict[Formula, int] = {}
    for f in formulas:
        if f is None:
            return None
        if f.clamped or f.parts or f.denominator != 1:
            parts[f] = parts.get(f, 0) + 1
        elif f.expression is not None:
            total = total + f.expression
        else:
            total = total + polynomial(f)
    found = formula_of(total, symbols)
    if found is None:
        return None
    return replace(found, parts=tuple((m, f) for f, m in parts.items()))


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
