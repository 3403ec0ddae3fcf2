"""Terminal report of an analysis (rich): header, totals, summary by op type, nodes or scopes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from onnxcost import units
from onnxcost.analysis.records import NodeRecord, PeakActivation
from onnxcost.analysis.result import Analysis
from onnxcost.report.columns import (
    Field,
    dtype_columns,
    node_columns,
    op_type_columns,
    read_by_role,
    table,
    with_cumulative,
)
from onnxcost.report.fit import MIN_TRIM, middle_trim, wrap_items
from onnxcost.report.safe_text import hanging, plain, text
from onnxcost.report.writers.rich import to_rich


def _table(
    title: str,
    columns: Sequence[Field],
    rows: Sequence[object],
    extra: Sequence[tuple[str, list[str]]] = (),
    *,
    width: int | None = None,
) -> Table:
    """Rows of ``columns`` (and ``extra`` columns of ready text) fitted to ``width``."""
    return to_rich(table(title, columns, rows, extra), width)


def _lines(console: Console, lead: str, items: Sequence[str], style: str = "", **kw: Any) -> None:
    """``wrap_items`` on the console's width: breaks between items, never inside one."""
    for line in wrap_items(lead, items, console.width, **kw):
        console.print(Text(line, style=style), no_wrap=True, overflow="ellipsis")


def render_header(a: Analysis, console: Console) -> None:
    """summarize_graph's view: where the model comes from, what goes in and out, what it is made of.

    Every line is a ``Text`` of ``plain`` strings: model text is never read as rich markup.
    A line too long for the console breaks between items with a hanging indent.
    """
    m = a.model
    console.print(
        text(middle_trim(plain(m.path or m.graph_name or "model"), console.width), style="bold"),
        no_wrap=True,
    )
    producer = f"{plain(m.producer)} {plain(m.producer_version)}".strip() or "unknown"
    size = units.nbytes(m.model_bytes) if m.model_bytes else "built in (no file)"
    opsets = ", ".join(f"{plain(d)} {v}" for d, v in sorted(m.opsets.items(), key=_by_text))
    _lines(
        console,
        "  producer ",
        [
            producer,
            f"IR {m.ir_version}",
            f"opsets {opsets}",
            f"{m.node_count} nodes",
            f"size {size}",
        ],
        sep=" | ",
        indent=11,
    )
    for label, tensors in (("input ", a.inputs), ("output", a.outputs)):
        for t in tensors:
            _lines(
                console,
                f"  {label} ",
                [f"{plain(t.name)}: {plain(t.dtype)}{_shape_text(t.dtype, t.shape)}"],
            )
    ops = sorted(
        (
            (
                s.count,
                plain(s.op_type) if not s.domain else f"{plain(s.domain)}::{plain(s.op_type)}",
            )
            for s in a.by_op_type
        ),
        reverse=True,
    )
    _lines(console, "  ops    ", [f"{name} x{n}" for n, name in ops], max_lines=OPS_LINES)
    if m.params_by_dtype:
        _lines(
            console,
            "  params ",
            [f"{d} {units.count(n)}" for d, n in sorted(m.params_by_dtype.items())],
        )


OPS_LINES = 4
"""The header's op list stops after this many lines with "… N more" (the summary lists all)."""


def _shape_text(dtype: str, shape: Any) -> str:
    """``[1x3]`` after a tensor's dtype; nothing after a sequence's or map's type."""
    return "" if shape is None and dtype.endswith(")") else f"[{units.shape(shape)}]"


def _by_text(item: tuple[object, int]) -> str:
    return plain(item[0])


def render_totals(a: Analysis, console: Console) -> None:
    t = a.totals
    flops_label = {
        "onnxcost": "FLOPs",
        "torch": "FLOPs (torch: 2 x MACs)",
        "fvcore": "FLOPs (fvcore: = MACs)",
    }[a.convention]
    head = wrap_items(
        "Totals  ",
        [
            f"MACs {units.count(t.macs)} ({t.macs:,})",
            f"{flops_label} {units.count(t.flops)} ({t.flops:,})",
        ],
        console.width,
        sep=" | ",
        indent=8,
    )
    console.print(Text.assemble(("Totals", "bold"), head[0][len("Totals") :]), no_wrap=True)
    for line in head[1:]:
        console.print(Text(line), no_wrap=True)
    # Items joined by spaces: the line breaks before a "+ N ..." part or the byte size.
    params = [f"{units.count(t.params)} ({t.params:,}"]
    params += [f"+ {t.stat_params:,} BatchNorm statistics"] if t.stat_params else []
    params += [f"+ {t.quant_params:,} quantization params"] if t.quant_params else []
    params[-1] += "),"
    _lines(console, "        params ", [*params, units.nbytes(t.param_bytes)], sep=" ", indent=15)
    ort = (
        ""
        if t.peak_activation_bytes_ort is None
        else f" (onnxruntime's order: {units.nbytes(t.peak_activation_bytes_ort)})"
    )
    lead, read = "        memory ", f"read {units.nbytes(t.bytes_read)} ({read_by_role(t)})"
    rest = [
        f"written {units.nbytes(t.bytes_written)}",
        f"peak activations {units.nbytes(t.peak_activation_bytes)}{ort}",
    ]
    if len(lead + read + " |") > console.width:
        # Too long for a line: the bytes read by role break between roles, not in a middle
        # ("weights 8.11 Ki…tions 5.37 KiB" read as one figure).
        *parts, last = read.split(", ")
        _lines(console, lead, [*parts, last + " |"], sep=", ", indent=len(lead))
        lead = " " * len(lead)
    else:
        rest.insert(0, read)
    _lines(console, lead, rest, sep=" | ", indent=15)
    if a.peak_activation.live:
        lead, items = peak_items(a.peak_activation, width=console.width)
        _lines(console, "        " + lead, items, indent=10)


def peak_items(
    peak: PeakActivation, top: int = 3, width: int | None = None
) -> tuple[str, list[str]]:
    """('live at NODE: ', ['T1 (from P1) 3.06 MiB', ..., 'T3 (from P3) 1 KiB and N more']).

    With a ``width``, names are trimmed in the middle so that each item fits a line of its own
    indented by 10: the names share what the width leaves beside the fixed text."""

    def item(tensor: str, producer: str, nbytes: int) -> str:
        return f"{tensor} (from {producer}) {units.nbytes(nbytes)},"

    def cut(name: str, room: int) -> str:
        return name if width is None else middle_trim(name, max(MIN_TRIM, room))

    live = peak.live[:top]
    more = peak.live_count - len(live)
    items = []
    for k, t in enumerate(live):
        tensor, producer = plain(t.tensor), plain(t.producer)
        end = f" and {more} more," if more > 0 and k == len(live) - 1 else ""
        if width is not None and 10 + len(item(tensor, producer, t.bytes) + end) > width:
            room = (width - 10 - len(item("", "", t.bytes) + end)) // 2
            tensor, producer = cut(tensor, room), cut(producer, room)
        items.append((item(tensor, producer, t.bytes) + end)[:-1])
    node = plain(peak.node) if width is None else cut(plain(peak.node), width - 20)
    return f"live at {node}: ", items


def peak_line(peak: PeakActivation, top: int = 3) -> str:
    """'at NODE: T1 (from P1) 3.06 MiB, ... and N more live'."""
    lead, items = peak_items(peak, top)
    return lead + ", ".join(items)


def render_training(a: Analysis, console: Console) -> None:
    """The Training section, with ``training=True`` only."""
    from onnxcost.report.training import training_table

    found = training_table(a)
    if found is not None:
        console.print(to_rich(found, console.width))


def render_formulas(a: Analysis, console: Console) -> None:
    """The heading (dim names from the model: plain text, word-wrapped), then one formula per
    total, broken between its terms (`` + ``) with the rest indented under the right side;
    a ``max`` or ``min`` too long for a line (a training peak over several steps) one
    argument a line, aligned under its first."""
    if a.symbolic is not None:
        heading = plain(a.symbolic.heading)
        _lines(console, "", heading.split(" "), style="bold", sep=" ", indent=2)
        for label, rhs in a.symbolic.rows():
            for row in formula_rows(f"  {label} = ", plain(rhs), console.width):
                console.print(Text(row), overflow="fold")  # a term too long: whole, folded


def formula_rows(lead: str, rhs: str, width: int | None) -> list[str]:
    """``lead`` and the formula ``rhs`` in lines of at most ``width``, broken only at spaces:
    between terms, and inside a term that is a ``max(...)``/``min(...)`` too long for a
    line, after each of its arguments' commas. A term longer than a line is kept whole (a
    formula cut in its middle reads as another)."""
    hang = " " * len(lead)
    terms = _split_top(rhs, " + ")
    rows: list[str] = []
    group: list[str] = []

    def flush(last: bool) -> None:
        if group:
            start = lead if not rows else hang
            wrapped = wrap_items(start, group, width, sep=" + ", indent=len(hang), trim=False)
            if not last:
                wrapped[-1] += " +"
            rows.extend(wrapped)
            group.clear()

    for k, term in enumerate(terms):
        last = k == len(terms) - 1
        long = width is not None and len(hang) + len(term) + (0 if last else 2) > width  # " +"
        opened = _opened(term) if long else None
        if opened is None:
            group.append(term)
            continue
        flush(last=False)
        head, args = opened
        under = (
            len(hang) + len(head) if len(hang) + len(head) <= (width or 0) // 2 else len(hang) + 4
        )
        for i, arg in enumerate(args):
            parts = _split_top(arg, " + ")
            if i == 0:
                parts[0] = head + parts[0]
            parts[-1] += "," if i < len(args) - 1 else ")" + ("" if last else " +")
            start = (lead if not rows else hang) if i == 0 else " " * under
            rows += wrap_items(start, parts, width, sep=" + ", indent=under + 2, trim=False)
    flush(last=True)
    return rows


def _split_top(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside parentheses."""
    parts, depth, start, k = [], 0, 0, 0
    while k < len(text):
        ch = text[k]
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and text.startswith(sep, k):
            parts.append(text[start:k])
            k += len(sep)
            start = k
            continue
        k += 1
    parts.append(text[start:])
    return parts


def _opened(term: str) -> tuple[str, list[str]] | None:
    """A term ``c·max(a, b, ...)`` (or min) as its head ``c·max(`` and its arguments; None
    for any other term."""
    for name in ("max(", "min("):
        at = term.find(name)
        if at >= 0 and "(" not in term[:at] and _closing(term, at + len(name) - 1) == len(term) - 1:
            inner = term[at + len(name) : -1]
            return term[: at + len(name)], _split_top(inner, ", ")
    return None


def _closing(text: str, start: int) -> int:
    """Where the parenthesis opened at ``start`` closes (-1: nowhere): a product of two
    mins, ``min(a, h)·min(b, w)``, ends in the second's."""
    depth = 0
    for k in range(start, len(text)):
        depth += (text[k] == "(") - (text[k] == ")")
        if depth == 0:
            return k
    return -1


def render_by_op_type(a: Analysis, console: Console) -> None:
    rows = with_cumulative(a.by_op_type, a.totals.flops)
    console.print(
        _table(
            "Summary by op type",
            op_type_columns(a.totals.flops, a.totals.macs),
            [r for r, _c in rows],
            [("cum. %", [f"{100 * c:.2f}%" if a.totals.flops else "-" for _r, c in rows])],
            width=console.width,
        )
    )


def render_tree(a: Analysis, console: Console, depth: int | None) -> None:
    """torchinfo's and fvcore's max_depth view: indented scopes with subtotals and share."""
    from onnxcost.report.tree import tree_view  # only with --tree or --depth

    title = "Scope tree" + (f" (depth {depth})" if depth is not None else "")
    note = ": N x adds up N blocks; the rows below it are one block's"
    console.print(to_rich(tree_view(a, depth, title + note), console.width))


_KEY_NAMES = {"flops": "FLOPs", "macs": "MACs", "bytes": "bytes", "params": "parameters"}


def render(
    a: Analysis,
    console: Console,
    nodes: Sequence[NodeRecord],
    *,
    hidden: int = 0,
    depth: int | None = None,
    tree: bool = False,
    sort_key: str = "order",
) -> None:
    """The whole report; ``nodes`` is the selection to list, ``hidden`` how many were cut,
    ``sort_key`` what the list is ranked by (``Selection.sort_key``).

    With ``tree`` (or a ``depth``) the scope tree to ``depth`` levels replaces the node list."""
    tree = tree or depth is not None
    render_header(a, console)
    console.print()
    render_totals(a, console)
    render_training(a, console)
    render_formulas(a, console)
    render_by_op_type(a, console)
    if a.by_dtype:
        console.print(
            _table(
                "By arithmetic type",
                dtype_columns(a.totals.macs),
                a.by_dtype,
                width=console.width,
            )
        )
    if tree:
        render_tree(a, console, depth)
    else:
        columns = node_columns(a.totals.training is not None)
        console.print(_table("Nodes", columns, nodes, width=console.width))
        if hidden:
            # --sort-by flops is offered only where it would change the list.
            how = (
                "--top 0 shows all, --sort-by flops ranks them"
                if sort_key == "order"
                else f"ranked by {_KEY_NAMES.get(sort_key, sort_key)}; --top 0 shows all"
            )
            console.print(f"  ... {hidden} more nodes not shown ({how})")
    if a.unsupported:
        console.print(
            Text.assemble(
                ("unsupported ops (counted as 0):", "yellow"),
                " " + ", ".join(plain(u) for u in a.unsupported),
            )
        )
    for w in a.warnings:
        console.print(hanging(Text.assemble(("warning:", "yellow"), " "), w))
