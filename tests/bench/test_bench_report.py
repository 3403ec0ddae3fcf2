"""The JSON contract of BenchResult and the table / markdown / CSV renderers (no onnxruntime)."""

from __future__ import annotations

import csv
import dataclasses
import io

import pytest
from onnxcost_testing import key_paths
from rich.console import Console

from onnxcost.bench.inputs import InputSpec
from onnxcost.bench.join import NodeProfile, OpTypeProfile
from onnxcost.bench.memory import MemoryUse
from onnxcost.bench.result import BenchResult, Environment, Memory, Phases, ProfileResult, Settings
from onnxcost.bench.roofline import Ceilings, ModelRoofline
from onnxcost.bench.sweep import BatchPoint, MaxBatch, Probe
from onnxcost.bench.timing import LatencyStats
from onnxcost.report.bench import render_table, to_csv, to_markdown

LAT = LatencyStats.from_ns([2_000_000, 2_000_000, 4_000_000])


def result(*, profile: bool = True) -> BenchResult:
    nodes = (
        NodeProfile(
            "conv1+relu1",
            "Conv+Relu",
            "CPUExecutionProvider",
            ("conv1",),
            ("FusedConv",),
            ("conv1", "relu1"),
            "fused",
            1,
            1500.0,
            0.75,
            1000,
            2_100_000,
            4000,
            2000,
            ((1, 3, 8, 8),),
            ((1, 4, 8, 8),),
            floor_us=1050.0,
            bound="compute",
        ),
        NodeProfile(
            "ReorderOutput",
            "ReorderOutput",
            "CPUExecutionProvider",
            ("ReorderOutput",),
            ("nchwc.ReorderOutput",),
            (),
            "inserted",
            1,
            500.0,
            0.25,
            0,
            0,
            0,
            0,
            (),
            (),
        ),
    )
    ops = (
        OpTypeProfile("FusedConv", 1, 1, 1500.0, 0.75, 0.75),
        OpTypeProfile("nchwc.ReorderOutput", 1, 1, 500.0, 0.25, 1.0),
    )
    prof = ProfileResult(nodes, ops, 10, 3, 2100.0, 2000.0, False, "optimized_graph", ("bn1",))
    ceilings = Ceilings(2e9, 1e9, "CPUExecutionProvider", "test CPU")
    return BenchResult(
        model="m.onnx",
        provider="CPUExecutionProvider",
        environment=Environment(
            "1.31.1", ("CPUExecutionProvider",), "test CPU", None, None, 2, None, 2, "3.11", "Linux"
        ),
        inputs=(InputSpec("x", "float32", (4, 3, 8, 8)),),
        phases=Phases(12.5, 3.25, 40.0, 0.008),
        latency=LAT,
        runs=3,
        warmup=10,
        batch=4,
        settings=Settings("all", (), False, False, False, "random (seed 0)"),
        memory=Memory(100.0, None),
        profile=prof if profile else None,
        roofline=ModelRoofline(ceilings, 1.0, LAT.median_ms),
        sweep=(BatchPoint(1, LAT, 3, 0.006), BatchPoint(8, LAT, 3, 0.012)),
        max_batch=MaxBatch(
            (Probe(1, True, 500.0, 2.0), Probe(2, False, detail="out of memory")), 64
        ),
        warnings=("latency varies a lot",),
    )


LATENCY = ["min", "mean", "median", "p90", "p95", "p99", "max", "std"]
BENCH = [
    "schema",
    "model",
    "provider",
    "environment",
    *(f"environment.{k}" for k in ("onnxruntime_version", "providers_available", "cpu", "gpu")),
    "environment.gpu_driver",
    "environment.threads",
    *(f"environment.threads.{k}" for k in ("intra_op", "inter_op", "logical_cpus")),
    "environment.python",
    "environment.platform",
    "inputs",
    *(f"inputs[].{k}" for k in ("name", "dtype", "shape")),
    "phases",
    *(f"phases.{k}" for k in ("session_create_ms", "first_run_ms", "warmup_ms", "timed_s")),
    "latency_ms",
    *(f"latency_ms.{k}" for k in LATENCY),
    "runs",
    "warmup",
    "batch",
    "throughput_per_s",
    "throughput_method",
    "cv",
    "noisy",
    "noisy_cv_threshold",
    "settings",
    *(f"settings.{k}" for k in ("opt_level", "provider_options", "io_binding", "include_copies")),
    "settings.cuda_graph",
    "settings.inputs_source",
    "memory",
    "memory.host_peak_rss_mb",
    "memory.gpu_used_delta_mb",
    *(f"memory.{k}" for k in ("weights_estimate_bytes", "weights_measured_bytes", "weights_ratio")),
    *(f"memory.{k}" for k in ("activations_estimate_bytes", "run_peak_measured_bytes")),
    *(
        f"memory.{k}"
        for k in ("run_peak_ratio", "run_peak_method", "device_weights_measured_bytes")
    ),
    *(f"memory.{k}" for k in ("device_run_peak_measured_bytes", "arena_planned_bytes")),
    "memory.arena_note",
    "warnings",
    "nodes",
    *(f"nodes[].{k}" for k in ("name", "op_type", "provider", "calls", "mean_us", "median_us")),
    *(f"nodes[].{k}" for k in ("p10_us", "p90_us", "share", "macs", "flops", "gflops_per_s")),
    *(f"nodes[].{k}" for k in ("gbytes_per_s", "bound", "bytes_read", "bytes_written")),
    *(f"nodes[].{k}" for k in ("arithmetic_intensity", "floor_us", "efficiency")),
    *(f"nodes[].{k}" for k in ("efficiency_suspect", "mapping", "kernels", "kernel_op_types")),
    *(f"nodes[].{k}" for k in ("sources", "input_shapes", "output_shapes")),
    "by_op_type",
    *(f"by_op_type[].{k}" for k in ("op_type", "count", "mean_us", "median_us", "p10_us")),
    *(f"by_op_type[].{k}" for k in ("p90_us", "share", "cumulative_share", "calls")),
    "profile",
    *(f"profile.{k}" for k in ("runs", "warmup_runs", "run_mean_us", "run_median_us")),
    *(f"profile.{k}" for k in ("kernel_sum_us", "node_time", "coverage", "host_launch_times")),
    *(f"profile.{k}" for k in ("mapped_with", "untimed_nodes", "note", "trace")),
    *(f"profile.{k}" for k in ("latency_median_us", "latency_coverage", "device_busy_us")),
    *(f"profile.{k}" for k in ("device_span_us", "device_utilization", "device_copy_us")),
    *(f"profile.{k}" for k in ("device_unowned_us", "device_coverage", "host_node_us")),
    "roofline",
    "roofline.ceilings",
    *(f"roofline.ceilings.{k}" for k in ("peak_flops_per_s", "bandwidth_bytes_per_s", "provider")),
    *(f"roofline.ceilings.{k}" for k in ("device", "dtype", "onnxruntime_version", "measured_at")),
    *(f"roofline.{k}" for k in ("floor_ms", "measured_ms", "efficiency", "efficiency_suspect")),
    *(f"roofline.{k}" for k in ("ceilings_from_cache", "cache_path")),
    "sweep",
    *(f"sweep[].{k}" for k in ("batch", "runs", "latency_ms")),
    *(f"sweep[].latency_ms.{k}" for k in LATENCY),
    *(f"sweep[].{k}" for k in ("throughput_per_s", "from_main_run")),
    "max_batch",
    *(f"max_batch.{k}" for k in ("limit", "largest_ok", "hit_limit", "best_batch")),
    *(f"max_batch.{k}" for k in ("best_throughput_per_s", "probes")),
    *(f"max_batch.probes[].{k}" for k in ("batch", "ok", "throughput_per_s", "median_ms")),
    "max_batch.probes[].detail",
    "max_batch.probes[].rss_bytes",
    *(f"max_batch.{k}" for k in ("estimate", "estimate_note", "estimate_error")),
]
"""``onnxcost.bench/1`` in order, as the contract defines it."""


def test_json_contract_keys() -> None:
    use = MemoryUse(1000, 2000, 1100, 2500, "VmHWM reset")
    full = dataclasses.replace(result(), memory=Memory(100.0, None, use))
    d = full.to_dict()
    assert key_paths(d, frozenset({"settings.provider_options"})) == BENCH
    assert d["schema"] == "onnxcost.bench/1"
    assert d["inputs"] == [{"name": "x", "dtype": "float32", "shape": [4, 3, 8, 8]}]
    # weights 1,100 measured / 1,000 estimated = 1.1; run peak 2,500 / 2,000 = 1.25
    assert (d["memory"]["weights_ratio"], d["memory"]["run_peak_ratio"]) == (1.1, 1.25)
    # The spread of a row with no per-run times is its mean: p10 = p90 = 1,500 us.
    assert (d["nodes"][0]["p10_us"], d["nodes"][0]["p90_us"]) == (1500.0, 1500.0)
    # Without a profile, a roofline, a sweep, a max-batch search or a memory estimate, their
    # keys are left out; the ones before stay in order.
    bare = dataclasses.replace(
        result(profile=False), roofline=None, sweep=(), max_batch=None
    ).to_dict()
    memory_end = BENCH.index("memory.gpu_used_delta_mb") + 1
    assert key_paths(bare, frozenset({"settings.provider_options"})) == [
        *BENCH[:memory_end],
        "warnings",
    ]


def test_json_figures() -> None:
    d = result().to_dict()
    # batch / median latency: runs of 2, 2, 4 ms -> median 2 ms; 4 x 1000 / 2 = 2000 samples/s.
    assert d["throughput_per_s"] == pytest.approx(2000.0)
    assert d["throughput_method"] == "batch / median latency"
    node = d["nodes"][0]
    # 2.1e6 FLOPs in 1500 us: 2.1e6 / 1.5e6 = 1.4 GFLOP/s; 6000 bytes / 1.5e6 = 0.004 GB/s.
    assert node["gflops_per_s"] == pytest.approx(1.4)
    assert node["gbytes_per_s"] == pytest.approx(0.004)
    # floor 1050 us / 1500 us measured.
    assert node["efficiency"] == pytest.approx(0.7)
    assert d["nodes"][1]["gflops_per_s"] is None
    # kernels 2000 us of 2100 us per run.
    assert d["profile"]["coverage"] == pytest.approx(2000 / 2100)
    assert d["max_batch"]["best_batch"] == 1
    assert d["roofline"]["efficiency"] == pytest.approx(1.0 / 2.0)


def test_render_table() -> None:
    console = Console(record=True, width=200)
    render_table(result(), console)
    text = console.export_text()
    for needle in (
        "CPUExecutionProvider",
        "conv1+relu1",
        "fused",
        "1.500",
        "75.00%",
        "1.40",
        "compute",
        "70.00%",
        "nchwc.ReorderOutput",
        "100.00%",
        "Batch sweep",
        "out of memory",
        "bn1",
        "warning: latency varies a lot",
    ):
        assert needle in text, needle


def test_render_table_cuts_to_top() -> None:
    console = Console(record=True, width=200)
    render_table(result(), console, top=1)
    text = console.export_text()
    assert "conv1+relu1" in text
    assert "1 more rows" in text


def test_markdown() -> None:
    md = to_markdown(result())
    assert md.startswith("## Benchmark: m.onnx\n")
    assert (
        "| conv1+relu1 | Conv+Relu | FusedConv | fused | CPU | 1 | 1.500 | 1.500-1.500 | 75.00% | 75.00% "
        "| 1.40 | 0.00 "
        "| compute | 70.00% | 1x4x8x8 |" in md
    )
    # the inserted row: 25 % of the time, cumulative 75 + 25 = 100 %.
    assert (
        "| ReorderOutput | ReorderOutput | nchwc.ReorderOutput | inserted | CPU | 1 | 0.500 | 0.500-0.500 "
        "| 25.00% | 100.00% |" in md
    )
    assert "| nchwc.ReorderOutput | 1 | 0.500 | 25.00% | 100.00% | 1 |" in md
    assert "### Batch sweep" in md


def test_csv_tables() -> None:
    nodes = list(csv.DictReader(io.StringIO(to_csv(result()))))
    assert [r["name"] for r in nodes] == ["conv1+relu1", "ReorderOutput"]
    assert nodes[0]["flops"] == "2100000"
    assert nodes[0]["gflops_per_s"] == "1.4"
    summary = list(csv.DictReader(io.StringIO(to_csv(result(), "summary"))))
    assert [r["batch"] for r in summary] == ["4", "1", "8"]
    # batch 8 / median 2 ms = 8 x 1000 / 2 = 4000.
    assert summary[2]["throughput_per_s"] == "4000.00"
    assert [r["batch"] for r in csv.DictReader(io.StringIO(to_csv(result(), "sweep")))] == [
        "1",
        "8",
    ]
    ops = list(csv.DictReader(io.StringIO(to_csv(result(), "op_types"))))
    assert ops[1]["cumulative_share"] == "1.000000"
    assert to_csv(result(profile=False), "nodes") == ""
    assert to_csv(result(profile=False)).startswith("model,provider,batch")


def test_html_has_the_max_batch_search() -> None:
    from onnxcost.report.html import bench_html

    page = bench_html(result())
    # probes: batch 1 ran at 500 samples/s, batch 2 ran out of memory; no estimate was made
    assert "<h2>Max batch</h2>" in page
    assert "out of memory" in page
    assert "Largest batch that ran: 1; best throughput at batch 1 (500.00 samples/s)." in page
    assert "Estimate from the formulas: none (not made)." in page
    assert "<h2>Max batch</h2>" not in bench_html(dataclasses.replace(result(), max_batch=None))
