"""Timing: the warm-up and timed loops, and the statistics of what they measured.

Each iteration is timed alone with ``time.perf_counter_ns`` around one call. Throughput comes
from the same per-run times as the latency statistics: batch / median latency, so one slow
run (or the harness's gaps between runs) moves neither of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from onnxcost.analysis.records import NOT_IN_JSON, json_key, to_jsonable
from onnxcost.bench.progress import BenchProgress, ProgressFn

NOISY_CV = 0.10
"""A coefficient of variation above this means the machine was busy while measuring."""

THROUGHPUT_METHOD = "batch / median latency"
"""How every throughput figure is computed (said in the report and the JSON)."""

_TICK_NS = 250_000_000
"""Progress is reported at most every 0.25 s from inside a loop."""


def throughput_per_s(batch: int, median_ms: float) -> float:
    """Samples per second from the median run time: batch x 1000 / median_ms (0 when it is 0)."""
    return batch * 1000.0 / median_ms if median_ms > 0 else 0.0


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """Order statistics of per-run latencies, in milliseconds.

    Percentiles interpolate linearly between closest ranks (numpy's default); ``std_ms`` is
    the sample standard deviation (n - 1 in the denominator; 0 for a single run).
    """

    count: int = field(metadata=NOT_IN_JSON)
    min_ms: float = field(metadata=json_key("min"))
    mean_ms: float = field(metadata=json_key("mean"))
    median_ms: float = field(metadata=json_key("median"))
    p90_ms: float = field(metadata=json_key("p90"))
    p95_ms: float = field(metadata=json_key("p95"))
    p99_ms: float = field(metadata=json_key("p99"))
    max_ms: float = field(metadata=json_key("max"))
    std_ms: float = field(metadata=json_key("std"))

    @staticmethod
    def from_ns(samples_ns: Sequence[int]) -> LatencyStats:
        """Statistics of ``samples_ns`` (nanoseconds per run, at least one)."""
        if not samples_ns:
            raise ValueError("no samples to summarise")
        ms = np.asarray(samples_ns, dtype=np.float64) / 1e6
        p90, p95, p99, median = np.percentile(ms, [90.0, 95.0, 99.0, 50.0])
        return LatencyStats(
            count=len(ms),
            min_ms=float(ms.min()),
            mean_ms=float(ms.mean()),
            median_ms=float(median),
            p90_ms=float(p90),
            p95_ms=float(p95),
            p99_ms=float(p99),
            max_ms=float(ms.max()),
            std_ms=float(ms.std(ddof=1)) if len(ms) > 1 else 0.0,
        )

    @property
    def cv(self) -> float:
        """Coefficient of variation: std / mean (0 when the mean is 0)."""
        return self.std_ms / self.mean_ms if self.mean_ms > 0 else 0.0

    @property
    def noisy(self) -> bool:
        """Whether the spread says the machine was busy (CV above ``NOISY_CV``)."""
        return self.cv > NOISY_CV

    def as_dict(self) -> dict[str, float]:
        """The ``latency_ms`` object of the JSON contract: the fields' ``json_key`` names."""
        return to_jsonable(self)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class LoopResult:
    """What one loop measured: every run's duration and the loop's wall time."""

    samples_ns: tuple[int, ...]
    wall_ns: int

    @property
    def runs(self) -> int:
        return len(self.samples_ns)

    @property
    def wall_s(self) -> float:
        return self.wall_ns / 1e9

    @property
    def stats(self) -> LatencyStats:
        return LatencyStats.from_ns(self.samples_ns)

    def throughput_per_s(self, batch: int) -> float:
        """Samples per second: batch / median run time (``THROUGHPUT_METHOD``)."""
        return throughput_per_s(batch, self.stats.median_ms)


def run_loop(
    run_once: Callable[[], object],
    *,
    runs: int,
    min_seconds: float,
    phase: str,
    progress: ProgressFn | None = None,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> LoopResult:
    """Call ``run_once`` at least ``runs`` times and for at least ``min_seconds``, whichever ends later."""
    min_ns = int(min_seconds * 1e9)
    samples: list[int] = []
    append = samples.append
    start = clock()
    next_tick = start + _TICK_NS
    n = 0
    now = start
    while n < runs or now - start < min_ns:
        t0 = clock()
        run_once()
        now = clock()
        append(now - t0)
        n += 1
        if progress is not None and now >= next_tick:
            next_tick = now + _TICK_NS
            progress(BenchProgress(phase, n, runs, f"{n} runs, {(now - start) / 1e9:.1f} s"))
    wall = now - start
    if progress is not None:
        progress(BenchProgress(phase, n, n, f"{n} runs in {wall / 1e9:.2f} s"))
    return LoopResult(tuple(samples), wall)
