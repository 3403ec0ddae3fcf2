"""Measured memory beside the static estimate (issue 15, item 4)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxcost.bench.memory as memory
from onnxcost.bench.memory import MemoryUse, PeakWindow, growth
from onnxcost.report.bench import to_markdown

if TYPE_CHECKING:
    from onnxcost.bench import BenchOptions


def test_ratios_and_growth() -> None:
    use = MemoryUse(
        weights_estimate_bytes=1000,
        activations_estimate_bytes=400,
        weights_measured_bytes=1500,
        run_peak_measured_bytes=100,
        run_peak_method=memory.HWM_RESET,
    )
    # 1500 / 1000 = 1.5; 100 / 400 = 0.25.
    assert use.weights_ratio == pytest.approx(1.5)
    assert use.run_peak_ratio == pytest.approx(0.25)
    # 5000 - 3000 = 2000; unknown when either side is.
    assert growth(5000, 3000) == 2000
    assert growth(None, 3000) is None
    unknown = MemoryUse(0, 400, None, None, "")
    assert unknown.weights_ratio is None
    assert unknown.run_peak_ratio is None
    d = use.as_dict()
    assert d["weights_estimate_bytes"] == 1000
    assert d["weights_measured_bytes"] == 1500
    assert d["run_peak_measured_bytes"] == 100
    assert d["arena_planned_bytes"] is None
    assert "AllocatorGetStats" in d["arena_note"]


def test_peak_window_reads_the_reset_high_water_mark(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "reset_peak", lambda: True)
    monkeypatch.setattr(memory, "_status_kib", lambda field: {"VmHWM": 300}[field])
    window = PeakWindow()
    window.start()
    # 300 KiB = 307200 bytes.
    assert window.peak_bytes() == 300 * 1024
    assert window.method == memory.HWM_RESET


def test_peak_window_without_reset_trusts_only_a_rising_maxrss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(memory, "reset_peak", lambda: False)
    readings = iter([1000, 1800])
    monkeypatch.setattr(memory, "maxrss_bytes", lambda: next(readings))
    window = PeakWindow()
    window.start()
    # ru_maxrss rose from 1000 to 1800 during the window: the peak was reached there.
    assert window.peak_bytes() == 1800
    assert window.method == memory.MAXRSS
    flat = iter([1000, 1000])
    monkeypatch.setattr(memory, "maxrss_bytes", lambda: next(flat))
    window = PeakWindow()
    window.start()
    # it did not rise: the process had peaked higher before, so the window's peak is unknown.
    assert window.peak_bytes() is None
    assert window.method.startswith("unknown")


def test_the_report_shows_estimate_measured_and_ratio() -> None:
    from bench.test_bench_stability import bench_result

    from onnxcost.bench.result import Memory

    use = MemoryUse(2 * 2**20, 2**20, 3 * 2**20, 2**19, memory.HWM_RESET)
    md = to_markdown(bench_result((), memory=Memory(None, None, use)))
    # weights 2 MiB estimated, 3 MiB measured: 1.50x; run peak 0.5 MiB against 1 MiB: 0.50x.
    assert "| weights | 2.00 MiB | 3.00 MiB | 1.50x |" in md
    assert "| run peak | 1.00 MiB | 512.00 KiB | 0.50x |" in md
    assert "| arena plan | - | not exposed | - |" in md


@pytest.mark.ort
def test_weights_are_measured_near_the_estimate(tmp_path: Path, fast: BenchOptions) -> None:
    from onnxcost.bench import run_bench

    # y = x @ W with W 1024 x 2048 float32: 1024 x 2048 x 4 = 8 MiB of weights.
    w = numpy_helper.from_array(np.random.default_rng(0).random((1024, 2048), np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")],
        "mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2048])],
        [w],
    )
    path = tmp_path / "mm8.onnx"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, path)
    r = run_bench(str(path), fast)
    use = r.memory.use
    assert use is not None
    assert use.weights_estimate_bytes == 8 * 2**20
    # x is 4 KiB and y 8 KiB: the analysis' peak of live activations is 12 KiB = 12288 B.
    assert use.activations_estimate_bytes == 12288
    assert use.weights_measured_bytes is not None
    assert use.weights_ratio is not None
    # onnxruntime holds the weights once (it packs MatMul's B and frees the original): measured
    # 1.007x here. 0.9x to 1.5x leaves room for page rounding and the session's own structures,
    # not for a figure that missed the weights (about 0) or counted them twice (2x).
    assert 0.9 < use.weights_ratio < 1.5
    assert use.run_peak_measured_bytes is not None
    assert use.run_peak_method in (memory.HWM_RESET, memory.MAXRSS)
    d = r.to_dict()["memory"]
    assert d["weights_measured_bytes"] == use.weights_measured_bytes
    assert d["weights_estimate_bytes"] == 8 * 2**20


@pytest.mark.gpu
def test_device_memory_is_read_on_cuda(cuda: None, mm_path: str, fast: BenchOptions) -> None:
    from onnxcost.bench import run_bench

    r = run_bench(mm_path, replace(fast, provider="cuda", dims={"N": 1}))
    use = r.memory.use
    assert use is not None
    # NVML answers on a machine where CUDA loads: both device figures are read.
    assert use.device_weights_measured_bytes is not None
    assert use.device_run_peak_measured_bytes is not None
