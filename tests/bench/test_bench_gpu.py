"""The CUDA paths: IO binding, host copies, CUDA graphs, NVML, launch-time note (skipped without CUDA)."""

from __future__ import annotations

from typing import Any

import pytest

from onnxcost.bench import available_providers, calibrate, run_bench

pytestmark = [pytest.mark.gpu, pytest.mark.ort, pytest.mark.usefixtures("cuda")]


def test_cuda_loads() -> None:
    status = {s.name: s for s in available_providers()}["CUDAExecutionProvider"]
    assert status.loads, status.detail


def test_device_io_binding(cbr_path: str, fast: dict[str, Any]) -> None:
    r = run_bench(cbr_path, provider="cuda", dims={"N": 8}, **fast)
    assert r.provider == "CUDAExecutionProvider"
    assert r.settings.io_binding
    assert r.environment.gpu is None or r.environment.gpu
    assert r.latency.count == 5


def test_include_copies_uses_host_arrays(cbr_path: str, fast: dict[str, Any]) -> None:
    r = run_bench(cbr_path, provider="cuda", dims={"N": 8}, include_copies=True, **fast)
    assert not r.settings.io_binding


def test_cuda_graph(cbr_path: str, fast: dict[str, Any]) -> None:
    r = run_bench(cbr_path, provider="cuda", dims={"N": 8}, cuda_graph=True, **fast)
    assert r.settings.cuda_graph
    assert dict(r.settings.provider_options)["enable_cuda_graph"] == "1"


def test_profile_says_times_are_launch_times(cbr_path: str, fast: dict[str, Any]) -> None:
    r = run_bench(cbr_path, provider="cuda", dims={"N": 8}, profile=True, profile_runs=3, **fast)
    assert r.profile is not None
    if r.profile.host_launch_times:
        assert "host-side launch times" in r.profile.note
    assert {n.provider for n in r.profile.nodes} & {"CUDAExecutionProvider"}


def test_calibrate_cuda(tmp_path: Any) -> None:
    ceilings = calibrate("CUDAExecutionProvider", cache=tmp_path / "c.json")
    assert ceilings.peak_flops_per_s > 1e11
    assert ceilings.bandwidth_bytes_per_s > 1e10
