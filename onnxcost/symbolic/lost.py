"""The nodes the symbolic walk did not carry, as a model of their own (issue 22): what the
sampler analyses at each of its points in place of the whole model, where the walk carried
the rest (``onewalk.PartialWalk``).

``LostRegion`` is the lost nodes and what they need to be analysed alone:
- each tensor they read that a carried node makes (an activation) becomes a graph input of
  the walk's shape evaluated at the point; one whose integer value the walk carries (a
  Reshape's target shape) becomes an initializer of that value;
- a constant they read (an initializer, a Constant, a weight's Cast: the walk's
  ``Weights.constant``) comes with the chain of constant-only nodes that makes it, so that
  what is folded in the whole model is folded here too;
- the whole model's graph inputs are kept as they are (the dims given at the point name
  them; a contrib op's declared output shape reads them), unused ones included.

Its analysis at a point where every symbol is at least 2 (where the walk's shapes hold) is
the lost nodes' part of a concrete analysis of the whole model. ``LostSampler`` takes the
points between from it and the points the formulas are checked at from concrete analyses:
every symbol at 1 is the reported analysis itself; the random point and each symbol's 0 are
the walk's reduced model (one node per class, the lost nodes kept as they are: a concrete
analysis of the same nodes, fed by the same shapes). At the random point the lost nodes
alone are analysed too, and must give the same costs, node for node: else the search is
made again on the whole model (``_ReducedMissError``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import onnx
from onnx import helper

from onnxcost.errors import OnnxcostError, ShapeError
from onnxcost.load.graph import build
from onnxcost.load.tensors import SUBGRAPH_OPS
from onnxcost.symbolic.reduced import (
    _NODE_COSTS,
    _Reduced,
    _ReducedMissError,
    _Sample,
    _Sampler,
)
from onnxcost.symbolic.result import NODE_KEYS
from onnxcost.symdim import Dim

if TYPE_CHECKING:
    from onnxcost.analysis.records import NodeRecord
    from onnxcost.analysis.result import Analysis
    from onnxcost.costs._context import TensorInfo
    from onnxcost.prepare import PreparedModel
    from onnxcost.symbolic.shape_core import SymbolicShapes


_Boundary = tuple[str, int, tuple[Dim, ...], tuple[Dim, ...] | None]
"""A tensor the lost nodes read from a carried node: name, element type, the walk's shape,
and its integer value where the walk carries one."""


@dataclass(frozen=True)
class LostRegion:
    """The lost nodes (``lost``, indices into the whole model's nodes) and the constant-only
    nodes that make the constants they read (``kept``: both, in the model's order), with
    the tensors they read from carried nodes (``boundary``)."""

    source: PreparedModel
    lost: tuple[int, ...]
    kept: tuple[int, ...]
    boundary: tuple[_Boundary, ...]
    initializers: frozenset[str]
    """The whole model's initializers the kept nodes read."""

    def model_at(self, values: Mapping[str, int]) -> PreparedModel:
        """The region as a model at ``values`` (the symbols): its boundary evaluated there.
        OnnxcostError where a boundary dim does not evaluate (a symbol it lacks) or is < 0."""
        whole = self.source.proto.graph
        proto = onnx.ModelProto(
            ir_version=self.source.proto.ir_version, opset_import=self.source.proto.opset_import
        )
        graph = proto.graph
        graph.name = whole.name
        graph.input.extend(
            vi for vi in whole.input if vi.name in self.initializers or not _stored(self, vi)
        )
        order = self.source.view.order
        graph.node.extend(order[k] for k in self.kept)
        graph.initializer.extend(t for t in whole.initializer if t.name in self.initializers)
        for name, elem, shape, value in self.boundary:
            dims = [_at(d, values) for d in shape]
            if value is None:
                graph.input.append(helper.make_tensor_value_info(name, elem, dims))
            else:
                graph.initializer.append(
                    helper.make_tensor(name, elem, dims, [_at(v, values) for v in value])
                )
        made = {o for k in self.kept for o in self.source.view.outputs[k] if o}
        graph.output.extend(o for o in whole.output if o.name in made)
        graph.value_info.extend(vi for vi in whole.value_info if vi.name in made)
        return replace(self.source, proto=proto, view=build(graph, name_unnamed=False))

    def sample(self, a: Analysis, n: int, totals: tuple[int, int]) -> _Sample:
        """The whole model's sample (``_Units.nodes(n)``) from the region's analysis: the
        lost nodes' costs, 0 for every other node, the totals the lost nodes' sums (the
        carried nodes' formulas are the walk's) and ``totals`` (params, param bytes)."""
        position = {k: j for j, k in enumerate(self.kept)}
        return _sample([(k, a.nodes[position[k]]) for k in self.lost], n, totals)


def _stored(region: LostRegion, vi: onnx.ValueInfoProto) -> bool:
    """Whether graph input ``vi`` is an initializer of the whole model (old IR lists them)."""
    return any(t.name == vi.name for t in region.source.proto.graph.initializer)


def _at(d: Dim, values: Mapping[str, int]) -> int:
    try:
        got = d if isinstance(d, int) else d.evaluate(values)
    except KeyError as e:
        raise OnnxcostError(f"the dim {d} names {e} (not a symbol)") from e
    if got < 0:
        raise OnnxcostError(f"the dim {d} is {got} there")
    return got


def _sample(records: Sequence[tuple[int, NodeRecord]], n: int, totals: tuple[int, int]) -> _Sample:
    """The sample of the given nodes' records (node index, record); 0 for the others."""
    values = [0] * (len(NODE_KEYS) * (n + 1))
    unknown: set[int] = set()
    for k, record in records:
        costs = _NODE_COSTS(record)
        for q, c in enumerate(costs):
            values[q] += c
            values[len(NODE_KEYS) * (k + 1) + q] = c
        if record.status == "unknown_shape":
            unknown.add(k)
    return _Sample(
        [*values[: len(NODE_KEYS)], *totals, *values[len(NODE_KEYS) :]], frozenset(unknown)
    )


def lost_region(
    source: PreparedModel,
    lost: frozenset[int],
    shapes: SymbolicShapes,
    types: Mapping[str, TensorInfo],
    constant: set[str],
) -> LostRegion | None:
    """The region of ``lost`` in ``source`` from the walk's shapes, element types (``types``:
    tensor -> TensorInfo) and constants; None where it cannot be built: a node with
    subgraphs, or a tensor read whose shape the walk did not carry."""
    view = source.view
    producer = {o: k for k, outs in enumerate(view.outputs) for o in outs if o}
    stored = {t.name for t in source.proto.graph.initializer}
    graph_inputs = {vi.name for vi in source.proto.graph.input}
    kept = set(lost)
    todo = sorted(lost)
    initializers: set[str] = set()
    boundary: dict[str, _Boundary] = {}
    while todo:
        k = todo.pop()
        if view.op_types[k] in SUBGRAPH_OPS or view.outer_reads:
            return None
        for name in view.inputs[k]:
            if not name or name in boundary or name in initializers:
                continue
            p = producer.get(name)
            if p is not None and p in kept:
                continue
            if name in stored:
                initializers.add(name)
            elif p is None:
                if name not in graph_inputs:
                    return None
            elif name in constant:
                kept.add(p)  # the constant-only chain that makes it, folded as in the whole
                todo.append(p)
            else:
                info = types.get(name)
                elem = getattr(info, "elem_type", 0)
                if name not in shapes.shapes or not elem:
                    return None
                boundary[name] = (name, elem, shapes.shapes[name], shapes.values.get(name))
    return LostRegion(
        source,
        tuple(sorted(lost)),
        tuple(sorted(kept)),
        tuple(boundary[b] for b in sorted(boundary)),
        frozenset(initializers),
    )


@dataclass
class LostSampler(_Sampler):
    """``_Sampler`` over the lost nodes (see the module docstring): ``region`` gives the
    region's sample at a point, ``check`` the reduced model's (a concrete analysis of one
    node per class and of every lost node). ``checked``: the points where both are
    compared (the random points). ``run`` and ``run_reduced`` are not used."""

    region: Callable[[dict[str, int]], _Sample] | None = None
    check: Callable[[dict[str, int]], _Sample] | None = None
    lost: frozenset[int] = frozenset()
    checked: frozenset[tuple[int, ...]] = frozenset()
    runs: int = 0
    """The region's and the reduced model's analyses."""
    regions: dict[tuple[int, ...], _Sample | None] = field(default_factory=dict)

    def __call__(self, point: tuple[int, ...]) -> _Sample | None:
        if point not in self.samples:
            sample = self._region_at(point)
            if sample is None:
                return self.whole(point)  # the reduced model says whether it analyses there
            self.samples[point] = sample
        return self.samples[point]

    def whole(self, point: tuple[int, ...], analysis: Analysis | None = None) -> _Sample | None:
        """The lost nodes' costs at a point the formulas are checked at: from ``analysis``
        (the reported one, at every symbol = 1), else the reduced model's; at the
        ``checked`` points the region's must be the same (else _ReducedMissError)."""
        if point in self.whole_points:
            return self.samples[point]
        self.whole_points.add(point)
        sample: _Sample | None = None
        if analysis is not None:
            totals = (analysis.totals.params, analysis.totals.param_bytes)
            found = _sample(
                [(k, analysis.nodes[k]) for k in sorted(self.lost)], len(self.names), totals
            )
            unknown = (k for k, r in enumerate(analysis.nodes) if r.status == "unknown_shape")
            sample = _Sample(found.values, frozenset(unknown))
        else:
            assert self.check is not None
            self.runs += 1
            try:
                sample = self.check(self._values(point))
            except OnnxcostError as e:
                self.why_not[point] = e.node if isinstance(e, ShapeError) and e.node else str(e)
        if point in self.checked and self._region_at(point) != sample:
            raise _ReducedMissError(point)
        self.samples[point] = sample
        return sample

    def _region_at(self, point: tuple[int, ...]) -> _Sample | None:
        assert self.region is not None
        if point not in self.regions:
            self.runs += 1
            try:
                self.regions[point] = self.region(self._values(point))
            except OnnxcostError:
                self.regions[point] = None
        return self.regions[point]


def reduced_sample(reduced: _Reduced, a: Analysis, lost: frozenset[int], n: int) -> _Sample:
    """The whole model's sample from the walk's reduced model's analysis ``a``: each lost
    node's costs (a class of its own), the others 0; every node of an unknown class
    unknown."""
    of_node = reduced.units.of_node
    found = _sample([(k, a.nodes[of_node[k]]) for k in sorted(lost)], n, reduced.params)
    unknown = (k for k in range(n) if a.nodes[of_node[k]].status == "unknown_shape")
    return _Sample(found.values, frozenset(unknown))
