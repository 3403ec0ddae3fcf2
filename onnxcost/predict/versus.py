"""Predicted against measured (``onnxcost bench --predict``): the model's latency, and per
profiled node, the largest misses first. That is how a device file gets better."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from onnxcost.analysis.records import Layout
from onnxcost.bench.result import BenchResult
from onnxcost.predict.result import Prediction


@dataclass(frozen=True, slots=True)
class NodeMiss:
    """One profiled row (a node, or the group of nodes one kernel ran) against its prediction."""

    name: str
    op_type: str
    sources: tuple[str, ...]
    measured_us: float
    """The profile's median time per run."""
    predicted_us: float
    """The sum of the predicted times of the row's source nodes (0 for a node onnxruntime
    inserted, which the prediction does not know)."""

    @property
    def miss_us(self) -> float:
        """predicted_us - measured_us."""
        return self.predicted_us - self.measured_us

    JSON_PROPERTIES = ("miss_us",)


@dataclass(frozen=True, slots=True)
class Versus:
    """A bench run and a prediction of the same model at the same shapes."""

    device: str
    predicted_ms: float
    measured_ms: float
    nodes: tuple[NodeMiss, ...]
    """Largest |miss| first; empty without a profile."""

    @property
    def error(self) -> float:
        """(predicted - measured) / measured of the median latency."""
        return (
            (self.predicted_ms - self.measured_ms) / self.measured_ms if self.measured_ms else 0.0
        )

    JSON_LAYOUT: ClassVar[Layout] = ("device", "predicted_ms", "measured_ms", "error", "nodes")


def versus(result: BenchResult, prediction: Prediction) -> Versus:
    """``prediction`` against what ``result`` measured (its median; per node its profile)."""
    by_name = {n.name: n.predicted_us for n in prediction.nodes}
    rows = []
    if result.profile is not None:
        for row in result.profile.nodes:
            predicted = sum(by_name.get(s, 0.0) for s in row.sources)
            rows.append(NodeMiss(row.name, row.op_type, row.sources, row.median_us, predicted))
    rows.sort(key=lambda r: (-abs(r.miss_us), r.name))
    return Versus(
        prediction.device.name, prediction.latency_ms, result.latency.median_ms, tuple(rows)
    )


__all__ = ["NodeMiss", "Versus", "versus"]
