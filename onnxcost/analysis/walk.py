"""The analysis pass: load -> graph -> shapes -> costs -> records. Walks every node in
topological order, looks its formula up in the registry, counts parameters once per weight
tensor, and computes peak activation memory by liveness."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import NamedTuple

import onnx

from onnxcost.analysis.arithmetic import DEQUANTIZE, by_dtype, label
from onnxcost.analysis.collector import collector_paused
from onnxcost.analysis.control_flow import bodies_peak, control_flow_cost
from onnxcost.analysis.diagnosis import _op_label, status_warnings, why_unknown
from onnxcost.analysis.records import (
    Convention,
    NodeRecord,
    ShapeOut,
    Status,
    Totals,
)
from onnxcost.analysis.result import NO_PEAK, SCHEMA, Analysis
from onnxcost.analysis.scopes import ModuleScopes, from_dynamo
from onnxcost.analysis.summaries import by_op_type, io_records, model_info
from onnxcost.analysis.traffic import (
    NOTHING,
    NodeTraffic,
    Traffic,
    check_traffic,
    kv_cache_names,
    node_traffic,
    sum_traffic,
)
from onnxcost.analysis.training import TrainingOptions, TrainingResult, train
from onnxcost.analysis.weights import Weights, dequantising_scales, read_stored
from onnxcost.costs import REGISTRY
from onnxcost.costs._context import InvalidAttributeError, OpContext
from onnxcost.costs._registry import Cost, OpSpec, Registry
from onnxcost.errors import UsageError
from onnxcost.load.graph import GraphView, check_domains, check_nesting
from onnxcost.load.model import ModelSource
from onnxcost.load.tensors import (
    SUBGRAPH_OPS,
    TensorInfo,
    UnknownShapeError,
    known_bytes,
    normalize_domain,
)
from onnxcost.prepare import PreparedModel, prepare
from onnxcost.shapes.bodies import BodyKey
from onnxcost.shapes.infer import ShapeResult, infer

_NO_COST = Cost()
CONVENTIONS: tuple[Convention, ...] = ("onnxcost", "torch", "fvcore")


@dataclass
class _Walk:
    """Mutable state of one analysis: the shapes, the weights seen, the records so far."""

    shapes: ShapeResult
    opsets: Mapping[str, int]
    convention: Convention
    weights: Weights
    """Which tensors are weights, and the stored weights counted so far."""
    graph_outputs: frozenset[str] = frozenset()
    """The main graph's outputs: a weight there counts where it is computed."""
    registry: Registry = REGISTRY
    records: list[NodeRecord | None] = field(default_factory=list)
    counted: list[bool] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    """Per record, the element types its arithmetic runs in (``arithmetic.label``)."""
    dequantized_from: dict[str, str] = field(default_factory=dict)
    """DequantizeLinear output -> its input, for the nodes walked so far."""
    warnings: list[str] = field(default_factory=list)
    unsupported: Counter[str] = field(default_factory=Counter)
    unknown: int = 0
    errors: list[str] = field(default_factory=list)
    """'node (op): exception' of each node whose formula raised (status error)."""
    specs: dict[tuple[str, str], tuple[str, int, OpSpec | None]] = field(default_factory=dict)
    """(node domain, op type) -> (normalized domain, opset, spec): one registry lookup each."""
    costed: dict[int, _Costed] = field(default_factory=dict)
    """Node kind (``ShapeResult.kinds``) -> what every node of that kind costs."""
    kind_labels: dict[int, str] = field(default_factory=dict)
    """Node kind -> its ``labels`` entry, while no DequantizeLinear has been seen (after one,
    two nodes of a kind may differ in whether an operand is dequantized)."""
    lean: bool = False
    """Costs only (``costs_at``): no ``labels``, which only the summaries read."""
    traffic: Traffic = "runtime"
    kv: set[str] = field(default_factory=set)
    """The KV-cache tensors so far (``traffic.node_traffic``)."""
    body_traffic: dict[BodyKey, NodeTraffic] = field(default_factory=dict)
    """Each body walked: the bytes its nodes move (a control-flow node's own, as its cost)."""
    taken: dict[str, tuple[BodyKey, ...]] = field(default_factory=dict)
    """Control-flow node's name -> the bodies its cost is (``control_flow_cost``)."""
    body_constant: dict[BodyKey, set[str]] = field(default_factory=dict)
    """Each body's own constant-derived tensors (weights: no activations), which ``weights``
    forgets after it."""

    def flops(self, cost: Cost) -> int:
        if self.convention == "torch":
            return 2 * cost.macs
        if self.convention == "fvcore":
            return cost.macs
        return cost.flops

    def body(
        self, graph: onnx.GraphProto, key: BodyKey, scope: str, multiplier: int, counted: bool
    ) -> Cost:
        """Walk a body graph (``control_flow`` calls back here): ``_walk_subgraph``."""
        return _walk_subgraph(self, graph, key, scope, multiplier, counted)


@dataclass(slots=True)
class _Node:
    """One node and the fields the walk reads, each read from the protobuf once (the main
    graph's come straight from the graph view's columns). Read-only by contract, not frozen
    (like ``NodeRecord``): the walk makes one per node, and a frozen dataclass's constructor
    is the slower (frozen, one analysis of the llama built-in runs ~9% more instructions)."""

    proto: onnx.NodeProto
    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def _opset_of(opsets: Mapping[str, int], domain: str) -> int:
    return opsets.get(normalize_domain(domain), 1)


def _spec_of(w: _Walk, node_domain: str, op_type: str) -> tuple[str, int, OpSpec | None]:
    """(domain, opset, formula spec) of an op, looked up once per op type."""
    key = (node_domain, op_type)
    found = w.specs.get(key)
    if found is None:
        domain = normalize_domain(node_domain)
        opset = _opset_of(w.opsets, domain)
        found = w.specs[key] = (domain, opset, w.registry.lookup(domain, op_type, opset))
    return found


class _Costed(NamedTuple):
    """What a node's op, attributes and tensor types determine: the same for every node of
    one kind (``ShapeResult.kinds``), so computed once per kind."""

    status: Status
    cost: Cost
    """The onnxcost count, which the totals add up."""
    flops: int
    """FLOPs in the analysis convention, as the record shows them."""
    bytes_read: int
    bytes_written: int
    input_shapes: tuple[ShapeOut, ...]
    output_shapes: tuple[ShapeOut, ...]
    note: str
    reads: tuple[int, ...]
    """Bytes read of each input: under the op's traffic rule with ``traffic="runtime"``,
    else whole (0 where omitted or unknown)."""
    writes: tuple[int, ...]
    """Bytes written of each output (0 where omitted or unknown)."""
    plain: NodeTraffic
    """The traffic of a node of this kind that reads no weight and touches no KV cache."""
    domain: str
    """The op's domain, normalized ('' for the default)."""
    opset: int
    spec: OpSpec | None
    """The op's formulas (None: an op with none)."""
    flagged: bool
    """Whether its status is one the warnings count (unsupported, unknown_shape, error)."""


def _types_of(
    types: Mapping[str, TensorInfo], names: Sequence[str]
) -> tuple[TensorInfo | None, ...]:
    return tuple([types.get(n) if n else None for n in names])


def _cost_node(
    w: _Walk,
    node: _Node,
    scope: str,
    multiplier: int,
    counted: bool,
    kind: int = -1,
) -> tuple[NodeRecord, Cost]:
    op_type, in_names, out_names = node.op_type, node.inputs, node.outputs
    # The per-kind memo: a decoder repeats a few node kinds (same op, attributes and tensor
    # types) thousands of times, so the formula and byte sizes are computed once per kind
    # (without it, one analysis of the 8B-shaped llama built-in runs ~26% more instructions).
    costed = w.costed.get(kind) if kind >= 0 else None
    if costed is not None:
        domain, opset, spec = costed.domain, costed.opset, costed.spec
    else:
        domain, opset, spec = _spec_of(w, node.domain, op_type)
    weights = w.weights
    params = 0
    folded = False
    if in_names or op_type == "Constant":
        types = w.shapes.types
        folded = weights.see(op_type, in_names, out_names, spec, types, domain == "")
        if not folded:
            context = None
            if spec is not None and (spec.param_elements or spec.attribute_params):
                # a packed weight, or params held in attributes: counted by its op
                context = partial(
                    OpContext,
                    node.proto,
                    opset,
                    _types_of(types, in_names),
                    _types_of(types, out_names),
                )
            params = weights.count(
                in_names, spec, types, context, outputs=out_names, reader=node.name
            )
        elif not w.graph_outputs.isdisjoint(out_names):  # a weight the model outputs
            outs = [o if o in w.graph_outputs else "" for o in out_names]
            params = weights.count(outs, None, types, None, generated=False)
    if costed is None:  # weights first: a control-flow node's bodies count theirs after
        costed = _costs(w, node, domain, opset, spec, scope, multiplier, counted)
        if kind >= 0:
            w.costed[kind] = costed
    status, cost, note = costed.status, costed.cost, costed.note
    if costed.flagged:
        note = _flag(w, node, costed)
    if folded and w.traffic == "runtime":
        moved = NOTHING  # computed from constants: folded at load time, nothing moves
    elif folded or w.kv or not weights.constant.isdisjoint(in_names):
        moved = node_traffic(
            op_type,
            domain == "",
            in_names,
            costed.reads,
            out_names,
            costed.writes,
            folded,
            w.traffic == "runtime",
            weights.constant,
            w.kv,
        )
    else:  # the usual node: activations in, activations out
        moved = costed.plain
    if (
        not (spec is None or spec.moves_data or scope)
        and w.traffic == "runtime"
        and w.graph_outputs.isdisjoint(out_names)  # onnxruntime keeps one that writes one
    ):
        moved = NOTHING  # an Identity of the main graph: taken out at load
    record = NodeRecord(
        node.name,
        op_type,
        domain,
        status,
        cost.macs,
        costed.flops,
        params,
        moved[0],
        moved[1],
        costed.input_shapes,
        costed.output_shapes,
        in_names,
        out_names,
        scope,
        note,
        None,  # backward_macs and backward_flops: set by the training pass, if any
        None,
        moved[2],
        moved[3],
        moved[4],
    )
    return record, cost


def _flag(w: _Walk, node: _Node, costed: _Costed) -> str:
    """Count a node whose status is unsupported, unknown_shape or error where the walk's
    warnings will name it; returns its record's note."""
    domain, op_type, note = costed.domain, node.op_type, costed.note
    if costed.status == "unsupported":
        w.unsupported[_op_label(domain, op_type)] += 1
    elif costed.status == "unknown_shape":
        w.unknown += 1
        note = why_unknown(w.shapes.types, domain, op_type, node.inputs, node.outputs, note)
    elif costed.status == "error":
        w.errors.append(f"{node.name} ({_op_label(domain, op_type)}): {note}")
    return note


def _costs(
    w: _Walk,
    node: _Node,
    domain: str,
    opset: int,
    spec: OpSpec | None,
    scope: str,
    multiplier: int,
    counted: bool,
) -> _Costed:
    """Run the node's formula (or walk its bodies) and size the tensors it reads and writes."""
    proto, op_type, in_names, out_names = node.proto, node.op_type, node.inputs, node.outputs
    types = w.shapes.types
    inputs = _types_of(types, in_names)
    outputs = _types_of(types, out_names)
    note = ""
    cost = _NO_COST
    status: Status
    control_flow = op_type in SUBGRAPH_OPS and domain == ""
    if control_flow:
        cost, status, note, w.taken[node.name] = control_flow_cost(w, proto, scope, counted)
    elif spec is None:
        status = "unsupported"
    elif spec.zero:
        status = "zero"  # no arithmetic: nothing to ask the formula
    else:
        try:
            cost = spec.formula(OpContext(proto, opset, inputs, outputs))
            status = "zero" if cost.macs == 0 and cost.flops == 0 else "ok"
        except UnknownShapeError as e:
            status = "unknown_shape"
            note = str(e)
        except InvalidAttributeError as e:  # a malformed model (group 0, num_heads=inf)
            status = "error"
            note = f"not costed: {e}"
        except Exception as e:  # a formula that raises anything else is an onnxcost bug
            status = "error"
            note = f"cost formula raised {type(e).__name__}: {e}"
    if spec is not None and not spec.reads_data:
        bytes_read, inputs_known = 0, True  # Shape, Size: the input's shape only
        reads: tuple[int, ...] = (0,) * len(inputs)
    else:
        bytes_read, inputs_known = known_bytes(inputs)
        reads = _reads(w, spec, proto, opset, inputs, outputs)
    bytes_written, outputs_known = known_bytes(outputs)
    writes = _whole(outputs)
    # A named input that nothing typed is unknown, not an omitted optional one. (An untyped
    # output is allowed: contrib formulas size their outputs from their inputs.)
    if inputs_known and spec is not None and spec.reads_data:
        inputs_known = all(t is not None for n, t in zip(in_names, inputs, strict=True) if n)
    if not (inputs_known and outputs_known) and not control_flow and status in ("ok", "zero"):
        status = "unknown_shape"  # its bytes would be incomplete (control flow keeps its body's)
    if status in ("unknown_shape", "error"):
        cost = _NO_COST
    if multiplier != 1:
        cost = cost * multiplier
        bytes_read, bytes_written = bytes_read * multiplier, bytes_written * multiplier
        reads = tuple([b * multiplier for b in reads])
        writes = tuple([b * multiplier for b in writes])
        note = (note + "; " if note else "") + f"x{multiplier} iterations"
    return _Costed(
        status,
        cost,
        w.flops(cost),
        bytes_read,
        bytes_written,
        tuple([None if t is None else t.shape for t in inputs]),
        tuple([None if t is None else t.shape for t in outputs]),
        note,
        reads,
        writes,
        (sum(reads), sum(writes), 0, 0, 0),
        domain,
        opset,
        spec,
        status not in ("ok", "zero"),
    )


def _whole(tensors: Sequence[TensorInfo | None]) -> tuple[int, ...]:
    """Bytes of each tensor, 0 where omitted or of unknown size."""
    return tuple([0 if t is None or t.known_nbytes < 0 else t.known_nbytes for t in tensors])


def _reads(
    w: _Walk,
    spec: OpSpec | None,
    proto: onnx.NodeProto,
    opset: int,
    inputs: tuple[TensorInfo | None, ...],
    outputs: tuple[TensorInfo | None, ...],
) -> tuple[int, ...]:
    """Bytes read of each input: the op's traffic rule with ``traffic="runtime"``, else (or
    where the rule cannot size them: a shape unknown) each input whole."""
    whole = _whole(inputs)
    if spec is None or spec.reads is None or w.traffic != "runtime":
        return whole
    try:
        found = spec.reads(OpContext(proto, opset, inputs, outputs))
    except (UnknownShapeError, InvalidAttributeError, IndexError, ValueError, ZeroDivisionError):
        return whole
    # Not clamped at the whole input: a Gather with repeated indices reads a row once per
    # index, and a clamp would make the bytes piecewise, with no formula (--symbolic).
    return whole if len(found) != len(whole) else tuple(found)


def _label(w: _Walk, node: _Node, kind: int) -> str:
    """``arithmetic.label`` of ``node``: the same for every node of a kind (same op and
    tensor types) as long as no operand can come from a DequantizeLinear."""
    shared = kind >= 0 and not w.dequantized_from
    # Memoised per kind: without it, one analysis of the llama built-in runs ~13% more
    # instructions.
    if shared and kind in w.kind_labels:
        return w.kind_labels[kind]
    spec = _spec_of(w, node.domain, node.op_type)[2]
    found = label(node.proto, node.inputs, node.outputs, spec, w.shapes.types, w.dequantized_from)
    if shared:
        w.kind_labels[kind] = found
    return found


def _record(
    w: _Walk, node: _Node, scope: str, multiplier: int, counted: bool, kind: int = -1
) -> tuple[NodeRecord, Cost]:
    """Cost ``node`` and append its record, ahead of the records of any body it walks."""
    if not w.lean:
        w.labels.append(_label(w, node, kind))
        if node.op_type in DEQUANTIZE and node.inputs and node.outputs and node.inputs[0]:
            w.dequantized_from[node.outputs[0]] = node.inputs[0]
    if node.op_type not in SUBGRAPH_OPS:
        rec, cost = _cost_node(w, node, scope, multiplier, counted, kind)
        w.records.append(rec)
        w.counted.append(counted)
        return rec, cost
    slot = len(w.records)  # its bodies' records follow its own
    w.records.append(None)
    w.counted.append(False)
    rec, cost = _cost_node(w, node, scope, multiplier, counted, kind)
    bodies = w.taken.get(node.name, ())
    if bodies and rec.domain == "":  # it moves what its counted bodies' nodes move
        moved = sum_traffic(w.body_traffic.get(key, NOTHING) for key in bodies)
        # a loop in a loop: its body's records count its own iterations, not the outer's
        rec.bytes_read, rec.bytes_written = moved[0] * multiplier, moved[1] * multiplier
        rec.bytes_read_weights = moved[2] * multiplier
        rec.bytes_read_kv_cache = moved[3] * multiplier
        rec.bytes_written_kv_cache = moved[4] * multiplier
    w.records[slot] = rec
    # A control-flow node's cost is its body's, whose nodes are counted themselves.
    w.counted[slot] = counted and rec.domain != ""
    return rec, cost


def _walk_subgraph(
    w: _Walk,
    graph: onnx.GraphProto,
    key: BodyKey,
    scope: str,
    multiplier: int,
    counted: bool,
) -> Cost:
    """Cost of a body graph; its nodes are recorded, counted in the totals with ``counted``.
    Its tensors are read in the body's own shapes (``ShapeResult.bodies``), where known."""
    # The body's own tensors are its own: a sibling branch may name other tensors alike (the
    # branch with the cache of optimum's merged T5 decoder writes its encoder keys with a
    # Constant, the other computes them), so what the walk learns of them (constant, KV
    # cache) is forgotten after it.
    local = {t.name for t in graph.initializer}
    local.update(o for node in graph.node for o in node.output if o)
    weights = w.weights
    local_constant = local - weights.constant
    local_kv = local - w.kv
    weights.add_initializers(graph.initializer)
    outer = w.shapes
    inner = outer.bodies.get(key)
    if inner is not None:
        w.shapes = replace(outer, types=inner.types, values=inner.values)
    total = Cost()
    moved: list[NodeTraffic] = []
    try:
        for node in graph.node:
            row = _Node(
                node, node.name, node.op_type, node.domain, tuple(node.input), tuple(node.output)
            )
            rec, cost = _record(w, row, scope, multiplier, counted)
            total = total + cost
            moved.append(
                (
                    rec.bytes_read,
                    rec.bytes_written,
                    rec.bytes_read_weights,
                    rec.bytes_read_kv_cache,
                    rec.bytes_written_kv_cache,
                )
            )
    finally:
        w.shapes = outer
        local_constant &= weights.constant
        w.body_constant[key] = local_constant
        weights.forget(local_constant)
        w.kv -= local_kv
    w.body_traffic[key] = sum_traffic(moved)
    return total


def count(
    model: ModelSource | PreparedModel,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    convention: Convention = "onnxcost",
    registry: Registry = REGISTRY,
    allow_reshape: bool = False,
    training: TrainingOptions | None = None,
    traffic: Traffic = "runtime",
) -> Analysis:
    """The analysis of ``model`` at one point: what ``onnxcost.analyze`` gives without its
    formulas (``symbolic``) and without onnxruntime's order (``ort_peak``), which the layers
    above this one add (``onnxcost.api``). The arguments are ``analyze``'s; ``training``
    (``analysis.training.options``) adds the backward and the step's memory."""
    check_convention(convention)
    check_traffic(traffic)
    return _analyze(
        model,
        input_shapes,
        dims,
        convention,
        registry,
        allow_reshape,
        training=training,
        traffic=traffic,
    )


def check_convention(convention: str) -> None:
    """Raise UsageError unless ``convention`` is one of ``CONVENTIONS``."""
    if convention not in CONVENTIONS:
        raise UsageError(f"convention must be one of {', '.join(CONVENTIONS)}, not {convention!r}")


def _analyze(
    model: ModelSource | PreparedModel,
    input_shapes: Mapping[str, Sequence[int]] | None,
    dims: Mapping[str, int] | None,
    convention: Convention,
    registry: Registry,
    allow_reshape: bool = False,
    lean: bool = False,
    training: TrainingOptions | None = None,
    traffic: Traffic = "runtime",
    whole_graph: bool = False,
) -> Analysis:
    """``analyze``; with ``lean`` (``costs_at``), only the totals and the node records: no
    model checks, warnings, peak memory, inputs, outputs or summaries. Run with the cyclic
    collector paused (``analysis.collector``)."""
    with collector_paused():
        return _analysis(
            model,
            input_shapes,
            dims,
            convention,
            registry,
            allow_reshape,
            lean,
            training,
            traffic,
            whole_graph,
        )


def _analysis(
    model: ModelSource | PreparedModel,
    input_shapes: Mapping[str, Sequence[int]] | None,
    dims: Mapping[str, int] | None,
    convention: Convention,
    registry: Registry,
    allow_reshape: bool,
    lean: bool,
    training: TrainingOptions | None,
    traffic: Traffic,
    whole_graph: bool = False,
) -> Analysis:
    """``_analyze``'s work."""
    given = model if isinstance(model, PreparedModel) else None
    prepared = prepare(model)
    # Shape inference writes into the model it is given: a prepared model the caller holds
    # is analysed through a copy; one prepared here is used up.
    proto = prepared.working_copy() if given is not None else prepared.proto
    view = prepared.view
    if not lean:
        if view.outer_reads:  # only a node that holds subgraphs can nest them too deep
            check_nesting(proto.graph)
        check_domains(proto, view)
    checked = None if lean else prepared.checker_warning  # before inference writes into proto
    stored = read_stored(proto, view, prepared.path)  # before inference detaches initializers
    shapes = infer(
        proto, input_shapes, dims, None if whole_graph else view, allow_reshape=allow_reshape
    )
    view = replace(view, types=shapes.types)
    opsets = {normalize_domain(o.domain): o.version for o in proto.opset_import}
    weights = Weights(
        scales=dequantising_scales(view.op_types, view.domains, view.inputs, view.outputs)
    )
    weights.add_initializers(proto.graph.initializer)
    stored.put(weights)
    walk = _Walk(
        shapes,
        opsets,
        convention,
        weights,
        frozenset(vi.name for vi in proto.graph.output),
        registry,
        warnings=[
            *(() if lean else prepared.notes),
            *shapes.warnings,
            *([checked] if checked else []),
        ],
        lean=lean,
        traffic=traffic,
        kv=kv_cache_names(
            [vi.name for vi in proto.graph.input], [vi.name for vi in proto.graph.output]
        ),
    )
    total_macs = total_flops = total_read = total_written = 0
    read_weights = read_kv = written_kv = 0
    kinds = shapes.kinds or (-1,) * len(view.order)
    rows = map(
        _Node, view.order, view.names, view.op_types, view.domains, view.inputs, view.outputs
    )
    main: list[NodeRecord] = []
    scoped = None if lean or not from_dynamo(view) else ModuleScopes()
    for row, kind in zip(rows, kinds, strict=True):
        rec, cost = _record(walk, row, "", 1, True, kind)
        if scoped is not None:  # (set before anything hashes the record)
            rec.scope = scoped(row.proto, row.op_type, rec)
        if training is not None:
            main.append(rec)
        total_macs += cost.macs
        total_flops += cost.flops
        total_read += rec.bytes_read
        total_written += rec.bytes_written
        read_weights += rec.bytes_read_weights
        read_kv += rec.bytes_read_kv_cache
        written_kv += rec.bytes_written_kv_cache
    if scoped is not None:
        scoped.place(walk.records)
    if walk.unsupported and not lean:
        listed = ", ".join(f"{op} ({n})" for op, n in sorted(walk.unsupported.items()))
        walk.warnings.append(
            f"{sum(walk.unsupported.values())} nodes have no cost formula and count as 0: {listed}; "
            f"see `onnxcost ops`"
        )
    if not lean:
        unknown, flagged = walk.unknown, walk.records
        if walk.taken:  # control flow: the nodes the totals count (not an If's other branch)
            flagged = [r for r, c in zip(walk.records, walk.counted, strict=True) if c]
            unknown = sum(1 for r in flagged if r is not None and r.status == "unknown_shape")
        walk.warnings += status_warnings(unknown, walk.errors, flagged, walk.shapes.types)
        if weights.merged:
            walk.warnings.append(weights.merged.warning(weights.recovered))
    params_by_dtype = weights.params_by_dtype()
    records = tuple(r for r in walk.records if r is not None)
    counted = tuple(walk.counted)
    totals = Cost(total_macs, total_flops)
    peak = NO_PEAK
    if not lean:
        peak = bodies_peak(
            view,
            [vi.name for vi in proto.graph.input],
            [vi.name for vi in proto.graph.output],
            walk.shapes,
            weights.constant,
            walk.taken,
            walk.body_constant,
        )
    trained = None
    if training is not None:
        trained = _train(walk, view, proto, shapes.kinds, main, records, totals, training)
        if not lean:
            walk.warnings.extend(trained.warnings)
    result_totals = Totals(
        macs=totals.macs,
        flops=walk.flops(totals),
        params=weights.totals["param"],
        param_bytes=weights.param_bytes(),
        stat_params=weights.totals["stat"],
        bytes_read=total_read,
        bytes_written=total_written,
        peak_activation_bytes=peak.bytes,
        quant_params=weights.totals["quant"],
        training=None if trained is None else trained.totals,
        bytes_read_weights=read_weights,
        bytes_read_activations=total_read - read_weights - read_kv,
        bytes_read_kv_cache=read_kv,
        bytes_written_activations=total_written - written_kv,
        bytes_written_kv_cache=written_kv,
    )
    info = model_info(
        str(prepared.path) if prepared.path else None, proto, prepared.model_bytes, params_by_dtype
    )
    if lean:
        return Analysis(
            info,
            inputs=(),
            outputs=(),
            totals=result_totals,
            nodes=records,
            by_op_type=(),
            unsupported=(),
            warnings=(),
            convention=convention,
            _counted=counted,
            _kinds=shapes.kinds,
            traffic=traffic,
        )
    return Analysis(
        model=info,
        inputs=io_records(proto.graph.input, {t.name for t in proto.graph.initializer}, shapes),
        outputs=io_records(proto.graph.output, set(), shapes),
        totals=result_totals,
        nodes=records,
        by_op_type=by_op_type(records, counted),
        by_dtype=by_dtype(records, counted, walk.labels),
        peak_activation=peak,
        unsupported=tuple(sorted(walk.unsupported)),
        warnings=tuple(dict.fromkeys(walk.warnings)),
        convention=convention,
        _counted=counted,
        _kinds=shapes.kinds,
        prepared=given,
        traffic=traffic,
    )


def _train(
    w: _Walk,
    view: GraphView,
    proto: onnx.ModelProto,
    kinds: Sequence[int],
    main: Sequence[NodeRecord],
    records: Sequence[NodeRecord],
    totals: Cost,
    opts: TrainingOptions,
) -> TrainingResult:
    """The training pass over the main graph's nodes (``analysis.training``); a body's
    nodes (If, Loop, Scan) get no backward of their own."""

    def spec_of(k: int) -> tuple[int, OpSpec | None]:
        _domain, opset, spec = _spec_of(w, view.domains[k], view.op_types[k])
        return opset, spec

    result = train(
        nodes=view.order,
        op_types=view.op_types,
        inputs=view.inputs,
        outputs=view.outputs,
        kinds=kinds or (-1,) * len(view.order),
        records=main,
        spec_of=spec_of,
        types=w.shapes.types,
        weights=w.weights,
        graph_inputs=[vi.name for vi in proto.graph.input],
        graph_outputs=[vi.name for vi in proto.graph.output],
        last_use=view.last_use,
        flops=w.flops,
        forward_flops=w.flops(totals),
        opts=opts,
    )
    for rec in records:
        if rec.backward_macs is None:
            rec.backward_macs = rec.backward_flops = 0
    return result


def costs_at(
    model: PreparedModel,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None,
    dims: Mapping[str, int],
    convention: Convention,
    allow_reshape: bool,
    training: TrainingOptions | None = None,
    traffic: Traffic = "runtime",
    whole_graph: bool = False,
) -> Analysis:
    """The analysis of ``model`` at ``dims`` reduced to what the formulas sample
    (formulas.py): the totals, every node's record, walked as ``analyze`` walks them, and
    the main graph's node kinds (``Analysis._kinds``).
    ``inputs``, ``outputs``, the summaries and the warnings are empty, the peak activation
    is 0, and the model checks are not made: ``analyze`` of the same model has made them.
    ``whole_graph``: shapes from ONNX's inference of the whole graph at once
    (``shapes.infer``'s other route, the same shapes; no node kinds), faster on a model
    whose nodes are all unlike (the symbolic walk's reduced model)."""
    return _analyze(
        model,
        input_shapes,
        dims,
        convention,
        REGISTRY,
        allow_reshape,
        lean=True,
        training=training,
        traffic=traffic,
        whole_graph=whole_graph,
    )


__all__ = ["CONVENTIONS", "SCHEMA", "Analysis", "count"]
