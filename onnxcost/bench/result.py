"""The result of a bench run and its JSON form (schema ``onnxcost.bench/1``).

``to_dict`` keys are a contract: new keys may be added, none renamed or removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from onnxcost.bench.inputs import InputSpec
from onnxcost.bench.join import NodeProfile, OpTypeProfile
from onnxcost.bench.memory import MemoryUse
from onnxcost.bench.roofline import ModelRoofline
from onnxcost.bench.sweep import BatchPoint, MaxBatch
from onnxcost.bench.timing import NOISY_CV, THROUGHPUT_METHOD, LatencyStats, throughput_per_s
from onnxcost.records import to_jsonable

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

    def as_dict(self) -> dict[str, Any]:
        return {
            "onnxruntime_version": self.onnxruntime_version,
            "providers_available": list(self.providers_available),
            "cpu": self.cpu,
            "gpu": self.gpu,
            "gpu_driver": self.gpu_driver,
            "threads": {
                "intra_op": self.intra_op_threads,
                "inter_op": self.inter_op_threads,
                "logical_cpus": self.logical_cpus,
            },
            "python": self.python,
            "platform": self.platform,
        }


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

    def as_dict(self) -> dict[str, Any]:
        return {
            "opt_level": self.opt_level,
            "provider_options": dict(self.provider_options),
            "io_binding": self.io_binding,
            "include_copies": self.include_copies,
            "cuda_graph": self.cuda_graph,
            "inputs_source": self.inputs_source,
        }


@dataclass(frozen=True, slots=True)
class Memory:
    """Memory seen while measuring (None where it could not be read)."""

    host_peak_rss_mb: float | None
    """Peak RSS of the whole process so far (``resource.getrusage``)."""
    gpu_used_delta_mb: float | None
    """Largest NVML 'used' sample minus the one before the session (whole device)."""
    use: MemoryUse | None = None
    """Estimate vs measured: weights and run peak (``onnxcost.bench.memory``)."""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "host_peak_rss_mb": self.host_peak_rss_mb,
            "gpu_used_delta_mb": self.gpu_used_delta_mb,
        }
        if self.use is not None:
            out.update(self.use.as_dict())
        return out


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

    def as_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "warmup_runs": self.warmup_runs,
            "run_mean_us": self.run_mean_us,
            "run_median_us": self.run_median_us,
            "kernel_sum_us": self.kernel_sum_us,
            "node_time": "median over the profiled runs; p10 and p90 give the spread",
            "coverage": self.coverage,
            "host_launch_times": self.host_launch_times,
            "mapped_with": self.mapped_with,
            "untimed_nodes": list(self.untimed_nodes),
            "note": self.note,
            "trace": self.trace_path,
        }


def node_dict(n: NodeProfile) -> dict[str, Any]:
    """One entry of ``nodes`` in the JSON contract."""
    return {
        "name": n.name,
        "op_type": n.op_type,
        "provider": n.provider,
        "calls": n.calls,
        "mean_us": n.mean_us,
        "median_us": n.median_us,
        "p10_us": n.spread.p10_us,
        "p90_us": n.spread.p90_us,
        "share": n.share,
        "macs": n.macs,
        "flops": n.flops,
        "gflops_per_s": n.gflops_per_s,
        "gbytes_per_s": n.gbytes_per_s,
        "bound": n.bound,
        "bytes_read": n.bytes_read,
        "bytes_written": n.bytes_written,
        "arithmetic_intensity": n.arithmetic_intensity,
        "floor_us": n.floor_us,
        "efficiency": n.efficiency,
        "efficiency_suspect": n.efficiency_suspect,
        "mapping": n.mapping,
        "kernels": list(n.kernels),
        "kernel_op_types": list(n.kernel_op_types),
        "sources": list(n.sources),
        "input_shapes": [list(s) for s in n.input_shapes],
        "output_shapes": [list(s) for s in n.output_shapes],
    }


def op_type_dict(o: OpTypeProfile) -> dict[str, Any]:
    """One entry of ``by_op_type`` in the JSON contract."""
    return {
        "op_type": o.op_type,
        "count": o.count,
        "mean_us": o.mean_us,
        "median_us": o.median_us,
        "p10_us": o.spread.p10_us,
        "p90_us": o.spread.p90_us,
        "share": o.share,
        "cumulative_share": o.cumulative_share,
        "calls": o.calls,
    }


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
        from onnxcost.report.html import bench_snippet

        return bench_snippet(self)

    @property
    def throughput_per_s(self) -> float:
        """batch / median latency: from the same timed runs as the latency statistics."""
        return throughput_per_s(self.batch, self.latency.median_ms)

    @property
    def noisy(self) -> bool:
        return self.latency.noisy

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract (schema ``onnxcost.bench/1``).

        Leaf records (phases, latency, probes, ceilings) go through ``records.to_jsonable``.
        This tree, Environment, Settings, Memory, ProfileResult, the node and op-type rows,
        BatchPoint and MaxBatch stay written out: their keys nest, flatten, rename or order
        the fields in ways the published contract fixed (``threads`` groups three fields,
        ``provider_options`` is an object, ``p10_us`` comes from ``spread``, ``run_median_us``
        sits before later fields), and keys are never renamed or reordered to suit a generic
        path."""
        out: dict[str, Any] = {
            "schema": SCHEMA,
            "model": self.model,
            "provider": self.provider,
            "environment": self.environment.as_dict(),
            "inputs": [
                {"name": s.name, "dtype": s.dtype, "shape": list(s.shape)} for s in self.inputs
            ],
            "phases": self.phases.as_dict(),
            "latency_ms": self.latency.as_dict(),
            "runs": self.runs,
            "warmup": self.warmup,
            "batch": self.batch,
            "throughput_per_s": self.throughput_per_s,
            "throughput_method": THROUGHPUT_METHOD,
            "cv": self.latency.cv,
            "noisy": self.noisy,
            "noisy_cv_threshold": NOISY_CV,
            "settings": self.settings.as_dict(),
            "memory": self.memory.as_dict(),
            "warnings": list(self.warnings),
        }
        if self.profile is not None:
            out["nodes"] = [node_dict(n) for n in self.profile.nodes]
            out["by_op_type"] = [op_type_dict(o) for o in self.profile.by_op_type]
            out["profile"] = self.profile.as_dict()
        if self.roofline is not None:
            r = self.roofline
            out["roofline"] = {
                "ceilings": r.ceilings.as_dict(),
                "floor_ms": r.floor_ms,
                "measured_ms": r.measured_ms,
                "efficiency": r.efficiency,
                "efficiency_suspect": r.efficiency_suspect,
                "ceilings_from_cache": r.cache_path is not None,
                "cache_path": r.cache_path,
            }
        if self.sweep:
            out["sweep"] = [p.as_dict() for p in self.sweep]
        if self.max_batch is not None:
            out["max_batch"] = self.max_batch.as_dict()
        return out
