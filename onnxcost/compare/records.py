"""What a comparison holds: compute nodes, aligned pairs, tables, findings, and its JSON contract."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from onnxcost import _display
from onnxcost.analysis.records import (
    NOT_IN_JSON,
    Const,
    Convention,
    Layout,
    Merge,
    ShapeOut,
    When,
    json_key,
    shown,
    to_jsonable,
)
from onnxcost.analysis.result import Analysis
from onnxcost.analysis.traffic import Traffic

SCHEMA = "onnxcost.compare/1"

AttrValue = int | float | str | tuple[int | float | str, ...]
PairKind = Literal["match", "merge", "only_a", "only_b"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One observation about two models, in words; ``kind`` names the rule that made it
    (``totals``, ``transpose``, ``pads``, ``attributes``, ``op``, ``merge``, ...)."""

    kind: str
    text: str


@dataclass(frozen=True, slots=True)
class ComputeNode:
    """One compute node as the alignment sees it."""

    name: str
    op_type: str
    domain: str
    family: str = field(metadata=NOT_IN_JSON)
    macs: int
    input_shape: ShapeOut
    weight_shape: ShapeOut
    """Shape of the first weight (initializer or Constant) of rank 2 or more; None if none."""
    output_shape: ShapeOut
    bias: Literal["", "inline", "add"]
    """Where the bias goes: '' none, 'inline' an input of the node, 'add' a following Add."""
    attrs: Mapping[str, AttrValue] = field(metadata=json_key("attributes"))
    """Attributes with the schema's defaults filled in (and Conv's implied ones)."""
    scope: str | None = field(default=None, metadata={"json_omit_none": True})
    """The module path of a torch dynamo export's node (``NodeRecord.scope``), else None."""

    @property
    def shown_name(self) -> str:
        """The name as the tables show it: a dynamo export's node in its module."""
        return shown(self.name, self.scope)

    @property
    def op_label(self) -> str:
        op = self.op_type if not self.domain else f"{self.domain}::{self.op_type}"
        return op + "+Add" if self.bias == "add" else op

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class AlignedPair:
    """A row of the alignment: one node each ('match'), one against several ('merge'), or one side."""

    a: tuple[ComputeNode, ...]
    b: tuple[ComputeNode, ...]
    differences: tuple[str, ...]
    score: float

    @property
    def kind(self) -> PairKind:
        if not self.b:
            return "only_a"
        if not self.a:
            return "only_b"
        return "match" if len(self.a) == len(self.b) == 1 else "merge"

    @property
    def macs_a(self) -> int:
        return sum(n.macs for n in self.a)

    @property
    def macs_b(self) -> int:
        return sum(n.macs for n in self.b)

    JSON_LAYOUT: ClassVar[Layout] = ("kind", "a", "b", "macs_a", "macs_b", "differences")


@dataclass(frozen=True, slots=True)
class AlignmentRow:
    """One pair of an alignment with the two labels it aligns: an entry of ``alignment`` in
    ``onnxcost.compare/1``."""

    baseline: str
    candidate: str
    pair: AlignedPair

    JSON_LAYOUT: ClassVar[Layout] = ("baseline", "candidate", Merge("pair"))


@dataclass(frozen=True, slots=True)
class Alignment:
    """The compute layers of ``candidate`` aligned with those of ``baseline`` (labels)."""

    baseline: str
    candidate: str
    pairs: tuple[AlignedPair, ...]

    def count(self, kind: PairKind) -> int:
        return sum(1 for p in self.pairs if p.kind == kind)


@dataclass(frozen=True, slots=True)
class OnlyIn:
    """An op type (not a compute op) with more nodes in ``model`` than in the other model."""

    baseline: str
    candidate: str
    model: str
    op_type: str
    domain: str
    count: int
    other_count: int
    role: str
    nodes: tuple[str, ...]
    """Names of ``model``'s nodes of this type when the other model has none."""


@dataclass(frozen=True, slots=True)
class MetricRow:
    """One metric for every model, with its difference in % from the first (None: no base)."""

    key: str = field(metadata=json_key("metric"))
    label: str
    kind: Literal["count", "bytes", "ms", "rate"] = field(metadata=NOT_IN_JSON)
    values: tuple[float | None, ...]

    JSON_PROPERTIES: ClassVar[tuple[str, ...]] = ("diff_percent",)

    @property
    def diff_percent(self) -> tuple[float | None, ...]:
        base = self.values[0]
        return tuple(None if i == 0 else percent_change(base, v) for i, v in enumerate(self.values))


@dataclass(frozen=True, slots=True)
class OpTypeRow:
    """Static cost of one op type (as written in the files) in every model."""

    op_type: str
    domain: str
    count: tuple[int, ...]
    macs: tuple[int, ...]
    flops: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TimeRow:
    """Measured time of one kernel op type (as onnxruntime ran it: FusedConv, ...) per model."""

    op_type: str
    count: tuple[int | None, ...]
    mean_us: tuple[float | None, ...]
    """Mean time per run; None where the model ran no kernel of this type."""


@dataclass(frozen=True, slots=True)
class BenchSettings:
    """One benchmark setting for every model of a comparison (see ``onnxcost.bench.run_bench``)."""

    provider: str = "cpu"
    runs: int = 100
    warmup: int = 10
    threads: int | None = None
    profile: bool = True
    min_seconds: float = 1.0
    """The timed loop runs ``runs`` times and at least this long."""


@dataclass(frozen=True, slots=True)
class BenchSummary:
    """What a benchmark measured for one model, as the comparison uses it."""

    provider: str
    latency_ms: Mapping[str, float]
    """min, mean, median, p90, p95, p99, max, std."""
    throughput_per_s: float
    runs: int
    noisy: bool
    time_by_op_type_us: Mapping[str, tuple[int, float]] = field(
        default_factory=dict, metadata=NOT_IN_JSON
    )
    """Kernel op type -> (kernels, mean time per run in us); empty without a profile."""
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ComparedModel:
    label: str
    path: str | None
    analysis: Analysis
    compute: tuple[ComputeNode, ...]
    facts: Facts
    bench: BenchSummary | None = None

    @property
    def compute_nodes(self) -> int:
        """How many compute nodes the alignment saw."""
        return len(self.compute)

    JSON_LAYOUT: ClassVar[Layout] = (
        "label",
        "path",
        ("inputs", "analysis.inputs"),
        ("outputs", "analysis.outputs"),
        ("totals", "analysis.totals"),
        ("node_count", "analysis.model.node_count"),
        "compute_nodes",
        ("op_counts", "facts.op_counts"),
        ("warnings", "analysis.warnings"),
        When("bench", ("bench",)),
    )
    """An entry of ``models`` in ``onnxcost.compare/1``."""


@dataclass(frozen=True, slots=True)
class Facts:
    """Structural facts of one model that the findings draw on."""

    op_counts: Mapping[str, int]
    """Node count by op type ('domain::Op' outside the default domain), main graph."""
    nodes_by_op: Mapping[str, tuple[str, ...]]
    input_transposes: tuple[tuple[str, tuple[int, ...]], ...]
    """(node name, perm) of Transposes that read a graph input."""
    output_transposes: tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True)
class Comparison:
    """The result of ``compare``; ``models[0]`` is the baseline."""

    models: tuple[ComparedModel, ...]
    totals: tuple[MetricRow, ...]
    by_op_type: tuple[OpTypeRow, ...]
    alignments: tuple[Alignment, ...]
    only_in: tuple[OnlyIn, ...]
    found: tuple[Finding, ...]
    """The findings with the rule that made each; ``findings`` is their text."""
    inputs_differ: bool
    convention: Convention = "onnxcost"
    time_by_op_type: tuple[TimeRow, ...] = ()
    """Measured kernel time by op type, side by side (with a profiled bench)."""
    traffic: Traffic = "runtime"
    """How the models' bytes are counted (``analysis.traffic``)."""

    def __repr__(self) -> str:
        """One line: what a notebook or a log shows."""
        models = ", ".join(
            f"{m.label}={(m.path or m.analysis.model.graph_name)!r}" for m in self.models
        )
        return f"Comparison({models}, findings={len(self.findings)})"

    def _repr_html_(self) -> str:
        """Jupyter: totals side by side and MACs by op type (needs onnxcost[html])."""
        return _display.html(self)

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(m.label for m in self.models)

    @property
    def findings(self) -> tuple[str, ...]:
        """What differs, in words, one sentence per finding."""
        return tuple(f.text for f in self.found)

    def worse_than(self, percent: float) -> tuple[str, ...]:
        """One line per metric of a candidate that is worse than the baseline by more than ``percent``.

        Metrics: MACs, FLOPs, params, peak activation, and median latency when benchmarked.
        """
        lines = []
        watched = ("macs", "flops", "params", "peak_activation_bytes", "latency_ms")
        base = self.models[0].label
        for row in self.totals:
            if row.key not in watched:
                continue
            for m, value, pct in zip(
                self.models[1:], row.values[1:], row.diff_percent[1:], strict=True
            ):
                if value is None or pct is None or pct <= percent:
                    continue
                shown = "inf" if pct == float("inf") else f"{pct:.2f}"
                lines.append(
                    f"{m.label} {row.label} {_exact(value, row.kind)} vs {base} "
                    f"{_exact(row.values[0], row.kind)}: +{shown}%, worse by more than {percent:g}%"
                )
        return tuple(lines)

    @property
    def benched(self) -> bool:
        """Whether any model was benchmarked."""
        return any(m.bench is not None for m in self.models)

    @property
    def alignment_rows(self) -> tuple[AlignmentRow, ...]:
        """Every alignment's pairs in order, each with the labels it aligns."""
        return tuple(
            AlignmentRow(al.baseline, al.candidate, p) for al in self.alignments for p in al.pairs
        )

    JSON_LAYOUT: ClassVar[Layout] = (
        ("schema", Const(SCHEMA)),
        "convention",
        "traffic",
        "models",
        ("totals_diff", "totals"),
        "by_op_type",
        ("alignment", "alignment_rows"),
        "only_in",
        "findings",
        "inputs_differ",
        When("benched", (("bench_by_op_type", "time_by_op_type"),)),
    )
    """The JSON contract ``onnxcost.compare/1``; keys are stable, new ones may be added."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract ``onnxcost.compare/1``: ``JSON_LAYOUT``."""
        return to_jsonable(self)  # type: ignore[no-any-return]

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)


def percent_change(base: float | None, value: float | None) -> float | None:
    if base is None or value is None:
        return None
    if base == 0:
        return 0.0 if value == 0 else float("inf")
    return 100.0 * (value - base) / base


def _exact(v: float | None, kind: str) -> str:
    if v is None:
        return "-"
    if kind == "ms":
        return f"{v:.3f} ms"
    if kind == "rate":
        return f"{v:,.1f}/s"
    return f"{int(v):,}" + (" bytes" if kind == "bytes" else "")
