"""The pivot's figures: a metric's path, its defaults and shortcuts, repeats as a median."""

from __future__ import annotations

import pytest

from onnxcost.report.sweep import NoFigureError, figure, pivot, tables


def test_a_metric_is_a_dotted_path_with_shortcuts() -> None:
    analysis = {"totals": {"macs": 7, "flops": 15}, "schema": "onnxcost.analysis/1"}
    bench = {"latency_ms": {"min": 1.0, "median": 2.5, "mean": 3.0}}
    assert figure(analysis, "totals.flops") == 15
    assert figure(analysis, "macs") == 7  # looked for under totals
    assert figure(bench, "latency_ms") == 2.5  # a table of statistics gives its median
    assert figure(bench, "latency_ms.mean") == 3.0
    with pytest.raises(NoFigureError):
        figure(analysis, "latency_ms")
    with pytest.raises(NoFigureError):
        figure(bench, "latency_ms.nope")


def test_repeats_show_their_median_and_a_failed_cell_its_status() -> None:
    def ok(v: float, batch: int, repeat: int) -> dict[str, object]:
        return {"cell": {"model": "m", "batch": batch}, "status": "ok", "repeat": repeat,
                "result": {"schema": "onnxcost.bench/1", "latency_ms": {"median": v}}}  # fmt: skip

    rows = [ok(3.0, 1, 0), ok(1.0, 1, 1), ok(2.0, 1, 2),
            {"cell": {"model": "m", "batch": 2}, "status": "timeout", "result": None, "reason": "r"},
            {"cell": {"model": "n", "batch": 1}, "status": "error", "result": None}]  # fmt: skip
    p = pivot(rows)
    assert p.metrics == ["latency_ms.median"]  # bench's default
    assert p.cell("latency_ms.median", "m", "1") == 2.0  # median of 3, 1, 2
    assert p.cell("latency_ms.median", "m", "2") == "timeout"
    assert p.cell("latency_ms.median", "n", "1") == "error"
    assert p.cell("latency_ms.median", "n", "2") is None  # no row
    first = tables(p)[0]
    assert first.headers == ("model", "1", "2")
    assert first.rows == (("m", "2", "timeout"), ("n", "error", ""))
