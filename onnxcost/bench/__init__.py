"""Measured cost: latency, throughput and per-node time of a model under onnxruntime.

onnxruntime is imported lazily inside this package only, so ``onnxcost analyze`` works where
onnxruntime is missing, and the trace parser works offline.
"""

from __future__ import annotations

from onnxcost.bench.join import NodeProfile, OpTypeProfile
from onnxcost.bench.options import BenchOptions
from onnxcost.bench.profile import (
    KernelStat,
    Trace,
    kernel_stats,
    parse_trace,
    read_trace,
    write_chrome_trace,
)
from onnxcost.bench.progress import BenchProgress, ProgressFn
from onnxcost.bench.providers import ProviderStatus, available_providers
from onnxcost.bench.result import SCHEMA, BenchResult
from onnxcost.bench.roofline import Ceilings, ModelRoofline, calibrate
from onnxcost.bench.run import run_bench
from onnxcost.bench.sweep import BatchPoint, MaxBatch, Probe
from onnxcost.bench.timing import LatencyStats

__all__ = [
    "SCHEMA",
    "BatchPoint",
    "BenchOptions",
    "BenchProgress",
    "BenchResult",
    "Ceilings",
    "KernelStat",
    "LatencyStats",
    "MaxBatch",
    "ModelRoofline",
    "NodeProfile",
    "OpTypeProfile",
    "Probe",
    "ProgressFn",
    "ProviderStatus",
    "Trace",
    "available_providers",
    "calibrate",
    "kernel_stats",
    "parse_trace",
    "read_trace",
    "run_bench",
    "write_chrome_trace",
]
