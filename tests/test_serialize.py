"""One serializer: bench and llm records go through ``records.to_jsonable``; keys, order and
values of the JSON contracts (``onnxcost.bench/1``, ``onnxcost.llm/1``) stay as they were."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from onnxcost.analysis.records import NOT_IN_JSON, json_key, to_jsonable
from onnxcost.bench.result import Phases
from onnxcost.bench.roofline import Ceilings
from onnxcost.bench.sweep import Probe
from onnxcost.bench.timing import LatencyStats
from onnxcost.llm.cost import PhaseCost, Roofline
from onnxcost.llm.loop import LoopTiming


def test_json_properties_follow_the_fields_in_their_order() -> None:
    from dataclasses import field

    @dataclass(frozen=True)
    class Box:
        w: int
        h: int = field(metadata=json_key("height"))
        hidden: int = field(default=0, metadata=NOT_IN_JSON)
        JSON_PROPERTIES: ClassVar[tuple[str, ...]] = ("area", "w_over_h")

        @property
        def area(self) -> int:
            return self.w * self.h

        @property
        def w_over_h(self) -> float:
            return self.w / self.h

    d = to_jsonable(Box(3, 4, 9))
    # 3 * 4 = 12; 3 / 4 = 0.75; hidden left out, h written as height.
    assert list(d.items()) == [("w", 3), ("height", 4), ("area", 12), ("w_over_h", 0.75)]


def test_latency_ms_keys_and_values() -> None:
    d = LatencyStats.from_ns([2_000_000, 2_000_000, 4_000_000]).as_dict()
    assert list(d) == ["min", "mean", "median", "p90", "p95", "p99", "max", "std"]
    # ms 2, 2, 4: mean 8/3; linear percentiles at rank q * 2: p90 2 + 0.8 * 2 = 3.6,
    # p95 2 + 0.9 * 2 = 3.8, p99 2 + 0.98 * 2 = 3.96; std (ddof 1) sqrt((4/9 + 4/9 + 16/9) / 2)
    # = sqrt(4/3).
    expected = [2.0, 8 / 3, 2.0, 3.6, 3.8, 3.96, 4.0, (4 / 3) ** 0.5]
    assert list(d.values()) == pytest.approx(expected)


def test_loop_timing_bench_object() -> None:
    d = LoopTiming("CPUExecutionProvider", "device", 2, 8, 4, 12.5, (1.0, 2.0, 4.0)).as_dict()
    # median of 1, 2, 4 = 2; p90 at rank 1.8: 2 + 0.8 * 2 = 3.6; total 12.5 + 7 = 19.5 ms;
    # B x M / s = 2 * 4 / 0.0195 = 410.256...
    assert list(d.items()) == [
        ("provider", "CPUExecutionProvider"),
        ("cache", "device"),
        ("ttft_ms", 12.5),
        ("decode_median_ms", 2.0),
        ("decode_p90_ms", pytest.approx(3.6)),
        ("decode_steps", 3),
        ("total_ms", 19.5),
        ("tokens_per_s", pytest.approx(8 / 0.0195)),
    ]
    none = LoopTiming("CPUExecutionProvider", "host", 1, 8, 1, 3.0, ()).as_dict()
    assert (none["decode_median_ms"], none["decode_p90_ms"], none["decode_steps"]) == (
        None,
        None,
        0,
    )


def test_llm_ceiling_and_phase() -> None:
    # ridge = 1e13 / 1e11 = 100 FLOPs per byte.
    assert list(to_jsonable(Roofline("flags", 1e13, 1e11)).items()) == [
        ("source", "flags"),
        ("peak_flops_per_s", 1e13),
        ("bandwidth_bytes_per_s", 1e11),
        ("ridge_flops_per_byte", 100.0),
    ]
    phase = PhaseCost(1, 2, 3, 4)
    assert list(phase.as_dict().items()) == [
        ("macs", 1),
        ("flops", 2),
        ("bytes_read", 3),
        ("bytes_written", 4),
    ]
    assert list(phase.as_dict(False)) == ["macs", "flops", "bytes_read"]


def test_bench_leaf_objects() -> None:
    assert list(Phases(12.5, 3.25, 40.0, 0.008).as_dict().items()) == [
        ("session_create_ms", 12.5),
        ("first_run_ms", 3.25),
        ("warmup_ms", 40.0),
        ("timed_s", 0.008),
    ]
    assert Probe(2, False, detail="out of memory").as_dict() == {
        "batch": 2,
        "ok": False,
        "throughput_per_s": None,
        "median_ms": None,
        "detail": "out of memory",
        "rss_bytes": None,
    }
    assert list(Ceilings(2e9, 1e9, "CPUExecutionProvider", "test CPU").as_dict()) == [
        "peak_flops_per_s",
        "bandwidth_bytes_per_s",
        "provider",
        "device",
        "dtype",
        "onnxruntime_version",
        "measured_at",
    ]
