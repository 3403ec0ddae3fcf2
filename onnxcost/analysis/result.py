"""The result of an analysis: ``Analysis`` (totals, one record per node, summaries) and its
JSON layout, ``onnxcost.analysis/1``. The walk (``walk.py``) builds it; this module does not
know how."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from onnxcost import _display
from onnxcost.analysis.records import (
    Const,
    Convention,
    DtypeSummary,
    Layout,
    Merge,
    ModelInfo,
    NodeRecord,
    OpTypeSummary,
    PeakActivation,
    ScopeSummary,
    TensorRecord,
    Totals,
    summed,
    to_json,
    to_jsonable,
)
from onnxcost.analysis.traffic import Traffic
from onnxcost.errors import UsageError
from onnxcost.prepare import PreparedModel


class Formulas(Protocol):
    """What an analysis holds of its formulas; ``onnxcost.symbolic`` builds them
    (``SymbolicCosts``), so this layer names only what it reads."""

    @property
    def symbols(self) -> tuple[str, ...]: ...

    @property
    def totals(self) -> Mapping[str, Any]: ...

    @property
    def least(self) -> Mapping[str, int]: ...

    def at(self, **values: int) -> Any: ...

    def node_formulas(self, index: int) -> dict[str, str | None]: ...

    @property
    def heading(self) -> str: ...

    def rows(self) -> list[tuple[str, str]]: ...

    def describe(self) -> list[str]: ...


SCHEMA = "onnxcost.analysis/1"
NO_PEAK = PeakActivation(0, -1, "", ())


@dataclass(frozen=True, slots=True)
class NodeWithFormulas:
    """A node's record and its formulas in the symbolic dims: an entry of ``nodes`` in
    ``onnxcost.analysis/1`` with ``symbolic=True``."""

    node: NodeRecord
    formulas: dict[str, str | None]
    """Keys ``formulas.NODE_KEYS``: Python expressions (None: no exact formula)."""

    JSON_LAYOUT: ClassVar[Layout] = (Merge("node"), "formulas")


@dataclass(frozen=True)
class Analysis:
    """The result of ``analyze``: totals, one record per node, and summaries."""

    model: ModelInfo
    inputs: tuple[TensorRecord, ...]
    outputs: tuple[TensorRecord, ...]
    totals: Totals
    nodes: tuple[NodeRecord, ...]
    by_op_type: tuple[OpTypeSummary, ...]
    unsupported: tuple[str, ...]
    warnings: tuple[str, ...]
    convention: Convention = "onnxcost"
    _counted: tuple[bool, ...] = field(default=(), repr=False, compare=False)
    _kinds: tuple[int, ...] = field(default=(), repr=False, compare=False)
    """``ShapeResult.kinds``: per main-graph node, a number shared by the nodes that cost the
    same (formulas.py analyses one node per class of them); empty where none is known."""
    prepared: PreparedModel | None = field(default=None, repr=False, compare=False)
    """The prepared model analysed, when ``analyze`` was given one (``compare`` reads its
    graph); None when it was given a path, bytes or a ModelProto, whose preparation the
    analysis consumed."""
    symbolic: Formulas | None = None
    """With ``analyze(..., symbolic=True)``: formulas in the free symbolic dims (formulas.py)."""
    by_dtype: tuple[DtypeSummary, ...] = ()
    """Costs by the element types the arithmetic runs in (``arithmetic``), most MACs first."""
    peak_activation: PeakActivation = NO_PEAK
    """Where the topological-order peak of activation memory happens and what is live there."""
    peak_activation_ort: PeakActivation | None = None
    """The same under onnxruntime's execution order (``ort_peak=True``), else None."""
    traffic: Traffic = "runtime"
    """How ``bytes_read`` and ``bytes_written`` are counted (``analysis.traffic``): what a
    runtime moves (``runtime``), or every input and output whole (``all-inputs``)."""

    @property
    def symbols(self) -> tuple[str, ...]:
        """The symbolic dims the formulas are in (empty without ``symbolic=True``)."""
        return () if self.symbolic is None else self.symbolic.symbols

    @property
    def formulas(self) -> dict[str, Any]:
        """Formulas of the totals: macs, flops, bytes_read, bytes_written, params, param_bytes,
        peak_activation_bytes (then the training keys, with ``training``)."""
        return {} if self.symbolic is None else dict(self.symbolic.totals)

    def at(self, **values: int) -> Any:
        """The totals at a point, from the formulas: ``a.at(batch=8, seq=1024)``."""
        if self.symbolic is None:
            raise UsageError("at() needs the formulas: analyze(..., symbolic=True)")
        return self.symbolic.at(**values)

    def __repr__(self) -> str:
        """One line: what a notebook or a log shows (the records stay in ``.nodes``)."""
        t = self.totals
        name = self.model.path or self.model.graph_name or "model"
        return (
            f"Analysis({name!r}, nodes={len(self.nodes)}, macs={t.macs}, flops={t.flops}, "
            f"params={t.params}, warnings={len(self.warnings)})"
        )

    def _repr_html_(self) -> str:
        """Jupyter: the totals and a chart of FLOPs by op type (needs onnxcost[html])."""
        return _display.html(self)

    @property
    def counted_nodes(self) -> tuple[NodeRecord, ...]:
        """The nodes whose costs make up the totals (not control-flow nodes themselves, whose
        cost is their bodies', nor the If-branch not taken)."""
        return tuple(r for r, counted in zip(self.nodes, self._counted, strict=True) if counted)

    def by_scope(self, depth: int) -> tuple[ScopeSummary, ...]:
        """Costs aggregated by the first ``depth`` parts of each node name's scope, in graph order.

        ``/layer1/layer1.0/conv1/Conv`` at depth 2 falls under ``/layer1/layer1.0``; nodes
        without a scope fall under their own name. A node of torch's dynamo exporter falls
        under its module path (``NodeRecord.scope``) the same way.
        """
        if depth < 1:
            raise UsageError(f"--depth must be 1 or more, not {depth}")
        groups: dict[str, list[NodeRecord]] = {}
        for rec, counted in zip(self.nodes, self._counted, strict=True):
            if counted:
                groups.setdefault(scope_of(rec, depth), []).append(rec)
        return tuple(ScopeSummary(scope=s, **summed(recs)) for s, recs in groups.items())

    @property
    def json_nodes(self) -> tuple[NodeRecord, ...] | tuple[NodeWithFormulas, ...]:
        """The ``nodes`` of the JSON: the records, each with its formulas when symbolic."""
        if self.symbolic is None:
            return self.nodes
        return tuple(
            NodeWithFormulas(n, self.symbolic.node_formulas(k)) for k, n in enumerate(self.nodes)
        )

    JSON_LAYOUT: ClassVar[Layout] = (
        ("schema", Const(SCHEMA)),
        "convention",
        "traffic",
        "model",
        "inputs",
        "outputs",
        "totals",
        ("nodes", "json_nodes"),
        "by_op_type",
        "by_dtype",
        "peak_activation",
        "peak_activation_ort",
        "unsupported",
        "warnings",
        Merge("symbolic"),
    )
    """The JSON contract ``onnxcost.analysis/1``; keys are stable, new ones may be added."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract ``onnxcost.analysis/1``: ``JSON_LAYOUT``."""
        return to_jsonable(self)  # type: ignore[no-any-return]

    def to_json(self, indent: int | None = 2) -> str:
        """The JSON text of ``to_dict``; a name that is not UTF-8 is written escaped (``\\xff``)."""
        return to_json(self.to_dict(), indent=indent)

    def to_dataframe(self) -> Any:
        """Per-node records as a pandas DataFrame (needs pandas: pip install pandas)."""
        try:
            import pandas as pd
        except ImportError as e:
            raise UsageError("to_dataframe() needs pandas: pip install pandas") from e
        return pd.DataFrame([to_jsonable(n) for n in self.nodes])


def scope_of(rec: NodeRecord, depth: int) -> str:
    """``Analysis.by_scope``'s group of ``rec``: the first ``depth`` parts of its subgraph's
    scope and module path (``NodeRecord.scope``) or name."""
    prefix = [p for p in rec.graph.split("/") if p]
    if rec.scope is not None:
        joined = "/".join([*prefix, *(p for p in rec.scope.split("/") if p)][:depth])
        return "/" + joined if not prefix else joined
    name = rec.name
    parts = [p for p in name.split("/") if p]
    if len(parts) > 1:
        parts = parts[:-1]  # the last part names the op itself
    scoped = [*prefix, *parts]
    joined = "/".join(scoped[:depth])
    return "/" + joined if name.startswith("/") and not prefix else joined


__all__ = ["SCHEMA", "Analysis", "NodeWithFormulas", "scope_of"]
