"""The trace parser, offline, on real onnxruntime 1.31 traces (tests/data/ort_traces/capture.py).

Each trace holds 6 runs: 1 first + 2 warm-up + 3 measured, so the tests parse with skip_runs=3.
Durations quoted in comments are read from the trace files (microseconds).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from onnxcost.bench.profile import (
    clean_chrome_trace,
    kernel_stats,
    parse_trace,
    read_trace,
    write_chrome_trace,
)
from onnxcost.errors import BenchError, OutputError

Events = Callable[[str], list[dict[str, Any]]]


def test_runs_and_kernels_split_by_model_run(events: Events) -> None:
    trace = parse_trace(events("cbr_all"), skip_runs=3)
    assert len(trace.runs) == 6
    assert len(trace.measured_runs) == 3
    # 3 kernels (r1_nchwc, y_nchwc, ReorderOutput) x 6 runs; 3 x 3 measured.
    assert len(trace.kernels) == 18
    assert len(trace.measured_kernels) == 9
    assert [k.run for k in trace.kernels[:3]] == [0, 0, 0]
    assert trace.fence_events == 0
    assert trace.outside_runs == 0
    assert trace.memory_args
    # model_run durs of runs 3, 4, 5: 99, 92, 91 -> mean 282 / 3 = 94.
    assert trace.run_mean_us == pytest.approx(94.0)
    # run 3: 20 + 48 + 8 = 76.
    assert trace.kernel_sum_us(3) == pytest.approx(76.0)


def test_warmup_runs_are_dropped(events: Events) -> None:
    measured = {s.name: s for s in kernel_stats(parse_trace(events("cbr_all"), skip_runs=3))}
    every = {s.name: s for s in kernel_stats(parse_trace(events("cbr_all"), skip_runs=0))}
    # r1_nchwc durs by run: 169, 24, 18 | 20, 18, 18. Measured: 56 / 3 runs; all: 267 / 6 runs.
    assert measured["r1_nchwc"].total_us == pytest.approx(56.0)
    assert measured["r1_nchwc"].mean_us == pytest.approx(56.0 / 3)
    assert every["r1_nchwc"].mean_us == pytest.approx(267.0 / 6)
    assert measured["r1_nchwc"].calls == 3
    assert measured["r1_nchwc"].runs == 3
    assert measured["r1_nchwc"].calls_per_run == 1.0


def test_kernel_stats_fields_and_order(events: Events) -> None:
    stats = kernel_stats(parse_trace(events("cbr_all"), skip_runs=3))
    assert [s.name for s in stats] == ["r1_nchwc", "y_nchwc", "ReorderOutput"]
    assert [s.order for s in stats] == [0, 1, 2]
    assert [s.op_type for s in stats] == ["Conv", "Conv", "ReorderOutput"]
    assert {s.provider for s in stats} == {"CPUExecutionProvider"}
    # y_nchwc: 48 + 48 + 47 = 143; ReorderOutput: 8 + 8 + 7 = 23.
    assert stats[1].total_us == pytest.approx(143.0)
    assert stats[2].total_us == pytest.approx(23.0)
    first = stats[0]
    assert first.input_shapes == ((1, 3, 32, 32), (16, 3, 3, 3), (16,))
    assert first.output_shapes[0][0] == 1


def test_fence_events_are_dropped(events: Events) -> None:
    plain = kernel_stats(parse_trace(events("cbr_all"), skip_runs=3))
    fenced_trace = parse_trace(events("cbr_all_fences"), skip_runs=3)
    # one before and one after each of 3 kernels in 6 runs: 2 x 3 x 6 = 36.
    assert fenced_trace.fence_events == 36
    assert kernel_stats(fenced_trace) == plain


def test_trace_without_memory_args(events: Events) -> None:
    trace = parse_trace(events("cbr_all_nomem"), skip_runs=3)
    assert not trace.memory_args
    assert kernel_stats(trace) == kernel_stats(parse_trace(events("cbr_all"), skip_runs=3))


def test_real_trace_without_arena_args(events: Events) -> None:
    trace = parse_trace(events("cbr_basic_noarena"), skip_runs=3)
    stats = {s.name: s for s in kernel_stats(trace)}
    assert list(stats) == ["conv1", "relu1", "conv2", "relu2"]
    # conv2: 106 + 107 + 108 = 321 over 3 runs.
    assert stats["conv2"].mean_us == pytest.approx(107.0)
    # relu2: 5 + 6 + 5 = 16.
    assert stats["relu2"].total_us == pytest.approx(16.0)


def test_trace_without_args(events: Events) -> None:
    stats = kernel_stats(parse_trace(events("cbr_all_noargs"), skip_runs=3))
    assert [s.name for s in stats] == ["r1_nchwc", "y_nchwc", "ReorderOutput"]
    assert [s.op_type for s in stats] == ["", "", ""]
    assert [s.provider for s in stats] == ["", "", ""]
    assert stats[0].input_shapes == ()
    assert stats[0].total_us == pytest.approx(56.0)


def test_kernel_names_with_spaces_and_slashes(events: Events) -> None:
    stats = kernel_stats(parse_trace(events("emb_all"), skip_runs=3))
    assert [s.name for s in stats] == ["Gather_0", "fused MatMul_1/MatMulAddFusion"]
    assert [s.op_type for s in stats] == ["Gather", "FusedGemm"]
    # 4 + 4 + 4 in each.
    assert [s.total_us for s in stats] == [12.0, 12.0]


def test_read_trace_repairs_a_cut_list(tmp_path: Path) -> None:
    text = (
        (Path(__file__).resolve().parents[1] / "data/ort_traces/cbr_all.trace.json")
        .read_text()
        .rstrip()
    )
    assert text.endswith("]")
    cut = tmp_path / "cut.json"
    cut.write_text(text[:-1].rstrip() + ",\n")
    assert len(read_trace(cut)) == 32


def test_read_trace_accepts_trace_events_object(tmp_path: Path, events: Events) -> None:
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({"traceEvents": events("cbr_all"), "displayTimeUnit": "ms"}))
    assert len(read_trace(wrapped)) == 32


def test_read_trace_rejects_other_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("not json at all")
    with pytest.raises(BenchError, match="not a Chrome trace"):
        read_trace(bad)


def test_no_runs_or_only_warmup_is_an_error(events: Events) -> None:
    no_runs = [e for e in events("cbr_all") if e.get("cat") != "Session"]
    with pytest.raises(BenchError, match="no model_run"):
        parse_trace(no_runs)
    with pytest.raises(BenchError, match="all of them warm-up"):
        parse_trace(events("cbr_all"), skip_runs=6)


def test_executor_spans_stand_in_for_model_run(events: Events) -> None:
    without = [e for e in events("cbr_all") if e.get("name") != "model_run"]
    stats = kernel_stats(parse_trace(without, skip_runs=3))
    assert stats[0].total_us == pytest.approx(56.0)


def test_kernels_outside_runs_are_counted_and_dropped(events: Events) -> None:
    stray = {
        "cat": "Node",
        "name": "late_kernel_time",
        "ts": 999_999,
        "dur": 5,
        "pid": 1,
        "tid": 1,
        "ph": "X",
    }
    trace = parse_trace([*events("cbr_all"), stray], skip_runs=3)
    assert trace.outside_runs == 1
    assert all(k.name != "late" for k in trace.kernels)


def test_device_kernel_events_give_device_time() -> None:
    # A CUPTI build: each Node event is followed by the GPU kernels it launched.
    events = [
        {
            "cat": "Node",
            "name": "mm_kernel_time",
            "ts": 10,
            "dur": 3,
            "ph": "X",
            "args": {"op_name": "MatMul"},
        },
        {"cat": "Kernel", "name": "sgemm_128x64", "ts": 12, "dur": 40, "ph": "X"},
        {"cat": "Kernel", "name": "splitK_reduce", "ts": 52, "dur": 5, "ph": "X"},
        {
            "cat": "Node",
            "name": "relu_kernel_time",
            "ts": 14,
            "dur": 2,
            "ph": "X",
            "args": {"op_name": "Relu"},
        },
        {"cat": "Session", "name": "model_run", "ts": 9, "dur": 10, "ph": "X"},
        # a kernel outside every run, and the GPU kernel it launched: neither is kept
        {"cat": "Node", "name": "late_kernel_time", "ts": 90, "dur": 1, "ph": "X"},
        {"cat": "Kernel", "name": "late_gpu", "ts": 91, "dur": 7, "ph": "X"},
    ]
    trace = parse_trace(events)
    assert trace.device_events == 3
    assert trace.outside_runs == 1
    assert trace.has_device_times
    mm, relu = trace.kernels
    # 40 + 5 device microseconds behind a 3 us launch.
    assert mm.device_us == 45.0
    assert relu.device_us is None
    assert [s.total_us for s in kernel_stats(trace)] == [45.0, 2.0]


def test_clean_chrome_trace_keeps_measured_runs_only(events: Events, tmp_path: Path) -> None:
    trace = parse_trace(events("cbr_all"), skip_runs=3)
    clean = clean_chrome_trace(trace)
    xs = [e for e in clean["traceEvents"] if e["ph"] == "X"]
    runs = [e for e in xs if e["name"] == "model_run"]
    nodes = [e for e in xs if e["cat"] == "Node"]
    assert len(runs) == 3
    assert len(nodes) == 9
    assert [r["args"]["run"] for r in runs] == [0, 1, 2]
    # the first measured run starts at 14941 us in the raw trace: rebased to 0.
    assert runs[0]["ts"] == 0
    assert nodes[0]["ts"] == 14944 - 14941
    assert {e["pid"] for e in clean["traceEvents"]} == {1}
    assert {e["tid"] for e in xs} == {0}
    assert {e["name"] for e in nodes} == {"r1_nchwc", "y_nchwc", "ReorderOutput"}
    meta = {(e["name"], e["args"]["name"]) for e in clean["traceEvents"] if e["ph"] == "M"}
    assert ("process_name", "onnxruntime") in meta
    assert ("thread_name", "main") in meta
    out = tmp_path / "clean.json"
    write_chrome_trace(trace, out)
    assert json.loads(out.read_text()) == clean


def test_write_chrome_trace_to_a_bad_path(events: Events, tmp_path: Path) -> None:
    trace = parse_trace(events("cbr_all"), skip_runs=3)
    with pytest.raises(OutputError, match=r"cannot write .*t\.json"):
        write_chrome_trace(trace, tmp_path / "no" / "such" / "dir" / "t.json")


def test_kernels_inside_an_if_are_nested(events: Events) -> None:
    trace = parse_trace(events("if_all"), skip_runs=3)
    run3 = [k for k in trace.kernels if k.run == 3]
    assert [(k.name, k.depth) for k in run3] == [("the_if", 0), ("then_relu", 1), ("then_neg", 1)]
    # run 3: only the If kernel (14 us) is top level; its branch's 2 + 2 us are inside it.
    assert trace.kernel_sum_us(3) == pytest.approx(14.0)
    stats = {s.name: s for s in kernel_stats(trace)}
    assert not stats["the_if"].nested
    assert stats["then_relu"].nested
    # the_if: 14 + 14 + 18 over 3 runs.
    assert stats["the_if"].mean_us == pytest.approx(46 / 3)
