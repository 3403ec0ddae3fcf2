"""The JSON contract of BenchResult and the table / markdown / CSV renderers (no onnxruntime)."""

from __future__ import annotations

import csv
import io

import pytest
from rich.console import Console

from onnxcost.bench.inputs import InputSpec
from onnxcost.bench.join import NodeProfile, OpTypeProfile
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


def test_json_contract_keys() -> None:
    d = result().to_dict()
    for key in (
        "schema",
        "model",
        "provider",
        "environment",
        "inputs",
        "phases",
        "latency_ms",
        "runs",
        "warmup",
        "batch",
        "throughput_per_s",
        "nodes",
        "by_op_type",
    ):
        assert key in d
    assert d["schema"] == "onnxcost.bench/1"
    assert set(d["environment"]) >= {
        "onnxruntime_version",
        "providers_available",
        "cpu",
        "gpu",
        "gpu_driver",
        "threads",
    }
    assert d["inputs"] == [{"name": "x", "dtype": "float32", "shape": [4, 3, 8, 8]}]
    assert set(d["phases"]) >= {"session_create_ms", "first_run_ms"}
    assert list(d["latency_ms"]) == ["min", "mean", "median", "p90", "p95", "p99", "max", "std"]
    assert set(d["nodes"][0]) >= {
        "name",
        "op_type",
        "provider",
        "calls",
        "mean_us",
        "share",
        "macs",
        "flops",
        "gflops_per_s",
        "gbytes_per_s",
        "bound",
    }
    assert set(d["by_op_type"][0]) >= {"op_type", "count", "mean_us", "share", "cumulative_share"}
    assert "nodes" not in result(profile=False).to_dict()


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
