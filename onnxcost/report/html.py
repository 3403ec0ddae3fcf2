"""Self-contained HTML reports of an analysis, a bench result and a comparison.

One file that opens offline: styles, scripts and data inline, and a Content-Security-Policy
that forbids every network request. Charts are Vega-Lite specifications drawn by vega-embed,
whose JavaScript bundle comes from the ``vl-convert-python`` package (``pip install
'onnxcost[html]'``) and is cached on disk after the first report (bundling takes ~10 s).
Pages are Jinja2 templates with autoescaping on; the data the scripts read is JSON inside a
``<script type="application/json">`` whose ``<``, ``>`` and ``&`` are written as ``\\u003c``
escapes, so no model string can close the element or open another. The scripts put model
strings on the page through ``textContent`` only.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onnxcost import units
from onnxcost._version import __version__
from onnxcost.analysis.records import NodeRecord, jsonable
from onnxcost.errors import OnnxcostError
from onnxcost.report.tree import MAX_DEPTH, Scope, scope_tree

if TYPE_CHECKING:
    import jinja2

    from onnxcost.analysis.walk import Analysis
    from onnxcost.bench.result import BenchResult
    from onnxcost.compare import Comparison
    from onnxcost.llm.cost import LlmReport

VEGA_LITE_SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"
"""Names the Vega-Lite version of each spec; vega-embed reads it and never fetches it."""

_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_GLOBALS = "window.vegaEmbed = vegaEmbed; window.vega = vega; window.vegaLite = vegaLite;"
"""The bundle's entry point: the three libraries as globals for the report's own script."""
_OP_METRICS = ("FLOPs", "MACs", "bytes", "params", "nodes")


class HtmlUnavailableError(OnnxcostError):
    """The optional packages for --format html are not installed."""


def script_json(data: object) -> str:
    """``data`` as JSON safe inside ``<script>``: no ``</script>``, ``<!--`` or line separators."""
    try:
        text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    except TypeError:  # bytes: a name that is not UTF-8, written escaped
        text = json.dumps(jsonable(data), separators=(",", ":"), allow_nan=False)
    for raw, escaped in _JSON_ESCAPES.items():
        text = text.replace(raw, escaped)
    return text


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "onnxcost"


@functools.cache
def vega_bundle() -> str:
    """vega, vega-lite and vega-embed as one script (from vl-convert-python), cached on disk."""
    try:
        import vl_convert
    except ImportError as e:
        raise HtmlUnavailableError(
            "--format html needs vl-convert-python and jinja2: pip install 'onnxcost[html]'"
        ) from e
    versions = f"vega{vl_convert.get_vega_version()}-embed{vl_convert.get_vega_embed_version()}"
    path = _cache_dir() / f"vega-bundle-{versions}.js"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        pass
    text: str = vl_convert.javascript_bundle(_GLOBALS)
    # A "</script" inside the bundle would end the inline script; in JavaScript "<\/" is "</".
    text = text.replace("</script", "<\\/script").replace("<!--", "<\\!--")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "w", dir=path.parent, delete=False, suffix=".tmp", encoding="utf-8"
        ) as f:
            f.write(text)
        os.replace(f.name, path)
    except OSError:
        pass  # no cache: the next report bundles again
    return text


@functools.cache
def _env() -> jinja2.Environment:
    try:
        import jinja2
    except ImportError as e:
        raise HtmlUnavailableError(
            "--format html needs jinja2 and vl-convert-python: pip install 'onnxcost[html]'"
        ) from e
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("onnxcost.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["count"] = units.count
    env.filters["nbytes"] = units.nbytes
    return env


def _asset(name: str) -> str:
    return (resources.files("onnxcost.report") / "templates" / name).read_text(encoding="utf-8")


def _page(template: str, *, title: str, what: str, data: Mapping[str, Any], **context: Any) -> str:
    env = _env()  # first: it says which extra to install when jinja2 is missing
    from markupsafe import Markup  # jinja2's own dependency

    return env.get_template(template).render(
        title=title,
        what=what,
        version=__version__,
        css=Markup(_asset("report.css")),
        js=Markup(_asset("report.js")),
        vega=Markup(vega_bundle()),
        data=Markup(script_json(data)),
        **context,
    )


def _op_label(op_type: str, domain: str) -> str:
    return op_type if not domain else f"{domain}::{op_type}"


def op_type_chart(rows: Sequence[Mapping[str, Any]], metrics: Sequence[str]) -> dict[str, Any]:
    """A horizontal bar per op type, the metric chosen from a drop-down (Vega-Lite)."""
    return {
        "$schema": VEGA_LITE_SCHEMA,
        "width": "container",
        "data": {"values": list(rows)},
        "params": [
            {
                "name": "show",
                "value": metrics[0],
                "bind": {"input": "select", "options": list(metrics), "name": "metric "},
            }
        ],
        "transform": [
            {"fold": list(metrics), "as": ["metric", "value"]},
            {"filter": "datum.metric == show && datum.value > 0"},
            {"joinaggregate": [{"op": "sum", "field": "value", "as": "total"}]},
            {"calculate": "datum.total ? datum.value / datum.total : 0", "as": "share"},
        ],
        "height": {"step": 18},
        "mark": {"type": "bar", "tooltip": True},
        "encoding": {
            "y": {"field": "op", "type": "nominal", "sort": "-x", "title": None},
            "x": {
                "field": "value",
                "type": "quantitative",
                "title": None,
                "axis": {"format": "~s", "tickCount": 6},
            },
            "tooltip": [
                {"field": "op", "title": "op type"},
                {"field": "metric"},
                {"field": "value", "format": ",d"},
                {"field": "share", "format": ".2%"},
            ],
        },
    }


def _op_rows(a: Analysis) -> list[dict[str, Any]]:
    return [
        {
            "op": _op_label(s.op_type, s.domain),
            "FLOPs": s.flops,
            "MACs": s.macs,
            "bytes": s.bytes_read + s.bytes_written,
            "params": s.params,
            "nodes": s.count,
        }
        for s in a.by_op_type
    ]


NODE_TABLE_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("name", "text", False),
    ("op type", "plain", False),
    ("status", "plain", False),
    ("in shapes", "plain", False),
    ("out shapes", "plain", False),
    ("params", "count", True),
    ("MACs", "count", True),
    ("FLOPs", "count", True),
    ("read", "bytes", True),
    ("written", "bytes", True),
)


def _columns(spec: Sequence[tuple[str, str, bool]]) -> list[dict[str, Any]]:
    return [{"label": label, "kind": kind, "numeric": numeric} for label, kind, numeric in spec]


def _node_rows(nodes: Sequence[NodeRecord]) -> list[list[Any]]:
    return [
        [
            n.name,
            _op_label(n.op_type, n.domain),
            n.status,
            units.shapes(n.input_shapes),
            units.shapes(n.output_shapes),
            n.params,
            n.macs,
            n.flops,
            n.bytes_read,
            n.bytes_written,
        ]
        for n in nodes
    ]


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
        "inputs": _tensor_view(a.inputs),
        "outputs": _tensor_view(a.outputs),
        "cards": [
            ("MACs", units.count(t.macs), f"{t.macs:,}"),
            ("FLOPs", units.count(t.flops), f"{t.flops:,}"),
            ("params", units.count(t.params), f"{t.params:,}"),
            ("param bytes", units.nbytes(t.param_bytes), f"{t.param_bytes:,} B"),
            ("bytes read", units.nbytes(t.bytes_read), f"{t.bytes_read:,} B"),
            ("bytes written", units.nbytes(t.bytes_written), f"{t.bytes_written:,} B"),
            (
                "peak activations",
                units.nbytes(t.peak_activation_bytes),
                f"{t.peak_activation_bytes:,} B",
            ),
        ],
        "unsupported": list(a.unsupported),
        "warnings": list(a.warnings),
    }


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
            {
                "id": "node-table",
                "columns": _columns(NODE_TABLE_COLUMNS),
                "rows": _node_rows(a.nodes if nodes is None else nodes),
                "placeholder": "filter nodes: name, op type, shape or status (regex)",
            }
        ],
    }
    ctx = _analysis_context(a)
    return _page(
        "analysis.html.j2",
        title=f"onnxcost: {ctx['heading']}",
        what="static cost analysis",
        data=data,
        tree_rows=tree_view(root),
        tree_total=total,
        **ctx,
    )


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


BENCH_NODE_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("node", "text", False),
    ("op type", "plain", False),
    ("kernel", "plain", False),
    ("on", "plain", False),
    ("calls", "int", True),
    ("median us", "us", True),
    ("share", "pct", True),
    ("MACs", "count", True),
    ("FLOPs", "count", True),
    ("bytes", "bytes", True),
    ("GFLOP/s", "rate", True),
    ("GB/s", "rate", True),
    ("bound", "plain", False),
    ("efficiency", "pct", True),
)


def bench_html(r: BenchResult) -> str:
    """The report of a bench: summary, latency, and with a profile the per-node charts."""
    from onnxcost.report.bench import profile_line, summary_rows

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
                "name": n.name,
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
        data["tables"].append(
            {
                "id": "node-table",
                "columns": _columns(BENCH_NODE_COLUMNS),
                "rows": [
                    [
                        n.name,
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
                    ]
                    for n in prof.nodes
                ],
                "sort": 5,
                "placeholder": "filter nodes: name, op type, kernel (regex)",
            }
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
    return _page(
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
        profiled=prof is not None,
        profile_line=profile_line(prof) if prof is not None else "",
        roofline_note=roofline_note,
        warnings=list(r.warnings),
    )


ALIGN_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("#", "int", True),
    ("{a} node (op)", "text", False),
    ("{b} node (op)", "text", False),
    ("MACs ({a} / {b})", "plain", False),
    ("shapes: in -> out, weight ({a} | {b})", "plain", False),
    ("differences", "plain", False),
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
                    "op": _op_label(r.op_type, r.domain),
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
        tables.append(
            {
                "id": table_id,
                "columns": [
                    {"label": h.format(a=al.baseline, b=al.candidate), "kind": kind, "numeric": num}
                    for h, kind, num in ALIGN_COLUMNS
                ],
                "rows": [[int(row[0]), *row[1:]] for row in sec.rows],
                "page": 500,
                "placeholder": "filter layers: names, ops, shapes, differences (regex)",
            }
        )
    header = header_lines(c)
    return _page(
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


def llm_html(r: LlmReport) -> str:
    """The report of ``onnxcost llm``: its figures, and each phase's arithmetic intensity
    (FLOPs per byte moved) against the ridge point peak / bandwidth where one is known."""
    from onnxcost.report.llm import rows

    phases = [("prefill", r.prefill)]
    if r.decode_first is not None:
        phases.append(("first decode step", r.decode_first))
    if r.decode_last is not None:
        phases.append(("last decode step", r.decode_last))
    values = [{"phase": n, "FLOP/B": p.flops_per_byte} for n, p in phases if p.flops_per_byte > 0]
    # A dot per phase, labelled: a bar on a log scale starts at 0, which has no place on it,
    # and Vega then draws nothing at all.
    y = {"field": "phase", "type": "nominal", "sort": None, "title": None}
    x = {"field": "FLOP/B", "type": "quantitative"}
    layers: list[dict[str, Any]] = [
        {
            "mark": {"type": "circle", "size": 120, "opacity": 1, "color": "#3b6fd8"},
            "encoding": {
                "y": y,
                "x": {
                    **x,
                    "scale": {"type": "log"},
                    "title": "arithmetic intensity (FLOPs per byte moved, log scale)",
                },
                "tooltip": [{"field": "phase"}, {**x, "format": ".4~g"}],
            },
        },
        {
            "mark": {"type": "text", "align": "left", "dx": 9, "fontSize": 11},
            "encoding": {"y": y, "x": x, "text": {**x, "format": ".3~g"}},
        },
    ]
    ridge_note = "No ceiling known: the ridge point needs --peak-tflops and --bandwidth-gbs."
    if r.roofline is not None:
        ridge = r.roofline.ridge_flops_per_byte
        layers.append(
            {
                "data": {"values": [{"ridge": ridge}]},
                "mark": {"type": "rule", "color": "#a15c00", "strokeDash": [4, 3]},
                "encoding": {"x": {"field": "ridge", "type": "quantitative"}},
            }
        )
        ridge_note = (
            f"Dashed: the ridge point, {ridge:.1f} FLOP/B; a phase left of it is memory-bound."
        )
    chart = {
        "$schema": VEGA_LITE_SCHEMA,
        "width": "container",
        "height": {"step": 28},
        "data": {"values": values},
        "layer": layers,
    }
    cards = [
        ("weights", units.nbytes(r.weights_bytes), f"{r.weights_bytes:,} B"),
        ("KV cache per token", units.nbytes(r.kv_cache_bytes_per_token), ""),
        ("prefill FLOPs", units.count(r.prefill.flops), f"{r.prefill.flops:,}"),
        ("generation FLOPs", units.count(r.generation.flops), f"{r.generation.flops:,}"),
    ]
    return _page(
        "llm.html.j2",
        title=f"onnxcost llm: {r.model}",
        what="decoder cost with a KV cache",
        data={"charts": {"chart-phases": chart}, "tables": []},
        heading=r.model,
        prompt=r.prompt,
        generate=r.generate,
        batch=r.batch,
        cards=cards,
        rows=[(k.strip(), v) for k, v in rows(r)],
        ridge_note=ridge_note,
        warnings=list(r.warnings),
    )


def _svg(spec: dict[str, Any]) -> str:
    """A static SVG of a Vega-Lite spec (vl-convert; its text is escaped by Vega's renderer)."""
    try:
        import vl_convert
    except ImportError as e:
        raise HtmlUnavailableError(
            "charts need vl-convert-python: pip install 'onnxcost[html]'"
        ) from e
    svg: str = vl_convert.vegalite_to_svg(spec)
    return svg


def _bars(rows: Sequence[Mapping[str, Any]], value: str, title: str, color: str = "") -> str:
    """A static horizontal bar chart of ``rows`` ({"op", value[, "model"]}), largest first."""
    spec: dict[str, Any] = {
        "$schema": VEGA_LITE_SCHEMA,
        "width": 520,
        "height": {"step": 16},
        "data": {"values": [r for r in rows if r[value]]},
        "mark": "bar",
        "encoding": {
            "y": {"field": "op", "type": "nominal", "sort": "-x", "title": None},
            "x": {
                "field": value,
                "type": "quantitative",
                "title": title,
                "axis": {"format": "~s", "tickCount": 6},
            },
        },
    }
    if color:
        spec["encoding"]["yOffset"] = {"field": color}
        spec["encoding"]["color"] = {"field": color, "title": None}
        spec["encoding"]["y"]["sort"] = None
    return _svg(spec)


def _snippet(heading: str, rows: Sequence[tuple[str, str, str]], svg: str, note: str = "") -> str:
    from markupsafe import Markup

    return (
        _env()
        .get_template("snippet.html.j2")
        .render(heading=heading, rows=rows, svg=Markup(svg) if svg else "", note=note)
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
    return _snippet(heading, rows, _bars(_op_rows(a), "FLOPs", "FLOPs by op type"), note)


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
        svg = _bars(
            [{"op": o.op_type, "us": o.median_us} for o in r.profile.by_op_type],
            "us",
            "time per run by kernel op type (us)",
        )
    return _snippet(f"Benchmark: {r.model}", rows, svg)


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
    bars = [
        {"op": _op_label(r.op_type, r.domain), "model": label, "MACs": r.macs[k]}
        for r in c.by_op_type
        for k, label in enumerate(c.labels)
    ]
    heading = "Compare " + " | ".join(c.labels)
    return _snippet(heading, rows, _bars(bars, "MACs", "MACs by op type", color="model"))


def snippet(result: object) -> str:
    """The HTML a notebook shows for an ``Analysis``, a ``BenchResult`` or a ``Comparison``."""
    from onnxcost.analysis.walk import Analysis
    from onnxcost.bench.result import BenchResult
    from onnxcost.compare import Comparison

    if isinstance(result, Analysis):
        return analysis_snippet(result)
    if isinstance(result, BenchResult):
        return bench_snippet(result)
    if isinstance(result, Comparison):
        return compare_snippet(result)
    raise TypeError(f"no HTML view of {type(result).__name__}")


__all__ = [
    "HtmlUnavailableError",
    "analysis_html",
    "analysis_snippet",
    "bench_html",
    "bench_snippet",
    "compare_html",
    "compare_snippet",
    "llm_html",
    "op_type_chart",
    "script_json",
    "snippet",
    "vega_bundle",
]
