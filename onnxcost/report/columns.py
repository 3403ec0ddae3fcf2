"""Column definitions shared by the table, markdown and CSV renderers of an analysis."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from onnxcost import units
from onnxcost.analysis.records import NodeRecord, OpTypeSummary, ScopeSummary


@dataclass(frozen=True)
class Column:
    header: str
    exact: Callable[[Any], Any]
    """The machine value (CSV): exact integers."""
    human: Callable[[Any], str]
    """The table value: human units."""
    numeric: bool = True


def _c(header: str, attr: str, human: Callable[[Any], str] = units.count) -> Column:
    return Column(header, lambda r: getattr(r, attr), lambda r: human(getattr(r, attr)))


def _t(header: str, get: Callable[[Any], str]) -> Column:
    return Column(header, get, get, numeric=False)


NODE_COLUMNS: Sequence[Column] = (
    _t("name", lambda r: r.name),
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


def op_type_columns(total_flops: int, total_macs: int) -> Sequence[Column]:
    """benchmark_model's 'Summary by node type', by cost instead of time."""
    return (
        _t("op type", lambda r: r.op_type if not r.domain else f"{r.domain}::{r.op_type}"),
        _c("count", "count", str),
        _c("MACs", "macs"),
        _c("FLOPs", "flops"),
        Column(
            "FLOPs %",
            lambda r: r.flops / total_flops if total_flops else 0.0,
            lambda r: units.percent(r.flops, total_flops),
        ),
        _c("read", "bytes_read", units.nbytes),
        _c("written", "bytes_written", units.nbytes),
        _c("params", "params"),
    )


def dtype_columns(total_macs: int) -> Sequence[Column]:
    """The ``by_dtype`` table: costs by the element types the arithmetic runs in."""
    return (
        _t("arithmetic in", lambda r: r.dtype),
        _c("nodes", "count", str),
        _c("MACs", "macs"),
        Column(
            "MACs %",
            lambda r: r.macs / total_macs if total_macs else 0.0,
            lambda r: units.percent(r.macs, total_macs),
        ),
        _c("FLOPs", "flops"),
        _c("params", "params"),
        _c("read", "bytes_read", units.nbytes),
        _c("written", "bytes_written", units.nbytes),
    )


SCOPE_COLUMNS: Sequence[Column] = (
    _t("scope", lambda r: r.scope),
    _c("nodes", "count", str),
    _c("params", "params"),
    _c("MACs", "macs"),
    _c("FLOPs", "flops"),
    _c("read", "bytes_read", units.nbytes),
    _c("written", "bytes_written", units.nbytes),
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
    "Column",
    "NodeRecord",
    "ScopeSummary",
    "op_type_columns",
    "with_cumulative",
]
