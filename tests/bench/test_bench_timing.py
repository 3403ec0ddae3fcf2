"""Latency statistics and the timed loop (a fake clock makes the loop exact)."""

from __future__ import annotations

import math

import pytest

from onnxcost.bench.progress import BenchProgress
from onnxcost.bench.timing import LatencyStats, run_loop


def test_stats_of_one_to_ten_ms() -> None:
    s = LatencyStats.from_ns([i * 1_000_000 for i in range(1, 11)])
    assert s.count == 10
    assert (s.min_ms, s.max_ms) == (1.0, 10.0)
    # mean (1 + ... + 10) / 10 = 5.5; median between 5 and 6 = 5.5.
    assert s.mean_ms == pytest.approx(5.5)
    assert s.median_ms == pytest.approx(5.5)
    # linear interpolation at rank p/100 x (n - 1): p90 -> 8.1 -> 9 + 0.1 = 9.1; p95 -> 8.55 -> 9.55; p99 -> 8.91 -> 9.91.
    assert s.p90_ms == pytest.approx(9.1)
    assert s.p95_ms == pytest.approx(9.55)
    assert s.p99_ms == pytest.approx(9.91)
    # sample std: sum((i - 5.5)^2) = 82.5; sqrt(82.5 / 9) = 3.02765.
    assert s.std_ms == pytest.approx(math.sqrt(82.5 / 9))
    # CV 3.02765 / 5.5 = 0.5505: noisy.
    assert s.cv == pytest.approx(math.sqrt(82.5 / 9) / 5.5)
    assert s.noisy


def test_steady_samples_are_not_noisy() -> None:
    # 100 runs of 2.0 ms and 100 of 2.2 ms: mean 2.1, std ~0.1003, CV ~0.048 < 0.10.
    s = LatencyStats.from_ns([2_000_000] * 100 + [2_200_000] * 100)
    assert s.cv == pytest.approx(0.1 * math.sqrt(200 / 199) / 2.1)
    assert not s.noisy


def test_single_sample_has_zero_std() -> None:
    s = LatencyStats.from_ns([3_000_000])
    assert (s.std_ms, s.cv, s.median_ms) == (0.0, 0.0, 3.0)


def test_as_dict_keys() -> None:
    d = LatencyStats.from_ns([1_000_000, 2_000_000]).as_dict()
    assert list(d) == ["min", "mean", "median", "p90", "p95", "p99", "max", "std"]


class FakeClock:
    """Advances 1 ms per reading."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        self.now += 1_000_000
        return self.now


def test_loop_runs_at_least_runs_times() -> None:
    calls: list[int] = []
    loop = run_loop(
        lambda: calls.append(1), runs=3, min_seconds=0.0, phase="timed", clock=FakeClock()
    )
    # each run reads the clock twice (before, after): 1 ms per sample, 2 ms per iteration.
    assert len(calls) == 3
    assert loop.samples_ns == (1_000_000,) * 3
    assert loop.wall_ns == 6_000_000


def test_loop_runs_at_least_min_seconds() -> None:
    loop = run_loop(lambda: None, runs=3, min_seconds=0.010, phase="timed", clock=FakeClock())
    # 2 ms per iteration: 10 ms after 5 iterations, past the 3 runs asked for.
    assert loop.runs == 5
    assert loop.wall_s == pytest.approx(0.010)
    # throughput: batch 2 / median run time 1 ms = 2 x 1000 / 1 = 2000 samples/s (the 1 ms
    # between runs, the harness's own time, is not the model's).
    assert loop.throughput_per_s(2) == pytest.approx(2000.0)


def test_loop_reports_progress() -> None:
    seen: list[BenchProgress] = []
    run_loop(
        lambda: None,
        runs=200,
        min_seconds=0.0,
        phase="timed",
        progress=seen.append,
        clock=FakeClock(),
    )
    # 400 ms of fake time, a tick every 250 ms: one tick plus the final report.
    assert [p.done for p in seen] == [125, 200]
    assert seen[-1].phase == "timed"
    assert seen[-1].total == 200


def test_zero_runs_means_no_samples() -> None:
    loop = run_loop(lambda: None, runs=0, min_seconds=0.0, phase="warmup", clock=FakeClock())
    assert loop.runs == 0
