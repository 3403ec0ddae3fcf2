"""The CUDA paths: IO binding, host copies, CUDA graphs, NVML, launch-time note (skipped without CUDA)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from onnxcost.bench import BenchOptions, available_providers, calibrate, run_bench

pytestmark = [pytest.mark.gpu, pytest.mark.ort, pytest.mark.usefixtures("cuda")]


def test_cuda_loads() -> None:
    status = {s.name: s for s in available_providers()}["CUDAExecutionProvider"]
    assert status.loads, status.detail


def test_device_io_binding(cbr_path: str, fast: BenchOptions) -> None:
    r = run_bench(cbr_path, replace(fast, provider="cuda", dims={"N": 8}))
    assert r.provider == "CUDAExecutionProvider"
    assert r.settings.io_binding
    assert r.environment.gpu is None or r.environment.gpu
    assert r.latency.count == 5


def test_include_copies_uses_host_arrays(cbr_path: str, fast: BenchOptions) -> None:
    r = run_bench(cbr_path, replace(fast, provider="cuda", dims={"N": 8}, include_copies=True))
    assert not r.settings.io_binding


def test_cuda_graph(cbr_path: str, fast: BenchOptions) -> None:
    r = run_bench(cbr_path, replace(fast, provider="cuda", dims={"N": 8}, cuda_graph=True))
    assert r.settings.cuda_graph
    assert dict(r.settings.provider_options)["enable_cuda_graph"] == "1"


def test_profile_has_gpu_times(cbr_path: str, fast: BenchOptions) -> None:
    """Node times come from CUPTI's kernel records, not the host's launch times."""
    r = run_bench(
        cbr_path, replace(fast, provider="cuda", dims={"N": 8}, profile=True, profile_runs=3)
    )
    p = r.profile
    assert p is not None
    assert not p.host_launch_times, p.note
    assert {n.provider for n in p.nodes} == {"CUDAExecutionProvider"}
    # the GPU was busy inside its span, and every busy microsecond is a node's or a copy's
    assert 0 < p.device_busy_us <= p.device_span_us
    assert p.kernel_sum_us + p.device_unowned_us == pytest.approx(p.device_busy_us, rel=0.05)
    assert p.latency_median_us == pytest.approx(r.latency.median_ms * 1e3)


def test_cupti_collects_kernels_and_their_launches(cbr_path: str) -> None:
    import numpy as np

    from onnxcost.bench.cupti import CuptiCollector
    from onnxcost.bench.session import SessionConfig, open_session, prepare_model

    opened = open_session(prepare_model(cbr_path), SessionConfig("CUDAExecutionProvider"))
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    collector = CuptiCollector()
    collector.start()
    opened.session.run(None, {"x": x})
    activity = collector.stop()
    kernels = [g for g in activity.gpu if g.kind == "Kernel"]
    copies = [g for g in activity.gpu if g.kind == "Memcpy"]
    assert kernels
    assert all(g.end_ns > g.start_ns for g in kernels)
    # host arrays: x goes in (2x3x32x32 float32 = 24,576 B) and y comes out
    assert ("HtoD", 24_576) in {(g.copy_kind, g.bytes) for g in copies}
    launched = {c.correlation for c in activity.calls}
    assert all(g.correlation in launched for g in activity.gpu)


def test_calibrate_cuda(tmp_path: Any) -> None:
    ceilings = calibrate("CUDAExecutionProvider", cache=tmp_path / "c.json")
    assert ceilings.peak_flops_per_s > 1e11
    assert ceilings.bandwidth_bytes_per_s > 1e10
