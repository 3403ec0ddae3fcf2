"""``predict --sweep``: the prediction at every point of a grid of symbol values from one
symbolic analysis.

``analyze(symbolic=True)`` gives every node's MACs, FLOPs, bytes read and bytes written as
exact formulas in the model's free symbols, and, where one symbolic walk found them, every
tensor's shape as dims in those symbols (``SymbolicCosts.shapes``). At a point, each node's
record is the reported record (every symbol at 1) with its cost fields replaced by its
formulas' values there and its input and output shapes by the walk's shapes there; then the
estimate runs on those records as ``predict`` runs it on a concrete analysis'. What the
estimate reads of a record (``estimate``): FLOPs and bytes read + written (formulas), params
(no symbol changes a weight), op type, inputs and outputs, and shapes (``op_class``: a
MatMul with 8 rows or fewer is a gemv, a Conv's channels and kernel; ``free_nodes``: a Shape
of a known shape, a 2-D MatMul, a Conv and an Add of the same shape). The batch is the first
input's first dim there. The result equals ``predict(model, device, dims=point)``.

A concrete analysis at each point instead (``PredictSweep.why`` says why) where a node the
estimate reads has no formula for FLOPs, bytes read or bytes written, where the formulas were
sampled (no walk: no shapes), or where the walk's shapes miss the reported analysis' at every
symbol = 1; and at a point alone where the formulas are not known to hold: past the model's
positions (``SymbolicCosts.limit``) or at a symbol's 0 that breaks the model's shapes.
"""

from __future__ import annotations

import itertools
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING

from onnxcost.analysis.records import NodeRecord
from onnxcost.api import analyze
from onnxcost.errors import ShapeError, UsageError
from onnxcost.load.model import ModelSource
from onnxcost.predict.device import Device, load_device
from onnxcost.predict.result import Prediction, PredictSweep, SweepPoint
from onnxcost.predict.run import predict_analysis, predict_records, static_inputs
from onnxcost.prepare import PreparedModel, prepare
from onnxcost.shapes.derived import python_names
from onnxcost.shapes.overrides import stated_dims
from onnxcost.symbolic.dims import model_symbols, with_derived
from onnxcost.symbolic.result import SymbolicCosts

if TYPE_CHECKING:
    from onnxcost.analysis.records import ShapeOut
    from onnxcost.analysis.result import Analysis
    from onnxcost.symbolic.poly import Formula
    from onnxcost.symdim import Dim

MAX_POINTS = 10_000
"""The most points a sweep predicts (the product of its symbols' value counts)."""

_NEEDED = ("flops", "bytes_read", "bytes_written")
"""The costs the estimate reads (``node_time``: FLOPs, bytes read + written)."""
_MAX_VALUE = 2**62


def parse_sweep(texts: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """``['batch=1,8,32', 'seq=128']`` -> ``{'batch': (1, 8, 32), 'seq': (128,)}``: each an
    integer from 0 to 2**62, a value repeated counted once; UsageError for anything else."""
    out: dict[str, tuple[int, ...]] = {}
    for text in texts:
        name, sep, values = text.partition("=")
        name = name.strip()
        parts = [v.strip() for v in values.split(",")]
        if not sep or not name or not all(re.fullmatch(r"[0-9]{1,19}", v) for v in parts):
            raise UsageError(
                f"--sweep {text!r} is not SYMBOL=N1,N2,... with each N an integer >= 0; "
                "e.g. --sweep batch=1,8,32"
            )
        if any(int(v) > _MAX_VALUE for v in parts):
            raise UsageError(f"--sweep {text!r}: each N must be between 0 and 2**62")
        if name in out:
            raise UsageError(f"--sweep {name}= is given twice; list its values once: {name}=1,2,4")
        out[name] = tuple(dict.fromkeys(int(v) for v in parts))
    count = math.prod(len(v) for v in out.values())
    if count > MAX_POINTS:
        raise UsageError(
            f"--sweep makes {count:,} points; at most {MAX_POINTS:,}: list fewer values"
        )
    return out


def predict_sweep(
    model: ModelSource | PreparedModel,
    device: Device | str | os.PathLike[str],
    sweep: Mapping[str, Sequence[int]],
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    provider: str | None = None,
    allow_reshape: bool = False,
) -> PredictSweep:
    """The prediction of ``model`` on ``device`` at every point of the grid ``sweep`` (symbol
    -> values; the other free symbols at ``dims``, or 1 as ``predict`` takes them), from
    one symbolic analysis (the module docstring), in the grid's order (the last symbol
    fastest)."""
    dev = load_device(device, provider)
    source = prepare(model) if not isinstance(model, PreparedModel) else model
    shapes, fixed = dict(input_shapes or {}), dict(dims or {})
    # a dim that is no Python name may be swept by either name: the formulas' is kept
    spelled = {p: n for p, (n, _owner) in python_names(source.proto.graph).items()}
    sweep = {spelled.get(s, s): _values_of(s, v) for s, v in sweep.items()}
    _check_symbols(source, sweep, shapes, fixed, spelled)
    static = static_inputs(source.proto)
    name = source.builtin or source.display
    a = analyze(source, input_shapes=shapes, dims=fixed, symbolic=True, allow_reshape=allow_reshape)
    costs = a.symbolic
    assert isinstance(costs, SymbolicCosts)
    why = _why_not(a, costs)
    swept = tuple(sweep)
    said = (
        *a.warnings,
        *(
            f"symbolic dim {s!r} is neither set nor swept; using 1 (set it with --dim {s}=N)"
            for s in costs.symbols
            if s not in sweep
        ),
    )
    points: list[SweepPoint] = []
    formulas = None if why else _Points(a, costs, dev, static, name, said)
    for values in itertools.product(*(sweep[s] for s in swept)):
        point = dict(zip(swept, values, strict=True))
        at = {**dict.fromkeys(costs.symbols, 1), **point}
        here = why or _outside(costs, at)
        if here:
            p = _concrete(source, shapes, {**fixed, **point}, allow_reshape, dev, static, name)
        else:
            assert formulas is not None
            p = formulas.at(at)
        points.append(SweepPoint(point, p, "analysis" if here else "formulas", here))
    return PredictSweep(swept, tuple(points), why)


def _values_of(symbol: str, values: Sequence[int]) -> tuple[int, ...]:
    """``values`` once each, in their order; UsageError where one is no integer from 0 to
    2**62 or there is none (the API takes any sequence)."""
    out: dict[int, None] = {}
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= _MAX_VALUE:
            raise UsageError(
                f"--sweep {symbol}: {v!r:.40} is not an integer from 0 to 2**62; e.g. "
                f"--sweep {symbol}=1,8,32"
            )
        out[v] = None
    if not out:
        raise UsageError(f"--sweep {symbol}: no values; e.g. --sweep {symbol}=1,8,32")
    return tuple(out)


def _concrete(
    source: PreparedModel,
    input_shapes: Mapping[str, Sequence[int]],
    dims: Mapping[str, int],
    allow_reshape: bool,
    device: Device,
    static: bool,
    name: str | None,
) -> Prediction:
    """``predict`` at one point, from a concrete analysis there; its error names the point."""
    try:
        concrete = analyze(
            source,
            input_shapes=input_shapes,
            dims=with_derived(source.proto, input_shapes, dims),
            allow_reshape=allow_reshape,
        )
    except ShapeError as e:
        at = ", ".join(f"{k}={v}" for k, v in dims.items())
        raise ShapeError(f"--sweep at {at}: {e}", node=e.node) from e
    return predict_analysis(concrete, device, static_shapes=static, model=name)


def _check_symbols(
    source: PreparedModel,
    sweep: Mapping[str, Sequence[int]],
    input_shapes: Mapping[str, Sequence[int]],
    dims: Mapping[str, int],
    renamed: Mapping[str, str],
) -> None:
    """ShapeError for a swept name that is no free symbol of the model's inputs (``renamed``:
    each dim that is no Python name -> the formulas' name for it)."""
    if not sweep:
        raise UsageError("--sweep needs at least one SYMBOL=N1,N2,...; e.g. --sweep batch=1,8")
    both = [s for s in sweep if s in dims or s in {renamed.get(k) for k in dims}]
    if both:
        raise UsageError(f"{both[0]} is set by --dim and swept by --sweep: keep one of the two")
    given = stated_dims(source.proto.graph, input_shapes, dims)
    free = (  # and each dim that is no Python name, by the formulas' name for it
        *model_symbols(source.proto, input_shapes, dims),
        *(n for p, n in renamed.items() if p not in given),
    )
    for s in sweep:
        if s not in free:
            listed = ", ".join(free) if free else "none (every input dim is fixed)"
            raise ShapeError(
                f"--sweep {s}=... matches no free symbolic dim of the inputs; the model's "
                f"free symbols are: {listed}"
            )


def _why_not(a: Analysis, costs: SymbolicCosts) -> str:
    """Why the points come from a concrete analysis each ('' where the formulas serve)."""
    if costs.shapes is None:
        return "the formulas were sampled, in whole or in part: no walked shapes at a point"
    counted = set(map(id, a.counted_nodes))
    for record, formulas in zip(a.nodes, costs.nodes, strict=True):
        if id(record) not in counted:
            continue
        missing = [k for k in _NEEDED if formulas.get(k) is None]
        if missing:
            return f"node {record.name!r} ({record.op_type}) has no formula for {missing[0]}"
    ones = {s: costs.least.get(s, 1) for s in costs.symbols}  # the analysis' point
    memo: dict[tuple[Dim, ...], tuple[int, ...]] = {}
    for r in a.counted_nodes:
        ins = _evaluated(
            _walked(r.inputs, r.input_shapes, costs.shapes), r.input_shapes, ones, memo
        )
        outs = _evaluated(
            _walked(r.outputs, r.output_shapes, costs.shapes), r.output_shapes, ones, memo
        )
        if (ins, outs) != (r.input_shapes, r.output_shapes):
            return (
                f"node {r.name!r} ({r.op_type}): the symbolic walk's shapes differ from the "
                f"analysis' at {', '.join(f'{s}={v}' for s, v in ones.items())}"
            )
    return ""


def _outside(costs: SymbolicCosts, at: Mapping[str, int]) -> str:
    """Why the formulas are not known to hold at ``at`` ('' where they are)."""
    for s in costs.symbols:
        if at[s] < costs.least.get(s, 0):
            return f"{s}={at[s]} is below {costs.least[s]}, the least {s} the formulas hold from"
        if at[s] == 0 and not costs.zero_allowed.get(s, False):
            return f"{s}=0 breaks the model's shapes (the formulas hold from 1)"
    limit = costs.limit
    if limit is not None and sum(at[s] for s in limit.symbols) > limit.budget:
        return (
            f"past the model's {limit.positions} positions ({' + '.join(limit.symbols)} > "
            f"{limit.budget}): the formulas hold within them"
        )
    return ""


_FIELDS = tuple(f.name for f in fields(NodeRecord))
_AT = tuple(
    _FIELDS.index(k)
    for k in ("macs", "flops", "bytes_read", "bytes_written", "input_shapes", "output_shapes")
)
"""Where a record's fields that vary with the symbols sit among its constructor's arguments."""

_Walked = tuple[tuple["Dim", ...] | None, ...]
"""Per input (or output) of a node, its shape from the walk, or None: kept as reported."""


class _Points:
    """The predictions at points from the formulas and the walk's shapes (the module
    docstring): what does not change from point to point read once."""

    def __init__(
        self,
        a: Analysis,
        costs: SymbolicCosts,
        device: Device,
        static: bool,
        name: str | None,
        warnings: Sequence[str],
    ) -> None:
        assert costs.shapes is not None
        self.a, self.costs, self.device, self.static = a, costs, device, static
        self.name, self.warnings = name, tuple(warnings)
        self.plan: list[tuple[NodeRecord, list[object] | None, int, _Walked, _Walked]] = []
        """Per counted node: its record, its constructor's arguments (None where nothing of
        it changes: the record as it is), its formulas' class, its inputs' and outputs'
        shapes from the walk."""
        self.formulas: dict[int, Mapping[str, Formula | None]] = {}
        counted = set(map(id, a.counted_nodes))
        for record, formulas in zip(a.nodes, costs.nodes, strict=True):
            if id(record) not in counted:
                continue
            ins = _walked(record.inputs, record.input_shapes, costs.shapes)
            outs = _walked(record.outputs, record.output_shapes, costs.shapes)
            fixed = all(f is None or f.degree == 0 for f in formulas.values()) and all(
                d is None or all(isinstance(x, int) for x in d) for d in (*ins, *outs)
            )
            args = None if fixed else [getattr(record, f) for f in _FIELDS]
            self.formulas[id(formulas)] = formulas
            self.plan.append((record, args, id(formulas), ins, outs))
        self.batch: Dim = 1
        """The batch: run._batch's dim (the first input whose first dim is known) as walked."""
        for t in a.inputs:
            if t.shape and isinstance(t.shape[0], int):
                walked = costs.shapes.get(t.name)
                self.batch = walked[0] if walked else t.shape[0]
                break

    def at(self, at: Mapping[str, int]) -> Prediction:
        """The prediction with every free symbol at ``at``."""
        values = {k: _values(f, at) for k, f in self.formulas.items()}
        memo: dict[tuple[Dim, ...], tuple[int, ...]] = {}
        nodes: list[NodeRecord] = []
        macs_at, flops_at, read_at, written_at, ins_at, outs_at = _AT
        for record, args, formulas, ins, outs in self.plan:
            if args is None:
                nodes.append(record)
                continue
            macs, flops, read, written = values[formulas]
            if macs is not None:
                args[macs_at] = macs
            args[flops_at], args[read_at], args[written_at] = flops, read, written
            args[ins_at] = _evaluated(ins, record.input_shapes, at, memo)
            args[outs_at] = _evaluated(outs, record.output_shapes, at, memo)
            nodes.append(NodeRecord(*args))  # type: ignore[arg-type]
        batch = self.batch if isinstance(self.batch, int) else self.batch.evaluate(at)
        a = self.a
        return predict_records(
            nodes,
            [t.name for t in a.inputs],
            self.device,
            batch=batch,
            inputs=len(a.inputs),
            outputs=len(a.outputs),
            static_shapes=self.static,
            weight_bytes=a.totals.param_bytes,
            warnings=self.warnings,
            model=self.name,
        )


def _walked(
    names: Sequence[str], reported: Sequence[ShapeOut], sym: Mapping[str, tuple[Dim, ...]]
) -> _Walked:
    """Per tensor, its shape from the walk; None for an omitted one, one the walk has no shape
    for, or one the analysis has none for (kept as reported)."""
    return tuple(
        [sym.get(n) if n and s is not None else None for n, s in zip(names, reported, strict=True)]
    )


def _evaluated(
    walked: _Walked,
    reported: Sequence[ShapeOut],
    at: Mapping[str, int],
    memo: dict[tuple[Dim, ...], tuple[int, ...]],
) -> tuple[ShapeOut, ...]:
    """The shapes at ``at`` (a walked shape evaluated once per point; None: as reported)."""
    out: list[ShapeOut] = []
    for dims, s in zip(walked, reported, strict=True):
        if dims is None:
            out.append(s)
            continue
        found = memo.get(dims)
        if found is None:
            found = memo[dims] = tuple([d if isinstance(d, int) else d.evaluate(at) for d in dims])
        out.append(found)
    return tuple(out)


def _values(
    formulas: Mapping[str, Formula | None], at: Mapping[str, int]
) -> tuple[int | None, int, int, int]:
    """MACs (None where it has no formula: the estimate does not read it, kept as reported),
    FLOPs, bytes read and written at ``at`` (these have one: ``_why_not``)."""
    f = formulas.get("macs")
    flops, read, written = (formulas[k] for k in _NEEDED)
    assert flops is not None and read is not None and written is not None
    return (
        None if f is None else f.evaluate(at),
        flops.evaluate(at),
        read.evaluate(at),
        written.evaluate(at),
    )


__all__ = ["MAX_POINTS", "parse_sweep", "predict_sweep"]
