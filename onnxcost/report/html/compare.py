"""The HTML page and Jupyter snippet of a comparison: findings, totals, op types, aligned
layers side by side."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from onnxcost import units
from onnxcost.report.tables import Column, Table
from onnxcost.report.writers.html import script_table

if TYPE_CHECKING:
    from onnxcost.compare import Comparison
from onnxcost.report.html.page import (
    bars,
    op_label,
    op_type_chart,
    page,
    snippet_page,
)

ALIGN_COLUMNS: tuple[Column, ...] = (
    Column("#", True, kind="int"),
    Column("{a} node (op)", kind="text"),
    Column("{b} node (op)", kind="text"),
    Column("MACs ({a} / {b})", kind="plain"),
    Column("shapes: in -> out, weight ({a} | {b})", kind="plain"),
    Column("differences", kind="plain"),
)


def compare_html(c: Comparison) -> str:
    """The report of a comparison: findings, totals, op types, aligned layers side by side."""
    from onnxcost.report.compare import (
        alignment_sections,
        header_lines,
        only_in_section,
        time_section,
        totals_section,
        warning_lines,
    )

    rows = []
    for r in c.by_op_type:
        for k, label in enumerate(c.labels):
            rows.append(
                {
                    "op": op_label(r.op_type, r.domain),
                    "model": label,
                    "FLOPs": r.flops[k],
                    "MACs": r.macs[k],
                    "nodes": r.count[k],
                }
            )
    chart = op_type_chart(rows, ("FLOPs", "MACs", "nodes"))
    chart["transform"] = [
        {"fold": ["FLOPs", "MACs", "nodes"], "as": ["metric", "value"]},
        {"filter": "datum.metric == show && datum.value > 0"},
        {"joinaggregate": [{"op": "sum", "field": "value", "as": "total"}], "groupby": ["model"]},
        {"calculate": "datum.total ? datum.value / datum.total : 0", "as": "share"},
    ]
    chart["encoding"]["yOffset"] = {"field": "model", "sort": list(c.labels)}
    chart["encoding"]["color"] = {"field": "model", "sort": list(c.labels), "title": "model"}
    chart["encoding"]["y"]["sort"] = None
    chart["encoding"]["tooltip"].insert(1, {"field": "model"})
    chart["height"] = {"step": 12 * len(c.labels)}

    tables, aligned = [], []
    for k, (al, sec) in enumerate(zip(c.alignments, alignment_sections(c), strict=True)):
        table_id = f"align-{k}"
        aligned.append({"id": table_id, "title": sec.title})
        cols = tuple(
            dataclasses.replace(col, header=col.header.format(a=al.baseline, b=al.candidate))
            for col in ALIGN_COLUMNS
        )
        cells = tuple((int(str(row[0])), *row[1:]) for row in sec.rows)
        tables.append(
            script_table(
                Table(sec.title, cols, cells),
                table_id,
                page=500,
                placeholder="filter layers: names, ops, shapes, differences (regex)",
            )
        )
    header = header_lines(c)
    return page(
        "compare.html.j2",
        title="onnxcost compare: " + " vs ".join(c.labels),
        what="comparison",
        data={"charts": {"chart-optype": chart}, "tables": tables},
        heading=header[0],
        header=[line.strip() for line in header[1:]],
        findings=list(c.findings),
        warnings=warning_lines(c),
        totals=totals_section(c),
        time=time_section(c),
        alignments=aligned,
        only_in=only_in_section(c),
    )


def compare_snippet(c: Comparison) -> str:
    """Jupyter's view of a comparison: each model's totals and MACs by op type side by side."""
    rows = [
        (
            r.label,
            " | ".join("-" if v is None else units.count(v) for v in r.values),
            "",
        )
        for r in c.totals
        if r.kind == "count"
    ]
    per_model = [
        {"op": op_label(r.op_type, r.domain), "model": label, "MACs": r.macs[k]}
        for r in c.by_op_type
        for k, label in enumerate(c.labels)
    ]
    heading = "Compare " + " | ".join(c.labels)
    return snippet_page(heading, rows, bars(per_model, "MACs", "MACs by op type", color="model"))
