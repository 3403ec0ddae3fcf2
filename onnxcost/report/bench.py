"""Renderers of a bench result: a rich terminal report, markdown, and CSV.

Model text (node names, op types, paths, notes that quote them) goes through ``safe_text``.

The node and op-type tables follow TensorFlow's benchmark_model: time per run, share,
cumulative share, times called; then what the analyzer counted and what that achieves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from onnxcost import units
from onnxcost.bench.join import NodeProfile
from onnxcost.bench.memory import MemoryUse
from onnxcost.bench.result import BenchResult, ProfileResult
from onnxcost.bench.roofline import ModelRoofline
from onnxcost.bench.sweep import MaxBatch
from onnxcost.bench.timing import THROUGHPUT_METHOD
from onnxcost.report.safe_text import hanging, md, plain
from onnxcost.report.tables import Cell, Column, Table, drop_order
from onnxcost.report.writers.csv import to_csv as csv_text
from onnxcost.report.writers.markdown import to_markdown as md_lines
from onnxcost.report.writers.rich import to_rich

CsvTable = Literal["auto", "summary", "nodes", "op_types", "sweep"]


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.2f}%"


def _rate(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


SUSPECT_MARK = ">100%?"
SUSPECT_NOTE = (
    "{mark} efficiency above 100% is a measurement problem, not a result: the node ran faster "
    "than its roofline floor, so the ceilings are too low for this run (measured under other "
    "conditions: pass --recalibrate; or its data stayed in a cache faster than the memory "
    "bandwidth measured) or time was attributed to another row (a fused kernel)"
)


def _efficiency(v: float | None) -> str:
    """The efficiency as a percentage, or the suspect mark above 100% (never printed as a fact)."""
    if v is None:
        return "-"
    return SUSPECT_MARK if v > 1.0 else _pct(v)


def _spread(n: NodeProfile) -> str:
    s = n.spread
    return f"{s.p10_us / 1e3:.3f}-{s.p90_us / 1e3:.3f}"


_NODE_COLS: tuple[tuple[str, bool, Callable[[NodeProfile, float], str]], ...] = (
    # (header, numeric, cell text from the row and the cumulative share up to and including it)
    ("node", False, lambda n, _c: n.shown_name),
    ("op type", False, lambda n, _c: n.op_type),
    ("kernel", False, lambda n, _c: "+".join(dict.fromkeys(n.kernel_op_types))),
    ("mapping", False, lambda n, _c: n.mapping),
    ("on", False, lambda n, _c: n.provider.replace("ExecutionProvider", "")),
    ("calls", True, lambda n, _c: str(n.calls)),
    ("median ms", True, lambda n, _c: _ms(n.median_us / 1e3)),
    ("p10-p90 ms", True, lambda n, _c: _spread(n)),
    ("%", True, lambda n, _c: _pct(n.share)),
    ("cdf %", True, lambda _n, c: _pct(c)),
    ("GFLOP/s", True, lambda n, _c: _rate(n.gflops_per_s)),
    ("GB/s", True, lambda n, _c: _rate(n.gbytes_per_s)),
    ("bound", False, lambda n, _c: n.bound or "-"),
    ("eff.", True, lambda n, _c: _efficiency(n.efficiency)),
    ("output", False, lambda n, _c: units.shapes(n.output_shapes) or "-"),
)


def _by_time(
    nodes: Sequence[NodeProfile], top: int | None
) -> tuple[list[tuple[NodeProfile, float]], int]:
    """Rows slowest first with their cumulative share, cut to ``top``; and how many were cut."""
    ordered = sorted(nodes, key=lambda n: -n.median_us)
    rows, running = [], 0.0
    for n in ordered:
        running += n.share
        rows.append((n, running))
    if top is not None and top > 0 and len(rows) > top:
        return rows[:top], len(rows) - top
    return rows, 0


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
            f"{r.throughput_per_s:.1f} samples/s ({THROUGHPUT_METHOD}: {r.batch} / {lat.median_ms:.3f} ms)",
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
        rows.append(("calibration", _ceilings_source(rf)))
        rows.append(
            (
                "roofline",
                f"sum of node floors {rf.floor_ms:.4g} ms vs median {rf.measured_ms:.4g} ms: "
                + (
                    f"{SUSPECT_MARK} (faster than the floor: the ceilings are too low, "
                    f"or the data stayed in cache; --recalibrate)"
                    if rf.efficiency_suspect
                    else f"{100 * rf.efficiency:.1f}% efficient"
                ),
            )
        )
    return rows


def _ceilings_source(rf: ModelRoofline) -> str:
    """Where the ceilings came from: the cache (file, date) or measured in this run."""
    when = rf.ceilings.measured_at or "at an unknown date"
    if rf.from_cache:
        return (
            f"ceilings from cache {rf.cache_path}, measured {when}; --recalibrate to measure again"
        )
    where = f", cached in {rf.cache_path}" if rf.cache_path else ""
    return f"ceilings measured now ({when}){where}"


def _memory_grid(use: MemoryUse) -> Table:
    """Estimate vs measured memory, with the ratio measured / estimate."""
    weights, activations = use.weights_estimate_bytes, use.activations_estimate_bytes
    figures = [
        ("weights", weights, use.weights_measured_bytes),
        ("run peak", activations, use.run_peak_measured_bytes),
    ]
    if use.device_weights_measured_bytes is not None:
        figures.append(("weights, device", weights, use.device_weights_measured_bytes))
    if use.device_run_peak_measured_bytes is not None:
        figures.append(("run peak, device", activations, use.device_run_peak_measured_bytes))
    rows = [
        [label, units.nbytes(estimate), _bytes(measured), _ratio(_div(measured, estimate))]
        for label, estimate, measured in figures
    ]
    rows.append(["arena plan", "-", "not exposed", "-"])
    return _grid(
        "Memory: estimate vs measured",
        ("", "estimate", "measured", "ratio"),
        (False, True, True, True),
        rows,
    )


MEMORY_NOTE = (
    "estimate: the analysis; measured: onnxruntime in this process. weights: param bytes vs "
    "host RSS growth over session creation; run peak: peak "
    "activations vs peak RSS over the runs minus the RSS after creation; device rows: NVML; "
    "ratio: measured / estimate; onnxruntime's Python API does not expose its arena plan"
)


def _bytes(v: int | None) -> str:
    return "-" if v is None else units.nbytes(v)


def _ratio(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _div(a: int | None, b: int) -> float | None:
    return a / b if a is not None and b > 0 else None


def _kv_table(title: str, rows: Sequence[tuple[str, str]]) -> Table:
    """Label and value, one line each: the label kept whole (bold), the value trimmed at its
    end where the terminal is narrow (--wide keeps it whole)."""
    return Table(
        title,
        (Column("key", style="bold"), Column("value", cut="end")),
        tuple(rows),
        show_header=False,
    )


# Columns a narrow terminal keeps: what names a row, and its time.
_KEPT = ("node", "op type", "median ms", "%", "batch", "ok", "metric")


def _grid(
    title: str,
    headers: tuple[str, ...],
    numeric: tuple[bool, ...],
    rows: Sequence[Sequence[Cell]],
) -> Table:
    """A table whose rightmost columns a narrow terminal drops first (all but ``_KEPT``),
    then cuts its text columns in the middle."""
    return Table(
        title,
        tuple(Column(h, n, "" if n else "middle") for h, n in zip(headers, numeric, strict=True)),
        tuple(tuple(row) for row in rows),
        drop=drop_order(headers, _KEPT),
    )


def _node_grid(prof: ProfileResult, top: int | None) -> tuple[Table, int]:
    nodes, more = _by_time(prof.nodes, top)
    grid = _grid(
        f"Per node (separate profiled session, median of {prof.runs} runs, slowest first)",
        tuple(h for h, _n, _v in _NODE_COLS),
        tuple(n for _h, n, _v in _NODE_COLS),
        [[value(n, cdf) for _h, _n, value in _NODE_COLS] for n, cdf in nodes],
    )
    return grid, more


def _op_grid(prof: ProfileResult) -> Table:
    return _grid(
        "By kernel op type",
        ("op type", "count", "median ms", "%", "cdf %", "times called"),
        (False, True, True, True, True, True),
        [
            [
                o.op_type,
                str(o.count),
                _ms(o.median_us / 1e3),
                _pct(o.share),
                _pct(o.cumulative_share),
                str(o.calls),
            ]
            for o in prof.by_op_type
        ],
    )


def _sweep_grid(result: BenchResult) -> Table:
    return _grid(
        "Batch sweep",
        ("batch", "runs", "median ms", "p90 ms", "throughput /s"),
        (True,) * 5,
        [
            [
                str(p.batch) + (" (main run)" if p.from_main_run else ""),
                str(p.runs),
                _ms(p.latency.median_ms),
                _ms(p.latency.p90_ms),
                f"{p.throughput_per_s:.1f}",
            ]
            for p in result.sweep
        ],
    )


def _probe_grid(mb: MaxBatch) -> Table:
    """Each probe; its memory (the probe's peak RSS growth) beside what the formulas say it
    needs (weights + peak activations), where there is an estimate."""
    e = mb.estimate
    return _grid(
        "Max batch search (each probe in its own process)",
        ("batch", "ok", "median ms", "throughput /s", "memory", "estimate", "detail"),
        (True, False, True, True, True, True, False),
        [
            [
                str(p.batch),
                "yes" if p.ok else "no",
                _ms(p.median_ms),
                _rate(p.throughput_per_s),
                _bytes(p.rss_bytes),
                "-" if e is None else _bytes(e.needs(p.batch)),
                p.detail,
            ]
            for p in mb.probes
        ],
    )


def _profile_line(prof: ProfileResult) -> str:
    return (
        f"{prof.runs} profiled runs kept ({prof.warmup_runs} dropped); node times are medians "
        f"over them, p10-p90 their spread: kernels "
        f"{prof.kernel_sum_us / 1e3:.3f} ms of {prof.run_us / 1e3:.3f} ms per run (medians) "
        f"({100 * prof.coverage:.1f}%); matched via {prof.mapped_with.replace('_', ' ')}"
        + (_gpu_line(prof) if prof.device_span_us > 0 else "")
    )


def _gpu_line(prof: ProfileResult) -> str:
    """The GPU's side (CUPTI): its busy time against the unprofiled latency."""
    host = (
        f"; CPU-provider nodes {prof.host_node_us / 1e3:.3f} ms of host time"
        if prof.host_node_us > 0
        else ""
    )
    return (
        f". GPU (CUPTI): busy {prof.device_busy_us / 1e3:.3f} ms per run = "
        f"{100 * prof.device_coverage:.0f}% of the unprofiled median latency "
        f"{prof.latency_median_us / 1e3:.3f} ms (copies {prof.device_copy_us / 1e3:.3f} ms, "
        f"outside nodes {prof.device_unowned_us / 1e3:.3f} ms){host}; a profiled run spans "
        f"{prof.device_span_us / 1e3:.3f} ms on the GPU (profiling slows the host, not the GPU)"
    )


def _suspect_note(prof: ProfileResult) -> str:
    names = prof.suspect_nodes
    return SUSPECT_NOTE.format(mark=SUSPECT_MARK) + f" ({len(names)}: {_listed(names, 5)})."


def _max_batch_line(mb: MaxBatch) -> str:
    best = mb.best
    limit = " (the search limit: larger may fit)" if mb.hit_limit else ""
    at = f"{best.batch} ({_rate(best.throughput_per_s)} samples/s)" if best else "-"
    return f"largest batch that ran: {mb.largest_ok}{limit}; best throughput at batch {at}"


def _estimate_line(mb: MaxBatch) -> str:
    """What the formulas estimate fits, its need against the free memory, and its error."""
    e = mb.estimate
    if e is None:
        return f"estimate from the formulas: none ({mb.estimate_note or 'not made'})"
    at = 1 if e.batch is None else e.batch
    parts = (
        f"weights {_bytes(e.weights_bytes)} + peak activations "
        f"{_bytes(e.need.needs(at) - e.weights_bytes)}"
    )
    if e.overhead_bytes:
        parts += f" + overhead {_bytes(e.overhead_bytes)} ({e.overhead_source})"
    free = f"{_bytes(e.free_bytes)} free ({e.free_source})"
    if e.batch is None:
        return f"estimate from the formulas: not even batch 1 fits ({parts} > {free})"
    up_to = " (the search limit: larger may fit)" if e.capped else ""
    error = mb.estimate_error
    against = "" if error is None else f"; {error:+.1%} against the largest batch that ran"
    return f"estimate from the formulas: batch {e.batch}{up_to}, needing {parts} of {free}{against}"


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


def _rich(grid: Table, width: int | None = None) -> RichTable:
    # Bench's titles have been drawn unstyled (not bold) in a colour terminal; kept as they were.
    return to_rich(grid, width, title_style="")


def _md(grid: Table) -> list[str]:
    return ["", *md_lines(grid, level=3)]


def render_table(result: BenchResult, console: Console, *, top: int | None = 20) -> None:
    """The whole result on ``console``; node rows cut to the ``top`` slowest (None: all)."""
    console.print(_rich(_kv_table("Benchmark", _summary_rows(result)), console.width))
    console.print(_rich(_kv_table("Timing", _latency_rows(result)), console.width))
    if result.memory.use is not None:
        console.print(_rich(_memory_grid(result.memory.use), console.width))
        console.print(hanging("  ", MEMORY_NOTE))
    prof = result.profile
    if prof is not None:
        nodes, more = _node_grid(prof, top)
        console.print(_rich(nodes, console.width))
        if more:
            console.print(f"  ... {more} more rows (--top 0 shows all)")
        if prof.suspect_nodes:
            console.print(hanging("  ", _suspect_note(prof), style="yellow"))
        console.print(_rich(_op_grid(prof), console.width))
        console.print(hanging("  ", _profile_line(prof)))
        if prof.untimed_nodes:
            untimed = _listed(prof.untimed_nodes)
            console.print(hanging("  ", f"not run by onnxruntime (folded or removed): {untimed}"))
        if prof.note:
            console.print(hanging("  ", prof.note, style="yellow"))
        if prof.trace_path:
            console.print(
                hanging("  ", f"trace: {prof.trace_path} (open in https://ui.perfetto.dev)")
            )
    if result.sweep:
        console.print(_rich(_sweep_grid(result), console.width))
    if result.max_batch is not None:
        console.print(_rich(_probe_grid(result.max_batch), console.width))
        console.print(hanging("  ", _max_batch_line(result.max_batch)))
        console.print(hanging("  ", _estimate_line(result.max_batch)))
    for w in result.warnings:
        console.print(hanging(Text.assemble(("warning:", "yellow"), " "), w))


def to_markdown(result: BenchResult, *, top: int | None = 20) -> str:
    """The result as GitHub markdown: summary, timing, per node, per op type, sweep, max batch."""
    summary = _grid(
        "Summary",
        ("", ""),
        (False, False),
        [list(r) for r in _summary_rows(result) + _latency_rows(result)],
    )
    lines = [f"## Benchmark: {md(result.model)}", *_md(summary)]
    if result.memory.use is not None:
        lines += [*_md(_memory_grid(result.memory.use)), "", md(_sentence(MEMORY_NOTE))]
    prof = result.profile
    if prof is not None:
        nodes, more = _node_grid(prof, top)
        lines += _md(nodes)
        if more:
            lines += ["", f"... {more} more rows"]
        if prof.suspect_nodes:
            lines += ["", md(_suspect_note(prof))]
        lines += _md(_op_grid(prof))
        lines += ["", _sentence(_profile_line(prof))]
        if prof.untimed_nodes:
            lines += [
                "",
                md(f"Not run by onnxruntime (folded or removed): {_listed(prof.untimed_nodes)}."),
            ]
        if prof.note:
            lines += ["", f"> {md(prof.note)}"]
    if result.sweep:
        lines += _md(_sweep_grid(result))
    if result.max_batch is not None:
        lines += [
            *_md(_probe_grid(result.max_batch)),
            "",
            _sentence(_max_batch_line(result.max_batch)),
            "",
            _sentence(_estimate_line(result.max_batch)),
        ]
    if result.warnings:
        lines += [""] + [f"- warning: {md(w)}" for w in result.warnings]
    return "\n".join(lines) + "\n"


def to_csv(result: BenchResult, table: CsvTable = "auto") -> str:
    """One table as CSV: 'nodes' (default when profiled), 'op_types', 'sweep', or 'summary'.

    'summary' has one row for the main run and one per sweep batch.
    """
    if table == "auto":
        table = "nodes" if result.profile is not None else "summary"
    if table in ("nodes", "op_types") and result.profile is None:
        return ""
    return csv_text(csv_table(result, table))


_CSV_NODE_HEADERS = (
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
    "median_us",
    "p10_us",
    "p90_us",
    "efficiency_suspect",
)
_CSV_OP_HEADERS = (
    "op_type",
    "count",
    "calls",
    "mean_us",
    "share",
    "cumulative_share",
    "median_us",
)
_CSV_RUN_HEADERS = (
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
)


def csv_table(result: BenchResult, table: CsvTable) -> Table:
    """The machine table ``to_csv`` writes: exact figures, one row per node, op type or run."""
    prof = result.profile
    rows: list[tuple[Cell, ...]]
    if table == "nodes":
        rows = [
            (
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
                f"{n.median_us:.3f}",
                f"{n.spread.p10_us:.3f}",
                f"{n.spread.p90_us:.3f}",
                "true" if n.efficiency_suspect else "false",
            )
            for n in (prof.nodes if prof is not None else ())
        ]
        return Table("nodes", tuple(map(Column, _CSV_NODE_HEADERS)), tuple(rows))
    if table == "op_types":
        rows = [
            (
                o.op_type,
                o.count,
                o.calls,
                f"{o.mean_us:.3f}",
                f"{o.share:.6f}",
                f"{o.cumulative_share:.6f}",
                f"{o.median_us:.3f}",
            )
            for o in (prof.by_op_type if prof is not None else ())
        ]
        return Table("op_types", tuple(map(Column, _CSV_OP_HEADERS)), tuple(rows))
    runs = [(result.batch, result.runs, result.latency, result.throughput_per_s)]
    runs += [(p.batch, p.runs, p.latency, p.throughput_per_s) for p in result.sweep]
    if table == "sweep":
        runs = runs[1:]
    rows = [
        (
            result.model,
            result.provider,
            batch,
            n,
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
        )
        for batch, n, lat, tput in runs
    ]
    return Table(table, tuple(map(Column, _CSV_RUN_HEADERS)), tuple(rows))


def _listed(names: Sequence[str], limit: int = 10) -> str:
    """'a, b, c' or 'a, b, ... (25 in all)'."""
    if len(names) <= limit:
        return ", ".join(map(plain, names))
    return f"{', '.join(map(plain, names[:limit]))}, ... ({len(names)} in all)"


def _opt(v: float | None) -> str:
    return "" if v is None else f"{v:.6g}"


def summary_rows(result: BenchResult) -> list[tuple[str, str]]:
    """What was measured and how, then the timing, as (label, text) rows (shared with HTML)."""
    return _summary_rows(result) + _latency_rows(result)


def max_batch_section(mb: MaxBatch) -> tuple[Table, list[str]]:
    """The probes' table and the sentences under it (shared with HTML)."""
    return _probe_grid(mb), [_sentence(_max_batch_line(mb)), _sentence(_estimate_line(mb))]


def profile_line(prof: ProfileResult) -> str:
    """One sentence on the profiled runs: how many, kernel time against run time, mapping."""
    return _sentence(_profile_line(prof))
