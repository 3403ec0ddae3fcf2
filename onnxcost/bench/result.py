"""The result of a bench run and its JSON form (schema ``onnxcost.bench/1``).

``to_dict`` keys are a contract: new keys may be added, none renamed or removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from onnxcost import _display
from onnxcost.analysis.records import Const, Group, Layout, Merge, When, to_jsonable
from onnxcost.bench.inputs import InputSpec
from onnxcost.bench.join import NodeProfile, OpTypeProfile
from onnxcost.bench.memory import MemoryUse
from onnxcost.bench.roofline import ModelRoofline
from onnxcost.bench.sweep import BatchPoint, MaxBatch
from onnxcost.bench.timing import NOISY_CV, THROUGHPUT_METHOD, LatencyStats, throughput_per_s

SCHEMA = "onnxcost.bench/1"


@dataclass(frozen=True, slots=True)
class Environment:
    """Where the numbers were taken."""

    onnxruntime_version: str
    providers_available: tuple[str, ...]
    cpu: str
    gpu: str | None
    gpu_driver: str | None
    intra_op_threads: int | None
    """As configured; None = onnxruntime's default (one per physical core)."""
    inter_op_threads: int | None
    logical_cpus: int
    python: str
    platform: str

    JSON_LAYOUT: ClassVar[Layout] = (
        "onnxruntime_version",
        "providers_available",
        "cpu",
        "gpu",
        "gpu_driver",
        (
            "threads",
            Group(
                (("intra_op", "intra_op_threads"), ("inter_op", "inter_op_threads"), "logical_cpus")
            ),
        ),
        "python",
        "platform",
    )

    def as_dict(self) -> dict[str, Any]:
        return to_jsonable(self)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class Phases:
    """Each phase timed apart: none of them is in the latency statistics."""

    session_create_ms: float
    first_run_ms: float
    warmup_ms: float
    """Wall time of the warm-up loop (after the first run)."""
    timed_s: float
    """Wall time of the timed loop."""

    def as_dict(self) -> dict[str, float]:
        return to_jsonable(self)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class Settings:
    """How the session was built and fed."""

    opt_level: str
    provider_options: tuple[tuple[str, str], ...]
    io_binding: bool
    """Inputs and outputs stayed on the device (no host copies in the timed loop)."""
    include_copies: bool
    cuda_graph: bool
    inputs_source: str
    """'random (seed N)' or the .npz path."""

    JSON_LAYOUT: ClassVar[Layout] = (
        "opt_level",
        ("provider_options", "provider_options_map"),
        "io_binding",
        "include_copies",
        "cuda_graph",
        "inputs_source",
    )

    @property
    def provider_options_map(self) -> dict[str, str]:
        """``provider_options`` as a mapping, the way the JSON writes them."""
        return dict(self.provider_options)

    def as_dict(self) -> dict[str, Any]:
        return to_jsonable(self)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class Memory:
    """Memory seen while measuring (None where it could not be read)."""

    host_peak_rss_mb: float | None
    """Peak RSS of the whole process so far (``resource.getrusage``)."""
    gpu_used_delta_mb: float | None
    """Largest NVML 'used' sample minus the one before the session (whole device)."""
    use: MemoryUse | None = None
    """Estimate vs measured: weights and run peak (``onnxcost.bench.memory``)."""

    JSON_LAYOUT: ClassVar[Layout] = ("host_peak_rss_mb", "gpu_used_delta_mb", Merge("use"))

    def as_dict(self) -> dict[str, Any]:
        return to_jsonable(self)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class ProfileResult:
    """Per-node times from a separate profiled session, joined to the analyzer's costs."""

    nodes: tuple[NodeProfile, ...]
    by_op_type: tuple[OpTypeProfile, ...]
    runs: int
    """Profiled runs kept (after dropping ``warmup_runs``)."""
    warmup_runs: int
    """Leading profiled runs dropped, the first run included."""
    run_mean_us: float
    """Mean ``model_run`` time of the kept profiled runs (profiling overhead included)."""
    kernel_sum_us: float
    """Top-level kernel time per run, added up within each run; the median over the runs."""
    host_launch_times: bool
    """Node times are host-side launch times (CUDA without device timestamps)."""
    mapped_with: Literal["optimized_graph", "names"]
    untimed_nodes: tuple[str, ...]
    """Source nodes no kernel computes: folded into constants or removed by onnxruntime."""
    note: str = ""
    trace_path: str | None = None
    run_median_us: float = 0.0
    """Median ``model_run`` time of the kept profiled runs (0: unknown, ``run_mean_us`` is used)."""
    device_busy_us: float = 0.0
    """GPU time per profiled run (CUPTI): the union of its kernels, copies and memsets, median
    over the runs; 0 without GPU times."""
    device_span_us: float = 0.0
    """First GPU start to last GPU end per run, median (busy / span: the GPU's utilisation)."""
    device_copy_us: float = 0.0
    """Copies and memsets per run, median (part of ``device_busy_us``)."""
    device_unowned_us: float = 0.0
    """GPU time per run launched outside every node (the run's own input/output copies)."""
    latency_median_us: float = 0.0
    """The timed loop's median latency (no profiler), the same batch: what the per-node times
    are compared with in ``latency_coverage`` and ``device_coverage``."""
    host_node_us: float = 0.0
    """With GPU times: host time per run of the nodes that ran on the CPU provider (shape
    arithmetic onnxruntime keeps on the host), median; part of ``kernel_sum_us``."""

    @property
    def device_coverage(self) -> float:
        """GPU busy time per run / the unprofiled median latency: how much of a run the GPU
        rows explain (near 1 when the GPU sets the pace, far below when launches do)."""
        return self.device_busy_us / self.latency_median_us if self.latency_median_us > 0 else 0.0

    @property
    def latency_coverage(self) -> float:
        """Node times added up (``kernel_sum_us``) / the unprofiled median latency."""
        return self.kernel_sum_us / self.latency_median_us if self.latency_median_us > 0 else 0.0

    @property
    def device_utilization(self) -> float:
        """GPU busy / GPU span per run (0 without GPU times)."""
        return self.device_busy_us / self.device_span_us if self.device_span_us > 0 else 0.0

    @property
    def run_us(self) -> float:
        """The run time coverage is measured against: the median, else the mean."""
        return self.run_median_us if self.run_median_us > 0 else self.run_mean_us

    @property
    def coverage(self) -> float:
        """Kernel time / run time: how much of a run the per-node rows explain."""
        return self.kernel_sum_us / self.run_us if self.run_us > 0 else 0.0

    @property
    def suspect_nodes(self) -> tuple[str, ...]:
        """Rows whose efficiency is above 100% (a measurement problem, not a fact)."""
        return tuple(n.name for n in self.nodes if n.efficiency_suspect)

    JSON_LAYOUT: ClassVar[Layout] = (
        "runs",
        "warmup_runs",
        "run_mean_us",
        "run_median_us",
        "kernel_sum_us",
        ("node_time", Const("median over the profiled runs; p10 and p90 give the spread")),
        "coverage",
        "host_launch_times",
        "mapped_with",
        "untimed_nodes",
        "note",
        ("trace", "trace_path"),
        "latency_median_us",
        "latency_coverage",
        "device_busy_us",
        "device_span_us",
        "device_utilization",
        "device_copy_us",
        "device_unowned_us",
        "device_coverage",
        "host_node_us",
    )

    def as_dict(self) -> dict[str, Any]:
        return to_jsonable(self)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class BenchResult:
    """Everything one ``run_bench`` measured."""

    model: str
    provider: str
    """The provider that actually ran (checked against the session's providers)."""
    environment: Environment
    inputs: tuple[InputSpec, ...]
    phases: Phases
    latency: LatencyStats
    runs: int
    """Timed runs done (at least the ``runs`` asked for; more when ``min_seconds`` needed)."""
    warmup: int
    """Warm-up runs done after the first run."""
    batch: int
    settings: Settings
    memory: Memory
    profile: ProfileResult | None = None
    roofline: ModelRoofline | None = None
    sweep: tuple[BatchPoint, ...] = ()
    max_batch: MaxBatch | None = None
    warnings: tuple[str, ...] = ()

    def __repr__(self) -> str:
        """One line: what a notebook or a log shows."""
        return (
            f"BenchResult({self.model!r}, provider={self.provider!r}, "
            f"median_ms={self.latency.median_ms:.4g}, runs={self.runs}, batch={self.batch}, "
            f"profiled={self.profile is not None})"
        )

    def _repr_html_(self) -> str:
        """Jupyter: latency, throughput and time by op type (needs onnxcost[html])."""
        return _display.html(self)

    @property
    def throughput_per_s(self) -> float:
        """batch / median latency: from the same timed runs as the latency statistics."""
        return throughput_per_s(self.batch, self.latency.median_ms)

    @property
    def noisy(self) -> bool:
        return self.latency.noisy

    JSON_LAYOUT: ClassVar[Layout] = (
        ("schema", Const(SCHEMA)),
        "model",
        "provider",
        "environment",
        "inputs",
        "phases",
        ("latency_ms", "latency"),
        "runs",
        "warmup",
        "batch",
        "throughput_per_s",
        ("throughput_method", Const(THROUGHPUT_METHOD)),
        ("cv", "latency.cv"),
        "noisy",
        ("noisy_cv_threshold", Const(NOISY_CV)),
        "settings",
        "memory",
        "warnings",
        When(
            "profile", (("nodes", "profile.nodes"), ("by_op_type", "profile.by_op_type"), "profile")
        ),
        When("roofline", ("roofline",)),
        When("sweep", ("sweep",)),
        When("max_batch", ("max_batch",)),
    )
    """The JSON contract ``onnxcost.bench/1`` (``records.to_jsonable``; keys are stable, new
    ones may be added)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract (schema ``onnxcost.bench/1``): ``JSON_LAYOUT``."""
        return to_jsonable(self)  # type: ignore[no-any-return]
