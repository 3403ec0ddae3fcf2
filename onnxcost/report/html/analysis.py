"""The HTML page and Jupyter snippet of an analysis: header, totals, op-type chart, scope tree
and node table."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from onnxcost import units
from onnxcost.analysis.records import NodeRecord
from onnxcost.report.columns import read_by_role, traffic_text
from onnxcost.report.tables import Cell, Column, Table
from onnxcost.report.training import training_table
from onnxcost.report.tree import MAX_DEPTH, Scope, scope_tree
from onnxcost.report.writers.html import script_table

if TYPE_CHECKING:
    from onnxcost.analysis.result import Analysis
from onnxcost.report.html.page import (
    bars,
    op_label,
    op_type_chart,
    page,
    snippet_page,
)

_OP_METRICS = ("FLOPs", "MACs", "bytes", "params", "nodes")


def _op_rows(a: Analysis) -> list[dict[str, Any]]:
    return [
        {
            "op": op_label(s.op_type, s.domain),
            "FLOPs": s.flops,
            "MACs": s.macs,
            "bytes": s.bytes_read + s.bytes_written,
            "params": s.params,
            "nodes": s.count,
        }
        for s in a.by_op_type
    ]


NODE_TABLE_COLUMNS: tuple[Column, ...] = (
    Column("name", kind="text"),
    Column("op type", kind="plain"),
    Column("status", kind="plain"),
    Column("in shapes", kind="plain"),
    Column("out shapes", kind="plain"),
    Column("params", True, kind="count"),
    Column("MACs", True, kind="count"),
    Column("FLOPs", True, kind="count"),
    Column("read", True, kind="bytes"),
    Column("written", True, kind="bytes"),
)


def _node_rows(nodes: Sequence[NodeRecord]) -> tuple[tuple[Cell, ...], ...]:
    return tuple(
        (
            n.shown_name,  # a dynamo export's in its module
            op_label(n.op_type, n.domain),
            n.status,
            units.shapes(n.input_shapes),
            units.shapes(n.output_shapes),
            n.params,
            n.macs,
            n.flops,
            n.bytes_read,
            n.bytes_written,
        )
        for n in nodes
    )


def _tensor_view(tensors: Sequence[Any]) -> list[dict[str, str]]:
    return [{"name": t.name, "dtype": t.dtype, "shape": units.shape(t.shape)} for t in tensors]


def _analysis_context(a: Analysis) -> dict[str, Any]:
    m, t = a.model, a.totals
    return {
        "heading": m.path or m.graph_name or "model",
        "model": m,
        "producer": f"{m.producer} {m.producer_version}".strip() or "unknown",
        "opsets": ", ".join(f"{d} {v}" for d, v in sorted(m.opsets.items())),
        "size": units.nbytes(m.model_bytes) if m.model_bytes else "built in (no file)",
        "convention": a.convention,
        "traffic": traffic_text(a),
        "inputs": _tensor_view(a.inputs),
        "outputs": _tensor_view(a.outputs),
        "cards": [
            ("MACs", units.count(t.macs), f"{t.macs:,}"),
            ("FLOPs", units.count(t.flops), f"{t.flops:,}"),
            ("params", units.count(t.params), f"{t.params:,}"),
            ("param bytes", units.nbytes(t.param_bytes), f"{t.param_bytes:,} B"),
            ("bytes read", units.nbytes(t.bytes_read), f"{t.bytes_read:,} B; {read_by_role(t)}"),
            ("bytes written", units.nbytes(t.bytes_written), f"{t.bytes_written:,} B"),
            (
                "peak activations",
                units.nbytes(t.peak_activation_bytes),
                f"{t.peak_activation_bytes:,} B",
            ),
        ],
        "unsupported": list(a.unsupported),
        "warnings": list(a.warnings),
        "training": training_table(a),
        "formulas": _formulas(a),
    }


FORMULA_WIDTH = 110
"""Characters a line of a formula on the page: a long one breaks between its terms, and a
``max`` of several opens one argument a line (``table.formula_rows``, as in the terminal)."""


def _formulas(a: Analysis) -> tuple[str, list[tuple[str, str]]] | None:
    """With ``--symbolic``: the heading, and (total, formula) rows, as the terminal has them."""
    from onnxcost.report.table import formula_rows

    if a.symbolic is None:
        return None
    return a.symbolic.heading, [
        (label, "\n".join(formula_rows("", text, FORMULA_WIDTH)))
        for label, text in a.symbolic.rows()
    ]


LEAF_LIMIT = 40
"""The page lists this many nodes directly in a scope, then says how many more there are."""
INDENT_LEVELS = 12
"""The page indents this many levels; a deeper row starts with its level (``L13``) instead."""


def tree_view(root: Scope, leaf_limit: int = LEAF_LIMIT) -> list[dict[str, Any]]:
    """The scope tree as flat rows for the page, depth first (a stack, not recursion): ``open``
    (a scope's ``<details>`` and its summary row), then its scopes, then ``leaf`` rows (its own
    nodes, ``leaf_limit`` at most, then one ``more`` row), then ``close``. The top level starts
    open where it has 12 scopes or fewer; ``indent`` is the depth shown, ``INDENT_LEVELS`` at
    most, so that a deep row's label keeps its room."""
    rows: list[dict[str, Any]] = []
    stack: list[tuple[int, Scope, Iterator[Scope]]] = [(0, root, iter(root.children))]
    while stack:
        depth, parent, it = stack[-1]
        c = next(it, None)
        if c is not None:
            top_open = depth == 0 and len(parent.children) <= 12
            rows.append(
                {"kind": "open", "depth": depth, "scope": c, "open": top_open,
                 "max_depth": MAX_DEPTH}
            )  # fmt: skip
            stack.append((depth + 1, c, iter(c.children)))
            continue
        stack.pop()
        if parent is root:
            continue
        rows += [{"kind": "leaf", "depth": depth, "node": n} for n in parent.nodes[:leaf_limit]]
        if len(parent.nodes) > leaf_limit:
            rows.append({"kind": "more", "depth": depth, "more": len(parent.nodes) - leaf_limit})
        rows.append({"kind": "close", "depth": depth})
    for row in rows:
        row["indent"] = min(row["depth"], INDENT_LEVELS)
    return rows


def analysis_html(a: Analysis, nodes: Sequence[NodeRecord] | None = None) -> str:
    """The report of ``a``: header, totals, op-type chart, scope tree, node table (``nodes``,
    default all)."""
    counted = a.counted_nodes
    root = scope_tree(counted)
    total = {"flops": root.flops, "bytes": root.bytes_total}
    data = {
        "charts": {"chart-optype": op_type_chart(_op_rows(a), _OP_METRICS)},
        "tables": [
            script_table(
                Table("Nodes", NODE_TABLE_COLUMNS, _node_rows(a.nodes if nodes is None else nodes)),
                "node-table",
                placeholder="filter nodes: name, op type, shape or status (regex)",
            )
        ],
    }
    ctx = _analysis_context(a)
    return page(
        "analysis.html.j2",
        title=f"onnxcost: {ctx['heading']}",
        what="static cost analysis",
        data=data,
        tree_rows=tree_view(root),
        tree_total=total,
        **ctx,
    )


def analysis_snippet(a: Analysis) -> str:
    """Jupyter's view of an analysis: the totals and a chart of FLOPs by op type (static SVG)."""
    t = a.totals
    rows = [
        ("MACs", units.count(t.macs), f"{t.macs:,}"),
        ("FLOPs", units.count(t.flops), f"{t.flops:,}"),
        ("params", units.count(t.params), f"{t.params:,}"),
        (
            "bytes read / written",
            f"{units.nbytes(t.bytes_read)} / {units.nbytes(t.bytes_written)}",
            "",
        ),
        ("peak activations", units.nbytes(t.peak_activation_bytes), ""),
    ]
    heading = f"{a.model.path or a.model.graph_name or 'model'}: {a.model.node_count} nodes"
    note = f"warnings: {len(a.warnings)} (see .warnings)" if a.warnings else ""
    return snippet_page(heading, rows, bars(_op_rows(a), "FLOPs", "FLOPs by op type"), note)
