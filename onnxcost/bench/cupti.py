"""GPU time per node on CUDA: CUPTI activity records, joined to onnxruntime's trace.

onnxruntime's published GPU wheels are built without CUDA profiling, so their trace times a
CUDA node on the host: the launch, not the GPU work. This module collects the GPU work itself
with NVIDIA's CUPTI Activity API (``libcupti``, from the ``nvidia-cuda-cupti`` package or a
CUDA toolkit), through ctypes, while the profiled session runs:

- kernels (``CONCURRENT_KERNEL``), memory copies (``MEMCPY``) and memsets (``MEMSET``), each
  with its start and end on the GPU in ns and the correlation id of the API call that issued it;
- the runtime and driver API calls (``RUNTIME``, ``DRIVER``) with their host start time and
  the same correlation id.

A GPU activity belongs to the onnxruntime node whose host span (``<node>_kernel_time``, on
onnxruntime's clock) contains the host start of the call that launched it, the innermost one
when spans nest. Clocks: onnxruntime's trace counts microseconds from
``InferenceSession.get_profiling_start_time_ns()`` (the system clock), CUPTI its own ns; the
offset between them (``cuptiGetTimestamp`` between two reads of the system clock) drifts, so
it is read after every profiled run and interpolated between readings (``Activity.offset_at``).

``merge_activity`` writes every GPU activity into the trace as a Chrome ``X`` event
(``cat`` ``Kernel``, ``Memcpy`` or ``Memset``; ``ts``/``dur`` its GPU time on the trace's
clock; ``args.node`` the owning node, '' when the call was made outside every node), right
after its node's event, which is the layout ``profile.parse_trace`` reads.

Record layouts read here (offsets in bytes, identical in CUpti_ActivityKernel4 to 11,
CUpti_ActivityMemcpy5/6, CUpti_ActivityMemset4 and CUpti_ActivityAPI; later versions add
fields only at the end): see ``_KERNEL``, ``_MEMCPY``, ``_MEMSET`` and ``_API``.
"""

from __future__ import annotations

import bisect
import ctypes
import glob
import itertools
import os
import struct
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

KIND_MEMCPY = 1
KIND_MEMSET = 2
KIND_DRIVER = 4
KIND_RUNTIME = 5
KIND_CONCURRENT_KERNEL = 10
_KINDS = (KIND_CONCURRENT_KERNEL, KIND_MEMCPY, KIND_MEMSET, KIND_RUNTIME, KIND_DRIVER)

_SUCCESS = 0
_MAX_LIMIT_REACHED = 1  # cuptiActivityGetNextRecord: no more records in the buffer
_FLUSH_FORCED = 1
_BUFFER_BYTES = 8 << 20

# (start, end, correlationId, streamId, name pointer) of CUpti_ActivityKernel4..11
_KERNEL = struct.Struct("<16xQQ8x8xI40xI8xQ")
# (copyKind, bytes, start, end, streamId, correlationId) of CUpti_ActivityMemcpy5/6
_MEMCPY = struct.Struct("<4xB3xQQQ8xII")
# (bytes, start, end, streamId, correlationId) of CUpti_ActivityMemset4
_MEMSET = struct.Struct("<8xQQQ8xII")
# (start, end, threadId, correlationId) of CUpti_ActivityAPI
_API = struct.Struct("<8xQQ4xII")

COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA"}
COPY_KINDS.update({8: "DtoD", 9: "HtoH", 10: "PtoP"})


class CuptiUnavailableError(Exception):
    """CUPTI cannot be loaded or refused to collect (the reason is the message)."""


@dataclass(frozen=True, slots=True)
class GpuActivity:
    """One kernel, copy or memset the GPU ran, in CUPTI's clock (ns)."""

    kind: str
    """'Kernel', 'Memcpy' or 'Memset'."""
    name: str
    start_ns: int
    end_ns: int
    correlation: int
    stream: int
    bytes: int | None = None
    copy_kind: str = ""


@dataclass(frozen=True, slots=True)
class ApiCall:
    """One CUDA runtime or driver call on the host, in CUPTI's clock (ns)."""

    start_ns: int
    end_ns: int
    correlation: int
    thread: int


@dataclass(frozen=True, slots=True)
class Activity:
    """What CUPTI recorded between ``start`` and ``stop``, and the clock offset.

    ``offset_ns`` = CUPTI's clock minus the system clock (``time.time_ns``), read at ``stop``.
    ``clock``: (CUPTI ns, offset ns) pairs read at ``start``, at each ``sample_clock`` and at
    ``stop``: the offset moves (by about 10 µs per second on the H100 machine, more than a
    node's launch margin), so each time is converted with the offset interpolated between
    the two readings around it (``offset_at``).
    """

    gpu: tuple[GpuActivity, ...]
    calls: tuple[ApiCall, ...]
    offset_ns: int
    dropped_records: int = 0
    clock: tuple[tuple[int, int], ...] = ()

    def offset_at(self, cupti_ns: int) -> float:
        """The offset at CUPTI time ``cupti_ns``: linear between the readings around it,
        the nearest reading outside them, ``offset_ns`` without readings."""
        points = self.clock
        if not points:
            return float(self.offset_ns)
        i = bisect.bisect_right([t for t, _ in points], cupti_ns)
        if i == 0:
            return float(points[0][1])
        if i == len(points):
            return float(points[-1][1])
        (t0, o0), (t1, o1) = points[i - 1], points[i]
        return o0 + (o1 - o0) * (cupti_ns - t0) / (t1 - t0) if t1 > t0 else float(o1)


def _candidates() -> list[str]:
    """Where libcupti may be: the nvidia-* pip packages, a CUDA toolkit, then the loader's path."""
    roots = [p for p in sys.path if p and os.path.isdir(os.path.join(p, "nvidia"))]
    found: list[str] = []
    for root in roots:
        for pattern in ("nvidia/cu*/lib/libcupti.so*", "nvidia/cuda_cupti/lib/libcupti.so*"):
            found += sorted(glob.glob(os.path.join(root, pattern)), reverse=True)
    for home in (
        os.environ.get("CUDA_HOME", ""),
        os.environ.get("CUDA_PATH", ""),
        "/usr/local/cuda",
    ):
        if home:
            found += sorted(
                glob.glob(os.path.join(home, "extras/CUPTI/lib64/libcupti.so*")), reverse=True
            )
    return [*found, "libcupti.so", "libcupti.so.13", "libcupti.so.12"]


def load_cupti() -> ctypes.CDLL:
    """libcupti, or CuptiUnavailableError naming where it was looked for and how to install it."""
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path}: {e}")
    raise CuptiUnavailableError(
        "libcupti was not found (pip install nvidia-cuda-cupti, or a CUDA toolkit's "
        "extras/CUPTI/lib64 on LD_LIBRARY_PATH)"
    )


_REQUEST = ctypes.CFUNCTYPE(
    None,
    ctypes.POINTER(ctypes.POINTER(ctypes.c_uint8)),
    ctypes.POINTER(ctypes.c_size_t),
    ctypes.POINTER(ctypes.c_size_t),
)
_COMPLETE = ctypes.CFUNCTYPE(
    None,
    ctypes.c_void_p,
    ctypes.c_uint32,
    ctypes.POINTER(ctypes.c_uint8),
    ctypes.c_size_t,
    ctypes.c_size_t,
)


@dataclass
class _State:
    buffers: dict[int, Any] = field(default_factory=dict)
    gpu: list[GpuActivity] = field(default_factory=list)
    calls: list[ApiCall] = field(default_factory=list)
    dropped: int = 0


def _parse_record(state: _State, address: int) -> None:
    kind = ctypes.c_uint32.from_address(address).value
    if kind == KIND_CONCURRENT_KERNEL:
        raw = ctypes.string_at(address, _KERNEL.size)
        start, end, stream, corr, name_ptr = _KERNEL.unpack(raw)
        name = ctypes.string_at(name_ptr).decode("utf-8", "replace") if name_ptr else "?"
        state.gpu.append(GpuActivity("Kernel", name, start, end, corr, stream))
    elif kind == KIND_MEMCPY:
        copy, nbytes, start, end, stream, corr = _MEMCPY.unpack(
            ctypes.string_at(address, _MEMCPY.size)
        )
        what = COPY_KINDS.get(copy, str(copy))
        state.gpu.append(
            GpuActivity("Memcpy", f"Memcpy {what}", start, end, corr, stream, nbytes, what)
        )
    elif kind == KIND_MEMSET:
        nbytes, start, end, stream, corr = _MEMSET.unpack(ctypes.string_at(address, _MEMSET.size))
        state.gpu.append(GpuActivity("Memset", "Memset", start, end, corr, stream, nbytes))
    elif kind in (KIND_RUNTIME, KIND_DRIVER):
        start, end, thread, corr = _API.unpack(ctypes.string_at(address, _API.size))
        state.calls.append(ApiCall(start, end, corr, thread))


class CuptiCollector:
    """Collect GPU activity between ``start()`` and ``stop()`` (one collector at a time).

    CUPTI calls the buffer callbacks from its own thread; ctypes takes the GIL for them.
    """

    def __init__(self) -> None:
        self._lib = load_cupti()
        self._state = _State()
        self._request = _REQUEST(self._on_request)
        self._complete = _COMPLETE(self._on_complete)
        self._running = False
        self._clock: list[tuple[int, int]] = []

    def _check(self, result: int, what: str) -> None:
        if result != _SUCCESS:
            text = ctypes.c_char_p()
            self._lib.cuptiGetResultString(result, ctypes.byref(text))
            detail = text.value.decode() if text.value else f"error {result}"
            raise CuptiUnavailableError(f"CUPTI {what} failed: {detail}")

    def _on_request(self, buffer: Any, size: Any, max_records: Any) -> None:
        block = (ctypes.c_uint8 * (_BUFFER_BYTES + 8))()
        address = ctypes.addressof(block)
        aligned = (address + 7) & ~7
        self._state.buffers[aligned] = block
        buffer[0] = ctypes.cast(aligned, ctypes.POINTER(ctypes.c_uint8))
        size[0] = _BUFFER_BYTES
        max_records[0] = 0

    def _on_complete(self, _ctx: Any, _stream: int, buffer: Any, _size: int, valid: int) -> None:
        record = ctypes.c_void_p()
        base = ctypes.cast(buffer, ctypes.c_void_p).value or 0
        try:
            while valid:
                status = self._lib.cuptiActivityGetNextRecord(buffer, valid, ctypes.byref(record))
                if status != _SUCCESS or not record.value:
                    break
                _parse_record(self._state, record.value)
        finally:
            self._state.buffers.pop(base, None)

    def start(self) -> None:
        """Register the buffers and enable the record kinds."""
        self._check(
            self._lib.cuptiActivityRegisterCallbacks(self._request, self._complete),
            "cuptiActivityRegisterCallbacks",
        )
        for kind in _KINDS:
            self._check(self._lib.cuptiActivityEnable(kind), f"cuptiActivityEnable({kind})")
        self._running = True
        self.sample_clock()

    def offset_ns(self) -> int:
        """CUPTI's clock minus the system clock, from one read between two system-clock reads."""
        return self._reading()[1]

    def _reading(self) -> tuple[int, int]:
        stamp = ctypes.c_uint64()
        before = time.time_ns()
        self._check(self._lib.cuptiGetTimestamp(ctypes.byref(stamp)), "cuptiGetTimestamp")
        after = time.time_ns()
        return int(stamp.value), int(stamp.value) - (before + after) // 2

    def sample_clock(self) -> None:
        """Read the clock offset now (about 2 µs; between runs, never inside one)."""
        self._clock.append(self._reading())

    def stop(self) -> Activity:
        """Flush, disable, and return what was recorded."""
        if self._running:
            self._check(self._lib.cuptiActivityFlushAll(_FLUSH_FORCED), "cuptiActivityFlushAll")
            for kind in _KINDS:
                self._lib.cuptiActivityDisable(kind)
            dropped = ctypes.c_size_t()
            self._running = False
            if hasattr(self._lib, "cuptiActivityGetNumDroppedRecords"):
                self._lib.cuptiActivityGetNumDroppedRecords(None, 0, ctypes.byref(dropped))
            self._state.dropped = int(dropped.value)
        state = self._state
        self.sample_clock()
        return Activity(
            tuple(state.gpu),
            tuple(state.calls),
            self._clock[-1][1],
            state.dropped,
            tuple(self._clock),
        )


@dataclass(frozen=True, slots=True)
class _Span:
    start_us: float
    end_us: float
    index: int


def _node_spans(events: Sequence[Mapping[str, Any]]) -> list[_Span]:
    from onnxcost.bench.profile import FENCE_SUFFIXES, KERNEL_SUFFIX

    spans = []
    for i, e in enumerate(events):
        name = e.get("name")
        if e.get("cat") != "Node" or not isinstance(name, str):
            continue
        if not name.endswith(KERNEL_SUFFIX) or name.endswith(FENCE_SUFFIXES):
            continue
        ts, dur = float(e.get("ts", 0.0)), float(e.get("dur", 0.0))
        spans.append(_Span(ts, ts + dur, i))
    spans.sort(key=lambda s: (s.start_us, -s.end_us))
    return spans


SLACK_US = 2.0
"""How far outside a node's span a launch may fall and still be its: onnxruntime writes whole
microseconds (start and duration each cut down, so a span can start up to 1 µs late and end
up to 2 µs early), and the clock offset is read to about a microsecond. Nodes on one thread
are several microseconds apart, so 2 µs takes no launch from a neighbour."""


def _distance(span: _Span, at_us: float) -> float:
    """0 inside the span, else how far outside it ``at_us`` is."""
    return max(span.start_us - at_us, at_us - span.end_us, 0.0)


def _owner(
    spans: Sequence[_Span], starts: Sequence[float], ends: Sequence[float], at_us: float
) -> _Span | None:
    """The span containing ``at_us`` within ``SLACK_US``: the nearest, and of those the
    innermost (the latest-starting: a nested span starts later and ends earlier).

    ``spans`` are sorted by start; ``ends[i]`` is the latest end among ``spans[:i + 1]``, so
    the walk back stops at the first index before which no span reaches ``at_us``.
    """
    i = bisect.bisect_right(starts, at_us + SLACK_US) - 1
    best: _Span | None = None
    best_key = (SLACK_US, 0.0)
    while i >= 0 and ends[i] >= at_us - SLACK_US:
        span = spans[i]
        gap = _distance(span, at_us)
        if gap <= SLACK_US and (best is None or (gap, -span.start_us) < best_key):
            best, best_key = span, (gap, -span.start_us)
        i -= 1
    return best


def merge_activity(
    events: Sequence[Mapping[str, Any]], activity: Activity, profiling_start_ns: int
) -> list[dict[str, Any]]:
    """onnxruntime's trace ``events`` with every GPU activity added after its node's event.

    Times of GPU events: (CUPTI ns - offset then - profiling start) / 1000, in the trace's µs.
    Activities whose launching call is outside every node span get ``args.node`` '' and go at
    the end, so nothing recorded is lost from the written trace.
    """

    def trace_us(cupti_ns: int) -> float:
        # integers first: ns since 1970 need 61 bits, more than a float's 53
        return ((cupti_ns - profiling_start_ns) - round(activity.offset_at(cupti_ns))) / 1e3

    calls = {c.correlation: c for c in activity.calls}
    spans = _node_spans(events)
    starts = [s.start_us for s in spans]
    ends = list(itertools.accumulate((s.end_us for s in spans), max))
    after: dict[int, list[dict[str, Any]]] = {}
    orphans: list[dict[str, Any]] = []
    for g in sorted(activity.gpu, key=lambda a: a.start_ns):
        call = calls.get(g.correlation)
        launch_us = trace_us(call.start_ns) if call is not None else None
        owner = _owner(spans, starts, ends, launch_us) if launch_us is not None else None
        node = ""
        if owner is not None:
            name = str(events[owner.index].get("name", ""))
            node = name.removesuffix("_kernel_time")
        args: dict[str, Any] = {"node": node, "correlation": g.correlation, "stream": g.stream}
        if launch_us is not None:
            args["launch_ts"] = round(launch_us, 3)
        if g.bytes is not None:
            args["bytes"] = g.bytes
        if g.copy_kind:
            args["copy_kind"] = g.copy_kind
        event = {
            "cat": g.kind,
            "name": g.name,
            "ph": "X",
            "pid": 0,
            "tid": f"stream {g.stream}",
            "ts": round(trace_us(g.start_ns), 3),
            "dur": round((g.end_ns - g.start_ns) / 1e3, 3),
            "args": args,
        }
        if owner is None:
            orphans.append(event)
        else:
            after.setdefault(owner.index, []).append(event)
    out: list[dict[str, Any]] = []
    for i, e in enumerate(events):
        out.append(dict(e))
        out.extend(after.get(i, ()))
    out.extend(orphans)
    return out
