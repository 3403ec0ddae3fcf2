"""Calibration on this machine: a quick one in a few seconds, and the full one (slow)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from onnxcost.bench.session import SessionConfig
from onnxcost.predict.calibrate import binned, cache_bytes, calibrate_device, probes
from onnxcost.predict.device import SCHEMA, from_dict
from onnxcost.predict.estimate import BASIS, CLASSES
from onnxcost.predict.run import predict


def test_every_probed_class_is_a_class_the_predictor_looks_up() -> None:
    found = {p.op_class for p in probes()}
    assert found <= set(CLASSES)
    assert found >= {"matmul", "gemv", "conv", "conv_1x1", "conv_depthwise", "elementwise"}
    assert found >= {"reduction", "softmax", "normalization", "transpose", "copy"}


def test_cache_sizes_come_from_sysfs(tmp_path: Path) -> None:
    # A Linux cpu0/cache folder as this project's machine has it: L1d 32K, L1i 32K, L2 1024K
    # (one core's), L3 32768K (shared). Largest: 32,768 x 1,024 = 33,554,432 bytes; level 2:
    # 1,024 x 1,024 = 1,048,576; a level there is none of: 0.
    for i, (level, size) in enumerate(
        (("1", "32K"), ("1", "32K"), ("2", "1024K"), ("3", "32768K"))
    ):
        (tmp_path / f"index{i}").mkdir()
        (tmp_path / f"index{i}" / "level").write_text(level + "\n")
        (tmp_path / f"index{i}" / "size").write_text(size + "\n")
    assert cache_bytes(folder=tmp_path) == 33_554_432
    assert cache_bytes(level=2, folder=tmp_path) == 1_048_576
    assert cache_bytes(level=4, folder=tmp_path) == 0
    assert cache_bytes(folder=tmp_path / "absent") == 0


def test_binned_points_hold_time_not_falling_with_size() -> None:
    # Bins of a factor of 4: log4(10) = 1.66 in bin 1; log4(20) = 2.16 and log4(30) = 2.45
    # in bin 2: one point at the geometric mean sqrt(20 x 30) = 24.49, median efficiency
    # (1.0 + 3.0) / 2 = 2.0, taking 24.49 / 2.0 = 12.25 units of time. 10 at 0.1 takes
    # 10 / 0.1 = 100: a smaller size may not take longer, so 10 gets 10 / 12.247 = 0.8165.
    assert binned([(10, 0.1), (20, 1.0), (30, 3.0)]) == ((10.0, 0.8165), (24.49, 2.0))


@pytest.mark.ort
def test_a_quick_calibration_writes_a_device_that_predicts() -> None:
    start = time.perf_counter()
    device = calibrate_device(
        SessionConfig(intra_op_threads=1),
        seconds_per_point=0.003,
        scale=0.25,
        ceilings_sizes=(64, 1 << 14),
    )
    assert time.perf_counter() - start < 30
    data = device.to_dict()
    assert data["schema"] == SCHEMA
    assert data["provider"] == "CPUExecutionProvider"
    assert data["threads"] == 1
    assert data["versions"]["onnxruntime"]
    assert from_dict(data) == device
    assert device.node_overhead_us > 0
    assert device.run_overhead_us > 0
    for name, curve in device.curves.items():
        assert curve.basis == BASIS[name]
    prediction = predict("mlp", device, dims={"batch": 1})
    assert prediction.latency_ms > 0


@pytest.mark.ort
@pytest.mark.slow
def test_the_full_calibration_takes_under_two_minutes() -> None:
    start = time.perf_counter()
    device = calibrate_device(SessionConfig(intra_op_threads=1))
    assert time.perf_counter() - start < 120
    assert set(device.curves) == {p.op_class for p in probes()}
