"""Control flow: the cost of If, Loop, Scan and SequenceMap from their bodies, whose nodes the
walk (``walk.py``) records too. This module knows the walk only as ``Walk``: what it reads and
writes of the walk's state, and the walker it calls back for a body."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np
import onnx

from onnxcost.analysis.records import NodeRecord, Status
from onnxcost.costs._registry import Cost
from onnxcost.load.tensors import normalize_domain
from onnxcost.shapes.infer import ShapeResult


class Walk(Protocol):
    """The state of one analysis (``walk._Walk``) as control flow sees it."""

    shapes: ShapeResult
    opsets: Mapping[str, int]
    records: list[NodeRecord | None]
    counted: list[bool]
    warnings: list[str]

    def body(self, graph: onnx.GraphProto, scope: str, multiplier: int, counted: bool) -> Cost:
        """Walk a body graph: record its nodes, counted in the totals with ``counted``."""
        ...


def _static_int(w: Walk, name: str) -> int | None:
    value = w.shapes.values.get(name) if name else None
    if value is None or value.size != 1:
        return None
    return int(np.asarray(value).reshape(-1)[0])


def control_flow_cost(
    w: Walk, node: onnx.NodeProto, scope: str, counted: bool
) -> tuple[Cost, Status, str]:
    """Cost of If / Loop / Scan / SequenceMap from their bodies; body nodes are recorded too."""
    here = f"{scope}/{node.name}" if scope else node.name
    graphs = {a.name: a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH}
    if node.op_type == "If":
        if "then_branch" not in graphs or "else_branch" not in graphs:
            return (
                Cost(),
                "error",
                "not costed: If without a then_branch and an else_branch",
            )
        # Each branch is walked once, its records counted for now; the smaller one's are
        # then uncounted. (Walking each twice, to probe and then to record, doubled the
        # time per level of nesting.)
        first = len(w.records)
        then_cost = w.body(graphs["then_branch"], f"{here}/then_branch", 1, counted)
        middle = len(w.records)
        else_cost = w.body(graphs["else_branch"], f"{here}/else_branch", 1, counted)
        take_then = then_cost.flops >= else_cost.flops
        skipped = range(middle, len(w.records)) if take_then else range(first, middle)
        for slot in skipped:
            w.counted[slot] = False
        larger = "then_branch" if take_then else "else_branch"
        note = f"both branches listed; totals take the larger ({larger})"
        w.warnings.append(f"If node {node.name!r}: {note}")
        return (then_cost if take_then else else_cost), "ok", note
    body = graphs.get("body")
    if body is None:
        return Cost(), "error", "not costed: no body graph"
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

    cost = w.body(body, f"{here}/body", iterations, counted)
    return cost, "ok", note or f"body x {iterations} iterations"


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
