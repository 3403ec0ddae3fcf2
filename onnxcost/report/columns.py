"""The analysis view's columns: how each cell of its tables is read from a record.

``table`` turns columns and records into a ``report.tables.Table`` that every writer draws
(the terminal in ``report.table``, Markdown in ``report.as_text``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from onnxcost import units
from onnxcost.analysis.records import NodeRecord, OpTypeSummary, ScopeSummary, Totals
from onnxcost.analysis.result import Analysis
from onnxcost.report import tables


def read_by_role(t: Totals) -> str:
    """'weights W, activations A' (', KV cache K' where there is one): the bytes read by role."""
    out = (
        f"weights {units.nbytes(t.bytes_read_weights)}, "
        f"activations {units.nbytes(t.bytes_read_activations)}"
    )
    if t.bytes_read_kv_cache or t.bytes_written_kv_cache:
        out += f", KV cache {units.nbytes(t.bytes_read_kv_cache)}"
    return out


def traffic_text(a: Analysis) -> str:
    """How the analysis counts bytes, in words (onnxcost/analysis/traffic.py)."""
    if a.traffic == "runtime":
        return "what a runtime moves"
    return "every input and output whole"


@dataclass(frozen=True)
class Field:
    """How one column of an analysis table reads a record (``table`` makes the
    ``report.tables.Column`` that the writers draw)."""

    header: str
    exact: Callable[[Any], Any]
    """The machine value (CSV): exact integers."""
    human: Callable[[Any], str]
    """The table value: human units."""
    numeric: bool = True


def _c(header: str, attr: str, human: Callable[[Any], str] = units.count) -> Field:
    return Field(header, lambda r: getattr(r, attr), lambda r: human(getattr(r, attr)))


def _t(header: str, get: Callable[[Any], str]) -> Field:
    return Field(header, get, get, numeric=False)


NODE_COLUMNS: Sequence[Field] = (
    # A node of a torch dynamo export (``node_Gemm_1406``) shown in its module, as the
    # TorchScript exporter's names are (``/transformer/h.2/mlp/c_proj/Gemm``).
    Field("name", lambda r: r.name, lambda r: r.shown_name, numeric=False),
    _t("op", lambda r: r.op_type if not r.domain else f"{r.domain}::{r.op_type}"),
    _t("in shapes", lambda r: units.shapes(r.input_shapes)),
    _t("out shapes", lambda r: units.shapes(r.output_shapes)),
    _c("params", "params"),
    _c("MACs", "macs"),
    _c("FLOPs", "flops"),
    _c("read", "bytes_read", units.nbytes),
    _c("written", "bytes_written", units.nbytes),
    _t("status", lambda r: r.status),
)

BACKWARD_COLUMN = Field(
    "bwd FLOPs", lambda r: r.backward_flops, lambda r: units.count(r.backward_flops or 0)
)
"""With ``training``: each node's backward FLOPs (``NodeRecord.backward_flops``)."""


def node_columns(training: bool) -> Sequence[Field]:
    """``NODE_COLUMNS``, with the backward FLOPs after the FLOPs when ``training``."""
    if not training:
        return NODE_COLUMNS
    k = [c.header for c in NODE_COLUMNS].index("FLOPs") + 1
    return (*NODE_COLUMNS[:k], BACKWARD_COLUMN, *NODE_COLUMNS[k:])


def op_type_columns(total_flops: int, total_macs: int) -> Sequence[Field]:
    """benchmark_model's 'Summary by node type', by cost instead of time."""
    return (
        _t("op type", lambda r: r.op_type if not r.domain else f"{r.domain}::{r.op_type}"),
        _c("count", "count", str),
        _c("MACs", "macs"),
        _c("FLOPs", "flops"),
        Field(
            "FLOPs %",
            lambda r: r.flops / total_flops if total_flops else 0.0,
            lambda r: units.percent(r.flops, total_flops),
        ),
        _c("read", "bytes_read", units.nbytes),
        _c("written", "bytes_written", units.nbytes),
        _c("params", "params"),
    )


def dtype_columns(total_macs: int) -> Sequence[Field]:
    """The ``by_dtype`` table: costs by the element types the arithmetic runs in."""
    return (
        _t("arithmetic in", lambda r: r.dtype),
        _c("nodes", "count", str),
        _c("MACs", "macs"),
        Field(
            "MACs %",
            lambda r: r.macs / total_macs if total_macs else 0.0,
            lambda r: units.percent(r.macs, total_macs),
        ),
        _c("FLOPs", "flops"),
        _c("params", "params"),
        _c("read", "bytes_read", units.nbytes),
        _c("written", "bytes_written", units.nbytes),
    )


SCOPE_COLUMNS: Sequence[Field] = (
    _t("scope", lambda r: r.scope),
    _c("nodes", "count", str),
    _c("params", "params"),
    _c("MACs", "macs"),
    _c("FLOPs", "flops"),
    _c("read", "bytes_read", units.nbytes),
    _c("written", "bytes_written", units.nbytes),
)


# Which columns go first when a table is too wide, and which text may be cut in the middle.
DROP_FIRST = (
    "in shapes", "cum. %", "written", "read", "status", "out shapes", "params", "count",
    "nodes", "FLOPs %", "MACs %",
)  # fmt: skip
TRIMMED = ("name", "scope", "op", "op type", "in shapes", "out shapes", "arithmetic in")


def table(
    title: str,
    columns: Sequence[Field],
    rows: Sequence[object],
    extra: Sequence[tuple[str, list[str]]] = (),
) -> tables.Table:
    """Rows of ``columns`` (human units), and ``extra`` columns of ready text (numeric)."""
    headers = [c.header for c in columns] + [h for h, _v in extra]
    trimmed = tables.by_header(headers, TRIMMED)
    cols = [(c.header, c.numeric) for c in columns] + [(h, True) for h, _v in extra]
    return tables.Table(
        title,
        tuple(
            tables.Column(h, n, "middle" if i in trimmed else "") for i, (h, n) in enumerate(cols)
        ),
        tuple(
            (*(c.human(r) for c in columns), *(values[i] for _h, values in extra))
            for i, r in enumerate(rows)
        ),
        drop=tables.by_header(headers, DROP_FIRST),
    )


def with_cumulative(
    rows: Sequence[OpTypeSummary], total_flops: int
) -> list[tuple[OpTypeSummary, float]]:
    """Each row with the cumulative share of FLOPs up to and including it."""
    out, acc = [], 0
    for r in rows:
        acc += r.flops
        out.append((r, acc / total_flops if total_flops else 0.0))
    return out


__all__ = [
    "NODE_COLUMNS",
    "SCOPE_COLUMNS",
    "Field",
    "NodeRecord",
    "ScopeSummary",
    "node_columns",
    "op_type_columns",
    "table",
    "with_cumulative",
]
