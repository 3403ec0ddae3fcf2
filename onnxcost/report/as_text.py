"""Plain-text formats of an analysis: CSV (exact integers) and Markdown (human units).

Model text goes through ``safe_text``: CSV cells that a spreadsheet would run are prefixed,
Markdown cells escaped, control characters written as escapes in both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import cast

from onnxcost import units
from onnxcost.analysis.records import NodeRecord
from onnxcost.analysis.result import Analysis
from onnxcost.report.columns import (
    Field,
    dtype_columns,
    node_columns,
    op_type_columns,
    table,
    traffic_text,
    with_cumulative,
)
from onnxcost.report.safe_text import md, md_code
from onnxcost.report.tables import Cell, Column, Table
from onnxcost.report.training import training_table
from onnxcost.report.tree import scope_json, tree_view
from onnxcost.report.writers.csv import to_csv as csv_text
from onnxcost.report.writers.markdown import to_markdown as md_lines

CSV_HEADERS = (
    "name",
    "op_type",
    "domain",
    "status",
    "input_shapes",
    "output_shapes",
    "params",
    "macs",
    "flops",
    "bytes_read",
    "bytes_written",
    "graph",
    "bytes_read_weights",
    "bytes_read_activations",
    "bytes_read_kv_cache",
    "bytes_written_kv_cache",
)


def csv_table(nodes: Sequence[NodeRecord]) -> Table:
    """One row per node; counts are exact integers, shapes written like 1x3x224x224; with
    training, each node's backward_macs and backward_flops after the other columns; for an
    export of torch's dynamo exporter, each node's module path last (``scope``)."""
    if any(n.scope is not None for n in nodes):
        base = csv_table([replace(n, scope=None) for n in nodes])
        rows_scoped = tuple((*row, n.scope or "") for row, n in zip(base.rows, nodes, strict=True))
        return Table("nodes", (*base.columns, Column("scope")), rows_scoped)
    if nodes and nodes[0].backward_macs is not None:
        base = csv_table([replace(n, backward_macs=None, backward_flops=None) for n in nodes])
        headers = (*base.columns, Column("backward_macs"), Column("backward_flops"))
        rows_bw = tuple(
            (*row, n.backward_macs or 0, n.backward_flops or 0)
            for row, n in zip(base.rows, nodes, strict=True)
        )
        return Table("nodes", headers, rows_bw)
    rows = tuple(
        (
            n.name,
            n.op_type,
            n.domain,
            n.status,
            ";".join(units.shape(s) for s in n.input_shapes),
            ";".join(units.shape(s) for s in n.output_shapes),
            n.params,
            n.macs,
            n.flops,
            n.bytes_read,
            n.bytes_written,
            n.graph,
            n.bytes_read_weights,
            n.bytes_read_activations,
            n.bytes_read_kv_cache,
            n.bytes_written_kv_cache,
        )
        for n in nodes
    )
    return Table("nodes", tuple(map(Column, CSV_HEADERS)), rows)


def scopes_csv(a: Analysis, depth: int | None) -> str:
    """``analyze --depth N -f csv`` (or ``--tree``): one row per scope of the tree to that
    depth, unfolded, with its subtotals (the JSON's ``scopes``: ``tree.scope_json``)."""
    scopes = scope_json(a, depth)
    keys = ("scope", "depth", "nodes", "params", "macs", "flops", "bytes_read", "bytes_written")
    rows = tuple(tuple(cast("Cell", s[k]) for k in keys) for s in scopes)
    return csv_text(Table("scopes", tuple(map(Column, keys)), rows))


def to_csv(nodes: Sequence[NodeRecord]) -> str:
    """One row per node; counts are exact integers, shapes written like 1x3x224x224."""
    return csv_text(csv_table(nodes))


def _md_table(columns: Sequence[Field], rows: Sequence[object]) -> list[str]:
    return md_lines(table("", columns, rows))


def _totals_table(a: Analysis) -> Table:
    t = a.totals
    rows: list[tuple[str, str]] = [
        ("MACs", f"{t.macs:,}"),
        (f"FLOPs ({a.convention})", f"{t.flops:,}"),
        ("params", f"{t.params:,}"),
        ("BatchNorm statistics", f"{t.stat_params:,}"),
        ("quantization params", f"{t.quant_params:,}"),
        ("param bytes", f"{t.param_bytes:,}"),
        ("bytes read", f"{t.bytes_read:,}"),
        ("bytes read: weights", f"{t.bytes_read_weights:,}"),
        ("bytes read: activations", f"{t.bytes_read_activations:,}"),
        ("bytes read: KV cache", f"{t.bytes_read_kv_cache:,}"),
        ("bytes written", f"{t.bytes_written:,}"),
        ("bytes written: KV cache", f"{t.bytes_written_kv_cache:,}"),
        ("peak activation bytes", f"{t.peak_activation_bytes:,}"),
        ("bytes counted as", f"{traffic_text(a)} (--traffic {a.traffic})"),
    ]
    if t.peak_activation_bytes_ort is not None:
        rows.append(
            ("peak activation bytes, onnxruntime's order", f"{t.peak_activation_bytes_ort:,}")
        )
    return Table("Totals", (Column("total"), Column("value", True)), tuple(rows))


def to_markdown(
    a: Analysis, nodes: Sequence[NodeRecord], *, depth: int | None = None, tree: bool = False
) -> str:
    t = a.totals
    out = [f"# {md(a.model.path or a.model.graph_name or 'model')}", ""]
    out += [*md_lines(_totals_table(a)), ""]
    trained = training_table(a)
    if trained is not None:
        out += ["## Training", "", *md_lines(trained), ""]
    live_columns = (Column("tensor"), Column("written by"), Column("bytes", True))
    for title, peak in (("", a.peak_activation), (", onnxruntime's order", a.peak_activation_ort)):
        if peak is not None and peak.live:
            live = tuple((x.tensor, x.producer, f"{x.bytes:,}") for x in peak.live)
            out += [
                f"Live at the peak{title} (at {md(peak.node)}, {peak.live_count} tensors):",
                "",
                *md_lines(Table("Live at the peak", live_columns, live)),
                "",
            ]
    formulas = [] if a.symbolic is None else a.symbolic.describe()
    if formulas:
        out += [f"## {md(formulas[0])}", "", *(f"- {md_code(line)}" for line in formulas[1:]), ""]
    out += [
        "## Summary by op type",
        "",
    ]
    out += _md_table(
        op_type_columns(t.flops, t.macs), [r for r, _c in with_cumulative(a.by_op_type, t.flops)]
    )
    if a.by_dtype:
        out += ["", "## By arithmetic type", "", *_md_table(dtype_columns(t.macs), a.by_dtype)]
    if tree or depth is not None:
        title = "Scope tree" + (f" (depth {depth})" if depth is not None else "")
        # Indentation that Markdown keeps: two no-break spaces per level.
        out += ["", *md_lines(tree_view(a, depth, title, "\u00a0\u00a0"), level=2)]
    else:
        columns = node_columns(a.totals.training is not None)
        out += ["", "## Nodes", "", *_md_table(columns, nodes)]
    if a.warnings:
        out += ["", "## Warnings", ""] + [f"- {md(w)}" for w in a.warnings]
    return "\n".join(out) + "\n"
