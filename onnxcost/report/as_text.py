"""Plain-text formats of an analysis: CSV (exact integers) and Markdown (human units).

Model text goes through ``safe_text``: CSV cells that a spreadsheet would run are prefixed,
Markdown cells escaped, control characters written as escapes in both.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from onnxcost import units
from onnxcost.analysis.records import NodeRecord
from onnxcost.analysis.walk import Analysis
from onnxcost.report.columns import (
    NODE_COLUMNS,
    Column,
    dtype_columns,
    op_type_columns,
    with_cumulative,
)
from onnxcost.report.safe_text import csv_writer, md, md_code
from onnxcost.report.tree import TREE_HEADERS, tree_table


def to_csv(nodes: Sequence[NodeRecord]) -> str:
    """One row per node; counts are exact integers, shapes written like 1x3x224x224."""
    buf = io.StringIO()
    w = csv_writer(buf)
    w.writerow(
        [
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
        ]
    )
    for n in nodes:
        w.writerow([
            n.name, n.op_type, n.domain, n.status,
            ";".join(units.shape(s) for s in n.input_shapes),
            ";".join(units.shape(s) for s in n.output_shapes),
            n.params, n.macs, n.flops, n.bytes_read, n.bytes_written, n.graph,
        ])  # fmt: skip
    return buf.getvalue()


def _md_table(columns: Sequence[Column], rows: Sequence[object]) -> list[str]:
    lines = ["| " + " | ".join(c.header for c in columns) + " |"]
    lines.append("|" + "|".join("---:" if c.numeric else "---" for c in columns) + "|")
    lines += ["| " + " | ".join(md(c.human(r)) for c in columns) + " |" for r in rows]
    return lines


def to_markdown(
    a: Analysis, nodes: Sequence[NodeRecord], *, depth: int | None = None, tree: bool = False
) -> str:
    t = a.totals
    out = [f"# {md(a.model.path or a.model.graph_name or 'model')}", ""]
    out += [
        "| total | value |",
        "|---|---:|",
        f"| MACs | {t.macs:,} |",
        f"| FLOPs ({a.convention}) | {t.flops:,} |",
        f"| params | {t.params:,} |",
        f"| BatchNorm statistics | {t.stat_params:,} |",
        f"| quantization params | {t.quant_params:,} |",
        f"| param bytes | {t.param_bytes:,} |",
        f"| bytes read | {t.bytes_read:,} |",
        f"| bytes written | {t.bytes_written:,} |",
        f"| peak activation bytes | {t.peak_activation_bytes:,} |",
        *(
            []
            if t.peak_activation_bytes_ort is None
            else [
                f"| peak activation bytes, onnxruntime's order | {t.peak_activation_bytes_ort:,} |"
            ]
        ),
        "",
    ]
    for title, peak in (("", a.peak_activation), (", onnxruntime's order", a.peak_activation_ort)):
        if peak is not None and peak.live:
            out += [
                f"Live at the peak{title} (at {md(peak.node)}, {peak.live_count} tensors):",
                "",
                "| tensor | written by | bytes |",
                "|---|---|---:|",
                *(f"| {md(x.tensor)} | {md(x.producer)} | {x.bytes:,} |" for x in peak.live),
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
        out += ["", f"## {title}", ""]
        out += ["| " + " | ".join(TREE_HEADERS) + " |", "|---|" + "---:|" * (len(TREE_HEADERS) - 1)]
        # Indentation that Markdown keeps: two no-break spaces per level.
        out += [
            "| " + " | ".join(md(c) for c in row) + " |"
            for row in tree_table(a, depth, "\u00a0\u00a0")
        ]
    else:
        out += ["", "## Nodes", "", *_md_table(NODE_COLUMNS, nodes)]
    if a.warnings:
        out += ["", "## Warnings", ""] + [f"- {md(w)}" for w in a.warnings]
    return "\n".join(out) + "\n"
