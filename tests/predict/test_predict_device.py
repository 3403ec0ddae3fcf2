"""The device file (schema onnxcost.device/1): round trip, refusals in one line, older files,
built-in devices, and the efficiency curve's interpolation."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from onnxcost.bench.roofline import Ceilings
from onnxcost.predict.device import (
    BUILTIN,
    SCHEMA,
    Curve,
    Device,
    DeviceError,
    from_dict,
    load_device,
    read_device,
)


def _device() -> Device:
    return Device(
        name="test box",
        ceilings=Ceilings(1e9, 1e8, "CPUExecutionProvider", "Test CPU", "float32", "1.31.1", "t"),
        node_overhead_us=2.0,
        run_overhead_us=5.0,
        threads=1,
        source="calibrated",
        curves={
            "matmul": Curve("flops", ((1e3, 0.5), (1e6, 0.25))),
            "elementwise": Curve("bytes", ((1e3, 0.5), (1.5e5, 0.75))),
        },
        host={"cpu": "Test CPU"},
        versions={"onnxcost": "0.1.0", "onnxruntime": "1.31.1"},
        input_overhead_us=0.5,
        output_overhead_us=0.25,
        cache_bytes=1 << 20,
        weight_bandwidth_bytes_per_s=5e7,
        core_cache_bytes=1 << 18,
    )


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "device.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data, encoding="utf-8")
    return path


def test_round_trip_through_a_file(tmp_path: Path) -> None:
    device = _device()
    path = _write(tmp_path, device.to_json())
    again = read_device(path)
    assert again == device
    assert json.loads(path.read_text())["schema"] == "onnxcost.device/1" == SCHEMA


def test_the_file_says_provider_threads_host_and_versions(tmp_path: Path) -> None:
    data = _device().to_dict()
    assert data["provider"] == "CPUExecutionProvider"
    assert data["threads"] == 1
    assert data["host"] == {"cpu": "Test CPU"}
    assert data["versions"]["onnxruntime"] == "1.31.1"
    assert data["classes"]["matmul"] == {"basis": "flops", "points": [[1e3, 0.5], [1e6, 0.25]]}


def test_an_older_onnxcosts_file_with_the_same_schema_is_read(tmp_path: Path) -> None:
    # What an onnxcost before the input/output overheads, the cache and the weight bandwidth
    # wrote, with a key this version does not know: read, the missing figures 0.
    data = {
        "schema": "onnxcost.device/1",
        "name": "old box",
        "source": "calibrated",
        "provider": "CPUExecutionProvider",
        "threads": None,
        "versions": {"onnxcost": "0.0.9"},
        "peak_flops_per_s": 2e10,
        "bandwidth_bytes_per_s": 1e10,
        "node_overhead_us": 1.5,
        "run_overhead_us": 4,
        "classes": {"conv": {"basis": "flops", "points": [[10, 0.1], [1000, 0.5]]}},
        "a_later_key": {"anything": 1},
    }
    device = read_device(_write(tmp_path, data))
    assert device.name == "old box"
    assert device.versions["onnxcost"] == "0.0.9"
    assert device.run_overhead_us == 4.0
    assert (device.input_overhead_us, device.cache_bytes, device.weight_bandwidth_bytes_per_s) == (
        0.0,
        0,
        0.0,
    )
    assert device.core_cache_bytes == 0
    assert device.curves["conv"].points == ((10.0, 0.1), (1000.0, 0.5))


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{not json", "is corrupt (not JSON: "),
        ("[1, 2]", "is corrupt (not a JSON object)"),
        ({"schema": "something/1"}, "is corrupt (no onnxcost.device/1 schema)"),
        ({"schema": SCHEMA, "source": "calibrated"}, "is corrupt (no provider)"),
        (
            {"schema": SCHEMA, "provider": "CPUExecutionProvider", "source": "calibrated"},
            "is corrupt (peak_flops_per_s is not a number)",
        ),
    ],
)
def test_a_corrupt_file_is_refused_in_one_line_saying_why(
    tmp_path: Path, content: Any, says: str
) -> None:
    with pytest.raises(DeviceError) as e:
        read_device(_write(tmp_path, content))
    message = str(e.value)
    assert says in message
    assert "onnxcost calibrate -o FILE" in message
    assert "\n" not in message


def test_a_corrupt_curve_is_refused(tmp_path: Path) -> None:
    data = _device().to_dict()
    data["classes"]["matmul"]["points"] = [[1e6, 0.25], [1e3, 0.5]]
    with pytest.raises(DeviceError, match=r"class 'matmul' has points out of size order"):
        read_device(_write(tmp_path, data))
    data["classes"]["matmul"]["points"] = [[1e3, -1]]
    with pytest.raises(DeviceError, match=r"not \[size, efficiency\] > 0"):
        read_device(_write(tmp_path, data))


def test_another_schema_version_is_refused_saying_which(tmp_path: Path) -> None:
    data = _device().to_dict()
    data["schema"] = "onnxcost.device/2"
    with pytest.raises(DeviceError) as e:
        read_device(_write(tmp_path, data))
    assert str(e.value).startswith(
        f"device file {tmp_path / 'device.json'} has schema onnxcost.device/2; this onnxcost "
        "reads onnxcost.device/1: calibrate again"
    )


def test_a_device_for_another_provider_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, _device().to_json())
    assert load_device(path, provider="cpu").name == "test box"
    assert load_device(path, provider="CPUExecutionProvider").name == "test box"
    with pytest.raises(DeviceError) as e:
        load_device(path, provider="cuda")
    assert str(e.value) == (
        "device 'test box' was made for CPUExecutionProvider, not CUDAExecutionProvider: "
        "calibrate with `onnxcost calibrate --provider cuda -o FILE`, or ask for "
        "--provider CPUExecutionProvider"
    )


def test_a_missing_file_names_calibrate_and_the_built_ins(tmp_path: Path) -> None:
    with pytest.raises(DeviceError, match=r"no device file .*onnxcost calibrate -o .*H100, A100"):
        load_device(tmp_path / "nowhere.json")


def test_built_in_devices_by_name_any_case() -> None:
    assert load_device("h100") is BUILTIN["H100"]
    assert set(BUILTIN) == {"H100", "A100", "H200", "L4"}
    h100 = BUILTIN["H100"]
    # docs/gpu.md: float32 (TF32) MatMul 412.2 TFLOP/s, Add bandwidth 2,925 GB/s.
    assert (h100.ceilings.peak_flops_per_s, h100.ceilings.bandwidth_bytes_per_s) == (
        412.2e12,
        2925e9,
    )
    assert h100.source == "measured"
    assert not h100.roofline_bound


@pytest.mark.parametrize(
    ("name", "peak", "bandwidth"),
    [
        # Datasheets: A100 SXM 80GB TF32 156 TFLOP/s dense, 2,039 GB/s; H200 SXM TF32 494.7
        # (495) dense, 4.8 TB/s; L4 TF32 60 dense (120 with sparsity), 300 GB/s.
        ("A100", 156e12, 2039e9),
        ("H200", 495e12, 4800e9),
        ("L4", 60e12, 300e9),
    ],
)
def test_datasheet_devices_say_they_are_a_roofline_bound(
    name: str, peak: float, bandwidth: float
) -> None:
    device = BUILTIN[name]
    assert device.roofline_bound
    assert device.source == "datasheet"
    assert (device.ceilings.peak_flops_per_s, device.ceilings.bandwidth_bytes_per_s) == (
        peak,
        bandwidth,
    )
    assert "a roofline bound" in device.note
    assert "not a calibration" in device.note
    assert device.node_overhead_us == 0.0
    assert from_dict(device.to_dict()) == device


def test_curve_interpolates_in_log_size_and_holds_time_below_the_smallest() -> None:
    curve = Curve("flops", ((1e3, 0.5), (1e6, 0.25)))
    # At the points: their efficiencies.
    assert curve.efficiency(1e3) == 0.5
    assert curve.efficiency(1e6) == 0.25
    # Halfway in log size (sqrt(1e3 x 1e6) = 31,622.78): halfway in efficiency, 0.375.
    assert math.isclose(curve.efficiency(math.sqrt(1e9)), 0.375)
    # Beyond the largest: the largest's efficiency.
    assert curve.efficiency(1e9) == 0.25
    # Below the smallest, the smallest's time: size 100 at 0.5 x 100 / 1000 = 0.05, so
    # 100 / 0.05 = 2,000 = 1,000 / 0.5.
    assert math.isclose(curve.efficiency(100), 0.05)


def test_a_class_may_carry_its_own_overhead_without_points(tmp_path: Path) -> None:
    data = _device().to_dict()
    data["classes"]["conv"] = {"basis": "flops", "points": [], "overhead_us": 30}
    device = read_device(_write(tmp_path, data))
    assert device.curves["conv"] == Curve("flops", (), 30.0)
    assert device.curves["conv"].efficiency(1e9) == 1.0
    del data["classes"]["conv"]["overhead_us"]
    with pytest.raises(DeviceError, match=r"class 'conv' has no points"):
        read_device(_write(tmp_path, data))
