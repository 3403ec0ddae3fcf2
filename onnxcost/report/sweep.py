"""The pivot of a sweep's results: model rows, grid-axis columns, one figure per ``--metric``.

A metric is a dotted path into each row's ``result`` (the command's own JSON), e.g.
``totals.macs`` or ``latency_ms.median``. A name the result does not have at its top is looked
for under ``totals`` (analyze) and ``generation`` (llm), so ``macs``, ``flops`` and ``params``
read an analysis's totals; a figure that is a table of statistics (bench's ``latency_ms``)
gives its ``median``. Without ``--metric``, each command's headline (``DEFAULT_METRICS``).

A cell run more than once (``repeat``) shows the median of its ``ok`` runs; a cell with none
shows its status (``error``, ``timeout``); a cell with no row is blank. Rows are read one at a
time: the pivot holds the figures, not the results.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from onnxcost.report.tables import Column, Table

DEFAULT_METRICS: Mapping[str, str] = {
    "onnxcost.analysis/1": "totals.macs",
    "onnxcost.bench/1": "latency_ms.median",
    "onnxcost.llm/1": "generation.flops",
    "onnxcost.predict/1": "latency_ms",
}
"""The figure shown by default, by the result's ``schema``."""

_ROOTS = ("totals", "generation")
_STATS = ("median", "mean")

Figure = int | float | str | None
"""A pivot cell: a number, a status (``error``, ``timeout``), or None (no row)."""


class NoFigureError(LookupError):
    """The result has nothing at the metric's path."""


def figure(result: Mapping[str, Any], metric: str) -> int | float:
    """The number at ``metric`` (a dotted path) in ``result``; see the module's docstring."""
    paths = [metric] if "." in metric else [metric, *(f"{r}.{metric}" for r in _ROOTS)]
    for path in paths:
        value: Any = result
        for part in path.split("."):
            if not isinstance(value, Mapping) or part not in value:
                break
            value = value[part]
        else:
            if isinstance(value, Mapping):
                value = next((value[s] for s in _STATS if s in value), value)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return value
            raise NoFigureError(f"{path} is {type(value).__name__}, not a number")
    raise NoFigureError(f"no {metric} in the result")


def _label(name: str, value: object) -> str:
    """A grid value as a column header shows it: the value (a flag: its name or ``no NAME``)."""
    if isinstance(value, bool):
        return name if value else f"no {name}"
    return " ".join(str(v) for v in value) if isinstance(value, list) else str(value)


@dataclass
class Pivot:
    """The figures of a results file, by metric, model and column (grid values)."""

    metrics: list[str]
    axes: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    values: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)
    states: dict[tuple[str, str], str] = field(default_factory=dict)
    statuses: Counter[str] = field(default_factory=Counter)
    failures: list[tuple[str, str, str]] = field(default_factory=list)
    """(cell as JSON, status, reason) of every row that is not ok."""
    misses: Counter[str] = field(default_factory=Counter)
    """metric -> ok rows whose result had no figure for it."""

    def cell(self, metric: str, model: str, column: str) -> Figure:
        got = self.values.get((metric, model, column))
        if got:
            return statistics.median(got) if len(got) > 1 else got[0]
        return self.states.get((model, column))


def pivot(rows: Iterable[Mapping[str, Any]], metrics: Sequence[str] = ()) -> Pivot:
    """The pivot of ``rows`` for ``metrics`` (none: the first ok row's default metric). Models
    and columns are sorted with the numbers in them by value (``natural``): rows come in the
    order cells finished, which is no order at all."""
    p = Pivot(list(metrics))
    models: dict[str, None] = {}
    columns: dict[str, tuple[Any, ...]] = {}
    for row in rows:
        cell = row.get("cell") or {}
        model = str(cell.get("model", "?"))
        labels = [_label(k, v) for k, v in cell.items() if k != "model"]
        column = ", ".join(labels) or "value"
        for k in cell:
            if k != "model" and k not in p.axes:
                p.axes.append(k)
        models.setdefault(model, None)
        columns.setdefault(column, tuple(natural(label) for label in labels))
        status = str(row.get("status", "?"))
        p.statuses[status] += 1
        result = row.get("result")
        if status != "ok" or not isinstance(result, Mapping):
            p.failures.append(
                (json.dumps(cell, ensure_ascii=False), status, str(row.get("reason", "")))
            )
            p.states.setdefault((model, column), status)
            continue
        if not p.metrics:
            default = DEFAULT_METRICS.get(str(result.get("schema")))
            p.metrics.append(default or "totals.macs")
        for metric in p.metrics:
            try:
                value = figure(result, metric)
            except NoFigureError:
                p.misses[metric] += 1
                p.states.setdefault((model, column), "n/a")
                continue
            p.values.setdefault((metric, model, column), []).append(value)
    if not p.metrics:  # no ok row to take a default from: the table shows the statuses
        p.metrics.append("status")
    p.models = sorted(models, key=natural)
    p.columns = sorted(columns, key=lambda c: columns[c])
    return p


def natural(text: str) -> tuple[tuple[int, int | str], ...]:
    """A sort key that orders the numbers inside text by value: batch=2 before batch=16."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part)
        for part in re.split(r"([0-9]+)", text)
        if part
    )


def _shown(value: Figure) -> str:
    if value is None:
        return ""
    if isinstance(value, bool | str):
        return str(value)
    if isinstance(value, int) or (
        isinstance(value, float) and value.is_integer() and abs(value) >= 1e6
    ):
        return f"{int(value):,}"
    return f"{value:.6g}"


def tables(p: Pivot, *, raw: bool = False) -> list[Table]:
    """One table per metric (model rows, a column per grid point), then the failed cells.
    ``raw``: numbers as numbers (CSV), else as text with thousands separators."""
    out = []
    for metric in p.metrics:
        cols = (Column("model"), *(Column(c, True) for c in p.columns))
        body = tuple(
            (m, *(p.cell(metric, m, c) if raw else _shown(p.cell(metric, m, c)) for c in p.columns))
            for m in p.models
        )
        by = f" by {' × '.join(p.axes)}" if p.axes else ""
        out.append(Table(f"{metric}{by}", cols, body))
    if p.failures:
        cols = (Column("cell", cut="middle"), Column("status"), Column("reason", cut="end"))
        out.append(Table("cells that did not finish", cols, tuple(p.failures)))
    return out


def summary_line(p: Pivot) -> str:
    """``12 cells: 10 ok, 1 error, 1 timeout``."""
    parts = ", ".join(f"{p.statuses[s]} {s}" for s in ("ok", "error", "timeout") if p.statuses[s])
    others = sum(n for s, n in p.statuses.items() if s not in ("ok", "error", "timeout"))
    if others:
        parts += f", {others} other"
    return f"{sum(p.statuses.values())} rows: {parts or 'none'}"


def to_dict(p: Pivot) -> dict[str, Any]:
    """The pivot as JSON: per metric its columns and each model's figures (a number, a status,
    or null), the rows by status, and the failed cells."""
    return {
        "schema": "onnxcost.sweep.pivot/1",
        "statuses": dict(sorted(p.statuses.items())),
        "axes": list(p.axes),
        "metrics": [
            {
                "metric": metric,
                "columns": list(p.columns),
                "rows": [
                    {"model": m, "values": [p.cell(metric, m, c) for c in p.columns]}
                    for m in p.models
                ],
                "missing": p.misses[metric],
            }
            for metric in p.metrics
        ],
        "failures": [{"cell": json.loads(c), "status": s, "reason": r} for c, s, r in p.failures],
    }


def to_csv(p: Pivot) -> str:
    """Every metric's table in one CSV: ``metric``, ``model``, then a column per grid point."""
    import io

    from onnxcost.report.safe_text import csv_writer

    buf = io.StringIO()
    w = csv_writer(buf)
    w.writerow(["metric", "model", *p.columns])
    for metric, t in zip(p.metrics, tables(p, raw=True), strict=False):
        for row in t.rows:
            w.writerow([metric, *row])
    return buf.getvalue()


def to_markdown(p: Pivot) -> str:
    from onnxcost.report.writers.markdown import to_markdown as md_table

    lines = [f"# Sweep: {summary_line(p)}", ""]
    for t in tables(p):
        lines += [*md_table(t, level=2), ""]
    return "\n".join(lines)


def chart(p: Pivot, metric: str) -> dict[str, Any]:
    """A grouped bar chart of ``metric``: a group per model, a bar per grid point (Vega-Lite)."""
    from onnxcost.report.html.page import VEGA_LITE_SCHEMA

    values = []
    for m in p.models:
        for c in p.columns:
            v = p.cell(metric, m, c)
            if isinstance(v, int | float) and not isinstance(v, bool):
                values.append({"model": m, "point": c, "value": v})
    return {
        "$schema": VEGA_LITE_SCHEMA,
        "width": "container",
        "data": {"values": values},
        "mark": {"type": "bar", "tooltip": True},
        "height": {"step": 14},
        "encoding": {
            "y": {"field": "model", "type": "nominal", "sort": None, "title": None},
            "yOffset": {"field": "point", "sort": None},
            "color": {"field": "point", "type": "nominal", "sort": None, "title": None},
            "x": {
                "field": "value",
                "type": "quantitative",
                "title": metric,
                "axis": {"format": "~s", "tickCount": 6},
            },
            "tooltip": [
                {"field": "model"},
                {"field": "point", "title": "grid point"},
                {"field": "value", "format": ",.6~g", "title": metric},
            ],
        },
    }


def to_html(p: Pivot, title: str = "sweep") -> str:
    """One page: a chart and a table per metric, then the cells that did not finish."""
    from onnxcost.report.html.page import page

    charts = {f"chart-{k}": chart(p, m) for k, m in enumerate(p.metrics)}
    ts = tables(p)
    sections = [(f"chart-{k}", t, f"pivot-{k}") for k, t in enumerate(ts[: len(p.metrics)])]
    return page(
        "sweep.html.j2",
        title=f"onnxcost sweep: {title}",
        what="a sweep's results",
        data={"charts": charts, "tables": []},
        heading=title,
        summary=summary_line(p),
        sections=sections,
        failures=ts[len(p.metrics)] if p.failures else None,
    )


__all__ = [
    "DEFAULT_METRICS",
    "NoFigureError",
    "Pivot",
    "chart",
    "figure",
    "pivot",
    "summary_line",
    "tables",
    "to_csv",
    "to_dict",
    "to_html",
    "to_markdown",
]
