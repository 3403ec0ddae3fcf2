"""Measured memory: what onnxruntime really used, beside the analyzer's static estimate.

Host (Linux ``/proc``):
- **weights measured** = resident set size (VmRSS) after the session was created minus just
  before. A throw-away session on a one-node model is created first, so onnxruntime's one-time
  set-up (kernel registries, a CUDA context) is not counted as the model's; and the C heap's
  free pages are handed back to the kernel (``malloc_trim``) before each reading, so memory
  freed earlier (the analysis' copy of the model) or during creation (parse buffers) neither
  hides onnxruntime's allocations nor counts as them.
- **run peak measured** = the process's peak RSS during the first, warm-up and timed runs minus
  the RSS after the session was created. The peak is the kernel's high-water mark (VmHWM),
  reset just before the runs by writing ``5`` to ``/proc/self/clear_refs`` (Linux 4.0+). Where
  that write is refused, ``getrusage``'s ``ru_maxrss`` (a high-water mark of the whole process
  that cannot be reset) is used only when it rose during the runs (then the peak was reached
  there); otherwise the run peak is unknown (None), never a figure from before the runs.

Device (CUDA, NVML): memory in use on the whole device, sampled before the session, after it
and after the runs; weights = after - before, run peak = the largest later sample - after.

onnxruntime's Python API (1.31) exposes no allocator statistics: the C API's
``AllocatorGetStats`` has no Python binding and the arena and memory-pattern plans are
internal, so the arena's planned activation memory is reported as unavailable (None).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, ClassVar

from onnxcost.analysis.records import Const, Layout, to_jsonable

ARENA_NOTE = (
    "onnxruntime's Python API exposes no allocator statistics (the C API's AllocatorGetStats "
    "has no Python binding), so its arena and planned activation memory cannot be read"
)

HWM_RESET = "VmHWM reset through /proc/self/clear_refs"
MAXRSS = "ru_maxrss, which rose during the runs"


def _status_kib(field: str) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` (VmRSS, VmHWM), in KiB; None where unreadable."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def rss_bytes() -> int | None:
    """Resident set size of this process now (VmRSS), in bytes; None off Linux."""
    kib = _status_kib("VmRSS")
    return kib * 1024 if kib is not None else None


def maxrss_bytes() -> int | None:
    """``getrusage(RUSAGE_SELF).ru_maxrss`` in bytes (KiB on Linux, bytes on macOS)."""
    try:
        import resource
    except ImportError:
        return None
    peak = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return peak if sys.platform == "darwin" else peak * 1024


def release_free_memory() -> bool:
    """Hand the C heap's free pages back to the kernel (glibc's ``malloc_trim(0)``).

    Without it, memory freed before a measurement (the analysis' copy of the model, say) stays
    resident, and onnxruntime's allocations reuse it without any RSS growth: the weights would
    be measured near zero. False where there is no glibc.
    """
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        return False
    return True


def reset_peak() -> bool:
    """Reset this process's VmHWM to its current RSS (``echo 5 > /proc/self/clear_refs``)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        return False
    return True


class PeakWindow:
    """The process's peak RSS over a window of work, measured in a way that is correct.

    ``start()`` before the work, ``peak_bytes()`` after it: the VmHWM since the reset, or
    ``ru_maxrss`` only when it rose inside the window, else None (with the reason in ``method``).
    """

    def __init__(self) -> None:
        self.maxrss_before: int | None = None
        self.reset = False
        self.method = ""

    def start(self) -> None:
        self.reset = reset_peak()
        self.maxrss_before = maxrss_bytes()

    def peak_bytes(self) -> int | None:
        if self.reset:
            kib = _status_kib("VmHWM")
            if kib is not None:
                self.method = HWM_RESET
                return kib * 1024
        after = maxrss_bytes()
        if after is not None and self.maxrss_before is not None and after > self.maxrss_before:
            self.method = MAXRSS
            return after
        self.method = (
            "unknown: the peak RSS cannot be reset here and the process had peaked higher "
            "before the runs"
        )
        return None


@dataclass(frozen=True, slots=True)
class MemoryUse:
    """Estimated (static analysis) and measured (onnxruntime, this process) memory, in bytes."""

    weights_estimate_bytes: int
    """The analysis' ``totals.param_bytes``."""
    activations_estimate_bytes: int
    """The analysis' ``totals.peak_activation_bytes``."""
    weights_measured_bytes: int | None
    """Host RSS growth over session creation (None: not measurable here)."""
    run_peak_measured_bytes: int | None
    """Host peak RSS during the runs minus the RSS after session creation."""
    run_peak_method: str
    device_weights_measured_bytes: int | None = None
    """NVML memory in use after the session minus before (CUDA only)."""
    device_run_peak_measured_bytes: int | None = None
    """Largest NVML sample after the runs minus the one after the session (CUDA only)."""
    arena_planned_bytes: int | None = None
    """Not exposed by onnxruntime's Python API: always None (see ``ARENA_NOTE``)."""

    @property
    def weights_ratio(self) -> float | None:
        """weights measured / estimate (None without both)."""
        return _ratio(self.weights_measured_bytes, self.weights_estimate_bytes)

    @property
    def run_peak_ratio(self) -> float | None:
        """run peak measured / activations estimate (None without both)."""
        return _ratio(self.run_peak_measured_bytes, self.activations_estimate_bytes)

    JSON_LAYOUT: ClassVar[Layout] = (
        "weights_estimate_bytes",
        "weights_measured_bytes",
        "weights_ratio",
        "activations_estimate_bytes",
        "run_peak_measured_bytes",
        "run_peak_ratio",
        "run_peak_method",
        "device_weights_measured_bytes",
        "device_run_peak_measured_bytes",
        "arena_planned_bytes",
        ("arena_note", Const(ARENA_NOTE)),
    )
    """Merged into the ``memory`` object of ``onnxcost.bench/1``."""

    def as_dict(self) -> dict[str, Any]:
        return to_jsonable(self)  # type: ignore[no-any-return]


def _ratio(measured: int | None, estimate: int) -> float | None:
    return measured / estimate if measured is not None and estimate > 0 else None


def growth(after: int | None, before: int | None) -> int | None:
    """``after - before`` (None when either is unknown)."""
    return after - before if after is not None and before is not None else None
