"""Terminal (rich) and Markdown reports of a comparison; both draw the same tables.

The sections are ``report.tables.Table`` values of ``plain`` text (model strings with control
characters escaped); the writers draw them: rich ``Text`` (never markup), Markdown escaped
with ``safe_text.md``, and the HTML page's ``section`` macro.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.text import Text

from onnxcost import units
from onnxcost.compare import AlignedPair, Comparison, ComputeNode, MetricRow
from onnxcost.report.fit import wrap_items
from onnxcost.report.safe_text import hanging, md, plain, text
from onnxcost.report.tables import Table, columns, drop_order
from onnxcost.report.writers.markdown import to_markdown as md_lines
from onnxcost.report.writers.rich import to_rich


def _section(
    title: str,
    headers: tuple[str, ...],
    numeric: tuple[bool, ...],
    rows: tuple[tuple[str, ...], ...],
) -> Table:
    """One table: a narrow terminal drops the rightmost columns first, never what names a
    row (a node column or the MACs), then cuts the text columns in the middle."""
    keep = [h for h in headers if h.endswith("node (op)") or h.startswith("MACs (")]
    return Table(title, columns(headers, numeric), rows, drop=drop_order(headers, keep))


def _value(v: float | None, kind: str) -> str:
    if v is None:
        return "-"
    if kind == "bytes":
        return units.nbytes(v)
    if kind == "ms":
        return f"{v:.3f} ms"
    if kind == "rate":
        return f"{v:,.1f}/s"
    return f"{int(v):,}"


def _diff(pct: float | None, base: float | None, value: float | None) -> str:
    if pct is None:
        return "-"
    if base == value:
        return "same"
    if pct == float("inf"):
        return "+inf"
    if abs(pct) < 0.005:
        return "+<0.01%" if pct > 0 else "-<0.01%"
    return f"{pct:+.2f}%"


def header_lines(c: Comparison) -> list[str]:
    """Who is who: label, path, inputs, node counts."""
    return [
        f"Comparing {len(c.models)} models; baseline {plain(c.models[0].label)}",
        *(lead + " | ".join(items) for lead, items in _model_items(c)),
    ]


def _model_items(c: Comparison) -> list[tuple[str, list[str]]]:
    """Per model, ``("  A: ", [path, "inputs ...", "N nodes, M compute"])``."""
    out = []
    for m in c.models:
        a = m.analysis
        ins = ", ".join(f"{plain(t.name)} {t.dtype}[{units.shape(t.shape)}]" for t in a.inputs)
        where = plain(m.path or a.model.graph_name or "in-memory model")
        out.append(
            (
                f"  {plain(m.label)}: ",
                [where, f"inputs {ins}", f"{a.model.node_count} nodes, {len(m.compute)} compute"],
            )
        )
    return out


def totals_section(c: Comparison) -> Table:
    labels = c.labels
    headers = ["metric", labels[0]]
    for lab in labels[1:]:
        headers += [lab, f"{lab} vs {labels[0]}"]
    rows = []
    for r in c.totals:
        rows.append(_totals_row(r))
    return _section(
        "Totals",
        tuple(headers),
        (False, *([True] * (len(headers) - 1))),
        tuple(rows),
    )


def _totals_row(r: MetricRow) -> tuple[str, ...]:
    cells = [r.label, _value(r.values[0], r.kind)]
    for v, pct in zip(r.values[1:], r.diff_percent[1:], strict=True):
        cells += [_value(v, r.kind), _diff(pct, r.values[0], v)]
    return tuple(cells)


def op_type_section(c: Comparison) -> Table:
    labels = c.labels
    headers = ["op type"]
    headers += [f"{lab} count" for lab in labels]
    headers += [f"{lab} MACs" for lab in labels]
    headers += [f"{lab} FLOPs" for lab in labels]
    rows = []
    for r in c.by_op_type:
        name = _op(r.domain, r.op_type)
        rows.append(
            (
                name,
                *(str(n) if n else "-" for n in r.count),
                *(units.count(v) if v else "-" for v in r.macs),
                *(units.count(v) if v else "-" for v in r.flops),
            )
        )
    return _section(
        "By op type (as written in the files)",
        tuple(headers),
        (False, *([True] * (len(headers) - 1))),
        tuple(rows),
    )


def _op(domain: object, op_type: object) -> str:
    return plain(op_type) if not domain else f"{plain(domain)}::{plain(op_type)}"


def _shape_cell(nodes: Sequence[ComputeNode]) -> str:
    parts = []
    for n in nodes:
        text = f"{units.shape(n.input_shape)} -> {units.shape(n.output_shape)}"
        if n.weight_shape is not None:
            text += f", w {units.shape(n.weight_shape)}"
        parts.append(text)
    return "; ".join(parts)


def _names(nodes: Sequence[ComputeNode]) -> str:
    return ", ".join(plain(n.shown_name) for n in nodes) if nodes else "-"


def _ops(nodes: Sequence[ComputeNode]) -> str:
    return ", ".join(plain(n.op_label) for n in nodes) if nodes else "-"


def _macs(nodes: Sequence[ComputeNode]) -> str:
    return units.count(sum(n.macs for n in nodes)) if nodes else "-"


def _node_cell(nodes: Sequence[ComputeNode]) -> str:
    return (
        ", ".join(f"{plain(n.shown_name)} ({plain(n.op_label)})" for n in nodes) if nodes else "-"
    )


def _pair_row(k: int, p: AlignedPair) -> tuple[str, ...]:
    both = bool(p.a) and bool(p.b)
    macs = f"{_macs(p.a)} / {_macs(p.b)}" if both and p.macs_a != p.macs_b else _macs(p.a or p.b)
    sa, sb = _shape_cell(p.a), _shape_cell(p.b)
    shapes = f"{sa} | {sb}" if both and sa != sb else (sa if p.a else sb)
    return (str(k), _node_cell(p.a), _node_cell(p.b), macs, shapes, "; ".join(p.differences) or "-")


def alignment_sections(c: Comparison) -> list[Table]:
    out = []
    for al in c.alignments:
        a, b = al.baseline, al.candidate
        headers = (
            "#",
            f"{a} node (op)",
            f"{b} node (op)",
            f"MACs ({a} / {b})",
            f"shapes: in -> out, weight ({a} | {b})",
            "differences",
        )
        numeric = (True, False, False, True, False, False)
        rows = []
        for k, p in enumerate(al.pairs, 1):
            row = list(_pair_row(k, p))
            if p.kind == "only_a":
                row[-1] = f"only in {a}"
            elif p.kind == "only_b":
                row[-1] = f"only in {b}"
            rows.append(tuple(row))
        merged = al.count("merge")
        title = (
            f"Layer alignment {a} vs {b}, by shapes and MACs: {al.count('match')} pairs"
            + (f", {merged} merged" if merged else "")
            + f", {al.count('only_a')} only in {a}, {al.count('only_b')} only in {b}"
        )
        out.append(_section(title, headers, numeric, tuple(rows)))
    return out


def only_in_section(c: Comparison) -> Table | None:
    if not c.only_in:
        return None
    rows = []
    for o in c.only_in:
        names = ", ".join(map(plain, o.nodes[:3])) + (
            f" (+{len(o.nodes) - 3})" if len(o.nodes) > 3 else ""
        )
        n_base, n_cand = (
            (o.count, o.other_count) if o.model == o.baseline else (o.other_count, o.count)
        )
        rows.append(
            (
                f"{o.baseline} vs {o.candidate}",
                _op(o.domain, o.op_type),
                f"{o.baseline} {n_base}, {o.candidate} {n_cand}",
                o.role,
                names,
            )
        )
    return _section(
        "Other op types whose counts differ",
        ("models", "op type", "nodes", "likely role", "names (when on one side only)"),
        (False, False, False, False, False),
        tuple(rows),
    )


def time_section(c: Comparison) -> Table | None:
    if not c.time_by_op_type:
        return None
    labels = c.labels
    headers = ["kernel op type"]
    for lab in labels:
        headers += [f"{lab} kernels", f"{lab} mean"]
    rows = []
    for r in c.time_by_op_type:
        cells = [plain(r.op_type)]
        for n, t in zip(r.count, r.mean_us, strict=True):
            cells += ["-" if n is None else str(n), "-" if t is None else f"{t:,.1f} us"]
        rows.append(tuple(cells))
    provider = next((m.bench.provider for m in c.models if m.bench is not None), "")
    return _section(
        f"Measured time by op type as onnxruntime ran it ({provider}, mean per run)",
        tuple(headers),
        (False, *([True] * (len(headers) - 1))),
        tuple(rows),
    )


def sections(c: Comparison) -> list[Table]:
    out = [totals_section(c), op_type_section(c)]
    time = time_section(c)
    if time is not None:
        out.append(time)
    out += alignment_sections(c)
    only = only_in_section(c)
    if only is not None:
        out.append(only)
    return out


def warning_lines(c: Comparison) -> list[str]:
    """Each distinct warning once, with the labels of the models it applies to."""
    seen: dict[str, list[str]] = {}
    for m in c.models:
        for w in m.analysis.warnings:
            seen.setdefault(w, []).append(m.label)
        if m.bench is not None:
            for w in m.bench.warnings:
                seen.setdefault(f"bench: {w}", []).append(m.label)
    return [f"({', '.join(labels)}) {w}" for w, labels in seen.items()]


def render(c: Comparison, console: Console) -> None:
    """The whole report on a rich console (model text is never read as rich markup)."""
    console.print(text(header_lines(c)[0], style="bold"))
    for lead, items in _model_items(c):
        # Broken between items, the rest indented under the label: never in mid-word.
        for line in wrap_items(lead, items, console.width, sep=" | ", indent=len(lead) + 2):
            console.print(Text(line), no_wrap=True, overflow="ellipsis")
    for s in sections(c):
        console.print(to_rich(s, console.width))
    console.print(Text("Findings", style="bold"))
    for f in c.findings:
        console.print(hanging("  - ", f))
    for w in warning_lines(c):
        console.print(hanging(Text.assemble(("warning:", "yellow"), " "), w))


def to_markdown(c: Comparison) -> str:
    lines = header_lines(c)
    out = [f"# {md(lines[0])}", ""]
    out += [f"- {md(line.strip())}" for line in lines[1:]]
    for s in sections(c):
        out += ["", *md_lines(s, level=2)]
    out += ["", "## Findings", ""] + [f"- {md(f)}" for f in c.findings]
    warnings = warning_lines(c)
    if warnings:
        out += ["", "## Warnings", ""] + [f"- {md(w)}" for w in warnings]
    return "\n".join(out) + "\n"


__all__ = ["render", "sections", "to_markdown"]
