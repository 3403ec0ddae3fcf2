"""The one serializer of result records: dataclass to JSON-ready data."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from onnxcost.analysis.records import NOT_IN_JSON, NodeRecord, json_key, to_jsonable
from onnxcost.compare import BenchSummary


@dataclass(frozen=True)
class Inner:
    shape: tuple[int | str | None, ...] | None
    ratio: float


@dataclass(frozen=True)
class Outer:
    name: str
    items: tuple[Inner, ...]
    hidden: int = field(default=0, metadata=NOT_IN_JSON)
    attrs: dict[str, int] = field(default_factory=dict, metadata=json_key("attributes"))


def test_fields_in_order_nested_records_and_tuples_as_lists() -> None:
    value = Outer("x", (Inner((1, "N", None), 0.5), Inner(None, float("inf"))), 7, {"k": 1})
    assert to_jsonable(value) == {
        "name": "x",
        "items": [{"shape": [1, "N", None], "ratio": 0.5}, {"shape": None, "ratio": "inf"}],
        "attributes": {"k": 1},
    }
    assert list(to_jsonable(value)) == ["name", "items", "attributes"]


def test_node_record_leaves_out_its_tensor_names() -> None:
    rec = NodeRecord("n", "Relu", "", "ok", 0, 4, 0, 16, 16, ((1, 4),), ((1, 4),), ("x",), ("y",))
    data = to_jsonable(rec)
    assert "inputs" not in data
    assert "outputs" not in data
    assert data["input_shapes"] == [[1, 4]]


def test_bench_summary_json_has_no_kernel_table() -> None:
    summary = BenchSummary(
        "CPUExecutionProvider", {"median": 1.5}, 666.7, 100, False, {"Conv": (2, 3.0)}
    )
    assert json.dumps(to_jsonable(summary)) == json.dumps(
        {
            "provider": "CPUExecutionProvider",
            "latency_ms": {"median": 1.5},
            "throughput_per_s": 666.7,
            "runs": 100,
            "noisy": False,
            "warnings": [],
        }
    )


def test_other_values_are_left_to_the_json_writer() -> None:
    """A protobuf name that is not UTF-8 arrives as bytes: onnxcost's JSON writer makes it text."""
    assert to_jsonable({"name": b"\xff"}) == {"name": b"\xff"}
