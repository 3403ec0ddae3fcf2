"""``onnxcost predict`` as a terminal table, markdown or an HTML page: the same rows in each.

A summary (device, latency, throughput, time by bound), the op-type summary, and the nodes
with the most predicted time first (``top`` of them; 0: all).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from onnxcost import units
from onnxcost.predict.estimate import NodeTime
from onnxcost.predict.llm import LlmPrediction
from onnxcost.predict.result import Prediction, PredictSweep
from onnxcost.predict.versus import Versus
from onnxcost.report.safe_text import hanging, md, plain
from onnxcost.report.tables import Column, Table, by_header
from onnxcost.report.writers.markdown import to_markdown as md_lines
from onnxcost.report.writers.rich import to_rich

if TYPE_CHECKING:
    from rich.console import Console

DEFAULT_TOP = 20
"""Nodes listed by default: the ones with the most predicted time."""


def _small(v: float, decimals: int) -> str:
    """``v`` to ``decimals`` decimals, or to 3 significant digits where those would read 0
    (a small model on a datasheet's roofline takes nanoseconds: 1.35e-06 ms, not 0.0000)."""
    return f"{v:,.{decimals}f}" if v == 0 or v >= 10**-decimals else f"{v:.3g}"


def _us(v: float) -> str:
    return _small(v, 2) if v < 1000 else f"{v:,.0f}"


def _ms(v: float) -> str:
    """A latency in ms: 4 decimals, or 3 significant digits under 0.0001 ms."""
    return _small(v, 4)


def summary_rows(p: Prediction) -> list[tuple[str, str]]:
    """Label and value per figure of the summary."""
    d = p.device
    threads = "onnxruntime's default" if d.threads is None else str(d.threads)
    rows = [
        ("model", p.model or "(in memory)"),
        ("device", f"{d.name} ({d.source}{', a roofline bound' if d.roofline_bound else ''})"),
        ("provider", f"{d.provider}, threads {threads}, {d.ceilings.dtype}"),
        (
            "ceilings",
            f"{d.ceilings.peak_flops_per_s / 1e9:,.1f} GFLOP/s, "
            f"{d.ceilings.bandwidth_bytes_per_s / 1e9:,.1f} GB/s, "
            f"{d.node_overhead_us:.2f} us per node",
        ),
        ("latency", f"{_ms(p.latency_ms)} ms (run overhead {_us(p.run_overhead_us)} us)"),
        ("throughput", f"{p.throughput_per_s:,.1f} per s at batch {p.batch}"),
    ]
    for bound in ("compute", "memory", "overhead"):
        stats = p.by_bound[bound]
        rows.append(
            (f"{bound}-bound", f"{int(stats['nodes'])} nodes, {_us(stats['predicted_us'])} us")
        )
    rows.append(("free", f"{p.free_nodes} nodes onnxruntime folds, eliminates or fuses away"))
    return rows


def node_rows(nodes: Sequence[NodeTime]) -> list[list[str]]:
    return [
        [
            n.name,
            n.op_type,
            n.op_class,
            n.bound,
            _us(n.predicted_us),
            _us(n.compute_us),
            _us(n.memory_us),
            _us(n.weights_us),
            units.count(n.flops),
            units.nbytes(n.bytes),
        ]
        for n in nodes
    ]


NODE_HEADERS = (
    "node",
    "op",
    "class",
    "bound",
    "predicted us",
    "compute us",
    "memory us",
    "weights us",
    "FLOPs",
    "bytes",
)
OP_HEADERS = ("op", "nodes", "predicted us", "share")


def top_nodes(p: Prediction, top: int | None) -> list[NodeTime]:
    """The ``top`` nodes with the most predicted time (0: all, None: ``DEFAULT_TOP``)."""
    ranked = sorted(p.nodes, key=lambda n: -n.predicted_us)
    limit = DEFAULT_TOP if top is None else top
    return ranked if limit == 0 else ranked[:limit]


def op_rows(p: Prediction) -> list[list[str]]:
    return [[o.op_type, str(o.count), _us(o.predicted_us), f"{o.share:.1%}"] for o in p.by_op_type]


def summary_table(p: Prediction) -> Table:
    return Table(
        "",
        (Column("figure", style="bold"), Column("value", cut="end")),
        tuple(summary_rows(p)),
        show_header=False,
    )


def op_table(p: Prediction) -> Table:
    return Table(
        "by op type",
        (Column("op"), *(Column(h, numeric=True) for h in OP_HEADERS[1:])),
        tuple(tuple(r) for r in op_rows(p)),
    )


def node_table(p: Prediction, top: int | None) -> Table:
    """The nodes with the most predicted time; a narrow terminal hides the breakdown (bytes,
    FLOPs, memory and compute time, class) before it shortens a name."""
    chosen = top_nodes(p, top)
    return Table(
        f"nodes, most predicted time first ({len(chosen)} of {len(p.nodes)})",
        (
            Column("node", cut="middle"),
            Column("op"),
            Column("class"),
            Column("bound"),
            *(Column(h, numeric=True) for h in NODE_HEADERS[4:]),
        ),
        tuple(tuple(r) for r in node_rows(chosen)),
        drop=by_header(NODE_HEADERS, ("bytes", "FLOPs", "memory us", "compute us", "class")),
    )


def render(p: Prediction, console: Console, top: int | None = None) -> None:
    from rich.text import Text

    for table in (summary_table(p), op_table(p), node_table(p, top)):
        console.print(to_rich(table, console.width))
    for w in p.warnings:
        console.print(hanging(Text.assemble(("warning:", "yellow"), " "), w))


def to_markdown(p: Prediction, top: int | None = None) -> str:
    ops, nodes = op_table(p), node_table(p, top)
    out = [f"# onnxcost predict: {md(p.model or '(in memory)')}", ""]
    out += md_lines(Table("", (Column("figure"), Column("value")), summary_table(p).rows))
    out += ["", *md_lines(replace(ops, title="By op type"), level=2)]
    out += ["", *md_lines(replace(nodes, title=nodes.title.capitalize()), level=2)]
    if p.warnings:
        out += ["", "## Warnings", ""] + [f"- {md(w)}" for w in p.warnings]
    return "\n".join(out) + "\n"


def predict_html(p: Prediction, top: int | None = None) -> str:
    """One self-contained page: the summary, the op types and the nodes."""
    from onnxcost.report.html.page import page

    chosen = top_nodes(p, top)
    return page(
        "predict.html.j2",
        title=f"onnxcost predict: {p.model or '(in memory)'}",
        what="predicted latency on a device",
        data={"charts": {}, "tables": []},
        heading=p.model or "(in memory)",
        cards=[
            ("latency", f"{_ms(p.latency_ms)} ms", ""),
            ("throughput", f"{p.throughput_per_s:,.1f} /s", f"batch {p.batch}"),
            ("device", p.device.name, p.device.source),
        ],
        rows=summary_rows(p),
        op_headers=OP_HEADERS,
        op_rows=op_rows(p),
        node_headers=NODE_HEADERS,
        node_rows=node_rows(chosen),
        shown=len(chosen),
        total=len(p.nodes),
        warnings=list(p.warnings),
    )


def versus_rows(v: Versus, top: int | None = None) -> list[list[str]]:
    """Per profiled row: measured and predicted microseconds and the miss, largest first."""
    limit = DEFAULT_TOP if top is None else top
    chosen = v.nodes if limit == 0 else v.nodes[:limit]
    return [
        [n.name, n.op_type, _us(n.measured_us), _us(n.predicted_us), f"{n.miss_us:+,.1f}"]
        for n in chosen
    ]


VERSUS_HEADERS = ("node", "op", "measured us", "predicted us", "miss us")


def versus_summary(v: Versus) -> str:
    return (
        f"predicted on {v.device}: {v.predicted_ms:,.4f} ms against {v.measured_ms:,.4f} ms "
        f"measured (median), {v.error:+.1%}"
    )


def versus_table(v: Versus, top: int | None = None) -> Table:
    rows = versus_rows(v, top)
    return Table(
        f"predicted against measured, largest misses first ({len(rows)} of {len(v.nodes)})",
        (
            Column("node", cut="middle"),
            Column("op"),
            *(Column(h, numeric=True) for h in VERSUS_HEADERS[2:]),
        ),
        tuple(tuple(r) for r in rows),
    )


def render_versus(v: Versus, console: Console, top: int | None = None) -> None:
    console.print(plain(versus_summary(v)))
    if v.nodes:
        console.print(to_rich(versus_table(v, top), console.width))


def versus_markdown(v: Versus, top: int | None = None) -> str:
    out = ["", "## Predicted against measured", "", md(versus_summary(v)), ""]
    if v.nodes:
        table = versus_table(v, top)
        out += md_lines(Table("", table.columns, table.rows))
    return "\n".join(out) + "\n"


def llm_rows(p: LlmPrediction) -> list[tuple[str, str]]:
    """The predicted figures of ``onnxcost llm --device``."""
    bound = ", a roofline bound" if p.roofline_bound else ""
    rows = [
        ("predicted on", f"{p.device} ({p.device_source}{bound})"),
        ("predicted time to first token", f"{p.time_to_first_token_ms:,.3f} ms"),
    ]
    if p.decode_step_ms is not None and p.tokens_per_s is not None:
        rows += [
            (
                "predicted decode step",
                f"{p.decode_step_ms:,.3f} ms (first {p.decode_first_ms:,.3f}, "
                f"last {p.decode_last_ms:,.3f})",
            ),
            ("predicted tokens/s", f"{p.tokens_per_s:,.1f} (batch {p.batch})"),
        ]
    rows.append(("predicted generation", f"{p.generation_ms:,.3f} ms"))
    return rows


SWEEP_HEADERS = ("latency ms", "throughput /s", "bound", "bound share", "from")


def sweep_summary(s: PredictSweep) -> list[tuple[str, str]]:
    """Model, device and where the points came from."""
    p = s.points[0].prediction
    d = p.device
    formulas = sum(1 for pt in s.points if pt.source == "formulas")
    if s.why:
        how = "a concrete analysis each (why: below)"
    elif formulas == len(s.points):
        how = "one symbolic analysis' formulas"
    else:
        how = (
            f"one symbolic analysis' formulas ({formulas}), a concrete analysis at the "
            f"{len(s.points) - formulas} where they are not known to hold"
        )
    return [
        ("model", p.model or "(in memory)"),
        ("device", f"{d.name} ({d.source}{', a roofline bound' if d.roofline_bound else ''})"),
        ("points", f"{len(s.points)} ({' x '.join(s.symbols)}) from {how}"),
    ]


def sweep_table(s: PredictSweep) -> Table:
    """One row per point: the swept values, latency, throughput, the top bound."""
    rows = tuple(
        (
            *(str(pt.values[sym]) for sym in s.symbols),
            _ms(pt.prediction.latency_ms),
            f"{pt.prediction.throughput_per_s:,.1f}",
            pt.top_bound,
            f"{pt.top_bound_share:.1%}",
            pt.source,
        )
        for pt in s.points
    )
    return Table(
        f"predicted at {len(s.points)} points",
        (
            *(Column(sym, numeric=True) for sym in s.symbols),
            Column(SWEEP_HEADERS[0], numeric=True),
            Column(SWEEP_HEADERS[1], numeric=True),
            Column(SWEEP_HEADERS[2]),
            Column(SWEEP_HEADERS[3], numeric=True),
            Column(SWEEP_HEADERS[4]),
        ),
        rows,
    )


def _sweep_warnings(s: PredictSweep) -> list[str]:
    """The first point's warnings, then each point's reason for a concrete analysis."""
    said = list(s.points[0].prediction.warnings)
    if s.why:
        said.append(f"every point came from a concrete analysis: {s.why}")
    else:
        said += [
            f"{', '.join(f'{k}={v}' for k, v in pt.values.items())}: a concrete analysis ({pt.why})"
            for pt in s.points
            if pt.why
        ]
    return said


def render_sweep(s: PredictSweep, console: Console) -> None:
    from rich.text import Text

    summary = Table(
        "",
        (Column("figure", style="bold"), Column("value", cut="end")),
        tuple(sweep_summary(s)),
        show_header=False,
    )
    for table in (summary, sweep_table(s)):
        console.print(to_rich(table, console.width))
    for w in _sweep_warnings(s):
        console.print(hanging(Text.assemble(("warning:", "yellow"), " "), w))


def sweep_markdown(s: PredictSweep) -> str:
    p = s.points[0].prediction
    out = [f"# onnxcost predict --sweep: {md(p.model or '(in memory)')}", ""]
    out += md_lines(Table("", (Column("figure"), Column("value")), tuple(sweep_summary(s))))
    table = sweep_table(s)
    out += ["", *md_lines(replace(table, title=table.title.capitalize()), level=2)]
    said = _sweep_warnings(s)
    if said:
        out += ["", "## Warnings", ""] + [f"- {md(w)}" for w in said]
    return "\n".join(out) + "\n"


__all__ = [
    "llm_rows",
    "predict_html",
    "render",
    "render_sweep",
    "render_versus",
    "summary_rows",
    "sweep_markdown",
    "sweep_table",
    "to_markdown",
    "top_nodes",
    "versus_markdown",
]
