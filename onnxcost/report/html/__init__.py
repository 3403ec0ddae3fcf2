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

from onnxcost.report.html.analysis import analysis_html, analysis_snippet, tree_view
from onnxcost.report.html.bench import bench_html, bench_snippet
from onnxcost.report.html.compare import compare_html, compare_snippet
from onnxcost.report.html.llm import llm_html
from onnxcost.report.html.page import (
    HtmlUnavailableError,
    op_type_chart,
    script_json,
    vega_bundle,
)


def snippet(result: object) -> str:
    """The HTML a notebook shows for an ``Analysis``, a ``BenchResult`` or a ``Comparison``."""
    from onnxcost.analysis.result import Analysis
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
    "tree_view",
    "vega_bundle",
]
