"""Control flow: the cost of If, Loop, Scan and SequenceMap from their bodies, whose nodes the
walk (``walk.py``) records too. This module knows the walk only as ``Walk``: what it reads and
writes of the walk's state, and the walker it calls back for a body.

An If's totals are its branch that runs where its condition is known at the shapes
(``shapes.bodies.if_condition``: folded, or an input whose value the point gives, optimum's
``use_cache_branch``), else the larger; the other branch is listed, not counted. A
control-flow node moves the bytes of the bodies it counts, and the peak of live activations
runs them in its place (``inlined_steps``, ``bodies_peak``)."""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

import numpy as np
import onnx

from onnxcost.analysis.liveness import peak_activation
from onnxcost.analysis.records import NodeRecord, PeakActivation, Status
from onnxcost.costs._registry import Cost
from onnxcost.load.graph import GraphView
from onnxcost.load.tensors import SUBGRAPH_OPS, normalize_domain
from onnxcost.shapes.bodies import BodyKey, if_condition
from onnxcost.shapes.infer import ShapeResult


class Walk(Protocol):
    """The state of one analysis (``walk._Walk``) as control flow sees it."""

    shapes: ShapeResult
    opsets: Mapping[str, int]
    records: list[NodeRecord | None]
    counted: list[bool]
    warnings: list[str]

    def body(
        self, graph: onnx.GraphProto, key: BodyKey, scope: str, multiplier: int, counted: bool
    ) -> Cost:
        """Walk a body graph (``key``: its node's name and attribute, whose shapes are
        ``ShapeResult.bodies[key]``): record its nodes, counted in the totals with ``counted``."""
        ...


def _static_int(w: Walk, name: str) -> int | None:
    value = w.shapes.values.get(name) if name else None
    if value is None or value.size != 1:
        return None
    return int(np.asarray(value).reshape(-1)[0])


def control_flow_cost(
    w: Walk, node: onnx.NodeProto, scope: str, counted: bool
) -> tuple[Cost, Status, str, tuple[BodyKey, ...]]:
    """Cost of If / Loop / Scan / SequenceMap from their bodies; body nodes are recorded too.
    Also the bodies whose cost it is (an If's branch that runs or the larger; a loop's body),
    whose bytes its record takes."""
    here = f"{scope}/{node.name}" if scope else node.name
    graphs = {a.name: a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH}
    if node.op_type == "If":
        if "then_branch" not in graphs or "else_branch" not in graphs:
            return (
                Cost(),
                "error",
                "not costed: If without a then_branch and an else_branch",
                (),
            )
        # Each branch is walked once. Where the condition is not known, its records are
        # counted for now and the smaller one's then uncounted. (Walking each twice, to
        # probe and then to record, doubled the time per level of nesting.)
        cond = if_condition(node, w.shapes.values)
        first = len(w.records)
        then_cost = w.body(
            graphs["then_branch"],
            (node.name, "then_branch"),
            f"{here}/then_branch",
            1,
            counted and cond is not False,
        )
        middle = len(w.records)
        else_cost = w.body(
            graphs["else_branch"],
            (node.name, "else_branch"),
            f"{here}/else_branch",
            1,
            counted and cond is not True,
        )
        if cond is None:
            take_then = then_cost.flops >= else_cost.flops
            skipped = range(middle, len(w.records)) if take_then else range(first, middle)
            for slot in skipped:
                w.counted[slot] = False
            larger = "then_branch" if take_then else "else_branch"
            note = f"both branches listed; totals take the larger ({larger})"
        else:
            take_then = cond
            note = _known_branch(w, node, cond)
        w.warnings.append(f"If node {node.name!r}: {note}")
        taken = (node.name, "then_branch" if take_then else "else_branch")
        return (then_cost if take_then else else_cost), "ok", note, (taken,)
    body = graphs.get("body")
    if body is None:
        return Cost(), "error", "not costed: no body graph", ()
    iterations: int | None = None
    if node.op_type == "Loop":
        iterations = _static_int(w, node.input[0]) if node.input else None
        if iterations is not None and iterations < 0:
            iterations = 0  # a negative trip count runs no iteration
        what = (
            "its trip count is not static"
            if node.input and node.input[0]
            else "it has no trip count"
        )
    elif node.op_type == "Scan":
        iterations = _scan_iterations(w, node)
        what = "the scanned axis length is unknown"
    else:
        what = "the sequence length is not static"
    note = ""
    if iterations is None:
        iterations = 1
        note = f"one iteration counted: {what}"
        w.warnings.append(f"{node.op_type} node {node.name!r}: {note}")

    key = (node.name, "body")
    cost = w.body(body, key, f"{here}/body", iterations, counted)
    return cost, "ok", note or f"body x {iterations} iterations", (key,)


def _known_branch(w: Walk, node: onnx.NodeProto, cond: bool) -> str:
    """The note of an If whose condition is known: which branch the totals count, and why."""
    runs, other = ("then_branch", "else_branch") if cond else ("else_branch", "then_branch")
    name = node.input[0]
    why = w.shapes.assumed.get(name)
    if why is None:
        why = f"its condition {name!r} is {str(cond).lower()} at these shapes"
    return f"{why}: the totals count {runs}; {other} is listed, not counted"


def _scan_iterations(w: Walk, node: onnx.NodeProto) -> int | None:
    """Length of the scanned axis of the first scan input (after the state variables)."""
    attrs = {a.name: a for a in node.attribute}
    n_scan = attrs["num_scan_inputs"].i if "num_scan_inputs" in attrs else 0
    axes = list(attrs["scan_input_axes"].ints) if "scan_input_axes" in attrs else []
    opset = w.opsets.get(normalize_domain(""), 1)
    first = 1 if opset < 9 else 0  # opset 8 has an optional sequence_lens input first
    n_state = len(attrs["body"].g.input) - n_scan
    idx = first + n_state
    if not 0 <= idx < len(node.input):
        return None
    info = w.shapes.types.get(node.input[idx])
    if info is None or not info.is_concrete:
        return None
    shape = info.concrete_shape
    axis = axes[0] if axes else (1 if opset < 9 else 0)
    if not -len(shape) <= axis < len(shape):
        return None  # an axis past the rank: the length is unknown
    return shape[axis]


Steps = tuple[list[str], list[tuple[str, ...]], list[tuple[str, ...]], list[BodyKey]]
"""A run order for liveness: each step's name, the tensors it reads and those it writes; and
the bodies whose nodes are steps."""


def inlined_steps(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[tuple[str, ...]],
    outputs: Sequence[tuple[str, ...]],
    taken: Mapping[str, tuple[BodyKey, ...]],
) -> Steps:
    """The steps of a graph (its ``nodes`` in run order, each reading ``inputs[k]`` and writing
    ``outputs[k]``) with each control-flow node's counted bodies in its place (``taken``, by
    node name: an If's branch that runs or the larger, one iteration of a loop's body), as
    deep as they nest: the node reads its own inputs (a condition, a trip count), then the
    body's nodes run, then the node writes its outputs from the body's (where it names them
    alike, as optimum's merged decoder does, the body has written them)."""
    names: list[str] = []
    reads: list[tuple[str, ...]] = []
    writes: list[tuple[str, ...]] = []
    inlined: list[BodyKey] = []
    for node, ins, outs in zip(nodes, inputs, outputs, strict=True):
        bodies = taken.get(node.name, ()) if node.op_type in SUBGRAPH_OPS else ()
        if not bodies:
            names.append(node.name)
            reads.append(ins)
            writes.append(outs)
            continue
        graphs = {a.name: a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH}
        names.append(node.name)
        reads.append(ins)
        writes.append(())
        ends: list[str] = []
        for key in bodies:
            body = graphs.get(key[1])
            if body is None:
                continue
            inlined.append(key)
            sub = inlined_steps(
                body.node,
                [tuple(n.input) for n in body.node],
                [tuple(n.output) for n in body.node],
                taken,
            )
            names += sub[0]
            reads += sub[1]
            writes += sub[2]
            inlined += sub[3]
            ends += [o.name for o in body.output if o.name]
        names.append(node.name)
        reads.append(tuple(ends))
        written = set(ends)
        writes.append(tuple(o for o in outs if o not in written))
    return names, reads, writes, inlined


def bodies_peak(
    view: GraphView,
    graph_inputs: Sequence[str],
    graph_outputs: Sequence[str],
    shapes: ShapeResult,
    constant: Collection[str],
    taken: Mapping[str, tuple[BodyKey, ...]],
    body_constant: Mapping[BodyKey, Collection[str]],
) -> PeakActivation:
    """The peak of live activations over the main graph's order (``view``); with control
    flow (``taken``: each control-flow node's counted bodies), over the order with those
    bodies in its place (``inlined_steps``), each body's tensors in its own shapes and its
    own constant-derived ones (``body_constant``) no activations."""
    if not taken:
        return peak_activation(
            view.names,
            view.inputs,
            view.outputs,
            graph_inputs,
            graph_outputs,
            shapes.types,
            constant,
            view.last_use,
        )
    names, reads, writes, inlined = inlined_steps(view.order, view.inputs, view.outputs, taken)
    own = [
        scope.types.maps[0]
        for key in inlined
        if (scope := shapes.bodies.get(key)) is not None and isinstance(scope.types, ChainMap)
    ]
    excluded = set(constant).union(*(body_constant.get(key, ()) for key in inlined))
    return peak_activation(
        names, reads, writes, graph_inputs, graph_outputs, ChainMap(*own, shapes.types), excluded
    )
