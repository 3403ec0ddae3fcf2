"""The prediction record: latency, throughput and per-node time of a model on a device.

JSON schema ``onnxcost.predict/1`` (``Prediction.JSON_LAYOUT``, serialized by
``onnxcost.records.to_jsonable``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from onnxcost.analysis.records import Const, Group, Layout, to_jsonable
from onnxcost.predict.device import Device
from onnxcost.predict.estimate import NodeTime

SCHEMA = "onnxcost.predict/1"


@dataclass(frozen=True, slots=True)
class OpTypeTime:
    """Predicted time of the nodes of one op type."""

    op_type: str
    count: int
    predicted_us: float
    share: float
    """This op type's predicted_us / the sum over all nodes."""


@dataclass(frozen=True, slots=True)
class Prediction:
    """``predict``'s result: one run of the model on ``device``."""

    model: str | None
    device: Device
    batch: int
    inputs: int
    """Inputs the model is fed (each beyond the first adds ``device.input_overhead_us``)."""
    outputs: int
    nodes: tuple[NodeTime, ...]
    by_op_type: tuple[OpTypeTime, ...]
    warnings: tuple[str, ...] = ()

    @property
    def nodes_us(self) -> float:
        """Sum of the nodes' predicted times."""
        return sum(n.predicted_us for n in self.nodes)

    @property
    def run_overhead_us(self) -> float:
        """What a run costs beyond its nodes: the device's run overhead, plus its input and
        output overheads for each input and output beyond the first."""
        d = self.device
        return (
            d.run_overhead_us
            + max(self.inputs - 1, 0) * d.input_overhead_us
            + max(self.outputs - 1, 0) * d.output_overhead_us
        )

    @property
    def latency_ms(self) -> float:
        """One run: run overhead + the nodes' predicted times."""
        return (self.run_overhead_us + self.nodes_us) / 1e3

    @property
    def throughput_per_s(self) -> float:
        """Samples per second: batch x 1000 / latency_ms."""
        return self.batch * 1e3 / self.latency_ms if self.latency_ms > 0 else 0.0

    @property
    def free_nodes(self) -> int:
        """Nodes onnxruntime folds, eliminates or fuses away (predicted at 0)."""
        return sum(1 for n in self.nodes if n.bound == "free")

    def bound_us(self, bound: str) -> float:
        return sum(n.predicted_us for n in self.nodes if n.bound == bound)

    @property
    def by_bound(self) -> dict[str, dict[str, float]]:
        """Nodes and predicted microseconds by what bounds them."""
        return {
            b: {
                "nodes": sum(1 for n in self.nodes if n.bound == b),
                "predicted_us": self.bound_us(b),
            }
            for b in ("compute", "memory", "overhead", "free")
        }

    JSON_LAYOUT: ClassVar[Layout] = (
        ("schema", Const(SCHEMA)),
        "model",
        (
            "device",
            Group(
                (
                    "name",
                    "source",
                    "roofline_bound",
                    "provider",
                    "threads",
                    ("dtype", "ceilings.dtype"),
                    ("peak_flops_per_s", "ceilings.peak_flops_per_s"),
                    ("bandwidth_bytes_per_s", "ceilings.bandwidth_bytes_per_s"),
                    "node_overhead_us",
                    "run_overhead_us",
                    "note",
                ),
                of="device",
            ),
        ),
        "batch",
        "latency_ms",
        "run_overhead_us",
        "throughput_per_s",
        "by_bound",
        "by_op_type",
        ("nodes", "nodes_json"),
        "warnings",
    )
    """The ``onnxcost.predict/1`` object."""

    @property
    def nodes_json(self) -> list[dict[str, Any]]:
        return [
            {
                "name": n.name,
                "op_type": n.op_type,
                "op_class": n.op_class,
                "bound": n.bound,
                "predicted_us": n.predicted_us,
                "compute_us": n.compute_us,
                "memory_us": n.memory_us,
                "weights_us": n.weights_us,
                "overhead_us": n.overhead_us,
                "flops": n.flops,
                "bytes": n.bytes,
                "note": n.note,
            }
            for n in self.nodes
        ]

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """The prediction at one point of ``predict --sweep``."""

    values: dict[str, int]
    """The swept symbols' values here."""
    prediction: Prediction
    source: Literal["formulas", "analysis"]
    """``formulas``: from the symbolic analysis' formulas and shapes; ``analysis``: from a
    concrete analysis at this point (``why``)."""
    why: str = ""

    @property
    def top_bound(self) -> str:
        """The bound with the most predicted time (compute, memory or overhead; ties in
        that order)."""
        times = {b: self.prediction.bound_us(b) for b in ("compute", "memory", "overhead")}
        return max(times, key=lambda b: times[b])

    @property
    def top_bound_share(self) -> float:
        """Its predicted time / the nodes' (0 where the nodes take none)."""
        total = self.prediction.nodes_us
        return self.prediction.bound_us(self.top_bound) / total if total > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        p = self.prediction
        return {
            "point": dict(self.values),
            "batch": p.batch,
            "latency_ms": p.latency_ms,
            "throughput_per_s": p.throughput_per_s,
            "bound": self.top_bound,
            "bound_share": self.top_bound_share,
            "source": self.source,
            "why": self.why,
        }


@dataclass(frozen=True, slots=True)
class PredictSweep:
    """``predict --sweep``'s result: the prediction at every point of a grid."""

    symbols: tuple[str, ...]
    """The swept symbols, in the grid's order (the last varies fastest)."""
    points: tuple[SweepPoint, ...]
    why: str = ""
    """Why every point came from a concrete analysis ('' where the formulas served)."""

    def to_dict(self) -> dict[str, Any]:
        """``onnxcost.predict/1`` of the first point, with ``sweep``: one entry per point."""
        out = self.points[0].prediction.to_dict()
        out["sweep"] = [pt.to_json() for pt in self.points]
        return out


__all__ = ["SCHEMA", "OpTypeTime", "PredictSweep", "Prediction", "SweepPoint"]
