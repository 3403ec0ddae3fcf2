"""Result records of an analysis, read-only by contract. Counts are Python ints; derived figures
are properties."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "zero", "unsupported", "unknown_shape", "error"]
Convention = Literal["onnxcost", "torch", "fvcore"]
ShapeOut = tuple[int | str | None, ...] | None


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
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    graph: str = ""
    """Scope of the subgraph the node lives in ('' for the main graph, 'If_3/then_branch' ...)."""
    note: str = ""

    @property
    def bytes_total(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per byte moved (0 when nothing moves)."""
        return self.flops / self.bytes_total if self.bytes_total else 0.0


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
    out = dict.fromkeys(("count", "macs", "flops", "params", "bytes_read", "bytes_written"), 0)
    for r in records:
        out["count"] += 1
        out["macs"] += r.macs
        out["flops"] += r.flops
        out["params"] += r.params
        out["bytes_read"] += r.bytes_read
        out["bytes_written"] += r.bytes_written
    return out
