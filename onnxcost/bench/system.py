"""The machine: CPU and GPU names, host peak RSS (``resource``), GPU memory (NVML, if importable)."""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import sys
from types import ModuleType
from typing import Any


@functools.cache
def cpu_name() -> str:
    """``model name`` from /proc/cpuinfo, else what ``platform`` knows."""
    with (
        contextlib.suppress(OSError),
        open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f,
    ):
        for line in f:
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def logical_cpus() -> int:
    return os.cpu_count() or 1


def host_peak_rss_mb() -> float | None:
    """Peak resident set size of this process so far, in MiB (None where ``resource`` is missing).

    ``ru_maxrss`` is KiB on Linux and bytes on macOS. It is the whole process's peak, so it
    includes whatever ran before the benchmark in the same process.
    """
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _nvml() -> ModuleType | None:
    """pynvml, initialised, or None when it is missing or no driver answers."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except _error(pynvml):
        return None
    module: ModuleType = pynvml
    return module


def _error(nvml: ModuleType) -> type[BaseException]:
    """pynvml's base error (its subclasses are generated at import time)."""
    error = getattr(nvml, "NVMLError", OSError)
    return error if isinstance(error, type) and issubclass(error, BaseException) else OSError


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def gpu_info(device_id: int = 0) -> tuple[str | None, str | None]:
    """(GPU name, driver version) from NVML, or (None, None)."""
    nvml = _nvml()
    if nvml is None:
        return None, None
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(device_id)
        return _text(nvml.nvmlDeviceGetName(handle)), _text(nvml.nvmlSystemGetDriverVersion())
    except _error(nvml):
        return None, None


def gpu_free_bytes(device_id: int) -> int | None:
    """NVML's free memory of the device, in bytes (None without NVML)."""
    nvml = _nvml()
    if nvml is None:
        return None
    try:
        return int(nvml.nvmlDeviceGetMemoryInfo(nvml.nvmlDeviceGetHandleByIndex(device_id)).free)
    except _error(nvml):
        return None


class GpuMemory:
    """Samples device memory in use (NVML, whole device, every process) to report the peak seen.

    NVML gives memory in use now, not a peak, so the bench samples after session creation,
    after warm-up and after the timed loop; ``peak_delta_mb`` is the largest sample minus the
    sample taken before the session existed.
    """

    def __init__(self, device_id: int) -> None:
        self._nvml = _nvml()
        self._handle: Any = None
        self.baseline_mb: float | None = None
        self.peak_mb: float | None = None
        if self._nvml is not None:
            try:
                self._handle = self._nvml.nvmlDeviceGetHandleByIndex(device_id)
            except _error(self._nvml):
                self._nvml = None
        self.baseline_mb = self.sample()

    @property
    def available(self) -> bool:
        return self._nvml is not None

    def sample(self) -> float | None:
        if self._nvml is None:
            return None
        try:
            used = float(self._nvml.nvmlDeviceGetMemoryInfo(self._handle).used) / (1024 * 1024)
        except _error(self._nvml):
            return None
        self.peak_mb = used if self.peak_mb is None else max(self.peak_mb, used)
        return used

    @property
    def peak_delta_mb(self) -> float | None:
        if self.peak_mb is None or self.baseline_mb is None:
            return None
        return self.peak_mb - self.baseline_mb
