"""Stable measured numbers: medians over profiled runs, their spread, throughput from the same
runs as the latency, a sweep that reuses the main run, the calibration cache shown, and
efficiencies above 100% flagged (issue 11, item 4)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from onnxcost.bench.join import NodeProfile, join
from onnxcost.bench.profile import Spread, kernel_stats, parse_trace
from onnxcost.bench.result import ProfileResult
from onnxcost.bench.roofline import Ceilings, ModelRoofline, store_ceilings
from onnxcost.bench.session import SessionConfig
from onnxcost.bench.timing import LatencyStats, LoopResult, throughput_per_s
from onnxcost.report.bench import SUSPECT_MARK, render_table, to_markdown

if TYPE_CHECKING:
    from onnxcost.bench import BenchOptions


def trace_events(per_run: Sequence[dict[str, float]]) -> list[dict[str, Any]]:
    """A trace with one model_run per entry of ``per_run`` (kernel name -> duration, us),
    the kernels back to back inside it, runs 1000 us apart."""
    events: list[dict[str, Any]] = []
    for i, kernels in enumerate(per_run):
        start = 1000.0 * i
        events.append({"cat": "Session", "name": "model_run", "ph": "X", "ts": start, "dur": 900.0})
        t = start + 1
        for name, dur in kernels.items():
            events.append(
                {
                    "cat": "Node",
                    "name": f"{name}_kernel_time",
                    "ph": "X",
                    "ts": t,
                    "dur": dur,
                    "tid": 1,
                    "args": {"op_name": "Conv", "provider": "CPUExecutionProvider"},
                }
            )
            t += dur
    return events


# a: 10, 50, 12 us (one slow run); b: 20, 20, 20 us.
RUNS = [{"a": 10.0, "b": 20.0}, {"a": 50.0, "b": 20.0}, {"a": 12.0, "b": 20.0}]


def test_kernel_times_are_medians_with_their_spread() -> None:
    stats = {s.name: s for s in kernel_stats(parse_trace(trace_events(RUNS)))}
    a = stats["a"]
    assert a.per_run_us == (10.0, 50.0, 12.0)
    # sorted 10, 12, 50: median 12; p10 at rank 0.1 x 2 = 0.2: 10 + 0.2 x 2 = 10.4;
    # p90 at rank 1.8: 12 + 0.8 x 38 = 42.4. The mean, (10 + 50 + 12) / 3 = 24, is kept apart.
    assert a.median_us == pytest.approx(12.0)
    assert (a.spread.p10_us, a.spread.p90_us) == pytest.approx((10.4, 42.4))
    assert a.mean_us == pytest.approx(24.0)
    # (p90 - p10) / median = 32 / 12.
    assert a.spread.relative == pytest.approx(32 / 12)


def test_one_slow_run_does_not_reorder_the_nodes() -> None:
    rows = join(kernel_stats(parse_trace(trace_events(RUNS))), (), ())
    by_name = {r.name: r for r in rows}
    # by mean, a (24 us) would rank above b (20 us); by median b (20) is above a (12).
    assert by_name["a"].mean_us > by_name["b"].mean_us
    assert by_name["b"].median_us > by_name["a"].median_us
    # shares of the medians: 12 / (12 + 20) and 20 / 32.
    assert by_name["a"].share == pytest.approx(12 / 32)
    assert by_name["b"].share == pytest.approx(20 / 32)
    text = to_markdown_of(rows)
    assert text.index("| b |") < text.index("| a |")


def test_a_kernel_missing_from_a_run_counts_zero_there() -> None:
    runs = [{"a": 10.0, "b": 1.0}, {"a": 10.0}, {"a": 10.0}]
    stats = {s.name: s for s in kernel_stats(parse_trace(trace_events(runs)))}
    # b ran in one run of three: 1, 0, 0 -> median 0; its mean 1 / 3.
    assert stats["b"].per_run_us == (1.0, 0.0, 0.0)
    assert stats["b"].median_us == 0.0
    assert stats["b"].mean_us == pytest.approx(1 / 3)


def test_run_and_kernel_sum_medians() -> None:
    trace = parse_trace(trace_events(RUNS))
    # kernels per run: 30, 70, 32 -> median 32; every run is 900 us.
    assert trace.kernel_sum_median_us == pytest.approx(32.0)
    assert trace.run_median_us == pytest.approx(900.0)


def node(floor_us: float | None, per_run: tuple[float, ...] = (100.0, 100.0, 100.0)) -> NodeProfile:
    return NodeProfile(
        "conv",
        "Conv",
        "CPUExecutionProvider",
        ("conv",),
        ("Conv",),
        ("conv",),
        "direct",
        1,
        sum(per_run) / len(per_run) if per_run else 7.0,
        1.0,
        1000,
        2000,
        100,
        100,
        (),
        (),
        floor_us=floor_us,
        bound="compute" if floor_us is not None else None,
        per_run_us=per_run,
    )


def test_efficiency_above_100_percent_is_flagged_not_printed() -> None:
    # floor 101 us / median 100 us = 1.01: faster than the roof is a measurement problem.
    suspect = node(101.0)
    assert suspect.efficiency == pytest.approx(1.01)
    assert suspect.efficiency_suspect
    # floor 100 us / median 100 us = 1.00 exactly: at the roof, a fact.
    assert not node(100.0).efficiency_suspect
    # the median, not the mean, is what the floor is compared with: runs 100, 100, 400 have
    # mean 200 but median 100, so a floor of 150 is 150% of the median: flagged.
    assert node(150.0, (100.0, 100.0, 400.0)).efficiency_suspect
    md = to_markdown_of((suspect,))
    assert SUSPECT_MARK in md
    assert "101.00%" not in md
    assert "ceilings are too low" in md
    assert "--recalibrate" in md
    console = Console(record=True, width=200)
    render_table(bench_result((suspect,)), console)
    text = console.export_text()
    assert SUSPECT_MARK in text
    assert "101.00%" not in text
    assert bench_result((suspect,)).to_dict()["nodes"][0]["efficiency_suspect"] is True


def test_whole_model_efficiency_above_100_percent_is_flagged() -> None:
    ceilings = Ceilings(1e9, 1e9, "CPUExecutionProvider", "cpu", measured_at="2026-01-02T03:04:05")
    # floors add up to 2.02 ms against a median of 2 ms: 101%.
    fast = ModelRoofline(ceilings, 2.02, 2.0)
    assert fast.efficiency == pytest.approx(1.01)
    assert fast.efficiency_suspect
    md = to_markdown(bench_result((), roofline=fast))
    assert SUSPECT_MARK in md
    assert "101.0%" not in md


def test_throughput_is_batch_over_the_median() -> None:
    # runs of 10, 20 and 1000 ms at batch 4: median 20 ms, so 4 x 1000 / 20 = 200 samples/s.
    # (batch x runs / wall time would say 4 x 3 / 1.03 s = 11.7: the outlier's doing.)
    loop = LoopResult((10_000_000, 20_000_000, 1_000_000_000), 1_030_000_000)
    assert loop.throughput_per_s(4) == pytest.approx(200.0)
    assert throughput_per_s(4, 20.0) == pytest.approx(200.0)
    assert throughput_per_s(4, 0.0) == 0.0
    result = bench_result((), latency=loop.stats, batch=4)
    assert result.throughput_per_s == pytest.approx(200.0)
    d = result.to_dict()
    assert d["throughput_method"] == "batch / median latency"
    assert "batch / median latency: 4 / 20.000 ms" in to_markdown(result)


def test_calibration_cache_is_shown() -> None:
    ceilings = Ceilings(1e9, 1e9, "CPUExecutionProvider", "cpu", measured_at="2026-01-02T03:04:05")
    cached = ModelRoofline(ceilings, 1.0, 2.0, from_cache=True, cache_path="/c/ceilings.json")
    md = to_markdown(bench_result((), roofline=cached))
    assert (
        "ceilings from cache /c/ceilings.json, measured 2026-01-02T03:04:05; "
        "--recalibrate to measure again" in md
    )
    d = bench_result((), roofline=cached).to_dict()["roofline"]
    assert (d["ceilings_from_cache"], d["cache_path"]) == (True, "/c/ceilings.json")
    fresh = ModelRoofline(ceilings, 1.0, 2.0, from_cache=False, cache_path="/c/ceilings.json")
    # Measured now and stored in the cache: not from the cache (the JSON said true before).
    d = bench_result((), roofline=fresh).to_dict()["roofline"]
    assert (d["ceilings_from_cache"], d["cache_path"]) == (False, "/c/ceilings.json")
    assert "ceilings measured now (2026-01-02T03:04:05), cached in /c/ceilings.json" in to_markdown(
        bench_result((), roofline=fresh)
    )


@pytest.mark.ort
def test_calibrate_reads_the_cache_and_recalibrate_measures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mm_path: str, fast: BenchOptions
) -> None:
    import onnxcost.bench.run as run_module
    from onnxcost.bench import run_bench

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cache = tmp_path / "onnxcost" / "ceilings.json"
    old = Ceilings(1e9, 1e9, "CPUExecutionProvider", "cpu", measured_at="2020-01-01T00:00:00")
    assert store_ceilings(SessionConfig(), old, cache) is None
    measured: list[bool] = []
    new = Ceilings(2e9, 2e9, "CPUExecutionProvider", "cpu", measured_at="2026-11-22T00:00:00")

    def fake(config: SessionConfig, **kwargs: Any) -> tuple[Ceilings, str | None]:
        measured.append(bool(kwargs.get("refresh")))
        return new, None

    monkeypatch.setattr(run_module, "calibrate_ceilings", fake)
    r = run_bench(mm_path, replace(fast, dims={"N": 1}, calibrate=True))
    assert r.roofline is not None
    assert (r.roofline.from_cache, r.roofline.cache_path) == (True, str(cache))
    assert r.roofline.ceilings == old
    assert measured == []
    again = run_bench(mm_path, replace(fast, dims={"N": 1}, recalibrate=True))
    assert again.roofline is not None
    assert not again.roofline.from_cache
    assert again.roofline.ceilings == new
    assert measured == [True]


@pytest.mark.ort
def test_compare_bench_throughput_moves_with_the_median(cbr_path: str) -> None:
    from onnxcost.cli.app import app

    out = CliRunner().invoke(
        app,
        [
            "compare",
            cbr_path,
            cbr_path,
            "--bench",
            "--runs",
            "3",
            "--warmup",
            "0",
            "-f",
            "json",
        ],
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    benches = [m["bench"] for m in data["models"]]
    for b in benches:
        # batch 1 (N defaults to 1): throughput = 1 x 1000 / median ms.
        assert b["throughput_per_s"] == pytest.approx(1000 / b["latency_ms"]["median"])


def test_cli_defaults_match_the_library() -> None:
    from onnxcost.bench.options import PROFILE_RUNS
    from onnxcost.bench.watchdog import DEFAULT_TIMEOUT_S
    from onnxcost.cli import bench as cli

    assert cli.BENCH_PROFILE_RUNS == PROFILE_RUNS
    assert cli.BENCH_TIMEOUT_S == DEFAULT_TIMEOUT_S


def test_spread_of_no_runs_falls_back_to_the_mean() -> None:
    n = node(None, ())
    # no per-run times (an older caller): median, p10 and p90 are the mean, 7 us.
    assert n.spread == Spread(7.0, 7.0, 7.0)


# helpers


def to_markdown_of(rows: Sequence[NodeProfile]) -> str:
    return to_markdown(bench_result(tuple(rows)))


def bench_result(
    rows: tuple[NodeProfile, ...],
    *,
    roofline: ModelRoofline | None = None,
    latency: LatencyStats | None = None,
    batch: int = 1,
    memory: Any = None,
) -> Any:
    from onnxcost.bench.inputs import InputSpec
    from onnxcost.bench.result import BenchResult, Environment, Memory, Phases, Settings

    lat = latency or LatencyStats.from_ns([2_000_000, 2_000_000, 2_000_000])
    prof = ProfileResult(rows, (), 3, 1, 900.0, 32.0, False, "names", ()) if rows else None
    return BenchResult(
        model="m.onnx",
        provider="CPUExecutionProvider",
        environment=Environment(
            "1.31.1", ("CPUExecutionProvider",), "cpu", None, None, None, None, 2, "3.11", "Linux"
        ),
        inputs=(InputSpec("x", "float32", (batch, 4)),),
        phases=Phases(1.0, 1.0, 1.0, 1.0),
        latency=lat,
        runs=lat.count,
        warmup=1,
        batch=batch,
        settings=Settings("all", (), False, False, False, "random (seed 0)"),
        memory=memory or Memory(None, None),
        profile=prof,
        roofline=roofline,
    )


def test_html_page_uses_medians_and_leaves_suspect_efficiency_blank(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import onnxcost.report.html.bench as html

    seen: dict[str, Any] = {}

    def page(template: str, **context: Any) -> str:
        seen.update(context)
        return ""

    monkeypatch.setattr(html, "page", page)
    # runs of 100, 100 and 400 us: mean 200, median 100; floor 150 us is 150% of the median.
    suspect = node(150.0, (100.0, 100.0, 400.0))
    ceilings = Ceilings(1e9, 1e9, "CPUExecutionProvider", "cpu")
    html.bench_html(bench_result((suspect,), roofline=ModelRoofline(ceilings, 1.0, 2.0)))
    (table,) = seen["data"]["tables"]
    headers = [c["label"] for c in table["columns"]]
    row = dict(zip(headers, table["rows"][0], strict=True))
    assert row["median us"] == pytest.approx(100.0)
    assert row["efficiency"] is None
    assert "faster than their floor" in seen["roofline_note"]
