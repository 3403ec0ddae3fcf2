"""Shapes: user overrides, ONNX shape inference, and concrete evaluation (numpy) of
shape-computing sub-graphs (Shape, Gather, Concat, Slice, Range, Where, ...).

The per-op shape logic is always ONNX's own; we feed it the values it cannot compute
itself (a folded ``Where``, ``Range`` or ``Equal`` on shapes). Two routes, same shapes:

- a graph without subgraphs is walked once in topological order: each node is folded and
  inferred by ONNX's per-node inference, once per distinct (op, attributes, input types,
  input values), so the repeated layers of a model cost a lookup each (``_per_node``);
- a model with If/Loop/Scan bodies goes through ONNX's whole-graph inference with data
  propagation (``whole``), then the same per-node pass over the main graph wherever a shape
  is still unknown, and over each body's nodes in the body's own scope (``bodies``), the
  types and values around it visible there.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxcost.errors import ShapeError
from onnxcost.load.graph import DEFAULT_DOMAINS, MAX_NESTING, GraphView
from onnxcost.load.kv import cache_branch_symbol
from onnxcost.load.tensors import SUBGRAPH_OPS, Shape, TensorInfo, is_tensor_type
from onnxcost.shapes import sequences
from onnxcost.shapes.bodies import (
    BodyKey,
    Scope,
    body_graphs,
    cache_branch_value,
    flat_types,
    type_body_inputs,
    type_if_outputs,
)
from onnxcost.shapes.checks import (
    _SHAPE_ERROR,
    _STATIC_CHECKED,
    _blame,
    _NodeFailure,
    _op_label,
    _static_failures,
)
from onnxcost.shapes.folding import (
    KnownValues,
    ScopedValues,
    _attribute_key,
    _fold_node,
    _fold_values,
    _known_values,
    _value_sources,
    typed_outputs,
)
from onnxcost.shapes.loops import infer_loop, trip_count
from onnxcost.shapes.overrides import (
    _apply_overrides,
    _declarations,
    _declared_in,
    _use_declared,
    shape_of,
)
from onnxcost.shapes.rules import has_rule, rule_outputs
from onnxcost.shapes.whole import (
    _clear_inferred,
    _collect_types,
    _constant_info,
    _detach_large_initializers,
    _infer,
    _unknown_outputs,
)
from onnxcost.units import shape_text


@dataclass
class ShapeResult:
    model: onnx.ModelProto
    """The model inferred: a copy with value_info (whole-graph route), or the model itself
    (per-node route). Its nodes are the input model's, in the same order."""
    types: MutableMapping[str, TensorInfo]
    """Every tensor of the main graph: name -> element type and shape; then each body's
    (``bodies``), where no graph around it names the tensor (a name two bodies share takes
    one's: read a body's tensors from its ``Scope``)."""
    values: KnownValues
    """Small tensors whose values are known (shape sub-graphs, int constants)."""
    warnings: list[str] = field(default_factory=list)
    kinds: tuple[int, ...] = ()
    """Per node of the view's order, on the per-node route: a number shared by the nodes
    with the same op, attributes, and input and output types, which therefore cost the
    same; -1 where no such sharing is known. Empty on the whole-graph route."""
    bodies: dict[BodyKey, Scope | None] = field(default_factory=dict)
    """The shapes inside each body, by ``BodyKey`` (None where two bodies have one key: a
    model whose node names repeat, not prepared); empty on the per-node route."""
    assumed: dict[str, str] = field(default_factory=dict)
    """Graph input -> why its value (in ``values``) is known: optimum's ``use_cache_branch``,
    taken from the cache length (``load.kv.cache_branch_symbol``)."""


def _type_proto(info: TensorInfo) -> onnx.TypeProto:
    return helper.make_tensor_type_proto(info.elem_type, info.shape)


_Inferred = tuple[tuple[int, int, Shape | None], ...]
"""What per-node inference gave: (output index, element type, shape) per output."""


@dataclass
class _Propagation:
    model: onnx.ModelProto
    types: MutableMapping[str, TensorInfo]
    values: KnownValues
    opsets: dict[str, int]
    memo: dict[tuple[object, ...], _Inferred | None] = field(default_factory=dict)
    """Per-node inference results by what determines them (op, attributes, input types and
    values): the repeated layers of a model re-infer once, not once per layer."""
    opset_imports: list[onnx.OperatorSetIdProto] = field(default_factory=list)
    failures: list[_NodeFailure] = field(default_factory=list)
    """Nodes whose input shapes, all concrete, contradict each other (ONNX's inference raised)."""
    declared: Mapping[BodyKey, Mapping[str, tuple[int, Shape | None]]] = field(default_factory=dict)
    """The shapes each body declares (``_declared_in``), read before inference."""
    symbols: Mapping[str, int] = field(default_factory=dict)
    """Each symbolic dim's value, for the shapes a body declares in them."""
    unrolled: list[int] = field(default_factory=lambda: [0])
    """Loop iterations unrolled so far (``_unroll``), shared by the bodies' runs."""

    def __post_init__(self) -> None:
        self.opset_imports = list(self.model.opset_import)


@lru_cache(maxsize=4096)
def _schema(op_type: str, opset: int, domain: str) -> onnx.defs.OpSchema | None:
    """The op's schema, or None where onnx has none. Kept for the process, as
    ``costs._context`` keeps its defaults: onnx's lookup takes 2 to 6 us, and each analysis
    asks it again for every op type it infers."""
    try:
        return onnx.defs.get_schema(op_type, opset, domain)
    except (onnx.defs.SchemaError, TypeError):  # TypeError: an opset past int32
        return None  # an op onnx does not know (contrib, custom)


def _propagate(
    model: onnx.ModelProto,
    types: MutableMapping[str, TensorInfo],
    values: KnownValues,
    failures: list[_NodeFailure],
    declared: Mapping[BodyKey, Mapping[str, tuple[int, Shape | None]]] | None = None,
    symbols: Mapping[str, int] | None = None,
) -> dict[BodyKey, Scope | None]:
    """One forward pass over the main graph: fold shape values, and re-run ONNX's own
    per-node inference, fed those values, wherever a node's outputs are still unknown; the
    same inside each body (If, Loop, Scan), where a node holding one is met, with the types
    and values of the scope around it (``_propagate_bodies``). Returns each body's shapes.

    A pass in topological order resolves chains that whole-graph inference cannot (each
    GPT-2 layer's mask slice depends on the previous layer's shapes). Main-graph nodes whose
    inference fails on concrete shapes are added to ``failures`` (a body's are not: a branch
    that does not run may not fit the shapes where it does not).
    """
    run = _Propagation(
        model,
        types,
        values,
        {(o.domain or ""): o.version for o in model.opset_import},
        failures=failures,
        declared=declared or {},
        symbols=symbols or {},
    )
    bodies: dict[BodyKey, Scope | None] = {}
    _propagate_nodes(model.graph.node, run, bodies, 0)
    return bodies


def _propagate_nodes(
    nodes: Sequence[onnx.NodeProto],
    run: _Propagation,
    bodies: dict[BodyKey, Scope | None],
    depth: int,
) -> None:
    """``_propagate`` over the nodes of one graph (``depth``: how deep it nests)."""
    types = run.types
    for node in nodes:
        op_type = node.op_type
        if op_type in SUBGRAPH_OPS:
            if node.domain in DEFAULT_DOMAINS and depth < MAX_NESTING:
                if op_type == "Loop":
                    infer_loop(node, types, run.values, run.opset_imports, run.model.ir_version)
                    _unroll(node, run, depth + 1)
                _propagate_bodies(node, run, bodies, depth + 1)
            continue
        if op_type in sequences.SEQUENCE_OPS and sequences.sequence_node(node, types, run.values):
            continue
        for o in node.output:
            if o:
                info = types.get(o)
                if info is None or info.known_numel < 0:
                    _infer_node(node, run)
                    break
        _fold_node(node, types, run.values, run.opsets.get(""))


def _propagate_bodies(
    node: onnx.NodeProto, run: _Propagation, bodies: dict[BodyKey, Scope | None], depth: int
) -> None:
    """Infer and fold inside each body of ``node`` (If, Loop, Scan), each over the types and
    values of ``run``, its scope; then type an If's outputs from its branches."""
    scopes: dict[str, tuple[onnx.GraphProto, Scope]] = {}
    for a in node.attribute:
        if a.type != onnx.AttributeProto.GRAPH:
            continue
        body = a.g
        key = (node.name, a.name)
        inner = _body_run(node, body, key, run)
        types, values = inner.types, inner.values
        _propagate_nodes(body.node, inner, bodies, depth)
        scope = Scope(types, values)
        bodies[key] = None if key in bodies else scope  # None: two bodies, one key
        scopes[a.name] = (body, scope)
    if node.op_type == "If":
        type_if_outputs(node, scopes, run.types, run.values)


def _body_run(
    node: onnx.NodeProto, body: onnx.GraphProto, key: BodyKey, run: _Propagation
) -> _Propagation:
    """``run`` inside one body of ``node``: the body's own types and values over those of
    ``run``, its scope, where the body reads them."""
    own: dict[str, TensorInfo] = {}
    # Not ONNX's inference of the body: where two branches name tensors alike, it mixes
    # them up (optimum's merged T5 decoder: a ConstantOfShape of [4] typed [1, 1, 32],
    # the other branch's). Each node is inferred here, in the body's own scope.
    _collect_types(body, own, inferred=False)
    outer = run.types
    for name in [n for n, info in own.items() if not info.is_concrete]:
        found = outer.get(name)
        if found is not None and found.is_concrete:  # a Loop's body (``infer_loop``)
            del own[name]
    type_body_inputs(node, body, own, outer)
    types = outer.new_child(own) if isinstance(outer, ChainMap) else ChainMap(own, outer)
    _use_declared(types, run.declared.get(key, {}), run.symbols)
    values = ScopedValues(_value_sources(body), run.values)
    if node.op_type == "Loop" and len(body.input) >= 2 and trip_count(node, run.values) == 1:
        # One iteration: the iteration number is 0 and the state is the initial one (a
        # sequence too, which ``infer_loop`` does not type).
        values.add_folded(body.input[0].name, np.array(0, dtype=np.int64))
        for vi, initial in zip(body.input[2:], node.input[2:], strict=False):
            found = outer.get(initial) if initial else None
            if isinstance(found, sequences.SequenceInfo):
                types[vi.name] = found.renamed(vi.name)
    return replace(run, types=types, values=values, failures=[])


def _unroll(node: onnx.NodeProto, run: _Propagation, depth: int) -> None:
    """Type a Loop's state outputs that hold sequences known element by element: its body
    propagated once per iteration (``sequences.unroll``)."""
    body = next((a.g for a in node.attribute if a.name == "body" and a.type == a.GRAPH), None)
    held = [run.types.get(s) for s in node.input[2:]]
    if body is None or not any(isinstance(t, sequences.SequenceInfo) for t in held):
        return

    def walk(k: int, given: Mapping[str, sequences.SequenceInfo]) -> Mapping[str, TensorInfo]:
        run.unrolled[0] += 1  # nested Loops multiply: a hostile model's are bounded in all
        if run.unrolled[0] > sequences.MAX_UNROLLED_IN_ALL:
            return {}
        inner = _body_run(node, body, (node.name, "body"), run)
        if body.input:
            inner.values.add_folded(body.input[0].name, np.array(k, dtype=np.int64))
        inner.types.update(given)
        _propagate_nodes(body.node, inner, {}, depth)
        return inner.types

    sequences.unroll(node, body, trip_count(node, run.values), run.types, walk)


def _inference_failures(
    model: onnx.ModelProto,
    types: Mapping[str, TensorInfo],
    values: KnownValues,
    failures: list[_NodeFailure],
) -> None:
    """Whole-graph inference drops a node it fails on without a word: ask ONNX's per-node
    inference again, before declared shapes fill the gap, for each main-graph node with an
    untyped output and concrete inputs, and add the nodes whose inputs disagree to ``failures``."""
    run = _Propagation(
        model,
        dict(types),
        values,
        {(o.domain or ""): o.version for o in model.opset_import},
        failures=failures,
    )
    for node in model.graph.node:
        if node.op_type in SUBGRAPH_OPS:
            continue
        outs = [types.get(o) for o in node.output if o]
        if all(t is not None and t.is_concrete for t in outs):
            continue
        ins = [types.get(i) for i in node.input if i]
        if all(t is not None and t.is_concrete for t in ins):
            domain = "" if node.domain == "ai.onnx" else node.domain
            opset = run.opsets.get(domain)
            if opset is not None:
                known = {i: v for i in node.input if i and (v := values.get(i)) is not None}
                _infer_with_onnx(node, domain, opset, known, run)


def _infer_node(node: onnx.NodeProto, run: _Propagation) -> None:
    signature = _signature(
        node, node.op_type, node.domain, node.input, node.output, run.types, run.values
    )
    if signature is not None:
        _apply_inferred(node.output, _inferred(node, signature, run), run.types)


def _signature(
    node: onnx.NodeProto,
    op_type: str,
    domain: str,
    ins: Sequence[str],
    outs: Sequence[str],
    types: Mapping[str, TensorInfo],
    values: KnownValues,
) -> tuple[object, ...] | None:
    """What ONNX's inference of ``node`` and its folding depend on: domain, op, which
    outputs it writes, the type of each input and its value where known, attributes.
    None when an input's rank is unknown."""
    # Optional outputs ('' where omitted) change what inference types.
    key: list[object] = [
        domain,
        op_type,
        tuple([o != "" for o in outs]) if "" in outs else len(outs),
    ]
    for name in ins:
        if not name:
            key.append(None)
            continue
        info = types.get(name)
        if info is None or info.shape is None:
            return None
        value = values.get(name)
        key.append(  # the dtype itself, not its .str, which is built anew at each call
            (info.elem_type, info.shape)
            if value is None
            else (info.elem_type, info.shape, value.dtype, value.tobytes())
        )
    key.append(_attribute_key(node))
    return tuple(key)


def _inferred(
    node: onnx.NodeProto, signature: tuple[object, ...], run: _Propagation
) -> _Inferred | None:
    """ONNX's inference of ``node``, run once per signature."""
    if signature in run.memo:
        return run.memo[signature]
    domain = "" if node.domain == "ai.onnx" else node.domain
    opset = run.opsets.get(domain)
    inferred = None
    if opset is not None:
        known = {}
        for name in node.input:
            value = run.values.get(name) if name else None
            if value is not None:
                known[name] = value
        inferred = _infer_with_onnx(node, domain, opset, known, run)
        inferred = _with_rules(node, domain, opset, inferred, run.types)
    run.memo[signature] = inferred
    return inferred


def _with_rules(
    node: onnx.NodeProto,
    domain: str,
    opset: int,
    inferred: _Inferred | None,
    types: Mapping[str, TensorInfo],
) -> _Inferred | None:
    """ONNX's result, completed by onnxcost's own rule (``shape_rules``) for the outputs
    it left untyped or with unknown dims: ops ONNX has no schema for, and outputs a schema
    does not type (ai.onnx.ml's ArrayFeatureExtractor: [N, ?])."""
    if not has_rule(domain, node.op_type):
        return inferred
    done = {
        index
        for index, _elem, shape in inferred or ()
        if shape is not None and all(type(d) is int for d in shape)
    }
    if len(done) == sum(1 for o in node.output if o):
        return inferred
    ins = [types.get(name) if name else None for name in node.input]
    extra = tuple(t for t in rule_outputs(node, domain, opset, ins) if t[0] not in done)
    if not extra:
        return inferred
    kept = tuple(t for t in inferred or () if t[0] in done)
    return kept + extra


def _apply_inferred(
    outs: Sequence[str], inferred: _Inferred | None, types: MutableMapping[str, TensorInfo]
) -> None:
    """Type ``outs`` from an inference result, never replacing a concrete type."""
    if inferred is None:
        return
    for index, elem, shape in inferred:
        name = outs[index]
        old = types.get(name)
        if shape is None:
            if old is None and elem:
                types[name] = TensorInfo(name, elem, None)  # its type, of unknown rank
            continue
        if old is not None and old.is_concrete:
            continue
        new = TensorInfo(name, elem or (old.elem_type if old is not None else 0), shape)
        if new.is_concrete or old is None or old.shape is None:
            types[name] = new


@dataclass(frozen=True, slots=True)
class _Seen:
    """What every node of one signature gets: its outputs' types, and its folded values."""

    outputs: tuple[tuple[int, TensorInfo], ...]
    """(output index, type) of each output inference typed, its name left empty."""
    values: tuple[np.ndarray | None, ...]
    """Per output, its folded value (None where unknown); () where none is known."""
    kind: int
    """The signature's number (the position of its first node): ``ShapeResult.kinds``."""
    complete: bool
    """Whether inference typed every output the node writes."""

    ids: tuple[tuple[int, int], ...]
    """(output index, ``_TensorIds`` number) of each output with a shape: its type and value."""

    @classmethod
    def of(
        cls,
        node: onnx.NodeProto,
        signature: tuple[object, ...],
        run: _Propagation,
        kind: int,
        ids: _TensorIds,
    ) -> _Seen:
        values = _fold_values(node, run.types, run.values, run.opsets.get(""))
        inferred = _inferred(node, signature, run) or ()
        typed = tuple((i, TensorInfo("", e, s)) for i, e, s in inferred if s is not None or e)
        outputs = typed_outputs(typed, values, node.output)  # a folded value gives a shape
        for value in values:
            if value is not None:
                value.flags.writeable = False  # shared by every node of this signature
        complete = len(outputs) == sum(1 for o in node.output if o)
        folded = dict(enumerate(values))
        numbered = tuple(
            (index, ids.number(t.elem_type, t.shape, folded.get(index)))
            for index, t in outputs
            if t.shape is not None
        )
        return cls(outputs, values, kind, complete, numbered)


class _TensorIds:
    """A small int per distinct (element type, shape, value) of the tensors of one walk, so
    that a node's signature (``_node_key``) holds and hashes ints, not shapes and bytes: two
    tensors have one number exactly when ``_signature`` would key them alike."""

    __slots__ = ("_numbers", "_types", "_values", "of")

    def __init__(self, types: Mapping[str, TensorInfo], values: KnownValues) -> None:
        self._types = types
        self._values = values
        self._numbers: dict[tuple[object, ...], int] = {}
        self.of: dict[str, int] = {}
        """Tensor -> its number, once known: the walk sets it where a node's outputs take a
        signature's types, ``read`` where it reads one; it is dropped where a node's outputs
        are typed another way (no signature, declared shapes, a merge with an input)."""

    def number(self, elem_type: int, shape: Shape, value: np.ndarray | None) -> int:
        if value is None:
            key: tuple[object, ...] = (elem_type, shape)
        else:
            key = (elem_type, shape, value.dtype, value.tobytes())
        return self._numbers.setdefault(key, len(self._numbers))

    def read(self, name: str) -> int | None:
        """The number of tensor ``name`` from its type and value now, kept in ``of``; None
        when its rank is unknown."""
        info = self._types.get(name)
        if info is None or info.shape is None:
            return None
        found = self.of[name] = self.number(info.elem_type, info.shape, self._values.get(name))
        return found


def _node_key(
    op_type: str,
    domain: str,
    ins: Sequence[str],
    outs: Sequence[str],
    ids: _TensorIds,
    attributes: bytes,
) -> tuple[object, ...] | None:
    """``_signature`` with each input's type and value as its ``_TensorIds`` number (-1 where
    the input is omitted): equal for the same nodes, cheaper to build and hash."""
    key: list[object] = [
        domain,
        op_type,
        tuple([o != "" for o in outs]) if "" in outs else len(outs),
    ]
    of = ids.of
    for name in ins:
        if not name:
            key.append(-1)
            continue
        number = of.get(name)
        if number is None:
            number = ids.read(name)
            if number is None:
                return None
        key.append(number)
    key.append(attributes)
    return tuple(key)


def _per_node(
    model: onnx.ModelProto,
    view: GraphView,
    declared: Mapping[str, onnx.ValueInfoProto],
    symbols: Mapping[str, int],
    failures: list[_NodeFailure],
) -> tuple[dict[str, TensorInfo], KnownValues, list[int]]:
    """Infer a graph without subgraphs node by node, in topological order, with ONNX's own
    per-node inference fed every value folded so far.

    Whole-graph inference treats each of a model's 10,000 nodes anew; here a node whose
    op, attributes, input types and input values were all seen before takes the result
    and the folded value of the first such node: a 32-layer decoder infers one layer.
    Constants are typed from their attribute, each distinct attribute read once.

    Also returns each node's kind (``ShapeResult.kinds``): nodes of one kind have the same
    op, attributes, and input and output types, so the same costs.
    """
    graph = model.graph
    types: dict[str, TensorInfo] = {}
    for vi in graph.input:
        types[vi.name] = TensorInfo(vi.name, *shape_of(vi.type))
    for t in graph.initializer:
        types[t.name] = TensorInfo(t.name, t.data_type, tuple(t.dims))
    values = _known_values(graph, constants=False)  # Constants: added as the walk meets them
    run = _Propagation(
        model,
        types,
        values,
        {(o.domain or ""): o.version for o in model.opset_import},
        failures=failures,
    )
    ids = _TensorIds(types, values)
    constants: dict[bytes, tuple[TensorInfo | None, int, int | None]] = {}
    seen: dict[tuple[object, ...], _Seen] = {}
    kinds: list[int] = []
    declared_names = declared.keys()
    # The view's columns, zipped: reading op type, domain, inputs and outputs from each
    # NodeProto instead costs 21% more instructions of an 8B-shaped decoder's analysis
    # (callgrind, 829M against 686M for two analyses).
    for node, op_type, domain, ins, outs in zip(
        view.order, view.op_types, view.domains, view.inputs, view.outputs, strict=True
    ):
        kind = -1
        attrs = _attribute_key(node)
        if op_type == "Constant" and len(outs) == 1 and domain in DEFAULT_DOMAINS:
            found_constant = constants.get(attrs)
            if found_constant is None:
                info = _constant_info(node)
                kind = -1 if info is None else len(kinds)
                found_constant = constants[attrs] = (info, kind, None)
            info, kind, number = found_constant
            if info is not None:
                out = outs[0]
                types[out] = info.renamed(out)
                # The serialized attributes go along, read once: serializing them again
                # where the value is read costs 4.8% more instructions (callgrind, the
                # 8B-shaped decoder: 719M against 686M for two analyses).
                values.add_constant(out, node, attrs)
                if number is None:  # read once per distinct Constant, its value with it
                    number = ids.read(out)
                    constants[attrs] = (info, kind, number)
                else:
                    ids.of[out] = number
                kinds.append(kind)
                continue
        if op_type in sequences.SEQUENCE_OPS and sequences.sequence_node(node, types, values):
            _forget(ids, outs)
            kinds.append(-1)
            continue
        signature = _node_key(op_type, domain, ins, outs, ids, attrs)
        if signature is None:
            _fold_node(node, types, values, run.opsets.get(""))
            _forget(ids, outs)
        else:
            found = seen.get(signature)
            if found is None:
                found = seen[signature] = _Seen.of(node, signature, run, len(kinds), ids)
            if found.complete:
                kind = found.kind
            merged = False
            for index, template in found.outputs:
                name = outs[index]
                if name in types:  # also an input or initializer: the careful merge
                    _apply_inferred(outs, ((index, template.elem_type, template.shape),), types)
                    kind = -1
                    merged = True
                else:
                    types[name] = template.renamed(name)
            for name, value in zip(outs, found.values, strict=False):
                if value is not None and name:
                    values.add_folded(name, value)
            if merged:
                _forget(ids, outs)
            else:
                for index, number in found.ids:
                    ids.of[outs[index]] = number
        if not declared_names.isdisjoint(outs):
            for o in outs:
                if o in declared:
                    info = types.get(o)
                    if info is None or not info.is_concrete:
                        _use_declared(types, {o: shape_of(declared[o].type)}, symbols)
                        ids.of.pop(o, None)
                        kind = -1
        kinds.append(kind)
    for vi in graph.output:
        if vi.name not in types and is_tensor_type(vi.type):
            # written by a node nothing could infer: its type only
            types[vi.name] = TensorInfo(vi.name, shape_of(vi.type)[0], None)
    return types, values, kinds


def _forget(ids: _TensorIds, outs: Sequence[str]) -> None:
    """Drop the numbers of ``outs``, typed other than from a signature: read again on use."""
    for name in outs:
        ids.of.pop(name, None)


def _infer_with_onnx(
    node: onnx.NodeProto,
    domain: str,
    opset: int,
    known: Mapping[str, np.ndarray],
    run: _Propagation,
) -> _Inferred | None:
    """ONNX's own inference of one node, fed the input values ``known``."""
    schema = _schema(node.op_type, opset, domain)
    if schema is None:
        return None  # nothing to infer with
    inputs = [i for i in node.input if i]
    in_types = {i: _type_proto(run.types[i]) for i in inputs}
    in_data = {name: numpy_helper.from_array(value, name) for name, value in known.items()}
    try:
        out = onnx.shape_inference.infer_node_outputs(
            schema,
            node,
            in_types,
            in_data,
            opset_imports=run.opset_imports,
            ir_version=run.model.ir_version,
        )
    except onnx.shape_inference.InferenceError as e:
        # Concrete input shapes that ONNX's own rule rejects contradict each other: a fact
        # about the shapes, which ``infer`` reports. Otherwise the node stays unknown_shape.
        why = str(e).strip()
        if why.startswith(_SHAPE_ERROR) and all(run.types[i].is_concrete for i in inputs):
            run.failures.append(
                _NodeFailure(
                    node.name,
                    _op_label(domain, node.op_type),
                    why[len(_SHAPE_ERROR) :].strip(),
                    tuple(shape_text(run.types[i].shape) for i in node.input if i),
                )
            )
        return None
    except Exception:  # best effort: the node stays unknown_shape
        return None
    index = {name: k for k, name in enumerate(node.output) if name}
    return tuple((index[name], *shape_of(tp)) for name, tp in out.items() if name in index)


def infer(
    model: onnx.ModelProto,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    view: GraphView | None = None,
    *,
    allow_reshape: bool = False,
) -> ShapeResult:
    """Resolve every tensor's shape. Modifies ``model`` (the caller's private copy) in place.

    Given ``view``, the main graph's index in topological order, a model without subgraphs
    is inferred node by node (``_per_node``), with ONNX's per-node inference run once per
    distinct node; other models go through ONNX's whole-graph inference, then the same
    per-node inference and folding wherever it left a shape unknown. Both give the same
    shapes (a test checks it); the first is several times faster on repeated layers.

    ``input_shapes`` may not change a dim the model fixes unless ``allow_reshape``. Where the
    shapes given make a main-graph node's concrete input shapes disagree (ONNX's inference
    of the node fails, or a Conv's input channels differ from its weight's), ShapeError names
    the node and the flags, unless the node disagrees as much without any flag (each
    symbolic dim at 1) on the same input shapes: that, like any disagreement without flags,
    is the model's own, and a warning.
    """
    input_shapes, dims = dict(input_shapes or {}), dict(dims or {})
    given = bool(input_shapes or dims)
    pristine = [_copy(vi) for vi in model.graph.input] if given else []
    result, failures = _infer_all(model, input_shapes, dims, view, allow_reshape)
    if not failures:
        return result
    if given:
        own = _own_failures(model, pristine, view)
        own_inputs = {o.node: o.inputs for o in own}
        caused = [f for f in failures if own_inputs.get(f.node) != f.inputs]
        if caused:
            message = _blame(caused, input_shapes, dims, allow_reshape, pristine, own)
            raise ShapeError(message, node=caused[0].text())
    listed = "; ".join(f.text() for f in failures[:3])
    more = f"; and {len(failures) - 3} more" if len(failures) > 3 else ""
    result.warnings.append(
        f"input shapes disagree at {listed}{more}: the model's declared shapes (with symbolic "
        f"dims left at 1) do not fit there, so counts there and after may be wrong or "
        f"unknown_shape; set the dims with --input-shape/--dim, or check the model"
    )
    return result


def _infer_all(
    model: onnx.ModelProto,
    input_shapes: Mapping[str, Sequence[int]],
    dims: Mapping[str, int],
    view: GraphView | None,
    allow_reshape: bool,
) -> tuple[ShapeResult, list[_NodeFailure]]:
    """``infer``'s two routes; also the nodes whose concrete input shapes disagree."""
    warnings: list[str] = []
    failures: list[_NodeFailure] = []
    per_node = view is not None and not view.outer_reads and not model.functions
    branch = None if per_node else cache_branch_symbol(model.graph)
    symbols = _apply_overrides(model.graph, input_shapes, dims, warnings, allow_reshape)
    if per_node:
        assert view is not None
        types, values, kinds = _per_node(model, view, _declarations(model.graph), symbols, failures)
        checked = [k for k, op_type in enumerate(view.op_types) if op_type in _STATIC_CHECKED]
        nodes = (
            (view.order[k], view.op_types[k], view.domains[k], view.inputs[k]) for k in checked
        )
        failures += _static_failures(nodes, types)
        return ShapeResult(model, types, values, warnings, tuple(kinds)), failures
    declared = _declared_in(model.graph)
    declared_bodies = {key: _declared_in(g) for key, g in body_graphs(model.graph)}
    _detach_large_initializers(model.graph)
    _clear_inferred(model.graph)
    inferred = _infer(model, warnings)
    values = _known_values(inferred.graph)
    assumed = {} if branch is None else cache_branch_value(inferred.graph, branch, symbols, values)
    types = {}
    _collect_types(inferred.graph, types)
    bodies: dict[BodyKey, Scope | None] = {}
    if _unknown_outputs(inferred.graph, types) or any(
        n.op_type in SUBGRAPH_OPS for n in inferred.graph.node
    ):
        _inference_failures(inferred, types, values, failures)
        _use_declared(types, declared, symbols)
        bodies = _propagate(inferred, types, values, failures, declared_bodies, symbols)
        flat_types(types, bodies)
    main = ((n, n.op_type, n.domain, n.input) for n in inferred.graph.node)
    failures += _static_failures(main, types)
    result = ShapeResult(inferred, types, values, warnings, bodies=bodies, assumed=assumed)
    return result, failures


def _copy(vi: onnx.ValueInfoProto) -> onnx.ValueInfoProto:
    out = onnx.ValueInfoProto()
    out.CopyFrom(vi)
    return out


def _own_failures(
    model: onnx.ModelProto, pristine: Sequence[onnx.ValueInfoProto], view: GraphView | None
) -> list[_NodeFailure]:
    """The nodes that disagree with no shape flag at all (each symbolic dim at 1), with their
    input shapes then. A node that disagrees with the flags is the flags' doing unless it
    disagrees without them on the very same input shapes (the flags do not reach it).
    Run only when some node disagrees with the flags, on a copy."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.graph.input[:]
    copy.graph.input.extend(pristine)
    try:
        _result, failures = _infer_all(copy, {}, {}, view, allow_reshape=False)
    except ShapeError:  # an input the model leaves unshaped: only the flags shape it
        return []
    return failures
