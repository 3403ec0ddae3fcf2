"""Renderers of a bench result: a rich terminal report, markdown, and CSV.

The node and op-type tables follow TensorFlow's benchmark_model: time per run, share,
cumulative share, times called; then what the analyzer counted and what that achieves.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from rich import box
from rich.console import Console
from rich.table import Table

from onnxcost.bench.join import NodeProfile
from onnxcost.bench.result import BenchResult
from onnxcost.report import units

CsvTable = Literal["auto", "summary", "nodes", "op_types", "sweep"]


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.2f}%"


def _rate(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


@dataclass(frozen=True, slots=True)
class _Col:
    header: str
    value: Callable[[NodeProfile], str]
    numeric: bool = True


_NODE_COLS: tuple[_Col, ...] = (
    _Col("node", lambda n: n.name, numeric=False),
    _Col("op type", lambda n: n.op_type, numeric=False),
    _Col("kernel", lambda n: "+".join(dict.fromkeys(n.kernel_op_types)), numeric=False),
    _Col("mapping", lambda n: n.mapping, numeric=False),
    _Col("calls", lambda n: str(n.calls)),
    _Col("avg ms", lambda n: _ms(n.mean_us / 1e3)),
    _Col("%", lambda n: _pct(n.share)),
    _Col("GFLOP/s", lambda n: _rate(n.gflops_per_s)),
    _Col("GB/s", lambda n: _rate(n.gbytes_per_s)),
    _Col("bound", lambda n: n.bound or "-", numeric=False),
    _Col("eff.", lambda n: _pct(n.efficiency)),
)


def _by_time(nodes: Sequence[NodeProfile], top: int | None) -> tuple[list[NodeProfile], int]:
    ordered = sorted(nodes, key=lambda n: -n.mean_us)
    if top is not None and top > 0 and len(ordered) > top:
        return ordered[:top], len(ordered) - top
    return ordered, 0


def _summary_rows(r: BenchResult) -> list[tuple[str, str]]:
    env = r.environment
    device = env.gpu or env.cpu
    threads = env.intra_op_threads if env.intra_op_threads is not None else "default"
    return [
        ("model", r.model),
        ("provider", f"{r.provider} (onnxruntime {env.onnxruntime_version})"),
        ("device", f"{device}{f' (driver {env.gpu_driver})' if env.gpu_driver else ''}"),
        (
            "threads",
            f"intra-op {threads}, inter-op {env.inter_op_threads or 'default'}, {env.logical_cpus} logical CPUs",
        ),
        (
            "settings",
            f"opt level {r.settings.opt_level}, io binding {'on' if r.settings.io_binding else 'off'}"
            f"{', CUDA graph' if r.settings.cuda_graph else ''}, inputs {r.settings.inputs_source}",
        ),
        (
            "inputs",
            ", ".join(f"{s.name}: {s.dtype}[{units.shape(s.shape)}]" for s in r.inputs) or "none",
        ),
        ("batch", str(r.batch)),
        ("runs", f"{r.runs} timed after {r.warmup} warm-up + 1 first run"),
    ]


def _latency_rows(r: BenchResult) -> list[tuple[str, str]]:
    lat = r.latency
    p = r.phases
    mem = r.memory
    rows = [
        ("session create", f"{p.session_create_ms:.1f} ms"),
        ("first run", f"{p.first_run_ms:.3f} ms"),
        (
            "latency min / median / mean",
            f"{lat.min_ms:.3f} / {lat.median_ms:.3f} / {lat.mean_ms:.3f} ms",
        ),
        (
            "latency p90 / p95 / p99 / max",
            f"{lat.p90_ms:.3f} / {lat.p95_ms:.3f} / {lat.p99_ms:.3f} / {lat.max_ms:.3f} ms",
        ),
        ("std / CV", f"{lat.std_ms:.3f} ms / {100 * lat.cv:.1f}%{' (noisy)' if lat.noisy else ''}"),
        (
            "throughput",
            f"{r.throughput_per_s:.1f} samples/s (batch {r.batch} x {r.runs} runs / {p.timed_s:.2f} s)",
        ),
    ]
    if mem.host_peak_rss_mb is not None:
        rows.append(("host peak RSS", f"{mem.host_peak_rss_mb:.0f} MiB (whole process)"))
    if mem.gpu_used_delta_mb is not None:
        rows.append(("GPU memory", f"+{mem.gpu_used_delta_mb:.0f} MiB used on the device (NVML)"))
    if r.roofline is not None:
        rf = r.roofline
        c = rf.ceilings
        rows.append(
            (
                "ceilings",
                f"{c.peak_flops_per_s / 1e9:.1f} GFLOP/s, {c.bandwidth_bytes_per_s / 1e9:.1f} GB/s ({c.dtype}, {c.device})",
            )
        )
        rows.append(
            (
                "roofline",
                f"sum of node floors {rf.floor_ms:.3f} ms vs median {rf.measured_ms:.3f} ms: {100 * rf.efficiency:.1f}% efficient",
            )
        )
    return rows


def _kv_table(title: str, rows: Sequence[tuple[str, str]]) -> Table:
    t = Table(
        title=title,
        box=box.SIMPLE_HEAD,
        title_justify="left",
        title_style="bold",
        show_header=False,
    )
    t.add_column("key", style="bold")
    t.add_column("value", overflow="fold")
    for k, v in rows:
        t.add_row(k, v)
    return t


def render_table(result: BenchResult, console: Console, *, top: int | None = 20) -> None:
    """The whole result on ``console``; node rows cut to the ``top`` slowest (None: all)."""
    console.print(_kv_table("Benchmark", _summary_rows(result)))
    console.print(_kv_table("Timing", _latency_rows(result)))
    prof = result.profile
    if prof is not None:
        nodes, more = _by_time(prof.nodes, top)
        t = Table(
            title="Per node (separate profiled session, slowest first)",
            box=box.SIMPLE_HEAD,
            title_justify="left",
            title_style="bold",
        )
        for c in _NODE_COLS:
            t.add_column(
                c.header,
                justify="right" if c.numeric else "left",
                no_wrap=c.numeric,
                overflow="fold",
            )
        for n in nodes:
            t.add_row(*(c.value(n) for c in _NODE_COLS))
        console.print(t)
        if more:
            console.print(f"  ... {more} more rows (pass top=None for all)")
        ops = Table(
            title="By kernel op type", box=box.SIMPLE_HEAD, title_justify="left", title_style="bold"
        )
        for h in ("op type", "count", "avg ms", "avg %", "cdf %", "times called"):
            ops.add_column(h, justify="left" if h == "op type" else "right")
        for o in prof.by_op_type:
            ops.add_row(
                o.op_type,
                str(o.count),
                _ms(o.mean_us / 1e3),
                _pct(o.share),
                _pct(o.cumulative_share),
                str(o.calls),
            )
        console.print(ops)
        console.print(
            f"  {prof.runs} profiled runs kept ({prof.warmup_runs} dropped): kernels {prof.kernel_sum_us / 1e3:.3f} ms "
            f"of {prof.run_mean_us / 1e3:.3f} ms per run ({100 * prof.coverage:.1f}%); matched via {prof.mapped_with.replace('_', ' ')}"
        )
        if prof.untimed_nodes:
            console.print(
                f"  not run by onnxruntime (folded or removed): {', '.join(prof.untimed_nodes)}"
            )
        if prof.note:
            console.print(f"  [yellow]{prof.note}[/yellow]")
        if prof.trace_path:
            console.print(f"  trace: {prof.trace_path} (open in https://ui.perfetto.dev)")
    if result.sweep:
        t = Table(
            title="Batch sweep", box=box.SIMPLE_HEAD, title_justify="left", title_style="bold"
        )
        for h in ("batch", "runs", "median ms", "p90 ms", "throughput /s"):
            t.add_column(h, justify="right")
        for pt in result.sweep:
            t.add_row(
                str(pt.batch),
                str(pt.runs),
                _ms(pt.latency.median_ms),
                _ms(pt.latency.p90_ms),
                f"{pt.throughput_per_s:.1f}",
            )
        console.print(t)
    if result.max_batch is not None:
        mb = result.max_batch
        t = Table(
            title="Max batch search (each probe in its own process)",
            box=box.SIMPLE_HEAD,
            title_justify="left",
            title_style="bold",
        )
        for h in ("batch", "ok", "median ms", "throughput /s", "detail"):
            t.add_column(h, justify="left" if h == "detail" else "right", overflow="fold")
        for pr in mb.probes:
            t.add_row(
                str(pr.batch),
                "yes" if pr.ok else "no",
                _ms(pr.median_ms),
                _rate(pr.throughput_per_s),
                pr.detail,
            )
        console.print(t)
        best = mb.best
        limit = " (the search limit: larger may fit)" if mb.hit_limit else ""
        console.print(
            f"  largest batch that ran: {mb.largest_ok}{limit}; best throughput at batch "
            f"{best.batch if best else '-'} ({_rate(best.throughput_per_s) if best else '-'} samples/s)"
        )
    for w in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {w}")


def _md_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool]
) -> list[str]:
    def cell(s: str) -> str:
        return s.replace("|", "\\|")

    out = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---:" if n else "---" for n in numeric) + "|",
    ]
    out.extend("| " + " | ".join(cell(c) for c in row) + " |" for row in rows)
    return out


def to_markdown(result: BenchResult, *, top: int | None = 20) -> str:
    """The result as GitHub markdown: summary, timing, per node, per op type, sweep, max batch."""
    lines = [f"## Benchmark: {result.model}", ""]
    lines += _md_table(("", ""), _summary_rows(result) + _latency_rows(result), (False, False))
    prof = result.profile
    if prof is not None:
        nodes, more = _by_time(prof.nodes, top)
        lines += ["", "### Per node (separate profiled session, slowest first)", ""]
        lines += _md_table(
            [c.header for c in _NODE_COLS],
            [[c.value(n) for c in _NODE_COLS] for n in nodes],
            [c.numeric for c in _NODE_COLS],
        )
        if more:
            lines += ["", f"... {more} more rows"]
        lines += ["", "### By kernel op type", ""]
        lines += _md_table(
            ("op type", "count", "avg ms", "avg %", "cdf %", "times called"),
            [
                [
                    o.op_type,
                    str(o.count),
                    _ms(o.mean_us / 1e3),
                    _pct(o.share),
                    _pct(o.cumulative_share),
                    str(o.calls),
                ]
                for o in prof.by_op_type
            ],
            (False, True, True, True, True, True),
        )
        lines += [
            "",
            f"Kernels add up to {100 * prof.coverage:.1f}% of the profiled run time ({prof.runs} runs kept).",
        ]
        if prof.note:
            lines += ["", f"> {prof.note}"]
    if result.sweep:
        lines += ["", "### Batch sweep", ""]
        lines += _md_table(
            ("batch", "runs", "median ms", "p90 ms", "throughput /s"),
            [
                [
                    str(p.batch),
                    str(p.runs),
                    _ms(p.latency.median_ms),
                    _ms(p.latency.p90_ms),
                    f"{p.throughput_per_s:.1f}",
                ]
                for p in result.sweep
            ],
            (True,) * 5,
        )
    if result.max_batch is not None:
        mb = result.max_batch
        best = mb.best
        lines += ["", "### Max batch", ""]
        lines += _md_table(
            ("batch", "ok", "median ms", "throughput /s", "detail"),
            [
                [
                    str(p.batch),
                    "yes" if p.ok else "no",
                    _ms(p.median_ms),
                    _rate(p.throughput_per_s),
                    p.detail,
                ]
                for p in mb.probes
            ],
            (True, False, True, True, False),
        )
        lines += [
            "",
            f"Largest batch that ran: {mb.largest_ok}; best throughput at batch {best.batch if best else '-'}.",
        ]
    if result.warnings:
        lines += [""] + [f"- warning: {w}" for w in result.warnings]
    return "\n".join(lines) + "\n"


def to_csv(result: BenchResult, table: CsvTable = "auto") -> str:
    """One table as CSV: 'nodes' (default when profiled), 'op_types', 'sweep', or 'summary'.

    'summary' has one row for the main run and one per sweep batch.
    """
    if table == "auto":
        table = "nodes" if result.profile is not None else "summary"
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if table == "nodes":
        if result.profile is None:
            return ""
        w.writerow(
            [
                "name",
                "op_type",
                "kernels",
                "kernel_op_types",
                "mapping",
                "provider",
                "calls",
                "mean_us",
                "share",
                "macs",
                "flops",
                "bytes_read",
                "bytes_written",
                "gflops_per_s",
                "gbytes_per_s",
                "bound",
                "floor_us",
                "efficiency",
            ]
        )
        for n in result.profile.nodes:
            w.writerow(
                [
                    n.name,
                    n.op_type,
                    "+".join(n.kernels),
                    "+".join(n.kernel_op_types),
                    n.mapping,
                    n.provider,
                    n.calls,
                    f"{n.mean_us:.3f}",
                    f"{n.share:.6f}",
                    n.macs,
                    n.flops,
                    n.bytes_read,
                    n.bytes_written,
                    _opt(n.gflops_per_s),
                    _opt(n.gbytes_per_s),
                    n.bound or "",
                    _opt(n.floor_us),
                    _opt(n.efficiency),
                ]
            )
    elif table == "op_types":
        if result.profile is None:
            return ""
        w.writerow(["op_type", "count", "calls", "mean_us", "share", "cumulative_share"])
        for o in result.profile.by_op_type:
            w.writerow(
                [
                    o.op_type,
                    o.count,
                    o.calls,
                    f"{o.mean_us:.3f}",
                    f"{o.share:.6f}",
                    f"{o.cumulative_share:.6f}",
                ]
            )
    else:
        w.writerow(
            [
                "model",
                "provider",
                "batch",
                "runs",
                "min_ms",
                "mean_ms",
                "median_ms",
                "p90_ms",
                "p95_ms",
                "p99_ms",
                "max_ms",
                "std_ms",
                "throughput_per_s",
            ]
        )
        rows = [(result.batch, result.runs, result.latency, result.throughput_per_s)]
        rows += [(p.batch, p.runs, p.latency, p.throughput_per_s) for p in result.sweep]
        if table == "sweep":
            rows = rows[1:]
        for batch, runs, lat, tput in rows:
            w.writerow(
                [
                    result.model,
                    result.provider,
                    batch,
                    runs,
                    *(
                        f"{v:.4f}"
                        for v in (
                            lat.min_ms,
                            lat.mean_ms,
                            lat.median_ms,
                            lat.p90_ms,
                            lat.p95_ms,
                            lat.p99_ms,
                            lat.max_ms,
                            lat.std_ms,
                        )
                    ),
                    f"{tput:.2f}",
                ]
            )
    return buf.getvalue()


def _opt(v: float | None) -> str:
    return "" if v is None else f"{v:.6g}"
