"""The model reduced to one node per class of alike nodes (``_Reduced``), the samples (cost
vectors over the totals and the nodes, or the classes) the search reads from an analysis, and
the sampler that takes them from the whole model or the reduced one (``_Sampler``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import TYPE_CHECKING

import onnx

from onnxcost.errors import OnnxcostError, ShapeError
from onnxcost.load.graph import build
from onnxcost.load.model import VIRTUAL_LOCATION_PREFIX
from onnxcost.prepare import PreparedModel
from onnxcost.symbolic.result import NODE_KEYS, TOTAL_KEYS

if TYPE_CHECKING:
    from onnxcost.analysis.result import Analysis


_TOTAL_COSTS = attrgetter(*TOTAL_KEYS)
"""An analysis's totals, in the order of ``TOTAL_KEYS``."""
_NODE_COSTS = attrgetter(*NODE_KEYS)
"""A node record's costs, in the order of ``NODE_KEYS``."""


@dataclass(frozen=True, slots=True)
class _Sample:
    values: list[int]
    """TOTAL_KEYS, then NODE_KEYS of each unit (``_Units``)."""
    unknown: frozenset[int]
    """Indices of the units with status unknown_shape."""


@dataclass(frozen=True)
class _Units:
    """What the samples hold NODE_KEYS for: every node, or, with the reduced model, every
    class of alike nodes (each node's formulas are then its class's)."""

    of_node: tuple[int, ...]
    """Node -> its unit."""
    first: tuple[int, ...]
    """Unit -> its first node."""
    sizes: tuple[int, ...]
    """Unit -> how many nodes it stands for."""

    @classmethod
    def nodes(cls, n: int) -> _Units:
        return cls(tuple(range(n)), tuple(range(n)), (1,) * n)

    def members(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in self.sizes]
        for node, unit in enumerate(self.of_node):
            out[unit].append(node)
        return out


class _ReducedMissError(Exception):
    """The reduced model, or the classes it stands for, missed the whole model's costs at a
    point where the whole model was analysed."""


def _vector(a: Analysis, units: _Units) -> _Sample:
    """The sample of a whole model's analysis. Raises _ReducedMissError where two nodes of
    one unit cost differently."""
    values: list[int] = list(_TOTAL_COSTS(a.totals))
    costs = [_NODE_COSTS(n) for n in a.nodes]
    for node in units.first:
        values += costs[node]
    if len(units.first) < len(costs) and any(
        cost != costs[units.first[unit]] for cost, unit in zip(costs, units.of_node, strict=True)
    ):
        raise _ReducedMissError("nodes of one class cost differently")
    unknown = frozenset(
        units.of_node[k] for k, n in enumerate(a.nodes) if n.status == "unknown_shape"
    )
    return _Sample(values, unknown)


@dataclass(frozen=True)
class _Reduced:
    """The model cut down to one node per class, where a class is the nodes with the same op,
    attributes, and input and output types and values (``ShapeResult.kinds``) at two points
    that differ in every symbol (every symbol at 1, and the random point). Such nodes are
    taken to stay alike at every point: a 32-layer decoder's layers become one, and each
    point costs the analysis of ~100 nodes rather than of thousands. The sampler checks it
    wherever the whole model is analysed."""

    model: PreparedModel
    units: _Units
    """The classes: the reduced model's node j is the whole model's node ``units.first[j]``."""
    params: tuple[int, int]
    """The totals' params and param bytes, the same at every point (see ``_reduce``)."""

    def sample(self, a: Analysis) -> _Sample:
        """The whole model's costs from the reduced model's analysis."""
        per_class = [_NODE_COSTS(r) for r in a.nodes]
        totals = [0] * len(NODE_KEYS)
        values: list[int] = []
        for costs, size in zip(per_class, self.units.sizes, strict=True):
            values += costs
            for key, value in enumerate(costs):
                totals[key] += size * value
        unknown = frozenset(c for c, r in enumerate(a.nodes) if r.status == "unknown_shape")
        return _Sample([*totals, *self.params, *values], unknown)

    def agrees(self, kinds: Sequence[int]) -> bool:
        """Whether every node has its class's first node's kind (``ShapeResult.kinds``) at a
        point: then every node costs as that node does, and the reduced model's costs are
        the whole model's there, node for node."""
        first = self.units.first
        return len(kinds) == len(self.units.of_node) and all(
            kind >= 0 and kind == kinds[first[unit]]
            for kind, unit in zip(kinds, self.units.of_node, strict=True)
        )


def _reduce(
    prepared: PreparedModel,
    analyses: Sequence[Analysis],
    params: tuple[int, int],
    min_saving: float = 0.5,
) -> _Reduced | None:
    """The reduced model from the whole model's analyses at two or more points, or None where
    it would not pay (fewer than ``min_saving`` of the nodes merged) or cannot be built: a
    model with If/Loop/Scan bodies (no kinds), or params that differ between the points (a
    weight generated at a symbolic size: the reduced model reads fewer weights, so its
    params are not the whole model's, and they are taken from these analyses)."""
    n = len(prepared.view.order)
    if any(len(a._kinds) != n or len(a.nodes) != n for a in analyses):
        return None
    first_params = [r.params for r in analyses[0].nodes]
    for a in analyses:
        if (a.totals.params, a.totals.param_bytes) != params or [
            r.params for r in a.nodes
        ] != first_params:
            return None
    classes: dict[tuple[int, ...], int] = {}
    of_node: list[int] = []
    for k in range(n):
        kinds = tuple(a._kinds[k] for a in analyses)
        key = kinds if min(kinds) >= 0 else (-1 - k,)  # -1: this node shares with none
        of_node.append(classes.setdefault(key, len(classes)))
    if len(classes) > (1 - min_saving) * n:
        return None
    return reduced_model(prepared, of_node, params)


def reduced_model(
    prepared: PreparedModel, of_node: Sequence[int], params: tuple[int, int]
) -> _Reduced | None:
    """The model cut down to the first node of each class (``of_node``: node -> its class,
    numbered in order of first appearance), a merged node's outputs read from its class's
    first node; None where the cut graph does not index."""
    view = prepared.view
    sizes: list[int] = []
    first: list[int] = []
    for k, c in enumerate(of_node):
        if c == len(sizes):
            sizes.append(0)
            first.append(k)
        sizes[c] += 1

    def renamed(name: str) -> str | None:
        """A merged node's output -> the same output of its class's first node (None where
        ``name`` is no merged node's output)."""
        k = view.writer.get(name)
        if k is None or first[of_node[k]] == k:
            return None
        return view.outputs[first[of_node[k]]][view.outputs[k].index(name)]

    whole = prepared.proto.graph
    proto = onnx.ModelProto(
        ir_version=prepared.proto.ir_version, opset_import=prepared.proto.opset_import
    )  # the fields an analysis reads; functions are inlined already
    graph = proto.graph
    graph.name = whole.name
    graph.input.extend(whole.input)
    read: set[str] = set()
    for k in first:
        node = graph.node.add()
        node.CopyFrom(view.order[k])
        for i, name in enumerate(view.inputs[k]):
            other = renamed(name)
            if other is not None:
                node.input[i] = other
        read.update(node.input)
    outputs = [o for o in whole.output if renamed(o.name) is None]
    read.update(o.name for o in outputs)
    graph.initializer.extend(t for t in whole.initializer if t.name in read)
    graph.output.extend(outputs)
    graph.value_info.extend(vi for vi in whole.value_info if renamed(vi.name) is None)
    try:
        built = build(graph, name_unnamed=False)
    except OnnxcostError:
        return None  # a graph the whole model's index took but this one does not: go without
    model = replace(prepared, proto=proto, view=built)
    return _Reduced(model, _Units(tuple(of_node), tuple(first), tuple(sizes)), params)


def _light(prepared: PreparedModel) -> PreparedModel:
    """The prepared model, its large inline weights made to point at no data: each analysis
    copies the model, and sizes are all it reads of a weight."""
    heavy = [
        t
        for t in prepared.proto.graph.initializer
        if t.data_location != onnx.TensorProto.EXTERNAL and math.prod(t.dims) > 1 << 16
    ]
    if not heavy:
        return prepared
    light = prepared.working_copy()
    for t in light.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL or math.prod(t.dims) <= 1 << 16:
            continue  # small tensors may be folded as shapes: keep them
        for name in ("raw_data", "float_data", "int32_data", "int64_data", "double_data"):
            t.ClearField(name)
        t.data_location = onnx.TensorProto.EXTERNAL
        del t.external_data[:]
        entry = t.external_data.add()
        entry.key, entry.value = "location", VIRTUAL_LOCATION_PREFIX + "formulas"
    return replace(prepared, proto=light)


@dataclass
class _Sampler:
    """The costs at each point: from the whole model's analysis (``run``), or, once
    ``reduced`` is set, from the reduced model's (``run_reduced``), except at the points the
    formulas are checked at (``whole``). There the whole model is analysed, and the reduced
    model must agree with it: every node has its class's kind (``_Reduced.agrees``), or the
    reduced model, run there too, gives the same costs; else _ReducedMissError."""

    run: Callable[[dict[str, int]], Analysis]
    run_reduced: Callable[[PreparedModel, dict[str, int]], Analysis]
    symbols: tuple[str, ...]
    names: tuple[str, ...]
    units: _Units
    samples: dict[tuple[int, ...], _Sample | None] = field(default_factory=dict)
    whole_points: set[tuple[int, ...]] = field(default_factory=set)
    """The points ``samples`` holds the whole model's costs at."""
    reduced: _Reduced | None = None
    reduced_samples: dict[tuple[int, ...], _Sample | None] = field(default_factory=dict)
    why_not: dict[tuple[int, ...], str] = field(default_factory=dict)
    """Why the whole model does not analyse at a point, where it does not."""
    offsets: Mapping[str, int] = field(default_factory=dict)
    """What ``run`` adds to each symbol with a least value above 1 (``symbolic.least``): a
    point is named by the model's values."""

    def __call__(self, point: tuple[int, ...]) -> _Sample | None:
        """The costs at ``point``; None where the model does not analyse there."""
        if point not in self.samples:
            if self.reduced is None:
                return self.whole(point)
            sample = self._reduced_at(point)
            if sample is None:
                return self.whole(point)  # the whole model must not analyse there either
            self.samples[point] = sample
        return self.samples[point]

    def whole(self, point: tuple[int, ...], analysis: Analysis | None = None) -> _Sample | None:
        """The whole model's costs at ``point`` (its ``analysis`` there, when run already)."""
        if point in self.whole_points:
            return self.samples[point]
        self.whole_points.add(point)
        a = analysis or self.analysis(point)
        sample = None
        if a is not None and tuple(n.name for n in a.nodes) == self.names:
            sample = _vector(a, self.units)  # else another walk (a different If branch)
        unproven = self.reduced is not None and (a is None or not self.reduced.agrees(a._kinds))
        if unproven and self._reduced_at(point) != sample:
            raise _ReducedMissError(point)
        self.samples[point] = sample
        return sample

    def analysis(self, point: tuple[int, ...]) -> Analysis | None:
        """The whole model's analysis at ``point`` (None where it does not analyse)."""
        try:
            return self.run(self._values(point))
        except OnnxcostError as e:
            self.why_not[point] = e.node if isinstance(e, ShapeError) and e.node else str(e)
            return None

    def use_reduced(
        self,
        source: PreparedModel,
        reported: tuple[tuple[int, ...], Analysis],
        points: Sequence[tuple[int, ...]],
    ) -> None:
        """Analyse the whole model at ``points`` and, where its analyses there and the
        ``reported`` one (every symbol at 1) make a reduced model that pays (``_reduce``),
        with the same params at every node, use it from now on. Its wiring is checked once,
        at the reported point."""
        at_one, base = reported
        analyses = {p: self.analysis(p) for p in points}
        found = [a for a in analyses.values() if a is not None]
        params = [r.params for r in base.nodes]
        if len(found) == len(points) and all([r.params for r in a.nodes] == params for a in found):
            totals = (base.totals.params, base.totals.param_bytes)
            reduced = _reduce(source, [base, *found], totals)
            if reduced is not None:
                self.reduced, self.units = reduced, reduced.units
        for p, a in analyses.items():
            if a is None:
                self.whole_points.add(p)
                self.samples[p] = None
            else:
                self.whole(p, a)
        self.whole(at_one, base)
        if self.reduced is not None and self._reduced_at(at_one) != self.samples[at_one]:
            raise _ReducedMissError(at_one)

    def _values(self, point: tuple[int, ...]) -> dict[str, int]:
        return dict(zip(self.symbols, point, strict=True))

    def _reduced_at(self, point: tuple[int, ...]) -> _Sample | None:
        assert self.reduced is not None
        if point not in self.reduced_samples:
            try:
                found = self.reduced.sample(
                    self.run_reduced(self.reduced.model, self._values(point))
                )
            except OnnxcostError:
                found = None
            self.reduced_samples[point] = found
        return self.reduced_samples[point]

    def need(self, point: tuple[int, ...], *, whole: bool = False) -> list[int]:
        sample = self.whole(point) if whole else self(point)
        if sample is None:
            at = ", ".join(
                f"{s}={v + self.offsets.get(s, 0)}"
                for s, v in zip(self.symbols, point, strict=True)
            )
            why = f" ({self.why_not[point]})" if point in self.why_not else ""
            raise ShapeError(
                f"--symbolic: the model does not analyse at {at}{why}; a dim its exporter "
                f"fixed may still be named as a symbol: fix the symbols that break it with "
                f"--dim SYMBOL=N, or give the least value it holds from with --dim SYMBOL>=N"
            )
        return sample.values
