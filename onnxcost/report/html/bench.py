"""The HTML page and Jupyter snippet of a bench result: latency, sweep, and with a profile the
per-node charts (time against cost, roofline) and node table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onnxcost.bench.result import BenchResult
from onnxcost.report.html.page import (
    VEGA_LITE_SCHEMA,
    bars,
    op_type_chart,
    page,
    snippet_page,
)
from onnxcost.report.tables import Column, Table
from onnxcost.report.writers.html import script_table


def _latency_chart(r: BenchResult) -> dict[str, Any]:
    """min, median, mean and the tail percentiles of the timed runs on one axis."""
    lat = r.latency
    stats = [
        ("min", lat.min_ms),
        ("median", lat.median_ms),
        ("mean", lat.mean_ms),
        ("p90", lat.p90_ms),
        ("p95", lat.p95_ms),
        ("p99", lat.p99_ms),
        ("max", lat.max_ms),
    ]
    return {
        "$schema": VEGA_LITE_SCHEMA,
        "width": "container",
        "height": {"step": 22},
        "data": {"values": [{"statistic": k, "ms": v} for k, v in stats]},
        "layer": [
            {
                "mark": {"type": "bar", "tooltip": True, "color": "#3b6fd8", "opacity": 0.8},
                "encoding": {
                    "y": {"field": "statistic", "type": "nominal", "sort": None, "title": None},
                    "x": {"field": "ms", "type": "quantitative", "title": "latency (ms)"},
                    "tooltip": [{"field": "statistic"}, {"field": "ms", "format": ".4f"}],
                },
            },
            {
                "mark": {"type": "text", "align": "left", "dx": 4, "fontSize": 11},
                "encoding": {
                    "y": {"field": "statistic", "type": "nominal", "sort": None},
                    "x": {"field": "ms", "type": "quantitative"},
                    "text": {"field": "ms", "format": ".3f"},
                },
            },
        ],
    }


def _sweep_chart(r: BenchResult) -> dict[str, Any]:
    rows = [
        {"batch": p.batch, "median ms": p.latency.median_ms, "samples/s": p.throughput_per_s}
        for p in r.sweep
    ]
    return {
        "$schema": VEGA_LITE_SCHEMA,
        "width": "container",
        "height": 220,
        "data": {"values": rows},
        "encoding": {"x": {"field": "batch", "type": "ordinal"}},
        "layer": [
            {
                "mark": {"type": "line", "point": True, "tooltip": True},
                "encoding": {"y": {"field": "samples/s", "type": "quantitative"}},
            },
            {
                "mark": {
                    "type": "line",
                    "point": True,
                    "strokeDash": [4, 3],
                    "color": "#a15c00",
                    "tooltip": True,
                },
                "encoding": {"y": {"field": "median ms", "type": "quantitative"}},
            },
        ],
        "resolve": {"scale": {"y": "independent"}},
    }


def _time_cost_chart(points: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Each node's measured time against its FLOPs or bytes moved (log-log, drop-down)."""
    return {
        "$schema": VEGA_LITE_SCHEMA,
        "width": "container",
        "height": 360,
        "data": {"values": list(points)},
        "params": [
            {
                "name": "against",
                "value": "FLOPs",
                "bind": {"input": "select", "options": ["FLOPs", "bytes"], "name": "cost "},
            }
        ],
        "transform": [
            {"calculate": "against == 'FLOPs' ? datum.flops : datum.bytes", "as": "cost"},
            {"filter": "datum.cost > 0 && datum.us > 0"},
        ],
        **_scatter(
            ("cost", "static cost (FLOPs or bytes moved)"),
            ("us", "measured time per run (us)"),
            [("us", ".1f", "us"), ("flops", ",d", "FLOPs"), ("bytes", ",d", "bytes")],
        ),
    }


def _log_axis(field: str, title: str) -> dict[str, Any]:
    return {
        "field": field,
        "type": "quantitative",
        "scale": {"type": "log"},
        "title": title,
        "axis": {"format": "~s"},
    }


def _scatter(
    x: tuple[str, str], y: tuple[str, str], figures: Sequence[tuple[str, str, str]]
) -> dict[str, Any]:
    """Mark and encoding of a log-log scatter of nodes coloured by op type: (field, title) axes,
    and (field, format, title) figures in the tooltip after the node's name and op type."""
    return {
        "mark": {"type": "point", "filled": True, "size": 50, "opacity": 0.75, "tooltip": True},
        "encoding": {
            "x": _log_axis(*x),
            "y": _log_axis(*y),
            "color": {"field": "op", "type": "nominal", "title": "op type"},
            "tooltip": [
                {"field": "name", "title": "node"},
                {"field": "op", "title": "op type"},
                *({"field": f, "format": fmt, "title": t} for f, fmt, t in figures),
            ],
        },
    }


def _roofline_chart(points: Sequence[Mapping[str, Any]], r: BenchResult) -> dict[str, Any]:
    """Nodes at (FLOPs/byte, achieved GFLOP/s) under min(peak, intensity x bandwidth)."""
    layers: list[dict[str, Any]] = [
        {
            "data": {"values": list(points)},
            "transform": [{"filter": "datum.ai > 0 && datum.gflops > 0"}],
            **_scatter(
                ("ai", "arithmetic intensity (FLOPs per byte moved)"),
                ("gflops", "achieved GFLOP/s"),
                [("ai", ".3g", "FLOPs/byte"), ("gflops", ".3g", "GFLOP/s"), ("us", ".1f", "us")],
            ),
        }
    ]
    if r.roofline is not None:
        c = r.roofline.ceilings
        ais = [p["ai"] for p in points if p["ai"] > 0] or [1.0]
        lo, hi = min(ais) / 4, max(ais) * 4
        steps = 60
        roof = [
            {"ai": x, "gflops": min(c.peak_flops_per_s, x * c.bandwidth_bytes_per_s) / 1e9}
            for x in (lo * (hi / lo) ** (k / steps) for k in range(steps + 1))
        ]
        layers.append(
            {
                "data": {"values": roof},
                "mark": {"type": "line", "color": "#1d2330", "strokeWidth": 1.5},
                "encoding": {
                    "x": {"field": "ai", "type": "quantitative", "scale": {"type": "log"}},
                    "y": {"field": "gflops", "type": "quantitative", "scale": {"type": "log"}},
                },
            }
        )
    return {
        "$schema": VEGA_LITE_SCHEMA,
        "width": "container",
        "height": 380,
        "layer": layers,
    }


BENCH_NODE_COLUMNS: tuple[Column, ...] = (
    Column("node", kind="text"),
    Column("op type", kind="plain"),
    Column("kernel", kind="plain"),
    Column("on", kind="plain"),
    Column("calls", True, kind="int"),
    Column("median us", True, kind="us"),
    Column("share", True, kind="pct"),
    Column("MACs", True, kind="count"),
    Column("FLOPs", True, kind="count"),
    Column("bytes", True, kind="bytes"),
    Column("GFLOP/s", True, kind="rate"),
    Column("GB/s", True, kind="rate"),
    Column("bound", kind="plain"),
    Column("efficiency", True, kind="pct"),
)


def bench_html(r: BenchResult) -> str:
    """The report of a bench: summary, latency, and with a profile the per-node charts."""
    from onnxcost.report.bench import max_batch_section, profile_line, summary_rows

    env = r.environment
    lat = r.latency
    data: dict[str, Any] = {"charts": {"chart-latency": _latency_chart(r)}, "tables": []}
    if r.sweep:
        data["charts"]["chart-sweep"] = _sweep_chart(r)
    prof = r.profile
    roofline_note = ""
    if prof is not None:
        timed = [n for n in prof.nodes if n.median_us > 0]
        points = [
            {
                "name": n.shown_name,
                "op": n.op_type,
                "us": n.median_us,
                "flops": n.flops,
                "bytes": n.bytes_total,
                "ai": n.flops / n.bytes_total if n.bytes_total else 0.0,
                "gflops": n.gflops_per_s or 0.0,
            }
            for n in timed
        ]
        data["charts"]["chart-optype"] = op_type_chart(
            [
                {"op": o.op_type, "time (us)": o.median_us, "kernels": o.count, "calls": o.calls}
                for o in prof.by_op_type
            ],
            ("time (us)", "kernels", "calls"),
        )
        data["charts"]["chart-time-cost"] = _time_cost_chart(points)
        data["charts"]["chart-roofline"] = _roofline_chart(points, r)
        nodes = Table(
            "Per node",
            BENCH_NODE_COLUMNS,
            tuple(
                (
                    n.shown_name,
                    n.op_type,
                    "+".join(dict.fromkeys(n.kernel_op_types)),
                    n.provider.replace("ExecutionProvider", ""),
                    n.calls,
                    n.median_us,
                    n.share,
                    n.macs,
                    n.flops,
                    n.bytes_total,
                    n.gflops_per_s,
                    n.gbytes_per_s,
                    n.bound or "",
                    None if n.efficiency_suspect else n.efficiency,
                )
                for n in prof.nodes
            ),
        )
        data["tables"].append(
            script_table(
                nodes,
                "node-table",
                sort=5,
                placeholder="filter nodes: name, op type, kernel (regex)",
            )
        )
        if r.roofline is not None:
            c = r.roofline.ceilings
            roofline_note = (
                f"Ceilings measured on this device: {c.peak_flops_per_s / 1e9:.1f} GFLOP/s, "
                f"{c.bandwidth_bytes_per_s / 1e9:.1f} GB/s ({c.dtype}); the line is "
                "min(peak, intensity x bandwidth). Sum of node floors "
                f"{r.roofline.floor_ms:.4g} ms against a median of {r.roofline.measured_ms:.4g} ms."
            )
            if prof.suspect_nodes:
                roofline_note += (
                    f" {len(prof.suspect_nodes)} nodes ran faster than their floor: their "
                    "efficiency is left blank, a measurement problem (ceilings too low, data "
                    "in cache, or time attributed to another row), not a result."
                )
        else:
            roofline_note = (
                "No ceilings: add --calibrate to measure this provider's peak FLOP/s and "
                "bandwidth and draw the roof."
            )
    cards = [
        (
            "median latency",
            f"{lat.median_ms:.3f} ms",
            f"p90 {lat.p90_ms:.3f} ms, p99 {lat.p99_ms:.3f} ms",
        ),
        ("throughput", f"{r.throughput_per_s:,.1f}/s", f"batch {r.batch} / median latency"),
        ("variation (CV)", f"{100 * lat.cv:.1f}%", "noisy" if r.noisy else "steady"),
        ("runs", str(r.runs), f"after {r.warmup} warm-up"),
    ]
    return page(
        "bench.html.j2",
        title=f"onnxcost bench: {r.model}",
        what="latency measured with onnxruntime",
        data=data,
        heading=r.model,
        provider=f"{r.provider} (onnxruntime {env.onnxruntime_version})",
        device=env.gpu or env.cpu,
        cards=cards,
        summary=summary_rows(r),
        runs=r.runs,
        sweep=bool(r.sweep),
        max_batch=None if r.max_batch is None else max_batch_section(r.max_batch),
        profiled=prof is not None,
        profile_line=profile_line(prof) if prof is not None else "",
        roofline_note=roofline_note,
        warnings=list(r.warnings),
    )


def bench_snippet(r: BenchResult) -> str:
    """Jupyter's view of a bench: latency and throughput, and with a profile time by op type."""
    lat = r.latency
    rows = [
        (
            "median latency",
            f"{lat.median_ms:.3f} ms",
            f"p90 {lat.p90_ms:.3f}, p99 {lat.p99_ms:.3f} ms",
        ),
        ("throughput", f"{r.throughput_per_s:,.1f}/s", f"batch {r.batch}, {r.runs} runs"),
        ("provider", r.provider, r.environment.gpu or r.environment.cpu),
    ]
    svg = ""
    if r.profile is not None:
        svg = bars(
            [{"op": o.op_type, "us": o.median_us} for o in r.profile.by_op_type],
            "us",
            "time per run by kernel op type (us)",
        )
    return snippet_page(f"Benchmark: {r.model}", rows, svg)
