"""Result records of an analysis, read-only by contract. Counts are Python ints; derived figures
are properties."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, ClassVar, Literal, TypeAlias

Status = Literal["ok", "zero", "unsupported", "unknown_shape", "error"]
Convention = Literal["onnxcost", "torch", "fvcore"]
ShapeOut = tuple[int | str | None, ...] | None


def shown(name: str, scope: str | None) -> str:
    """A node's name as the tables show it: a torch dynamo export's in its module
    (``/gpt2/transformer/h.0/mlp/c_fc/node_Gemm_1357``, ``NodeRecord.scope``), every other
    as it is."""
    return name if scope is None else f"{scope}/{name}"


NOT_IN_JSON = {"json": False}
"""Field metadata: the field is left out of the record's JSON."""


@dataclass(frozen=True, slots=True)
class TensorRecord:
    """A graph input or output as reported: name, dtype name, shape (symbols kept as str)."""

    name: str
    dtype: str
    shape: ShapeOut


@dataclass(slots=True, unsafe_hash=True)
class NodeRecord:
    """Cost of one node. ``flops`` follows the analysis convention.

    Read-only by contract, like the other records, but not a frozen dataclass: a frozen
    one's constructor sets each field through ``object.__setattr__``, eight times slower,
    and an analysis builds one record per node.
    """

    name: str
    op_type: str
    domain: str
    status: Status
    macs: int
    flops: int
    params: int
    bytes_read: int
    bytes_written: int
    input_shapes: tuple[ShapeOut, ...]
    output_shapes: tuple[ShapeOut, ...]
    inputs: tuple[str, ...] = field(metadata={"json": False})
    outputs: tuple[str, ...] = field(metadata={"json": False})
    graph: str = ""
    """Scope of the subgraph the node lives in ('' for the main graph, 'If_3/then_branch' ...)."""
    note: str = ""
    backward_macs: int | None = field(default=None, metadata={"json_omit_none": True})
    """With ``training``: MACs of this node's backward (``analysis.training``), else None."""
    backward_flops: int | None = field(default=None, metadata={"json_omit_none": True})
    """With ``training``: FLOPs of its backward in the analysis convention, else None."""
    bytes_read_weights: int = 0
    """Of ``bytes_read``, the bytes of weights: constants and what is computed only from them
    (``analysis.traffic``)."""
    bytes_read_kv_cache: int = 0
    """Of ``bytes_read``, the bytes of the KV cache (cache inputs, outputs and their copies)."""
    bytes_written_kv_cache: int = 0
    """Of ``bytes_written``, the bytes of the KV cache."""
    scope: str | None = field(default=None, metadata={"json_omit_none": True})
    """The module path torch's dynamo exporter recorded for the node (``analysis.scopes``:
    ``/gpt2/transformer/h.2/mlp/act``), the scope the tree reads in place of the name's;
    None for every other node."""

    JSON_PROPERTIES: ClassVar[tuple[str, ...]] = (
        "bytes_read_activations",
        "bytes_written_activations",
    )

    @property
    def shown_name(self) -> str:
        """The name as the tables show it: a dynamo export's node in its module."""
        return shown(self.name, self.scope)

    @property
    def bytes_read_activations(self) -> int:
        """Of ``bytes_read``, what is neither weights nor KV cache."""
        return self.bytes_read - self.bytes_read_weights - self.bytes_read_kv_cache

    @property
    def bytes_written_activations(self) -> int:
        """Of ``bytes_written``, what is not KV cache."""
        return self.bytes_written - self.bytes_written_kv_cache

    @property
    def bytes_total(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per byte moved (0 when nothing moves)."""
        return self.flops / self.bytes_total if self.bytes_total else 0.0


@dataclass(frozen=True, slots=True)
class LiveTensor:
    """An activation live at the peak: its name, the node that wrote it, its bytes."""

    tensor: str
    producer: str
    bytes: int


@dataclass(frozen=True, slots=True)
class PeakActivation:
    """Where peak activation memory happens: its bytes, the step (index in the execution
    order, -1 for an empty graph) and node it happens at, and the largest tensors live there."""

    bytes: int
    node_index: int
    node: str
    live: tuple[LiveTensor, ...]
    """The largest live tensors, at most ``liveness.TOP_LIVE``, largest first."""
    live_count: int = 0
    """How many activations are live there in all."""


@dataclass(frozen=True, slots=True)
class TrainingMemory:
    """Bytes of one training step (``analysis.training``): the weights as the step holds
    them, one gradient per trainable parameter, the optimizer's state, the activations
    backward keeps, and the peak over forward then backward."""

    weights_bytes: int
    gradient_bytes: int
    optimizer_bytes: int
    saved_activation_bytes: int
    peak_bytes: int


@dataclass(frozen=True, slots=True)
class TrainingTotals:
    """What ``analyze(..., training=True)`` adds to the totals (merged into their JSON)."""

    backward_macs: int
    backward_flops: int
    """In the analysis convention."""
    training_flops: int
    """Forward plus backward FLOPs, in the analysis convention."""
    trainable_params: int
    training_memory: TrainingMemory
    optimizer: str = field(default="adamw", metadata=NOT_IN_JSON)
    """What the memory was counted for (reports show it; the JSON keys are the contract's)."""
    mixed_precision: str | None = field(default=None, metadata=NOT_IN_JSON)
    frozen: str | None = field(default=None, metadata=NOT_IN_JSON)


@dataclass(frozen=True, slots=True)
class Totals:
    macs: int
    flops: int
    params: int
    param_bytes: int
    stat_params: int
    """BatchNorm running mean/var elements, apart from params (torch counts them as buffers)."""
    bytes_read: int
    bytes_written: int
    peak_activation_bytes: int
    quant_params: int = 0
    """Quantization scales and zero points, apart from params (their bytes are in param_bytes)."""
    peak_activation_bytes_ort: int | None = None
    """Peak activation bytes under onnxruntime's own execution order (``ort_peak=True``),
    None when not computed."""
    training: TrainingTotals | None = field(default=None, metadata={"json_merge": True})
    """With ``training=True``: backward, training FLOPs and step memory; its keys are
    merged into the totals' JSON (none without training)."""
    bytes_read_weights: int = 0
    """Of ``bytes_read``, the bytes of weights (``analysis.traffic``): under the runtime
    convention, each weight read once per consumer (a Gather's table: the rows it selects)."""
    bytes_read_kv_cache: int = 0
    """Of ``bytes_read``, the bytes of the KV cache: the cache inputs and outputs and their copies."""
    bytes_written_kv_cache: int = 0
    """Of ``bytes_written``, the bytes of the KV cache (the present outputs and their copies)."""
    bytes_read_activations: int = 0
    """Of ``bytes_read``, the bytes of activations: neither weights nor KV cache."""
    bytes_written_activations: int = 0
    """Of ``bytes_written``, the bytes of activations: not KV cache."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CostSums:
    """Summed costs of a group of nodes (``summed``)."""

    count: int
    macs: int
    flops: int
    params: int
    bytes_read: int
    bytes_written: int


@dataclass(frozen=True, slots=True, kw_only=True)
class OpTypeSummary(CostSums):
    op_type: str
    domain: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DtypeSummary(CostSums):
    """Costs of the nodes whose arithmetic runs in one element type (``arithmetic.label``):
    ``float32``, ``uint8 x int8``, ``float32 x int4``..."""

    dtype: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ScopeSummary(CostSums):
    scope: str


@dataclass(frozen=True, slots=True)
class ModelInfo:
    path: str | None
    ir_version: int
    opsets: dict[str, int]
    producer: str
    producer_version: str
    graph_name: str
    node_count: int
    model_bytes: int
    """Size of the .onnx file plus its external data files (0 for in-memory models)."""
    params_by_dtype: dict[str, int]


def summed(records: Iterable[NodeRecord]) -> dict[str, int]:
    """The ``CostSums`` fields of ``records``: their count and their summed costs."""
    recs = list(records)
    return {
        "count": len(recs),
        "macs": sum(r.macs for r in recs),
        "flops": sum(r.flops for r in recs),
        "params": sum(r.params for r in recs),
        "bytes_read": sum(r.bytes_read for r in recs),
        "bytes_written": sum(r.bytes_written for r in recs),
    }


def json_key(name: str) -> dict[str, str]:
    """Field metadata: the field's key in the record's JSON, where it differs from its name."""
    return {"json_key": name}


# --- JSON layouts: where a record's JSON is not its fields in order -------------------------------


@dataclass(frozen=True, slots=True)
class Const:
    """A fixed value in the JSON (a schema name, a method described in words)."""

    value: Any


@dataclass(frozen=True, slots=True)
class Group:
    """A nested object of ``entries``, read from the record itself, or from its attribute ``of``
    (the object is null when that attribute is None)."""

    entries: Layout
    of: str = ""


@dataclass(frozen=True, slots=True)
class Merge:
    """The JSON object of the attribute ``path`` merged into this one (nothing when it is None)."""

    path: str


@dataclass(frozen=True, slots=True)
class When:
    """``entries`` only when the attribute ``path`` is set: true, not None, False or empty."""

    path: str
    entries: Layout


Spec: TypeAlias = str | Const | Group
"""A value: an attribute (a dotted path such as ``"latency.cv"``, None if a step is None), a
constant, or a nested object."""
Entry: TypeAlias = str | tuple[str, Spec] | Merge | When
"""An attribute under its own name, a key and its value, a merged object, or keys set when."""
Layout: TypeAlias = tuple[Entry, ...]
"""A record's JSON object, key by key in order (a class's ``JSON_LAYOUT``)."""


def to_jsonable(value: Any) -> Any:
    """``value`` as JSON-ready data, the one serializer of every result record.

    A dataclass whose class has a ``JSON_LAYOUT`` becomes the object that layout spells out
    (``Layout``: keys in order, each an attribute, a constant, a nested ``Group``, a ``Merge``d
    record or keys present only ``When`` an attribute is set), so a published contract that
    groups, renames or reorders fields is written as data, not as code. Any other dataclass
    becomes a dict of its fields in declaration order: a field whose metadata is NOT_IN_JSON
    is left out, ``json_key(...)`` renames one, ``json_omit_none`` leaves one out while it
    is None, ``json_merge`` merges one's object into this one (nothing while it is None); then the attributes its class names in a
    ``JSON_PROPERTIES`` tuple (computed figures: properties), in that order. Every value is
    serialized the same way again. Tuples, lists and sets become lists, mappings dicts (keys
    as they are), an infinite float the string "inf" (or "-inf", which JSON cannot write as a
    number); anything else stays as it is (str, int, bool, None; and bytes, such as a
    protobuf name that is not UTF-8, which the JSON writer in onnxcost.report.safe_text turns
    into text).
    """
    if isinstance(value, str | int | bool) or value is None:
        return value
    if isinstance(value, float):
        return (
            value if math.isfinite(value) or math.isnan(value) else ("inf" if value > 0 else "-inf")
        )
    if is_dataclass(value) and not isinstance(value, type):
        layout: Layout | None = getattr(value, "JSON_LAYOUT", None)
        if layout is not None:
            return _object(value, layout)
        out = {}
        for f in fields(value):
            meta = f.metadata
            if not meta:
                out[f.name] = to_jsonable(getattr(value, f.name))
                continue
            if not meta.get("json", True):
                continue
            item = getattr(value, f.name)
            if item is None and (meta.get("json_omit_none") or meta.get("json_merge")):
                continue
            if meta.get("json_merge"):
                out.update(to_jsonable(item))
            else:
                out[meta.get("json_key", f.name)] = to_jsonable(item)
        for name in getattr(value, "JSON_PROPERTIES", ()):
            out[name] = to_jsonable(getattr(value, name))
        return out
    if isinstance(value, Mapping):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, tuple | list | set | frozenset):
        return [to_jsonable(v) for v in value]
    return value


def _object(record: Any, layout: Layout) -> dict[str, Any]:
    """The JSON object ``layout`` spells out for ``record``."""
    out: dict[str, Any] = {}
    for entry in layout:
        if isinstance(entry, str):
            out[entry] = to_jsonable(_attribute(record, entry))
        elif isinstance(entry, Merge):
            merged = _attribute(record, entry.path)
            if merged is not None:
                out.update(to_jsonable(merged))
        elif isinstance(entry, When):
            if _attribute(record, entry.path):
                out.update(_object(record, entry.entries))
        else:
            key, spec = entry
            out[key] = _value(record, spec)
    return out


def _value(record: Any, spec: Spec) -> Any:
    if isinstance(spec, str):
        return to_jsonable(_attribute(record, spec))
    if isinstance(spec, Const):
        return to_jsonable(spec.value)
    inner = _attribute(record, spec.of) if spec.of else record
    return None if inner is None else _object(inner, spec.entries)


def _attribute(record: Any, path: str) -> Any:
    """``record.a.b`` for the path ``"a.b"``; None as soon as a step is None."""
    for name in path.split("."):
        if record is None:
            return None
        record = getattr(record, name)
    return record


def to_json(data: Any, indent: int | None = 2) -> str:
    """``json.dumps(data)``; ``bytes`` (names that are not UTF-8) become text like ``\\xff``."""
    try:
        return json.dumps(data, indent=indent)
    except TypeError:
        return json.dumps(_decoded(data), indent=indent)


def jsonable(data: Any) -> Any:
    """``data`` with every ``bytes`` (a name that is not UTF-8) decoded to escaped text."""
    return _decoded(data)


def _decoded(data: Any) -> Any:
    # Kept though the model's names are text (load.names): to_json takes any data, and a
    # caller's own dict may hold bytes (tests/test_hostile_strings.py).
    if isinstance(data, bytes | bytearray):
        return bytes(data).decode("utf-8", "backslashreplace")
    if isinstance(data, dict):
        return {_decoded(k): _decoded(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_decoded(v) for v in data]
    return data
