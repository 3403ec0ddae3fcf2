"""Compare two or more models: totals, op types, an alignment of their compute layers, findings.

Exporters name nodes differently, so layers are aligned by what they compute, never by name
(``alignment``). The package: ``records`` (what a comparison holds and its JSON contract),
``layers`` (a model's compute nodes and structural facts), ``alignment``, ``findings`` (rules
that say in words what differs) and ``entry`` (``compare`` and ``measure``). Every other model
is aligned with the first, the baseline.
"""

from __future__ import annotations

from onnxcost.compare.alignment import BAND, align
from onnxcost.compare.entry import Compared, compare, compare_analysed, measure
from onnxcost.compare.layers import FAMILY_OF
from onnxcost.compare.records import (
    SCHEMA,
    AlignedPair,
    Alignment,
    BenchSettings,
    BenchSummary,
    ComparedModel,
    Comparison,
    ComputeNode,
    Finding,
    MetricRow,
    OnlyIn,
    OpTypeRow,
    TimeRow,
)

__all__ = [
    "BAND",
    "FAMILY_OF",
    "SCHEMA",
    "AlignedPair",
    "Alignment",
    "BenchSettings",
    "BenchSummary",
    "Compared",
    "ComparedModel",
    "Comparison",
    "ComputeNode",
    "Finding",
    "MetricRow",
    "OnlyIn",
    "OpTypeRow",
    "TimeRow",
    "align",
    "compare",
    "compare_analysed",
    "measure",
]
