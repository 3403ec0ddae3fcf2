"""GPU times per node from CUPTI, offline: record layouts, the clock join, real H100 traces.

The ``*_cuda`` files under tests/data/ort_traces were captured on an NVIDIA H100 80GB HBM3
(onnxruntime-gpu 1.31.1, CUDA 13.0, libcupti 13.0.85) by ``capture_cuda.py``: onnxruntime's
own trace (host times) and what CUPTI recorded in the same runs. Every expected number below
is read from those files by hand (the arithmetic is in the comments).
"""

from __future__ import annotations

import ctypes
import json
import struct
from pathlib import Path
from typing import Any

import pytest

from onnxcost.bench.cupti import (
    KIND_CONCURRENT_KERNEL,
    KIND_MEMCPY,
    KIND_MEMSET,
    KIND_RUNTIME,
    SLACK_US,
    Activity,
    ApiCall,
    GpuActivity,
    _parse_record,
    _State,
    merge_activity,
)
from onnxcost.bench.profile import kernel_stats, parse_trace

TRACES = Path(__file__).resolve().parents[1] / "data" / "ort_traces"


def load(case: str) -> tuple[list[dict[str, Any]], Activity, int]:
    trace: list[dict[str, Any]] = json.loads((TRACES / f"{case}.trace.json").read_text())
    raw = json.loads((TRACES / f"{case}.cupti.json").read_text())
    activity = Activity(
        tuple(GpuActivity(**g) for g in raw["gpu"]),
        tuple(ApiCall(**c) for c in raw["calls"]),
        raw["offset_ns"],
    )
    return trace, activity, int(raw["profiling_start_ns"])


def merged(case: str) -> list[dict[str, Any]]:
    trace, activity, start = load(case)
    return merge_activity(trace, activity, start)


# --- record layouts ------------------------------------------------------------------------
# Offsets printed on the H100 machine with offsetof() against cupti_activity.h of
# nvidia-cuda-cupti 13.0.85 (CUpti_ActivityKernel10, CUpti_ActivityMemcpy6,
# CUpti_ActivityMemset4, CUpti_ActivityAPI):
#   kernel start 16 end 24 stream 48 corr 92 name 104
#   memcpy copyKind 4 bytes 8 start 16 end 24 stream 40 corr 44
#   memset bytes 8 start 16 end 24 stream 40 corr 44
#   api start 8 end 16 thread 28 corr 32


def _parse(record: bytes) -> _State:
    buf = ctypes.create_string_buffer(record, len(record))
    state = _State()
    _parse_record(state, ctypes.addressof(buf))
    return state


def test_kernel_record_layout() -> None:
    name = ctypes.create_string_buffer(b"my_kernel")
    rec = bytearray(128)
    struct.pack_into("<I", rec, 0, KIND_CONCURRENT_KERNEL)
    struct.pack_into("<QQ", rec, 16, 1_000, 5_000)
    struct.pack_into("<I", rec, 48, 7)
    struct.pack_into("<I", rec, 92, 42)
    struct.pack_into("<Q", rec, 104, ctypes.addressof(name))
    (g,) = _parse(bytes(rec)).gpu
    assert g == GpuActivity("Kernel", "my_kernel", 1_000, 5_000, 42, 7)


def test_memcpy_and_memset_record_layouts() -> None:
    rec = bytearray(80)
    struct.pack_into("<IB", rec, 0, KIND_MEMCPY, 2)  # copyKind 2 = DtoH
    struct.pack_into("<QQQ", rec, 8, 524_288, 10, 30)
    struct.pack_into("<II", rec, 40, 13, 99)
    (g,) = _parse(bytes(rec)).gpu
    assert g == GpuActivity("Memcpy", "Memcpy DtoH", 10, 30, 99, 13, 524_288, "DtoH")
    rec = bytearray(64)
    struct.pack_into("<I", rec, 0, KIND_MEMSET)
    struct.pack_into("<QQQ", rec, 8, 256, 40, 41)
    struct.pack_into("<II", rec, 40, 13, 100)
    (g,) = _parse(bytes(rec)).gpu
    assert g == GpuActivity("Memset", "Memset", 40, 41, 100, 13, 256)


def test_api_record_layout() -> None:
    rec = bytearray(40)
    struct.pack_into("<IIQQ", rec, 0, KIND_RUNTIME, 211, 100, 200)
    struct.pack_into("<III", rec, 24, 1, 77, 42)
    assert _parse(bytes(rec)).calls == [ApiCall(100, 200, 42, 77)]


# --- the join ------------------------------------------------------------------------------


def node_event(name: str, ts: float, dur: float) -> dict[str, Any]:
    return {"cat": "Node", "name": f"{name}_kernel_time", "ph": "X", "ts": ts, "dur": dur}


def activity_at(*launches_us: float, start_ns: int = 0) -> Activity:
    """One 1 µs kernel per launch time (µs after profiling start; offset 0)."""
    gpu = tuple(
        GpuActivity("Kernel", f"k{i}", int(t * 1e3) + 500, int(t * 1e3) + 1_500, i, 7)
        for i, t in enumerate(launches_us)
    )
    calls = tuple(
        ApiCall(int(t * 1e3), int(t * 1e3) + 100, i, 1) for i, t in enumerate(launches_us)
    )
    return Activity(gpu, calls, 0)


def owners(events: list[dict[str, Any]]) -> list[str]:
    return [e["args"]["node"] for e in events if e.get("cat") == "Kernel"]


def test_a_launch_belongs_to_the_span_around_it_within_the_slack() -> None:
    events = [node_event("a", 100, 10), node_event("b", 120, 10)]
    # 105: inside a; 100 - 1.5: 1.5 µs before a, within the 2 µs slack; 115: 5 µs after a
    # and 5 before b, beyond the slack of both; 131.9: 1.9 µs after b ends (130)
    out = merge_activity(events, activity_at(105, 100 - 1.5, 115, 131.9), 0)
    assert SLACK_US == 2.0
    assert owners(out) == ["a", "a", "b", ""]
    # the owned kernels follow their node's event in GPU start order (k1 started at 99.0 µs,
    # k0 at 105.5); the unowned one goes at the end
    names = [e["name"] for e in out]
    assert names == ["a_kernel_time", "k1", "k0", "b_kernel_time", "k3", "k2"]


def test_nested_spans_give_the_launch_to_the_innermost() -> None:
    # an If kernel 0-100 with a branch node 40-60 inside it
    events = [node_event("if", 0, 100), node_event("branch", 40, 20)]
    out = merge_activity(events, activity_at(50, 20, 99), 0)
    kernels = [e["name"] for e in out if e.get("cat") == "Kernel"]
    assert sorted(zip(owners(out), kernels, strict=True)) == [
        ("branch", "k0"),
        ("if", "k1"),
        ("if", "k2"),
    ]


def test_gpu_times_are_put_on_the_trace_clock() -> None:
    # CUPTI's clock is 2,000 ns ahead of the system clock; profiling started at 1,000,000 ns.
    # A kernel from 1,052,500 to 1,054,000 CUPTI ns is at (1,052,500 - 2,000 - 1,000,000) / 1000
    # = 50.5 µs for 1.5 µs; its launch at 1,051,000 is at 49.0 µs, inside node a (45-60).
    gpu = (GpuActivity("Kernel", "k", 1_052_500, 1_054_000, 1, 7),)
    calls = (ApiCall(1_051_000, 1_051_500, 1, 3),)
    out = merge_activity([node_event("a", 45, 15)], Activity(gpu, calls, 2_000), 1_000_000)
    k = out[1]
    assert (k["ts"], k["dur"], k["args"]["launch_ts"], k["args"]["node"]) == (50.5, 1.5, 49.0, "a")


# --- real traces ---------------------------------------------------------------------------


def test_h100_kernels_are_joined_to_their_nodes() -> None:
    trace = parse_trace(merged("cbr_cuda"), skip_runs=0)
    # 3 runs x 5 kernels (conv1: cuDNN's implicit GEMM + a generic tensor op for the bias;
    # relu1; conv2: one xmma kernel; relu2): 15 GPU records, all inside a node
    assert (len(trace.runs), trace.device_events, trace.unowned_device_us) == (3, 15, 0.0)
    assert not trace.copy_events
    stats = {s.name: s for s in kernel_stats(trace)}
    # run 0, from cbr_cuda.cupti.json (end_ns - start_ns):
    # conv1 = 1795406444640497600 - ...640493568 = 4,032 ns + (...640505153 - ...640502465 =
    # 2,688 ns) = 6.720 µs; relu1 = ...640519393 - ...640517985 = 1.408 µs;
    # conv2 = ...640546626 - ...640539458 = 7.168 µs; relu2 = ...640558018 - ...640556546 = 1.472 µs
    assert stats["conv1"].per_run_us[0] == pytest.approx(6.720)
    assert stats["relu1"].per_run_us[0] == pytest.approx(1.408)
    assert stats["conv2"].per_run_us[0] == pytest.approx(7.168)
    assert stats["relu2"].per_run_us[0] == pytest.approx(1.472)
    assert {s.provider for s in stats.values()} == {"CUDAExecutionProvider"}
    # the GPU time is not the host time: conv1's host span in run 0 is 28 µs
    assert next(k.dur_us for k in trace.kernels if k.name == "conv1") == 28
    # relu1's kernel was launched at 189,498.427 µs on the trace clock
    # ((1795406444640512008 - 2389 - 1795406444451011192) / 1000), 0.573 µs before the
    # whole-µs start onnxruntime wrote (189,499): joined through the slack
    relu1 = [e for e in merged("cbr_cuda") if e.get("args", {}).get("correlation") == 1287]
    assert relu1[0]["args"]["launch_ts"] == pytest.approx(189498.427)
    assert relu1[0]["args"]["node"] == "relu1"


def test_h100_busy_time_and_span_per_run() -> None:
    trace = parse_trace(merged("cbr_cuda"), skip_runs=0)
    run0 = trace.device_runs[0]
    # busy: the five kernels do not overlap (one stream): 6.720 + 1.408 + 7.168 + 1.472 = 16.768
    assert run0.busy_us == pytest.approx(16.768)
    # span: first start 1795406444640493568 to last end ...640558018 = 64,450 ns
    assert run0.span_us == pytest.approx(64.450)
    assert trace.kernel_sum_us(0) == pytest.approx(16.768)


def test_h100_memcpy_events() -> None:
    trace = parse_trace(merged("cbr_cuda_copies"), skip_runs=0)
    copies = [e for e in merged("cbr_cuda_copies") if e.get("cat") == "Memcpy"]
    # host arrays in and out: per run one HtoD of x (8x3x32x32 float32 = 98,304 B) and one
    # DtoH of y (8x16x32x32 float32 = 524,288 B), made by the run itself outside every node
    assert [(e["args"]["copy_kind"], e["args"]["bytes"]) for e in copies] == [
        ("HtoD", 98_304),
        ("DtoH", 524_288),
    ] * 3
    assert {e["args"]["node"] for e in copies} == {""}
    assert trace.copy_events == 6
    # run 0: 4,384 ns + 14,240 ns = 18.624 µs of copies, none of it in a node's time
    assert trace.device_runs[0].copy_us == pytest.approx(18.624)
    assert trace.device_runs[0].unowned_us == pytest.approx(18.624)
    stats = {s.name: s for s in kernel_stats(trace)}
    assert stats["conv2"].per_run_us[0] == pytest.approx(7.200)  # not the copies


def test_residual_block_on_the_gpu() -> None:
    trace = parse_trace(merged("res_cuda"), skip_runs=0)
    stats = {s.name: s for s in kernel_stats(trace)}
    # onnxruntime's CUDA provider fuses nothing here: five nodes, one kernel each
    assert list(stats) == ["conv_a", "relu_a", "conv_b", "add", "relu_out"]
    assert all(s.calls == 3 for s in stats.values())
    assert trace.unowned_device_us == 0.0


def mixed_run() -> list[dict[str, Any]]:
    """One run: Reshape on CUDA (launches nothing), Shape on the CPU (4 µs on the host),
    MatMul on CUDA with one 50 µs GPU kernel (40 to 90 µs)."""
    return [
        {"cat": "Session", "name": "model_run", "ph": "X", "ts": 0, "dur": 100},
        {
            "cat": "Node",
            "name": "reshape_kernel_time",
            "ph": "X",
            "ts": 10,
            "dur": 5,
            "args": {"op_name": "Reshape", "provider": "CUDAExecutionProvider"},
        },
        {
            "cat": "Node",
            "name": "shape_kernel_time",
            "ph": "X",
            "ts": 20,
            "dur": 4,
            "args": {"op_name": "Shape", "provider": "CPUExecutionProvider"},
        },
        {
            "cat": "Node",
            "name": "mm_kernel_time",
            "ph": "X",
            "ts": 30,
            "dur": 6,
            "args": {"op_name": "MatMul", "provider": "CUDAExecutionProvider"},
        },
        {"cat": "Kernel", "name": "gemm", "ph": "X", "ts": 40, "dur": 50, "args": {"node": "mm"}},
    ]


def test_a_gpu_node_that_launched_nothing_took_no_gpu_time() -> None:
    trace = parse_trace(mixed_run())
    times = {k.name: k.device_us for k in trace.kernels}
    # Reshape on CUDA launched nothing: 0 GPU time; Shape ran on the CPU: host time stays (None)
    assert times == {"reshape": 0.0, "shape": None, "mm": 50}
    # the run: 0 + 4 (the CPU node's host time) + 50 = 54 µs
    assert trace.kernel_sum_us(0) == 54


def test_the_cleaned_trace_keeps_gpu_events_and_times() -> None:
    from onnxcost.bench.profile import clean_chrome_trace

    trace = parse_trace(merged("cbr_cuda"), skip_runs=1)
    cleaned = clean_chrome_trace(trace)["traceEvents"]
    kernels = [e for e in cleaned if e.get("cat") == "Kernel"]
    # runs 1 and 2 are kept: 2 x 5 kernels, on one thread for the CUDA provider's stream
    # (stream 45 in every record of cbr_cuda.cupti.json)
    assert len(kernels) == 10
    assert {e["args"]["node"] for e in kernels} == {"conv1", "relu1", "conv2", "relu2"}
    names = {e["tid"]: e["args"]["name"] for e in cleaned if e.get("name") == "thread_name"}
    assert {names[e["tid"]] for e in kernels} == {"GPU stream 45"}
    # read back: the same per-node GPU times, counted once (the node events carry them in
    # args.device_us and the GPU events name their node)
    again = parse_trace(cleaned)
    before = {s.name: [round(t, 3) for t in s.per_run_us] for s in kernel_stats(trace)}
    after = {s.name: [round(t, 3) for t in s.per_run_us] for s in kernel_stats(again)}
    # conv1 in runs 1 and 2: 4.064 + 2.656 = 6.720 and 4.064 + 2.624 = 6.688 µs
    assert after == before
    assert after["conv1"] == [6.720, 6.688]
    assert again.has_device_times
    assert [round(d.busy_us, 3) for d in again.device_runs] == [
        round(d.busy_us, 3) for d in trace.device_runs[1:]
    ]


def test_host_time_of_cpu_nodes_is_counted_apart() -> None:
    trace = parse_trace(mixed_run())
    assert trace.host_node_median_us == 4
    assert trace.device_median("busy_us") == 50
    # the GPU span: the one kernel, 40 to 90
    assert trace.device_median("span_us") == 50


def test_a_drifting_clock_offset_is_interpolated() -> None:
    # readings: at CUPTI 1,000,000 ns the offset was 0; at 2,000,000 ns it was 10,000 ns.
    # A call at 1,500,000 ns gets the offset halfway, 5,000 ns: (1,500,000 - 5,000 - 0) / 1000
    # = 1,495 µs on the trace clock; before the first reading the first offset holds, after
    # the last the last: 900,000 -> 900 µs, 2,100,000 -> 2,090 µs.
    act = Activity((), (), 10_000, 0, ((1_000_000, 0), (2_000_000, 10_000)))
    assert act.offset_at(1_500_000) == 5_000
    assert (act.offset_at(900_000), act.offset_at(2_100_000)) == (0, 10_000)
    gpu = (GpuActivity("Kernel", "k", 1_500_500, 1_501_500, 1, 7),)
    calls = (ApiCall(1_500_000, 1_500_100, 1, 3),)
    events = [node_event("a", 1_494, 2)]
    out = merge_activity(events, Activity(gpu, calls, 10_000, 0, act.clock), 0)
    # with the offset read only at the end (10,000 ns) the launch would be at 1,490 µs,
    # outside node a (1,494-1,496) by more than the slack
    assert out[1]["args"]["launch_ts"] == 1_495.0
    assert out[1]["args"]["node"] == "a"
