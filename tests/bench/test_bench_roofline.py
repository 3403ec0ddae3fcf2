"""Roofline floors, the ceilings cache, and a small real calibration."""

from __future__ import annotations

from pathlib import Path

import pytest

from onnxcost.analysis.records import NodeRecord
from onnxcost.bench.join import NodeProfile
from onnxcost.bench.roofline import (
    Ceilings,
    cached_ceilings,
    calibrate_ceilings,
    floor_s,
    model_roofline,
    store_ceilings,
    with_roofline,
)
from onnxcost.bench.session import SessionConfig

CEIL = Ceilings(
    peak_flops_per_s=1e12,
    bandwidth_bytes_per_s=1e11,
    provider="CPUExecutionProvider",
    device="test",
)


def test_floor_takes_the_slower_roof() -> None:
    # 2e9 FLOPs / 1e12 = 2 ms; 1e8 bytes / 1e11 = 1 ms: compute bound at 2 ms.
    seconds, bound = floor_s(2_000_000_000, 100_000_000, CEIL)
    assert seconds == pytest.approx(0.002)
    assert bound == "compute"
    # 1e9 / 1e12 = 1 ms; 3e8 / 1e11 = 3 ms: memory bound at 3 ms.
    seconds, bound = floor_s(1_000_000_000, 300_000_000, CEIL)
    assert seconds == pytest.approx(0.003)
    assert bound == "memory"
    # ridge: 1e12 / 1e11 = 10 FLOPs per byte.
    assert CEIL.ridge_flops_per_byte == pytest.approx(10.0)


def row(name: str, flops: int, read: int, written: int, mean_us: float) -> NodeProfile:
    return NodeProfile(
        name,
        "Op",
        "CPUExecutionProvider",
        (name,),
        ("Op",),
        (name,),
        "direct",
        1,
        mean_us,
        0.5,
        0,
        flops,
        read,
        written,
        (),
        (),
    )


def test_rows_get_floor_bound_and_efficiency() -> None:
    rows = with_roofline(
        [row("mm", 2_000_000_000, 60_000_000, 40_000_000, 4000.0), row("copy", 0, 0, 0, 10.0)], CEIL
    )
    mm, copy = rows
    # floor 2 ms = 2000 us, measured 4000 us: 50 % efficient.
    assert mm.floor_us == pytest.approx(2000.0)
    assert mm.bound == "compute"
    assert mm.efficiency == pytest.approx(0.5)
    assert (copy.floor_us, copy.bound, copy.efficiency) == (None, None, None)


def test_model_line_sums_main_graph_floors() -> None:
    def rec(name: str, flops: int, read: int, graph: str = "") -> NodeRecord:
        return NodeRecord(name, "Op", "", "ok", 0, flops, 0, read, 0, (), (), (), (), graph)

    nodes = [
        rec("a", 1_000_000_000, 0),
        rec("b", 0, 200_000_000),
        rec("inner", 5_000_000_000, 0, graph="If_0/then"),
    ]
    line = model_roofline(nodes, measured_ms=6.0, ceilings=CEIL)
    # a: 1e9 / 1e12 = 1 ms; b: 2e8 / 1e11 = 2 ms; the subgraph node is not summed: 3 ms of 6 ms.
    assert line.floor_ms == pytest.approx(3.0)
    assert line.efficiency == pytest.approx(0.5)


def test_cache_round_trip(tmp_path: Path) -> None:
    cache = tmp_path / "ceilings.json"
    config = SessionConfig()
    assert cached_ceilings(config, path=cache) is None
    assert store_ceilings(config, CEIL, cache) is None
    assert cached_ceilings(config, path=cache) == CEIL
    assert cached_ceilings(SessionConfig(intra_op_threads=1), path=cache) is None


def test_unwritable_cache_is_a_warning(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    warning = store_ceilings(SessionConfig(), CEIL, blocker / "ceilings.json")
    assert warning is not None
    assert "could not cache the ceilings" in warning


@pytest.mark.ort
def test_calibrate_measures_then_reads_the_cache(tmp_path: Path) -> None:
    cache = tmp_path / "ceilings.json"
    config = SessionConfig(intra_op_threads=1)
    first, warning = calibrate_ceilings(
        config, matmul_n=128, add_numel=1 << 16, repeats=2, cache=cache
    )
    assert warning is None
    assert first.peak_flops_per_s > 0
    assert first.bandwidth_bytes_per_s > 0
    assert first.provider == "CPUExecutionProvider"
    # other sizes, same key: the cached figures come back unchanged.
    again, _ = calibrate_ceilings(config, matmul_n=64, add_numel=1 << 10, repeats=1, cache=cache)
    assert again == first
