"""Measured cost: latency, throughput and per-node time of a model under onnxruntime.

onnxruntime is imported lazily inside this package only, so ``onnxcost analyze`` works where
onnxruntime is missing, and the trace parser works offline.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_WHERE = {
    "NodeProfile": "join",
    "OpTypeProfile": "join",
    "BenchOptions": "options",
    "KernelStat": "profile",
    "Trace": "profile",
    "kernel_stats": "profile",
    "parse_trace": "profile",
    "read_trace": "profile",
    "write_chrome_trace": "profile",
    "BenchProgress": "progress",
    "ProgressFn": "progress",
    "ProviderStatus": "providers",
    "available_providers": "providers",
    "SCHEMA": "result",
    "BenchResult": "result",
    "Ceilings": "roofline",
    "ModelRoofline": "roofline",
    "calibrate": "roofline",
    "run_bench": "run",
    "BatchPoint": "sweep",
    "MaxBatch": "sweep",
    "Probe": "sweep",
    "LatencyStats": "timing",
}
"""Each public name's module: imported when the name is first used (``import onnxcost.bench``
and its submodules stay light for the commands that read one record of it)."""


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'onnxcost.bench' has no attribute {name!r}")
    return getattr(importlib.import_module(f"onnxcost.bench.{module}"), name)


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
