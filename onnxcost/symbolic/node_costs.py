"""Every node's costs over symbolic shapes in one walk (issue 22): its MACs, FLOPs, bytes read
and bytes written as ``SymDim``s in the model's symbols, its params, from one pass of the
symbolic shape rules (``symbolic.shapes``) and one call of the node's own registered formula
and traffic rule per class of nodes.

Nothing of a formula is restated here. The registered formula (``spec.formula``) and traffic
rule (``spec.reads``) are called with tensors whose shapes are SymDims (``_SymTensor``), so
the same arithmetic (``math.prod``, products, sums) builds the polynomial; who reads weights,
the KV cache or a folded constant is ``analysis.traffic.node_traffic``'s and
``analysis.weights.Weights``' own decision, as in a concrete analysis (``analysis.walk``).

A memo per class makes the repeated layers cost a lookup: a node's class is what its result
depends on, (domain, op, attributes, which outputs it writes, whether it computes from
constants only, per input its element type, symbolic shape and symbolic value, and with a KV
cache which inputs are KV cache: node_traffic's totals do not depend on which inputs are
weights). Each tensor's (type, shape, value) is interned as one int when it is made, so a key
is cheap. A Constant seen before is one lookup by its attributes.

A formula that needs more than arithmetic (a comparison of a symbolic dim, a value) raises
(a SymDim has no truth value), and the node gets no formula (None) with the reason; so does
a node whose shape is not carried and what depends on it.
NB: a formula's comparison of a symbolic dim with 1 (``d == 1``: a broadcast) is False, so
the polynomials hold where every symbol is at least 2; at 0 and 1 a formula may branch
otherwise. A node that holds subgraphs (If, Loop, Scan) gets no formula, and its outputs no
shape: its bodies are not walked.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import onnx

from onnxcost.analysis.records import Convention
from onnxcost.analysis.traffic import Traffic, check_traffic, kv_cache_names, node_traffic
from onnxcost.analysis.walk import check_convention
from onnxcost.analysis.weights import Weights, dequantising_scales, read_stored
from onnxcost.costs import REGISTRY
from onnxcost.costs._context import OpContext, TensorInfo
from onnxcost.costs._registry import OpSpec
from onnxcost.load.graph import DEFAULT_DOMAINS
from onnxcost.load.tensors import SUBGRAPH_OPS, normalize_domain, tensor_bytes
from onnxcost.prepare import PreparedModel
from onnxcost.shapes.folding import _attribute_key
from onnxcost.symbolic.contrib import _SymTensor
from onnxcost.symbolic.elem_types import output_elem_types
from onnxcost.symbolic.inputs import input_shapes_of
from onnxcost.symbolic.shape_core import Floats, Shape, SymbolicShapes, _UncarriedError
from onnxcost.symbolic.shapes import _attrs, _carry, _maybe_value
from onnxcost.symdim import Dim, SymDim, as_dim


def _tensor(name: str, elem_type: int, shape: Shape) -> TensorInfo:
    """A TensorInfo of ``shape``: the plain one where every dim is an int (a formula then
    runs exactly as in a concrete analysis), else a ``_SymTensor``."""
    if all(type(d) is int for d in shape):
        return TensorInfo(name, elem_type, shape)  # type: ignore[arg-type]
    return _SymTensor(name, elem_type, shape)


@dataclass
class NodeCosts:
    """Per node of ``PreparedModel.view.order`` (the order of a concrete analysis' records),
    its costs as Dims (an int where it is one), or None with a reason in ``reasons``.

    ``flops`` follow the convention asked for; ``bytes_read`` and ``bytes_written`` the
    traffic mode. ``params`` and ``param_bytes``: the weights a node brings in, each stored
    weight counted at its first reader (ints: weights have no symbolic size); their sums are
    the analysis' totals (empty without ``count_params``). ``classes``: nodes with equal ids
    have the same class key (op, attributes, symbolic inputs: see the module docstring), hence
    the same MACs, FLOPs and bytes at every point (not the same params: a weight is counted
    once); -1 where a node has no shape carried."""

    macs: list[Dim | None] = field(default_factory=list)
    flops: list[Dim | None] = field(default_factory=list)
    bytes_read: list[Dim | None] = field(default_factory=list)
    bytes_written: list[Dim | None] = field(default_factory=list)
    params: list[int] = field(default_factory=list)
    param_bytes: list[int] = field(default_factory=list)
    classes: list[int] = field(default_factory=list)
    reasons: dict[int, str] = field(default_factory=dict)
    """Node index -> why it has no formula (its costs are None)."""
    shapes: SymbolicShapes | None = None
    memo: WalkMemo | None = None
    """The walk's memo, for a next walk of the same settings (``node_costs(memo=...)``)."""
    types: _Types | None = None
    """Every carried tensor as a TensorInfo (a ``_SymTensor`` where a dim is symbolic; its
    bytes by ``_Types.nbytes``), and the ``Weights`` the walk saw (counted only with
    ``count_params``): the training pass's and the peak's inputs (``symbolic.training_walk``,
    ``symbolic.peak``)."""
    weights: Weights | None = None


@dataclass(slots=True)
class _Class:
    """What every node of one class gets (read-only by contract; slots: the walk reads a few
    fields of it per node)."""

    id: int
    outputs: tuple[tuple[int, Shape, tuple[Dim, ...] | Floats | None], ...]
    """Per output, its index in ``_Walk.table`` (-1 where omitted or not carried), shape and
    value."""
    macs: Dim | None
    flops: Dim | None
    read: Dim | None
    written: Dim | None
    reason: str
    joins_kv: bool
    """Whether the node's outputs become KV cache (``node_traffic``'s layout rule)."""
    plain: bool = True
    """Neither a reason nor KV cache joined: the usual node."""
    stored: TensorInfo | None = None
    """A Constant's output as ``Weights`` stores it (its name left empty)."""

    row: tuple[Dim | None, Dim | None, Dim | None, Dim | None] = (None, None, None, None)
    """(macs, flops, read, written): what the node's row of ``NodeCosts`` gets."""

    def __post_init__(self) -> None:
        self.plain = not self.reason and not self.joins_kv
        self.row = (self.macs, self.flops, self.read, self.written)


_NO_ROW: tuple[None, None, None, None] = (None, None, None, None)

_Tensor = tuple[int, Shape, tuple[Dim, ...] | Floats | None]
"""A tensor as the walk knows it: element type, shape, value (small int tensors, small
stored float ones) or None."""


@dataclass
class WalkMemo:
    """What one walk learns that holds for another walk of the same settings (opsets,
    convention, traffic): the interned tensors, each class by its key, the Constants by
    their attributes and each tensor's bytes. ``NodeCosts.memo`` of one walk given to the
    next (``node_costs(memo=...)``) makes a node alike a node seen before a lookup there too:
    ``--symbolic``'s walks of the reduced model at each symbol's 0 recompute only the classes
    whose inputs change with the symbol. A class's key is all its result depends on (the
    module docstring), whichever model the node is in."""

    settings: tuple[object, ...]
    """(opsets, convention, traffic, count_params): a memo serves walks of equal settings."""
    table: list[_Tensor] = field(default_factory=list)
    ids: dict[_Tensor, int] = field(default_factory=dict)
    specs: dict[tuple[str, str], tuple[str, int, OpSpec | None]] = field(default_factory=dict)
    memo: dict[tuple[object, ...], _Class] = field(default_factory=dict)
    constants: dict[bytes, _Class] = field(default_factory=dict)
    """A Constant's attributes -> its class (where its output is neither a graph output nor
    KV cache)."""
    whole: dict[int, Dim] = field(default_factory=dict)
    """Tensor (index in ``table``) -> its bytes."""
    infos: dict[int, TensorInfo] = field(default_factory=dict)
    """Tensor (index in ``table``) -> its TensorInfo (``_tensor``), its name left empty: a
    formula or rule is given it renamed."""
    attrs: dict[bytes, dict[str, object]] = field(default_factory=dict)
    """A node's attributes (``_attribute_key``) -> their values, as the shape rules read them."""


_NO_ATTRS: dict[str, object] = {}
"""The attributes of a node that has none (read-only, as every entry of ``WalkMemo.attrs``)."""


@dataclass
class _Walk:
    shapes: SymbolicShapes
    opsets: dict[str, int]
    flops_of: str
    runtime: bool
    weights: Weights
    kv: set[str]
    graph_outputs: frozenset[str]
    count_params: bool
    shared: WalkMemo
    tensors: dict[str, int] = field(default_factory=dict)
    """Tensor name -> its index in ``table``."""
    table: list[_Tensor] = field(init=False)
    ids: dict[_Tensor, int] = field(init=False)
    specs: dict[tuple[str, str], tuple[str, int, OpSpec | None]] = field(init=False)
    memo: dict[tuple[object, ...], _Class] = field(init=False)
    whole: dict[int, Dim] = field(init=False)
    infos: dict[int, TensorInfo] = field(init=False)

    def __post_init__(self) -> None:
        m = self.shared
        self.table, self.ids, self.specs, self.memo, self.whole, self.infos = (
            m.table,
            m.ids,
            m.specs,
            m.memo,
            m.whole,
            m.infos,
        )

    def info(self, tid: int, name: str) -> TensorInfo:
        """Tensor ``tid`` of ``table`` as a TensorInfo named ``name``."""
        found = self.infos.get(tid)
        if found is None:
            elem, shape, _value = self.table[tid]
            found = self.infos[tid] = _tensor("", elem, shape)
        return found.renamed(name)

    def intern(self, t: _Tensor) -> int:
        found = self.ids.get(t)
        if found is None:
            found = self.ids[t] = len(self.table)
            self.table.append(t)
        return found

    def put(self, name: str, tid: int) -> None:
        self.tensors[name] = tid
        _elem, shape, value = self.table[tid]
        self.shapes.shapes[name] = shape
        self.shapes.keep(name, value)

    def spec(self, node_domain: str, op_type: str) -> tuple[str, int, OpSpec | None]:
        key = (node_domain, op_type)
        found = self.specs.get(key)
        if found is None:
            domain = normalize_domain(node_domain)
            opset = self.opsets.get(domain, 1)
            found = self.specs[key] = (domain, opset, REGISTRY.lookup(domain, op_type, opset))
        return found


class _Types(Mapping[str, TensorInfo]):
    """The walk's tensors as TensorInfos, for ``Weights`` (which reads a few of them)."""

    def __init__(self, w: _Walk) -> None:
        self.w = w
        self.sizes: dict[int, Dim] = {}
        """Tensor (index in ``_Walk.table``) -> its bytes, -1 where not concrete."""

    def __getitem__(self, name: str) -> TensorInfo:
        found = self.get(name)
        if found is None:
            raise KeyError(name)
        return found

    def get(self, name: str, default: TensorInfo | None = None) -> TensorInfo | None:  # type: ignore[override]
        """The tensor's TensorInfo (one per interned type, renamed), or ``default``."""
        tid = self.w.tensors.get(name, -1) if name else -1
        return default if tid < 0 else self.w.info(tid, name)

    def nbytes(self, name: str) -> Dim | None:
        """The bytes of tensor ``name`` as its TensorInfo has them (``nbytes`` of a
        ``_SymTensor``, else ``known_nbytes``: -1 where not concrete), once per interned
        type (the peak's liveness asks it of every tensor); None where the walk has none."""
        tid = self.w.tensors.get(name, -1) if name else -1
        if tid < 0:
            return None
        found = self.sizes.get(tid)
        if found is None:
            info = self.w.info(tid, "")
            found = self.sizes[tid] = (
                _whole(self.w, tid) if isinstance(info, _SymTensor) else info.known_nbytes
            )
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self.w.tensors)

    def __len__(self) -> int:
        return len(self.w.tensors)


def _elem_types(proto: onnx.ModelProto) -> dict[str, int]:
    g = proto.graph
    out = {t.name: t.data_type for t in g.initializer}
    for vi in g.input:
        out.setdefault(vi.name, vi.type.tensor_type.elem_type)
    return out


def node_costs(
    prepared: PreparedModel,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    fixed: Mapping[str, Dim] | None = None,
    traffic: Traffic = "runtime",
    convention: Convention = "onnxcost",
    count_params: bool = True,
    memo: WalkMemo | None = None,
    stop: frozenset[int] | None = None,
) -> NodeCosts:
    """Every node's MACs, FLOPs, bytes read and written (Dims) and params of ``prepared``,
    its symbols at ``fixed`` where given and its inputs at ``input_shapes`` (``--dim`` and
    ``--input-shape`` of a concrete analysis), under ``traffic`` and ``convention``.

    Without ``count_params``, ``params`` and ``param_bytes`` are empty: counting them (each
    stored weight at its first reader, ``Weights.count``) is 10-25% of the walk, and a
    concrete analysis at any point has the same per node (weights have no symbolic size).

    ``memo``: a previous walk's (``NodeCosts.memo``), where its settings are these: its
    classes are found again by lookup (the results are the same as without it).

    ``stop``: the walk ends at the first node it does not carry whose index is not in
    ``stop``, and the result covers only the nodes before it: for a caller that asks only
    whether every other node is carried (the walk at a symbol's 0)."""
    check_traffic(traffic)
    check_convention(convention)
    proto, view = prepared.proto, prepared.view
    graph = proto.graph
    opsets = {normalize_domain(o.domain): o.version for o in proto.opset_import}
    settings = (sorted(opsets.items()), convention, traffic, count_params)
    shared = memo if memo is not None and memo.settings == settings else WalkMemo(settings)
    weights = Weights(
        scales=dequantising_scales(view.op_types, view.domains, view.inputs, view.outputs)
    )
    weights.add_initializers(graph.initializer)
    if count_params:  # a tied LM head stored twice counts once, as in analysis.walk
        read_stored(proto, view, prepared.path).put(weights)
    graph_inputs = [vi.name for vi in graph.input]
    graph_outputs = frozenset(vi.name for vi in graph.output)
    w = _Walk(
        SymbolicShapes(opset=opsets.get("", 0)),
        opsets,
        convention,
        traffic == "runtime",
        weights,
        kv_cache_names(graph_inputs, graph_outputs),
        graph_outputs,
        count_params,
        shared,
    )
    elems = _elem_types(proto)
    for t in graph.initializer:
        _maybe_value(w.shapes, t.name, t)
        w.put(t.name, w.intern((t.data_type, tuple(t.dims), w.shapes.known(t.name))))
    for name, shape in input_shapes_of(proto, fixed, input_shapes).items():
        w.put(name, w.intern((elems.get(name, 0), shape, None)))
    n = len(view.order)
    params, param_bytes = [0] * n, [0] * n
    reasons: dict[int, str] = {}
    rows: list[tuple[Dim | None, Dim | None, Dim | None, Dim | None]] = []
    """Per node, its class's (MACs, FLOPs, bytes read, bytes written)."""
    classes: list[int] = []
    types = _Types(w)
    w.tensors[""] = -1
    constants = shared.constants
    special = w.kv | graph_outputs
    constant, kv, tensors, known, specs = weights.constant, w.kv, w.tensors, w.memo, w.specs
    shapes = w.shapes.shapes
    for i, (node, op_type, node_domain, ins, outs) in enumerate(
        zip(view.order, view.op_types, view.domains, view.inputs, view.outputs, strict=True)
    ):
        # Weights first, as analysis.walk's _cost_node: which outputs are constant, and the
        # params this node brings in (each stored weight at its first reader); a Constant's
        # after its class, to store its output with the type just carried. A node that reads
        # no constant is neither (Weights.see's and .count's own first tests).
        is_constant = op_type == "Constant" and node_domain in DEFAULT_DOMAINS
        if is_constant and len(outs) == 1 and outs[0] not in special:
            # A Constant whose attributes were seen: its class, and Weights.see's own rule
            # for it (its output is a stored weight), without the general key.
            cls = constants.get(_attribute_key(node))
            if cls is not None and cls.stored is not None:
                o = outs[0]
                tid, shapes[o], value = cls.outputs[0]
                tensors[o] = tid
                if value is not None:
                    w.shapes.keep(o, value)
                weights.add_stored(o, cls.stored.renamed(o))
                rows.append(cls.row)
                classes.append(cls.id)
                continue
        folded = False
        reads_constant = bool(ins) and not is_constant and not constant.isdisjoint(ins)
        if reads_constant or (ins and node_domain not in DEFAULT_DOMAINS):
            spec = (specs.get((node_domain, op_type)) or w.spec(node_domain, op_type))[2]
            if reads_constant or (spec is not None and spec.attribute_params is not None):
                # ai.onnx.ml's params are in its attributes: counted with no constant read
                folded, params[i], param_bytes[i] = _weights(w, node, spec, ins, outs, types)
        ids = tuple(map(tensors.get, ins))  # "" (an omitted input) is -1
        if None in ids:
            k = ids.index(None)
            reasons[i] = f"input {k} {ins[k]!r} has no carried shape"
            if stop is not None and i not in stop:
                break
            rows.append(_NO_ROW)
            classes.append(-1)
            continue
        # node_traffic's totals are every input read and every output written, or nothing
        # for a folded node (its split into weights and KV cache is not carried); which
        # inputs are KV cache decides whether the outputs become KV cache too.
        kv_in = None if not kv or kv.isdisjoint(ins) else tuple([k in kv for k in ins])
        key = (
            node_domain,
            op_type,
            attributes := _attribute_key(node),
            tuple([o != "" for o in outs]) if "" in outs else len(outs),
            folded or is_constant,
            ids,
            kv_in,
            bool(outs) and not graph_outputs.isdisjoint(outs),
        )
        cls = known.get(key)
        if cls is None:
            domain, opset, spec = specs.get((node_domain, op_type)) or w.spec(node_domain, op_type)
            new = _new_class(
                w,
                node,
                op_type,
                domain,
                opset,
                spec,
                ins,
                outs,
                folded or is_constant,
                len(known),
                attributes,
            )
            if isinstance(new, str):
                reasons[i] = new
                if stop is not None and i not in stop:
                    break
                rows.append(_NO_ROW)
                classes.append(-1)
                if is_constant:
                    _f, params[i], param_bytes[i] = _weights(w, node, spec, ins, outs, types)
                continue
            cls = known[key] = new
            if is_constant and len(outs) == 1 and outs[0] not in special:
                constants[attributes] = cls
        for o, (tid, shape, value) in zip(outs, cls.outputs, strict=True):
            if tid >= 0:
                tensors[o] = tid
                shapes[o] = shape
                if value is not None:
                    w.shapes.keep(o, value)
        rows.append(cls.row)
        classes.append(cls.id)
        if not cls.plain:
            if cls.joins_kv:
                kv.update(o for o in outs if o)
            if cls.reason:
                reasons[i] = cls.reason
                if stop is not None and i not in stop:
                    break
        if is_constant:
            spec = (specs.get((node_domain, op_type)) or w.spec(node_domain, op_type))[2]
            _f, params[i], param_bytes[i] = _weights(w, node, spec, ins, outs, types)
            if cls.stored is None and outs:
                cls.stored = types.get(outs[0])
    w.shapes.uncarried.extend(
        (view.names[i], view.op_types[i], why)
        for i, why in reasons.items()
        if i >= len(classes) or classes[i] < 0  # (past the end: where ``stop`` ended it)
    )
    macs, flops, read, written = ([row[k] for row in rows] for k in range(4))
    if not count_params:
        params, param_bytes = [], []
    return NodeCosts(
        macs,
        flops,
        read,
        written,
        params,
        param_bytes,
        classes,
        reasons,
        w.shapes,
        shared,
        types,
        weights,
    )


def _weights(
    w: _Walk,
    node: onnx.NodeProto,
    spec: OpSpec | None,
    ins: Sequence[str],
    outs: Sequence[str],
    types: Mapping[str, TensorInfo],
) -> tuple[bool, int, int]:
    """``Weights.see`` and ``Weights.count`` of the node as ``analysis.walk._cost_node`` calls
    them: (whether it computes from constants only, the params it brings in, their bytes)."""
    weights = w.weights
    before = len(weights.counted)
    params = 0
    op_type = node.op_type
    if op_type != "Constant" and ins and ins[0] and ins[0] not in weights.constant:
        folded = False  # see's own first test: the usual node's first input is an activation
    else:
        folded = weights.see(op_type, ins, outs, spec, types, node.domain in DEFAULT_DOMAINS)
    if not w.count_params:
        return folded, 0, 0
    if not folded:
        packed = spec is not None and (spec.param_elements or spec.attribute_params)
        context = _context(w, node, ins, outs) if packed else None
        params = weights.count(ins, spec, types, context, outputs=outs, reader=node.name)
    elif not w.graph_outputs.isdisjoint(outs):  # a weight the model outputs
        kept = [o if o in w.graph_outputs else "" for o in outs]
        params = weights.count(kept, None, types, None, generated=False)
    param_bytes = 0
    if len(weights.counted) != before:
        added = list(weights.counted.values())[before:]
        param_bytes = sum(c.nbytes for c in added if c.role != "stat")
    return folded, params, param_bytes


def _context(
    w: _Walk, node: onnx.NodeProto, ins: Sequence[str], outs: Sequence[str]
) -> Callable[[], OpContext] | None:
    """The node's OpContext on demand (``Weights.count``: an op with a packed weight)."""

    def context() -> OpContext:
        opset = w.spec(node.domain, node.op_type)[1]
        return OpContext(node, opset, _infos(w, ins), _infos(w, outs))

    return context


def _infos(w: _Walk, names: Sequence[str]) -> tuple[TensorInfo | None, ...]:
    out: list[TensorInfo | None] = []
    for n in names:
        tid = w.tensors.get(n, -1) if n else -1
        out.append(None if tid < 0 else w.info(tid, n))
    return tuple(out)


def _new_class(
    w: _Walk,
    node: onnx.NodeProto,
    op_type: str,
    domain: str,
    opset: int,
    spec: OpSpec | None,
    ins: Sequence[str],
    outs: Sequence[str],
    folded: bool,
    index: int,
    attribute_key: bytes,
) -> _Class | str:
    """Carry the node's shapes and run its formula and traffic rule: what its class gets."""
    if op_type in SUBGRAPH_OPS and domain == "":
        return "control flow: its bodies are not walked symbolically"
    shapes, table = w.shapes, w.table
    attrs = w.shared.attrs.get(attribute_key) if attribute_key else _NO_ATTRS
    in_tids = [w.tensors[n] for n in ins]  # -1 for "" (omitted)
    in_elems = [table[tid][0] if tid >= 0 else 0 for tid in in_tids]
    try:
        if attrs is None:
            attrs = w.shared.attrs[attribute_key] = _attrs(node)
        typed = _carry(shapes, node, attrs, in_elems)
    except _UncarriedError as e:
        return f"its shape is not carried ({e})"
    except (IndexError, KeyError, ValueError, TypeError, AssertionError, ArithmeticError) as e:
        return f"its shape is not carried (unexpected input, {type(e).__name__})"
    out_elems = typed or output_elem_types(node, op_type, domain, in_elems, opset)
    tids: list[int] = []
    outputs: list[_Tensor] = []
    outputs_info: list[TensorInfo | None] = []
    missing = -1  # the first output the shape rule leaves without a shape
    for k, o in enumerate(outs):
        shape = shapes.shapes.get(o) if o else None
        if shape is None:
            tids.append(-1)
            outputs.append((-1, (), None))
            outputs_info.append(None)
            if o and missing < 0:
                missing = k
            continue
        tid = w.intern((out_elems[k], shape, shapes.known(o)))
        tids.append(tid)
        outputs.append((tid, *table[tid][1:]))
        outputs_info.append(w.info(tid, o))
    if missing >= 0:  # no bytes written
        return _Class(
            index,
            tuple(outputs),
            None,
            None,
            None,
            None,
            f"output {missing} has no carried shape",
            False,
        )
    context = OpContext(node, opset, _infos(w, ins), tuple(outputs_info))
    macs: Dim | None = None
    flops: Dim | None = None
    reason = ""
    if spec is None or spec.zero:
        macs = flops = 0  # unsupported (counted as 0) or no arithmetic
    else:
        try:
            cost = spec.formula(context)
            macs = as_dim(SymDim.of(cost.macs))
            if w.flops_of == "torch":
                flops = as_dim(SymDim.of(cost.macs) * 2)
            elif w.flops_of == "fvcore":
                flops = macs
            else:
                flops = as_dim(SymDim.of(cost.flops))
        except Exception as e:  # any formula may need a concrete dim somewhere
            reason = f"its formula needs concrete dims ({type(e).__name__}: {e})"
    reads = _reads(w, spec, context, in_tids)
    if isinstance(reads, str):
        return _Class(index, tuple(outputs), macs, flops, None, None, reason or reads, False)
    writes = [_whole(w, tid) for tid in tids]
    before = {o for o in outs if o and o not in w.kv}
    read, written = _traffic(w, op_type, domain, ins, reads, outs, writes, folded)
    if not (spec is None or spec.moves_data) and w.runtime and w.graph_outputs.isdisjoint(outs):
        read = written = 0  # as analysis.walk._cost_node: taken out at load
    joins = bool(before) and before <= w.kv
    return _Class(index, tuple(outputs), macs, flops, read, written, reason, joins)


def _whole(w: _Walk, tid: int) -> Dim:
    """The bytes of tensor ``tid`` of ``_Walk.table`` (0 for -1: omitted), once per tensor."""
    if tid < 0:
        return 0
    found = w.whole.get(tid)
    if found is None:
        elem, shape, _value = w.table[tid]
        size = tensor_bytes(math.prod(shape), elem)  # type: ignore[arg-type]
        found = w.whole[tid] = size if type(size) is int else as_dim(SymDim.of(size))
    return found


def _reads(
    w: _Walk, spec: OpSpec | None, context: OpContext, tids: Sequence[int]
) -> tuple[Dim, ...] | str:
    """Bytes read of each input (``tids``), as ``analysis.walk._reads``: none for an op that
    reads shapes only, the op's traffic rule with ``traffic="runtime"``, else each input
    whole; or why they are unknown."""
    if spec is not None and not spec.reads_data:
        return (0,) * len(tids)
    whole = tuple(_whole(w, tid) for tid in tids)
    if spec is None or spec.reads is None or not w.runtime:
        return whole
    try:
        found = spec.reads(context)
    except Exception as e:
        if any(isinstance(t, _SymTensor) for t in (*context.inputs, *context.outputs)):
            return f"its traffic rule needs concrete dims ({type(e).__name__}: {e})"
        return whole  # as a concrete analysis: a rule that cannot size them reads whole
    if len(found) != len(whole):
        return whole
    return tuple(as_dim(SymDim.of(b)) for b in found)


def _traffic(
    w: _Walk,
    op_type: str,
    domain: str,
    ins: Sequence[str],
    reads: Sequence[Dim],
    outs: Sequence[str],
    writes: Sequence[Dim],
    folded: bool,
) -> tuple[Dim, Dim]:
    """Bytes read and written by ``analysis.traffic.node_traffic``'s rule. The rule sums the
    bytes of the inputs and outputs it counts, by role; called with one bit per input and per
    output in place of their bytes, its sums say which it counts (and it adds the outputs to
    the KV cache where it would), and the Dims are summed over those."""
    read_mask, write_mask, *_roles = node_traffic(
        op_type,
        domain == "",
        ins,
        _bits(len(ins)),
        outs,
        _bits(len(outs)),
        folded,
        w.runtime,
        w.weights.constant,
        w.kv,
    )
    return _counted(reads, read_mask), _counted(writes, write_mask)


_BITS = tuple(1 << k for k in range(64))


def _bits(n: int) -> tuple[int, ...]:
    """One bit per input or output (``_traffic``): 1, 2, 4, ..."""
    return _BITS[:n] if n <= len(_BITS) else tuple(1 << k for k in range(n))


def _counted(dims: Sequence[Dim], mask: int) -> Dim:
    """The sum of the ``dims`` whose bit is set in ``mask`` (all of them, the usual case)."""
    if mask == (1 << len(dims)) - 1:
        return _total(dims)
    return _total([b for k, b in enumerate(dims) if mask >> k & 1])


def _total(dims: Sequence[Dim]) -> Dim:
    """The sum of ``dims``: the ints added as ints, one SymDim made for the rest."""
    for d in dims:
        if type(d) is not int:
            break
    else:
        return sum(dims)
    symbolic = [d for d in dims if isinstance(d, SymDim)]
    constant = sum(d for d in dims if isinstance(d, int))
    if not symbolic:
        return constant
    total = symbolic[0]
    for d in symbolic[1:]:
        total = total + d
    return as_dim(total + constant)


__all__ = ["NodeCosts", "WalkMemo", "node_costs"]
