"""Weight provenance: which tensors are weights, and where each weight is stored.

One rule. A tensor computed only from constants is a weight, never an activation: an
initializer, a Constant, and the output of any node whose inputs are all such tensors
(Identity, Cast, Transpose, Reshape, DequantizeLinear, Concat, ConstantOfShape of a constant
shape, a Mul by a scale ...). The walk marks them in topological order (``see``).

Weights are counted where they are stored. When a node that reads an activation (a
consumer) reads a weight at one of its inputs, the chain of constant-only nodes behind that
input is walked back to its stored roots, the initializers and Constants, and each root is
counted once, however many chains reach it. A chain that starts at a node with no data
input (ConstantOfShape, EyeLike: a generated weight, stored nowhere) counts the tensor the
consumer reads, at its size in memory.

What a root counts as follows the input position that reaches it, through the chain:
a data position (a Conv's W, a Gather's table) makes params; a statistics position
(BatchNormalization's mean and var) statistics; a quantization position (the scales and
zero points of DequantizeLinear, QLinearConv, MatMulNBits ...) quantization params; a
shape, axis or index position nothing. Params and statistics skip indices, shapes and masks
(int64, bool, string) and lone scalars (an epsilon, a per-tensor scale in a Mul);
quantization params count scalars too, since every one of them is stored.

An Identity of a stored tensor whose output is named as a parameter of its own (a module
path, ``layer1.0.bn1.weight``; not an exporter's ``/bn/Identity_output_0``, ``onnx::...``, nor
an undotted alias) is the TorchScript
exporter's de-duplication of equal initializers (an untrained model's BatchNorm ones and
zeros): its output is stored in its own right, and counts once by itself, as a param or, where
BatchNorm reads it as mean or variance, a statistic. A tensor several nodes read directly, or
through Transpose (a tied LM head), is one stored tensor and counts once.

A scale that multiplies a dequantised product is a quantization parameter wherever it sits
(``dequantising_scales``): onnxruntime's quantize_dynamic multiplies MatMulInteger's output,
cast to float, by the input's scale times the weight's, in two plain Muls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple

import onnx

from onnxcost.analysis.masks import additive_masks
from onnxcost.analysis.merged import Merged, merged_params
from onnxcost.analysis.norms import made_up_norm_params
from onnxcost.analysis.position_bias import gathered_tables
from onnxcost.analysis.rotary import rotary_tables
from onnxcost.analysis.scopes import from_dynamo
from onnxcost.analysis.signature import buffers
from onnxcost.analysis.tied import deduplicated, tied_copies, weight_copies
from onnxcost.costs._context import InvalidAttributeError, OpContext
from onnxcost.costs._registry import OpSpec
from onnxcost.load.graph import GraphView
from onnxcost.load.tensors import (
    PARAMETER_PATH,
    SUBGRAPH_OPS,
    TensorInfo,
    UnknownShapeError,
    dtype_name,
    element_bits,
)

Role = Literal["param", "stat", "quant"]

NON_WEIGHT_TYPES = frozenset(
    {onnx.TensorProto.INT64, onnx.TensorProto.BOOL, onnx.TensorProto.STRING}
)
"""Element types that are never weights: indices, shapes, masks, strings."""

_NOT_CONSTANT_OPS = frozenset(
    {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial"}
)
"""Ops whose output is not determined by their inputs."""

_DENSE = frozenset({"MatMul", "Add"})
"""The ops of a dense layer whose one-element bias is a param (``Weights._dense_bias``)."""


@dataclass(frozen=True, slots=True)
class Counted:
    """One stored weight (or generated one) as counted: its role, its count (logical elements:
    MatMulNBits' packed uint8 holds two 4-bit weights per element), its element type and the
    bytes it takes in the file (or, generated, in memory)."""

    role: Role
    elements: int
    elem_type: int
    nbytes: int


@dataclass(frozen=True, slots=True)
class _Producer:
    inputs: tuple[str, ...]
    spec: OpSpec | None


@dataclass
class Weights:
    """The constant-derived tensors of an analysis and the weights counted so far."""

    stored: dict[str, TensorInfo] = field(default_factory=dict)
    """Initializers and Constant outputs: where weights are stored."""
    constant: set[str] = field(default_factory=set)
    """Every constant-derived tensor, the stored ones included."""
    producers: dict[str, _Producer] = field(default_factory=dict)
    """Constant-derived tensor -> the node that computes it from constants."""
    counted: dict[str, Counted] = field(default_factory=dict)
    """Stored (or generated) weight -> how it counts; each once."""
    totals: dict[Role, int] = field(default_factory=lambda: {"param": 0, "stat": 0, "quant": 0})
    """Elements counted so far by role."""
    scales: frozenset[str] = frozenset()
    """Tensors that scale a dequantised product (``dequantising_scales``): what they read of
    the stored weights counts as quantization params, whatever node reads them."""
    copies: dict[str, str] = field(default_factory=dict)
    """Stored tensor -> the stored tensor it is a copy of (``analysis.tied``: a tied LM head
    the exporter wrote again): counted as that one, once."""
    merged: Merged = field(default_factory=Merged)
    """The params torch's exporter merged into one tensor or dropped from an untrained model
    (``analysis.merged``): counted as the model's own, per module and per Gemm."""
    no_params: frozenset[str] = frozenset()
    """Stored tensors that are no params: the additive attention masks an exporter folded
    (``analysis.masks``), the ones and zeros torch's exporters give an InstanceNormalization
    that torch's norm has no params for (``analysis.norms``), the rotary position tables an
    exporter folded (``analysis.rotary``)."""
    separate: frozenset[str] = frozenset()
    """Outputs of the Identity nodes through which the TorchScript exporter reads a param that
    equalled another (``tied.deduplicated``): each a param of its own."""
    buffers: frozenset[str] = frozenset()
    """Initializers that torch's graph signature names as buffers or constants
    (``analysis.signature``): no params (a BatchNorm's statistics still count as such)."""
    tables: dict[str, int] = field(default_factory=dict)
    """Initializer -> the elements of the table it was gathered from (``analysis.position_bias``:
    Swin's relative position bias, stored expanded): counted as that table."""
    recovered: int = 0
    """The params ``merged`` brought back: not stored in the file as they count."""
    recovered_names: set[str] = field(default_factory=set)
    """The names they count under (each param's path where the exporter's record gives it:
    ``gpt2.transformer.h.1.ln_2.weight``): trainable params as the stored ones are."""
    one_unit: set[str] = field(default_factory=set)
    """Outputs of a MatMul by a constant of one column: a dense layer with one output unit
    (``_dense_bias``), whose bias, added next, is a stored tensor of one element."""

    def add_stored(self, name: str, info: TensorInfo) -> None:
        self.stored[name] = info
        self.constant.add(name)

    def forget(self, names: Iterable[str]) -> None:
        """No longer know ``names`` as constant-derived or stored (a body's own tensors, once
        it is walked); what they counted stays counted."""
        for name in names:
            self.constant.discard(name)
            self.stored.pop(name, None)
            self.producers.pop(name, None)

    def add_initializers(self, initializers: Iterable[onnx.TensorProto]) -> None:
        for t in initializers:
            self.add_stored(t.name, TensorInfo(t.name, t.data_type, tuple(t.dims)))

    def see(
        self,
        op_type: str,
        inputs: Sequence[str],
        outputs: Sequence[str],
        spec: OpSpec | None,
        types: Mapping[str, TensorInfo],
        default_domain: bool,
    ) -> bool:
        """Mark ``outputs`` constant-derived when the node computes them from constants only;
        returns whether it does. Call for every node in topological order."""
        if op_type == "Constant" and default_domain:
            for o in outputs:
                info = types.get(o) if o else None
                if info is not None:
                    self.add_stored(o, info)
            return True
        constant = self.constant
        if inputs and inputs[0] and inputs[0] not in constant:
            return False  # the usual node: its first input is an activation
        if op_type == "Identity" and default_domain and self._deduplicated(inputs, outputs, types):
            return True
        if (
            op_type in _NOT_CONSTANT_OPS
            or (op_type in SUBGRAPH_OPS and default_domain)
            or not constant.issuperset(filter(None, inputs))  # a named input not constant
            or not any(inputs)
        ):
            return False
        producer = _Producer(tuple(inputs), spec)
        for o in outputs:
            if o:
                constant.add(o)
                self.producers[o] = producer
        return True

    def _deduplicated(
        self, inputs: Sequence[str], outputs: Sequence[str], types: Mapping[str, TensorInfo]
    ) -> bool:
        """Store an exporter's de-duplicating Identity's output as a weight of its own
        (see the module's docstring); returns whether the node is one."""
        if len(inputs) != 1 or len(outputs) != 1 or inputs[0] not in self.stored:
            return False
        out = outputs[0]
        if out in self.stored or not (PARAMETER_PATH.match(out) or out in self.separate):
            return False  # a name the exporter made up, or an alias: an Identity like any other
        info = types.get(out)
        self.add_stored(out, info if info is not None else self.stored[inputs[0]].renamed(out))
        return True

    def count(
        self,
        inputs: Sequence[str],
        spec: OpSpec | None,
        types: Mapping[str, TensorInfo],
        context: Callable[[], OpContext] | None,
        *,
        generated: bool = True,
        outputs: Sequence[str] = (),
        reader: str = "",
    ) -> int:
        """Count the weights a consumer node reads (each stored weight once); returns the
        params it brings in. Without ``generated``, only stored weights count (a model output
        computed from constants: a ConstantOfShape or Range output there is no weight).
        ``context``: the node's OpContext, needed where ``spec.param_elements`` names an input
        and where the op holds params in its attributes (``spec.attribute_params``).
        ``outputs``: the node's, where a MatMul's product may be a one-unit layer's
        (``_dense_bias``). ``reader``: the node's name, where torch's exporter merged or
        dropped a param it reads (``analysis.merged``)."""
        params = 0
        if spec is not None and spec.attribute_params is not None and context is not None:
            params = self._count_attributes(spec.attribute_params, context())
        if reader in self.merged.readers:
            params += self._count_merged(inputs, spec, reader)
        if self.constant.isdisjoint(inputs):
            return params  # most nodes read activations only
        for i, name in enumerate(inputs):
            if not name or name not in self.constant:
                continue
            role: Role | None = "quant" if name in self.scales else _role(spec, i)
            if role is None:
                continue
            if reader in self.merged.readers and self._merged_elsewhere(name, reader, i):
                continue  # counted by _count_merged as this module's own
            before = self.totals["param"]
            if self._count_roots(name, role) and generated:
                self._count_generated(name, role, types)
            if role == "param" and spec is not None and i in spec.bias_inputs:
                self._count_bias(name)
            if role == "param" and spec is not None and i in spec.param_elements:
                assert context is not None, "an op with param_elements needs its context"
                self._logical_count(name, spec.param_elements[i], context)
            params += self.totals["param"] - before
        if spec is not None and spec.op_type in _DENSE and spec.domain == "":
            params += self._dense_bias(spec.op_type, inputs, outputs, types)
        return params

    def _merged_elsewhere(self, name: str, reader: str, index: int) -> bool:
        """Whether ``reader`` reads ``name`` (at input ``index``) as another param than the one
        it is named for, of another module or another of the same: a merged tensor standing
        for that param."""
        module = self.merged.shared.get(name, {}).get(reader)
        owner, _, own = name.rpartition(".")
        leaf = self.merged.leaves.get((name, reader, index), own)
        return module is not None and (module != owner or leaf != own)

    def _count_merged(self, inputs: Sequence[str], spec: OpSpec | None, reader: str) -> int:
        """The params of ``reader`` (a node's name) that torch's exporter merged into another
        module's tensor, each once per module, or dropped from it (``analysis.merged``)."""
        before = self.totals["param"]
        dropped = self.merged.dropped.get(reader)
        if dropped is not None and dropped.name not in self.stored:
            bits = element_bits(dropped.elem_type)
            nbytes = (dropped.elements * bits + 7) // 8
            self._put(dropped.name, Counted("param", dropped.elements, dropped.elem_type, nbytes))
            self.recovered_names.add(dropped.name)
        for i, name in enumerate(inputs):
            if not name or not self._merged_elsewhere(name, reader, i):
                continue
            role = _role(spec, i)
            info = self.stored.get(name)
            module = self.merged.shared[name][reader]
            leaf = self.merged.leaves.get((name, reader, i), name.rpartition(".")[2])
            key = f"{module}.{leaf}"  # that module's own param
            if key in self.stored:
                key = f"{name} ({module})"
            if role is None or info is None or key in self.counted or info.known_numel < 0:
                continue
            if name in self.no_params:  # a mask merged: none in any module
                continue
            self._put(key, Counted(role, info.known_numel, info.elem_type, info.known_nbytes))
            self.recovered_names.add(key)
        self.recovered += self.totals["param"] - before
        return self.totals["param"] - before

    def _dense_bias(
        self,
        op_type: str,
        inputs: Sequence[str],
        outputs: Sequence[str],
        types: Mapping[str, TensorInfo],
    ) -> int:
        """The params of a one-unit dense layer's bias (``count``, for a MatMul or an Add that
        reads a constant): a MatMul by a constant of one column (a Keras ``Dense(1)``, a torch
        ``Linear(d, 1)`` on a sequence) is noted, and the Add of a one-element stored tensor
        to its product brings that tensor in, 1 param, where any other lone scalar (an
        epsilon) is none. Exporters write the bias on either side of the Add."""
        if op_type == "MatMul" and len(inputs) == 2 and len(outputs) == 1:
            b = types.get(inputs[1]) if inputs[1] in self.constant else None
            if b is not None and b.shape is not None and len(b.shape) >= 2 and b.shape[-1] == 1:
                self.one_unit.add(outputs[0])
            return 0
        if op_type != "Add" or len(inputs) != 2 or self.one_unit.isdisjoint(inputs):
            return 0
        before = self.totals["param"]
        for name in inputs:
            if name not in self.one_unit:
                self._count_bias(name)
        return self.totals["param"] - before

    def _count_bias(self, name: str) -> None:
        """A stored bias of one element (a Conv with one output channel): a param, which
        ``_count_stored`` leaves out as a lone scalar."""
        info = self.stored.get(name)
        if info is None or name in self.counted or info.elem_type in NON_WEIGHT_TYPES:
            return
        if info.known_numel == 1:
            self._put(name, Counted("param", 1, info.elem_type, info.known_nbytes))

    def _count_attributes(
        self, attribute_params: Callable[[OpContext], tuple[int, int]], context: OpContext
    ) -> int:
        """The params a node holds in its attributes (an ai.onnx.ml model's coefficients,
        support vectors, thresholds), stored with the node: counted once under its name."""
        try:
            elements, elem_type = attribute_params(context)
        except (InvalidAttributeError, UnknownShapeError, IndexError, TypeError, ValueError):
            return 0  # an attribute no runtime accepts: nothing counted
        if elements <= 0:
            return 0
        nbytes = elements * element_bits(elem_type) // 8
        before = self.totals["param"]
        self._put(
            f"{context.node.name} (attributes)", Counted("param", elements, elem_type, nbytes)
        )
        return self.totals["param"] - before

    def _count_roots(self, start: str, role: Role) -> bool:
        """Walk back from ``start`` through constant-only nodes and count the stored roots;
        returns whether a chain starts at a generator (a node with no data input)."""
        generated = False
        stack: list[tuple[str, Role]] = [(start, role)]
        visited: set[tuple[str, Role]] = set()
        while stack:
            name, r = stack.pop()
            if (name, r) in visited:
                continue
            visited.add((name, r))
            info = self.stored.get(name)
            if info is not None:
                self._count_stored(name, info, r)
                continue
            producer = self.producers.get(name)
            if producer is None or self._masked_fill(producer) or _trigonometric(producer):
                continue
            pushed = False
            for j, source in enumerate(producer.inputs):
                role_j = _role(producer.spec, j, r)
                if source and role_j is not None:
                    stack.append((source, role_j))
                    pushed = pushed or role_j == r
            generated = generated or not pushed
        return generated

    def _masked_fill(self, producer: _Producer) -> bool:
        """Whether ``producer`` is a Where that fills a constant tensor by a condition computed
        from it, with a lone scalar on one side: torch's ``masked_fill`` of an attention mask
        (Swin's shifted windows: 0 and -100, built from ConstantOfShape and ScatterND), which
        the dynamo exporter computes from constants. A mask, not a weight: nothing behind it
        counts (swin3d_t counted 12.9 M mask elements as params, 46% over torch's)."""
        spec, inputs = producer.spec, producer.inputs
        if spec is None or spec.op_type != "Where" or spec.domain != "" or len(inputs) != 3:
            return False
        if not inputs[0] or inputs[0] in self.stored:
            return False  # a stored condition: a pruning mask over a weight, which counts
        for value in inputs[1:]:
            info = self.stored.get(value)
            if info is not None and 0 <= info.known_numel <= 1:
                return True
        return False

    def _count_stored(self, name: str, info: TensorInfo, role: Role) -> None:
        original = self.copies.get(name)
        if original is not None and original in self.stored:
            name, info = original, self.stored[original]  # a copy counts as what it copies
        if name in self.counted or info.elem_type in NON_WEIGHT_TYPES or name in self.no_params:
            return
        if role == "param" and name in self.buffers:
            return  # a rotary embedding's inv_freq: torch's buffer, read as a weight
        numel, nbytes = info.known_numel, info.known_nbytes
        if numel < 0 or (numel <= 1 and role != "quant"):
            return  # unknown, or a lone scalar (an epsilon, a scale)
        # a position bias stored expanded: its table's elements, the bytes it takes in the
        # file (as a packed weight's: MatMulNBits')
        numel = self.tables.get(name, numel)
        self._put(name, Counted(role, numel, info.elem_type, nbytes))

    def _put(self, name: str, counted: Counted) -> None:
        old = self.counted.get(name)
        if old is not None:
            self.totals[old.role] -= old.elements
        self.counted[name] = counted
        self.totals[counted.role] += counted.elements

    def _count_generated(self, name: str, role: Role, types: Mapping[str, TensorInfo]) -> None:
        info = types.get(name)
        if info is None or name in self.counted or info.elem_type in NON_WEIGHT_TYPES:
            return
        numel = info.known_numel
        if numel < 0 or (numel <= 1 and role != "quant"):
            return
        self._put(name, Counted(role, numel, info.elem_type, info.known_nbytes))

    def _logical_count(
        self, name: str, elements: Callable[[OpContext], int], context: Callable[[], OpContext]
    ) -> None:
        """A weight stored packed (MatMulNBits' B): its count is the op's logical one."""
        found = self.counted.get(name)
        if found is None or found.role != "param":
            return
        try:
            count = elements(context())
        except (UnknownShapeError, InvalidAttributeError, IndexError, TypeError, ValueError):
            return  # unknown, or an attribute no runtime accepts: the stored count stands
        self._put(name, Counted("param", count, found.elem_type, found.nbytes))

    def snapshot(self) -> tuple[dict[str, Counted], dict[Role, int]]:
        """What ``restore`` puts back (a probe of an If branch counts nothing)."""
        return dict(self.counted), dict(self.totals)

    def restore(self, saved: tuple[dict[str, Counted], dict[Role, int]]) -> None:
        self.counted, self.totals = dict(saved[0]), dict(saved[1])

    def param_bytes(self) -> int:
        """Bytes of params and quantization params: as stored, or in memory when generated."""
        return sum(c.nbytes for c in self.counted.values() if c.role != "stat")

    def params_by_dtype(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for name in sorted(self.counted):
            c = self.counted[name]
            if c.role == "param":
                key = dtype_name(c.elem_type)
                out[key] = out.get(key, 0) + c.elements
        return out


_INTEGER_PRODUCTS = frozenset({"MatMulInteger", "ConvInteger"})
"""Default-domain ops whose int32 output is a product of quantized tensors, still to scale."""
_SCALE_PATH = frozenset({"Mul", "Cast", "Identity", "Reshape", "Unsqueeze", "Squeeze"})
"""Ops through which a scale is computed (the input's scale times the weight's) or a
dequantised product is carried (its Cast to float)."""


class Stored(NamedTuple):
    """What ``read_stored`` finds: ``Weights``' fields of the same names."""

    copies: dict[str, str]
    merged: Merged
    no_params: frozenset[str]
    separate: frozenset[str]
    tables: dict[str, int]
    buffers: frozenset[str]

    def put(self, weights: Weights) -> None:
        weights.copies, weights.merged = self.copies, self.merged
        weights.no_params, weights.separate = self.no_params, self.separate
        weights.tables, weights.buffers = self.tables, self.buffers


def read_stored(proto: onnx.ModelProto, view: GraphView, path: Path | None) -> Stored:
    """What the stored tensors of ``proto``'s main graph say before any is counted (``Weights``'
    ``copies``, ``merged``, ``no_params``, ``separate``, ``tables`` and ``buffers``): the
    tensors stored twice (``analysis.tied``; a weight torch's dynamo exporter folded once per
    call too), the params it merged or dropped (``analysis.merged``), the attention masks an
    exporter folded (``analysis.masks``), the norms' params torch's made up
    (``analysis.norms``) and the rotary tables folded (``analysis.rotary``), the params the
    TorchScript exporter de-duplicated (``tied.deduplicated``), the position biases stored
    expanded (``analysis.position_bias``), torch's buffers (``analysis.signature``). Read
    before shape inference detaches initializers."""
    copies = tied_copies(proto, view, path)
    merged = Merged()
    if from_dynamo(view):
        copies = {**weight_copies(proto, path), **copies}
        merged = merged_params(proto, view, path)
    no_params = (
        additive_masks(proto, view, path)
        | made_up_norm_params(proto, view)
        | rotary_tables(proto, view, path)
    )
    tables = gathered_tables(proto, view, path)
    separate = deduplicated(proto, view, path)
    return Stored(copies, merged, no_params, separate, tables, buffers(proto))


def dequantising_scales(
    op_types: Sequence[str],
    domains: Sequence[str],
    inputs: Sequence[Sequence[str]],
    outputs: Sequence[Sequence[str]],
) -> frozenset[str]:
    """The tensors that scale a dequantised product, nodes given in topological order.

    A dequantised product is the output of MatMulInteger or ConvInteger and its Casts. A
    Mul that reads one multiplies it by a scale: its other operand, and every tensor that
    operand is computed from through Mul, Cast and reshapes (x_scale * w_scale), are scales.
    """
    if _INTEGER_PRODUCTS.isdisjoint(op_types):
        return frozenset()  # nearly every model: one pass over the op types
    dequantised: set[str] = set()
    writers: dict[str, int] = {}
    scaled: list[str] = []
    for i, (op_type, domain) in enumerate(zip(op_types, domains, strict=True)):
        if domain not in ("", "ai.onnx"):
            continue
        ins, outs = inputs[i], outputs[i]
        for o in outs:
            if o:
                writers[o] = i
        if op_type in _INTEGER_PRODUCTS or (
            op_type in ("Cast", "Identity") and ins and ins[0] in dequantised
        ):
            dequantised.update(o for o in outs if o)
        elif op_type == "Mul" and len(ins) == 2:
            for a, b in ((ins[0], ins[1]), (ins[1], ins[0])):
                if a in dequantised and b not in dequantised:
                    scaled.append(b)
    found: set[str] = set()
    while scaled:
        name = scaled.pop()
        if not name or name in found:
            continue
        found.add(name)
        at = writers.get(name)
        if at is not None and op_types[at] in _SCALE_PATH:
            data = inputs[at] if op_types[at] == "Mul" else inputs[at][:1]
            scaled.extend(data)
    return frozenset(found)


_TRIGONOMETRIC = frozenset({"Cos", "Sin"})


def _trigonometric(producer: _Producer) -> bool:
    """Whether ``producer`` is a Cos or Sin of constants: a position table (a rotary
    embedding's cos and sin, computed from its ``inv_freq`` and the positions at the traced
    length; a sinusoidal encoding), which no learned weight is: nothing behind it counts."""
    spec = producer.spec
    return spec is not None and spec.op_type in _TRIGONOMETRIC and spec.domain == ""


def _role(spec: OpSpec | None, i: int, role: Role = "param") -> Role | None:
    """What a weight at input ``i`` of a node counts as, reached with ``role``: None at a
    shape, axis or index position."""
    if spec is None:
        return role
    if i in spec.quant_inputs:
        return "quant"
    if i in spec.meta_inputs:
        return None
    if i in spec.stat_inputs:
        return "stat"
    return role


__all__ = ["NON_WEIGHT_TYPES", "Counted", "Weights", "dequantising_scales"]
