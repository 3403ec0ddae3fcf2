"""onnxruntime's profile trace: parse it tolerantly, split it by run, summarise it per kernel.

The trace is Chrome trace JSON: a list of complete ('X') events. ``cat: Session`` events mark
``model_run`` (one per ``InferenceSession.run``); ``cat: Node`` events named
``<node>_kernel_time`` time one kernel, with args (``op_name``, ``provider``,
``input_type_shape``, ...) that older builds or other providers may leave out. Older builds
also write ``<node>_fence_before``/``_fence_after`` events (synchronisation waits, not
compute): they are counted and dropped. Builds with CUDA profiling (CUPTI) follow each Node
event with the ``cat: Kernel`` events of the GPU kernels it launched, which give device time.

No onnxruntime needed here: traces are parsed offline.
"""

from __future__ import annotations

import bisect
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from onnxcost.errors import BenchError

KERNEL_SUFFIX = "_kernel_time"
FENCE_SUFFIXES = ("_fence_before", "_fence_after")
_RUN_NAMES = ("model_run",)
_EXECUTE_NAMES = ("SequentialExecutor::Execute", "ParallelExecutor::Execute")
_MEMORY_ARGS = ("output_size", "activation_size", "parameter_size")
DEVICE_CATEGORIES = ("Kernel", "Memcpy", "Memset")
"""Trace categories of GPU work (CUPTI records): a kernel, a copy, a memset."""
CPU_PROVIDER = "CPUExecutionProvider"

Event = Mapping[str, Any]
Shape = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class RunSpan:
    """One ``InferenceSession.run`` as the trace saw it (microseconds since profiling began)."""

    index: int
    ts_us: float
    dur_us: float

    @property
    def end_us(self) -> float:
        return self.ts_us + self.dur_us


@dataclass(frozen=True, slots=True)
class KernelEvent:
    """One execution of one kernel (an onnxruntime node after graph optimization)."""

    name: str
    op_type: str
    """``args.op_name``; '' when the trace carries no args."""
    provider: str
    ts_us: float
    dur_us: float
    """Host time of the call. On CUDA that is the launch, not the GPU work."""
    run: int
    tid: int
    input_shapes: tuple[Shape, ...] = ()
    output_shapes: tuple[Shape, ...] = ()
    output_bytes: int | None = None
    device_us: float | None = None
    """Summed duration of the GPU kernels it launched, when the trace has them (CUPTI builds)."""
    depth: int = 0
    """0 for a kernel of the main graph; 1 or more inside a control-flow kernel (If, Loop, Scan)
    whose own time already includes it."""


@dataclass(frozen=True, slots=True)
class Trace:
    """A parsed trace: every run, every kernel event inside a run, and what was dropped."""

    runs: tuple[RunSpan, ...]
    kernels: tuple[KernelEvent, ...]
    skipped_runs: int
    """Leading runs dropped as warm-up (the first run included)."""
    fence_events: int
    outside_runs: int
    """Kernel events that fell in no run (dropped)."""
    device_events: int
    memory_args: bool
    """Whether kernel events carried memory args (``output_size`` ...)."""
    copy_events: int = 0
    """GPU copies and memsets (``Memcpy``/``Memset`` events) among ``device_events``."""
    copy_us: float = 0.0
    """Their GPU time added up, over every run in the trace."""
    unowned_device_us: float = 0.0
    """GPU time launched outside every node (input/output copies of a run), over every run."""
    device_runs: tuple[DeviceRun, ...] = ()
    """Per-run GPU figures (CUPTI traces only), every run with GPU work."""
    gpu: tuple[DeviceEvent, ...] = ()
    """Every GPU event of the trace, in trace order."""

    @property
    def host_node_median_us(self) -> float:
        """Median over the measured runs of the host time of top-level CPU-provider kernels."""
        totals = dict.fromkeys((r.index for r in self.measured_runs), 0.0)
        for k in self.kernels:
            if k.depth == 0 and k.run in totals and k.provider == CPU_PROVIDER:
                totals[k.run] += k.dur_us
        return median(list(totals.values()))

    def device_median(self, what: str) -> float:
        """Median over the measured runs of a ``DeviceRun`` figure (``busy_us``, ``span_us``,
        ``copy_us``, ``unowned_us``); 0.0 without GPU times. A measured run with no GPU work
        counts as 0."""
        if not self.device_runs:
            return 0.0
        values = {d.run: float(getattr(d, what)) for d in self.device_runs}
        return median([values.get(r.index, 0.0) for r in self.measured_runs])

    @property
    def measured_runs(self) -> tuple[RunSpan, ...]:
        return self.runs[self.skipped_runs :]

    @property
    def measured_kernels(self) -> tuple[KernelEvent, ...]:
        return tuple(k for k in self.kernels if k.run >= self.skipped_runs)

    @property
    def run_mean_us(self) -> float:
        """Mean ``model_run`` duration over the measured runs."""
        runs = self.measured_runs
        return sum(r.dur_us for r in runs) / len(runs) if runs else 0.0

    @property
    def run_median_us(self) -> float:
        """Median ``model_run`` duration over the measured runs."""
        return median([r.dur_us for r in self.measured_runs])

    @property
    def kernel_sum_median_us(self) -> float:
        """Median over the measured runs of each run's top-level kernel time added up."""
        totals = dict.fromkeys((r.index for r in self.measured_runs), 0.0)
        for k in self.kernels:
            if k.depth == 0 and k.run in totals:
                totals[k.run] += k.device_us if k.device_us is not None else k.dur_us
        return median(list(totals.values()))

    def kernel_sum_us(self, run: int) -> float:
        """Time of the top-level kernels of run ``run`` added up (nested ones are inside them):
        GPU time where the trace has it, else host time."""
        return sum(
            k.device_us if k.device_us is not None else k.dur_us
            for k in self.kernels
            if k.run == run and k.depth == 0
        )

    @property
    def has_device_times(self) -> bool:
        """GPU events in the trace, or GPU times in its node events' args (a cleaned trace)."""
        return self.device_events > 0 or any(k.device_us is not None for k in self.kernels)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, interpolating linearly between closest
    ranks as numpy does (rank = q / 100 x (n - 1)); 0.0 for no values."""
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if len(values) else 0.0


def median(values: Sequence[float]) -> float:
    """The 50th percentile: the middle value, or the mean of the two middle ones."""
    return percentile(values, 50.0)


@dataclass(frozen=True, slots=True)
class Spread:
    """Median and the 10th/90th percentiles of one time over the measured runs, microseconds."""

    median_us: float
    p10_us: float
    p90_us: float

    @staticmethod
    def of(per_run_us: Sequence[float], fallback_us: float = 0.0) -> Spread:
        """The spread of ``per_run_us``; all three ``fallback_us`` when there are none."""
        if not per_run_us:
            return Spread(fallback_us, fallback_us, fallback_us)
        return Spread(
            median(per_run_us), percentile(per_run_us, 10.0), percentile(per_run_us, 90.0)
        )

    @property
    def relative(self) -> float:
        """(p90 - p10) / median: how far apart the runs were (0 when the median is 0)."""
        return (self.p90_us - self.p10_us) / self.median_us if self.median_us > 0 else 0.0


class _Timed(Protocol):
    @property
    def per_run_us(self) -> tuple[float, ...]: ...
    @property
    def mean_us(self) -> float: ...


class PerRunTimes:
    """Mixin of the records that keep a time per profiled run (``per_run_us``) and a mean."""

    __slots__ = ()

    @property
    def spread(self: _Timed) -> Spread:
        """Median, p10 and p90 of ``per_run_us`` (all three ``mean_us`` when it is empty)."""
        return Spread.of(self.per_run_us, self.mean_us)

    @property
    def median_us(self: _Timed) -> float:
        """Median time per run: what the report ranks by and computes rates from."""
        return Spread.of(self.per_run_us, self.mean_us).median_us


@dataclass(frozen=True, slots=True)
class KernelStat(PerRunTimes):
    """One kernel over the measured runs: calls, time per run, what it ran on."""

    name: str
    op_type: str
    provider: str
    calls: int
    """Executions over all measured runs."""
    runs: int
    total_us: float
    """Host time summed over all measured runs (device time when the trace has it)."""
    order: int
    """Position of its first execution in a run (for 'run order' listings)."""
    input_shapes: tuple[Shape, ...]
    output_shapes: tuple[Shape, ...]
    nested: bool = False
    """Runs inside a control-flow kernel, whose time already includes it."""
    per_run_us: tuple[float, ...] = ()
    """Its time in each measured run, in run order (0.0 in a run where it did not execute);
    the calls of one run added up."""

    @property
    def mean_us(self) -> float:
        """Time per run (a kernel called twice per run counts both calls)."""
        return self.total_us / self.runs if self.runs else 0.0

    @property
    def calls_per_run(self) -> float:
        return self.calls / self.runs if self.runs else 0.0


def read_trace(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Events of a trace file: a JSON list, ``{"traceEvents": [...]}``, or a list cut short.

    onnxruntime writes the list event by event; a process that died leaves it without the
    closing bracket, which is repaired here.
    """
    text = Path(path).read_text(encoding="utf-8", errors="replace").strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        try:
            data = json.loads(text.rstrip(",\n ") + "]")
        except json.JSONDecodeError as e:
            raise BenchError(
                f"{os.fspath(path)} is not a Chrome trace (JSON: {e.msg}); pass a trace onnxruntime wrote"
            ) from e
    if isinstance(data, dict):
        data = data.get("traceEvents", [])
    if not isinstance(data, list):
        raise BenchError(f"{os.fspath(path)} is not a Chrome trace (no event list)")
    return [e for e in data if isinstance(e, dict)]


def _shapes(value: object) -> tuple[Shape, ...]:
    """``[{"float": [1, 3]}, ...]`` -> ``((1, 3), ...)``; anything else -> ()."""
    if not isinstance(value, list):
        return ()
    out: list[Shape] = []
    for item in value:
        if isinstance(item, dict) and item:
            dims = next(iter(item.values()))
            if isinstance(dims, list) and all(isinstance(d, int) for d in dims):
                out.append(tuple(dims))
                continue
        out.append(())
    return tuple(out)


def _num(value: object) -> float:
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return 0.0
    return 0.0


def _spans(events: Sequence[Event], names: Sequence[str]) -> list[tuple[float, float]]:
    return sorted(
        (_num(e.get("ts")), _num(e.get("dur")))
        for e in events
        if e.get("name") in names and e.get("ph", "X") == "X"
    )


def parse_trace(events: Sequence[Event], *, skip_runs: int = 0) -> Trace:
    """Split ``events`` into runs and kernel executions; the first ``skip_runs`` runs are warm-up.

    A kernel belongs to the run whose ``model_run`` span contains it (1 us of slack for the
    trace's rounding). Traces without ``model_run`` events fall back to the executor's spans.
    """
    spans = _spans(events, _RUN_NAMES) or _spans(events, _EXECUTE_NAMES)
    if not spans:
        raise BenchError(
            "the trace has no model_run events, so runs cannot be told apart; profile at least one run"
        )
    if skip_runs >= len(spans):
        raise BenchError(
            f"the trace has {len(spans)} runs, all of them warm-up (skip {skip_runs}); profile more runs"
        )
    runs = tuple(RunSpan(i, ts, dur) for i, (ts, dur) in enumerate(spans))
    starts = [r.ts_us for r in runs]
    kernels: list[KernelEvent] = []
    device: dict[int, float] = {}
    owner: int | None = None  # index of the last Node event kept: GPU kernels that follow are its
    gpu: list[DeviceEvent] = []
    latest: dict[str, int] = {}  # node name -> index of its latest kernel event
    preset: set[int] = set()  # kernel events whose GPU time came in their args
    fences = outside = device_events = copies = 0
    copy_us = unowned_us = 0.0
    memory = False
    for e in events:
        name = e.get("name")
        cat = e.get("cat")
        if not isinstance(name, str):
            continue
        if cat in DEVICE_CATEGORIES:
            device_events += 1
            us = _num(e.get("dur"))
            raw = e.get("args")
            gargs: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
            node = gargs.get("node")
            # args.node (onnxcost's CUPTI join) names the launching node, '' for none; without
            # it the event belongs to the Node event before it (onnxruntime's CUPTI builds)
            target = owner if node is None else latest.get(str(node)) if node else None
            if cat != "Kernel":
                copies += 1
                copy_us += us
            if target is not None:
                if target not in preset:  # a cleaned trace already holds it in args.device_us
                    device[target] = device.get(target, 0.0) + us
            else:
                unowned_us += us
            launch = _num(gargs["launch_ts"]) if "launch_ts" in gargs else _num(e.get("ts"))
            gpu.append(
                DeviceEvent(
                    name=name,
                    category=str(cat),
                    launch_us=launch,
                    ts_us=_num(e.get("ts")),
                    dur_us=us,
                    node=kernels[target].name if target is not None else "",
                    stream=str(gargs.get("stream", e.get("tid", ""))),
                )
            )
            continue
        if cat != "Node":
            continue
        if name.endswith(FENCE_SUFFIXES):
            fences += 1
            continue
        ts, dur = _num(e.get("ts")), _num(e.get("dur"))
        i = bisect.bisect_right(starts, ts) - 1
        if i < 0 or ts + dur > runs[i].end_us + 1.0:
            outside += 1
            owner = None
            continue
        raw_args = e.get("args")
        args: Mapping[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        memory = memory or any(k in args for k in _MEMORY_ARGS)
        out_bytes = args.get("output_size")
        owner = len(kernels)
        latest[name.removesuffix(KERNEL_SUFFIX)] = owner
        if "device_us" in args:  # a trace onnxcost cleaned (``--trace``) keeps the GPU time here
            device[owner] = _num(args["device_us"])
            preset.add(owner)
        kernels.append(
            KernelEvent(
                name=name.removesuffix(KERNEL_SUFFIX),
                op_type=str(args.get("op_name", "")),
                provider=str(args.get("provider", "")),
                ts_us=ts,
                dur_us=dur,
                run=i,
                tid=int(_num(e.get("tid"))),
                input_shapes=_shapes(args.get("input_type_shape")),
                output_shapes=_shapes(args.get("output_type_shape")),
                output_bytes=int(_num(out_bytes)) if out_bytes is not None else None,
            )
        )
    for index, us in device.items():
        kernels[index] = replace(kernels[index], device_us=us)
    if device_events:
        # a GPU node that launched nothing (Reshape, Squeeze: views) took no GPU time; its host
        # span is bookkeeping. CPU nodes keep their host time, which is their compute.
        kernels = [
            replace(k, device_us=0.0)
            if k.device_us is None and k.provider not in ("", CPU_PROVIDER)
            else k
            for k in kernels
        ]
    return Trace(
        runs,
        _with_depth(kernels),
        skip_runs,
        fences,
        outside,
        device_events,
        memory,
        copy_events=copies,
        copy_us=copy_us,
        unowned_device_us=unowned_us,
        device_runs=_device_runs(gpu, runs),
        gpu=tuple(gpu),
    )


@dataclass(frozen=True, slots=True)
class DeviceEvent:
    """One kernel, copy or memset the GPU ran (a CUPTI record joined by ``cupti.merge_activity``)."""

    name: str
    category: str
    """'Kernel', 'Memcpy' or 'Memset'."""
    launch_us: float
    """Host time of the call that launched it (trace clock)."""
    ts_us: float
    dur_us: float
    node: str
    """The node that launched it ('' outside every node)."""
    stream: str

    @property
    def copy(self) -> bool:
        return self.category != "Kernel"

    @property
    def owned(self) -> bool:
        return self.node != ""


@dataclass(frozen=True, slots=True)
class DeviceRun:
    """The GPU's side of one run (CUPTI times), microseconds.

    ``busy_us``: the union of its GPU intervals (kernels, copies, memsets), so work that
    overlapped counts once; ``span_us``: from the first GPU start to the last GPU end
    (busy / span is how much of that time the GPU worked); ``copy_us``: copies and memsets
    added up; ``unowned_us``: GPU time launched outside every node.
    """

    run: int
    busy_us: float
    span_us: float
    copy_us: float
    unowned_us: float


def _device_runs(work: Sequence[DeviceEvent], runs: Sequence[RunSpan]) -> tuple[DeviceRun, ...]:
    """Per-run GPU figures; work belongs to the run whose span holds its launch (1 µs slack)."""
    starts = [r.ts_us for r in runs]
    by_run: dict[int, list[DeviceEvent]] = {}
    for w in work:
        i = bisect.bisect_right(starts, w.launch_us + 1.0) - 1
        if i >= 0 and w.launch_us <= runs[i].end_us + 1.0:
            by_run.setdefault(i, []).append(w)
    out = []
    for i, items in sorted(by_run.items()):
        intervals = sorted((w.ts_us, w.ts_us + w.dur_us) for w in items)
        busy, cur_start, cur_end = 0.0, intervals[0][0], intervals[0][1]
        for start, end in intervals[1:]:
            if start > cur_end:
                busy += cur_end - cur_start
                cur_start, cur_end = start, end
            else:
                cur_end = max(cur_end, end)
        busy += cur_end - cur_start
        span = max(e for _, e in intervals) - intervals[0][0]
        out.append(
            DeviceRun(
                i,
                busy,
                span,
                sum(w.dur_us for w in items if w.copy),
                sum(w.dur_us for w in items if not w.owned),
            )
        )
    return tuple(out)


def _with_depth(kernels: Sequence[KernelEvent]) -> tuple[KernelEvent, ...]:
    """Kernels in time order, each with its nesting depth inside earlier kernels of its thread."""
    ordered = sorted(kernels, key=lambda k: (k.run, k.ts_us, -k.dur_us))
    open_ends: dict[tuple[int, int], list[float]] = {}
    out = []
    for k in ordered:
        stack = open_ends.setdefault((k.run, k.tid), [])
        while stack and stack[-1] <= k.ts_us:
            stack.pop()
        nested = bool(stack) and k.ts_us + k.dur_us <= stack[-1] + 1.0
        if stack and not nested:
            stack.clear()
        out.append(replace(k, depth=len(stack)) if stack else k)
        stack.append(k.ts_us + k.dur_us)
    return tuple(out)


@dataclass
class _KernelTotals:
    """One kernel's figures while the measured runs are read."""

    first: KernelEvent
    calls: int = 0
    total_us: float = 0.0
    order: int = 0
    by_run: dict[int, float] = field(default_factory=dict)


def kernel_stats(trace: Trace) -> tuple[KernelStat, ...]:
    """Per-kernel totals and per-run times over the measured runs, in order of first execution
    within a run."""
    run_ids = [r.index for r in trace.measured_runs]
    acc: dict[str, _KernelTotals] = {}
    counters: dict[int, int] = {}
    for k in trace.measured_kernels:
        position = counters.get(k.run, 0)
        counters[k.run] = position + 1
        totals = acc.get(k.name)
        if totals is None:
            totals = acc[k.name] = _KernelTotals(k, order=position)
        us = k.device_us if k.device_us is not None else k.dur_us
        totals.calls += 1
        totals.total_us += us
        totals.order = min(totals.order, position)
        totals.by_run[k.run] = totals.by_run.get(k.run, 0.0) + us
    stats = [
        KernelStat(
            name=t.first.name,
            op_type=t.first.op_type,
            provider=t.first.provider,
            calls=t.calls,
            runs=len(run_ids),
            total_us=t.total_us,
            order=t.order,
            input_shapes=t.first.input_shapes,
            output_shapes=t.first.output_shapes,
            nested=t.first.depth > 0,
            per_run_us=tuple(t.by_run.get(i, 0.0) for i in run_ids),
        )
        for t in acc.values()
    ]
    return tuple(sorted(stats, key=lambda s: (s.order, s.name)))


def clean_chrome_trace(trace: Trace, *, process_name: str = "onnxruntime") -> dict[str, Any]:
    """A Chrome trace of the measured runs only, for Perfetto or chrome://tracing.

    One process; threads renumbered 0, 1, ... in order of appearance (runs on thread 0, where
    the first kernel ran, so kernels nest under their run); times rebased so the
    first measured run starts at 0; kernel names without the ``_kernel_time`` suffix and with
    their op type, provider and shapes as args. GPU events (CUPTI), when the trace has them,
    go on one thread per CUDA stream ("GPU stream N", tids from 1000), with the node that
    launched each and its launch time as args.
    """
    runs = trace.measured_runs
    origin = runs[0].ts_us if runs else 0.0
    tids: dict[int, int] = {}
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": 1, "tid": 0, "name": "process_name", "args": {"name": process_name}},
    ]
    for r in runs:
        events.append(
            {
                "ph": "X",
                "cat": "Session",
                "name": "model_run",
                "pid": 1,
                "tid": 0,
                "ts": r.ts_us - origin,
                "dur": r.dur_us,
                "args": {"run": r.index - trace.skipped_runs},
            }
        )
    for k in trace.measured_kernels:
        tid = tids.setdefault(k.tid, len(tids))
        args: dict[str, Any] = {"op_type": k.op_type, "provider": k.provider}
        if k.input_shapes:
            args["input_shapes"] = [list(s) for s in k.input_shapes]
        if k.output_shapes:
            args["output_shapes"] = [list(s) for s in k.output_shapes]
        if k.device_us is not None:
            args["device_us"] = k.device_us
        events.append(
            {
                "ph": "X",
                "cat": "Node",
                "name": k.name,
                "pid": 1,
                "tid": tid,
                "ts": k.ts_us - origin,
                "dur": k.dur_us,
                "args": args,
            }
        )
    last_end = max((r.end_us for r in runs), default=origin) + 1.0
    streams: dict[str, int] = {}
    for g in trace.gpu:
        if not runs or g.launch_us < origin - 1.0 or g.launch_us > last_end:
            continue  # a warm-up run's
        tid = streams.setdefault(g.stream, 1000 + len(streams))
        gpu_args: dict[str, Any] = {"node": g.node, "launch_ts": g.launch_us - origin}
        events.append(
            {
                "ph": "X",
                "cat": g.category,
                "name": g.name,
                "pid": 1,
                "tid": tid,
                "ts": g.ts_us - origin,
                "dur": g.dur_us,
                "args": gpu_args,
            }
        )
    labels = {0: "main"} | {tid: f"thread {original}" for original, tid in tids.items() if tid}
    labels |= {tid: f"GPU stream {stream}" for stream, tid in streams.items()}
    for tid, label in labels.items():
        events.append(
            {"ph": "M", "pid": 1, "tid": tid, "name": "thread_name", "args": {"name": label}}
        )
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_chrome_trace(
    trace: Trace, path: str | os.PathLike[str], *, process_name: str = "onnxruntime"
) -> None:
    """Write ``clean_chrome_trace`` to ``path`` (OutputError when the path cannot be written)."""
    from onnxcost.load.outputs import write_atomic

    write_atomic(path, json.dumps(clean_chrome_trace(trace, process_name=process_name)))
