"""Shapes inside the bodies of If, Loop and Scan: each body's own scope over the one around
it (``Scope``), the types an If's outputs and a loop's body inputs take from them, and the
value of optimum's ``use_cache_branch`` at a point. ``infer._propagate`` walks the bodies."""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto

from onnxcost.load.graph import DEFAULT_DOMAINS, MAX_NESTING
from onnxcost.load.tensors import SUBGRAPH_OPS, TensorInfo
from onnxcost.shapes.folding import KnownValues

BodyKey = tuple[str, str]
"""A body by (the name of the node that holds it, its attribute: 'then_branch', 'body'):
node names are unique in a prepared model, subgraphs included (``load.graph.name_nodes``)."""


@dataclass(frozen=True)
class Scope:
    """The shapes inside one body (an If branch, a Loop or Scan body): its own tensors' types
    and values, over those of the scope around it, which the body reads. Two branches may
    name different tensors alike (optimum's merged decoder shares 454 names between its
    two), so each body's are its own."""

    types: MutableMapping[str, TensorInfo]
    values: KnownValues


def if_condition(node: onnx.NodeProto, values: KnownValues) -> bool | None:
    """The value of an If's condition where it is known (folded, or an input ``assumed``)."""
    name = node.input[0] if node.input else ""
    value = values.get(name) if name else None
    if value is None or value.size != 1:
        return None
    return bool(value.reshape(-1)[0])


def type_if_outputs(
    node: onnx.NodeProto,
    scopes: Mapping[str, tuple[onnx.GraphProto, Scope]],
    types: MutableMapping[str, TensorInfo],
    values: KnownValues,
) -> None:
    """Each output of an If takes the type of its branch's output where the condition is
    known (and its value, folded there), else the type both branches agree on."""
    cond = if_condition(node, values)
    chosen = ("else_branch", "then_branch")[cond] if cond is not None else None
    names = (chosen,) if chosen is not None else ("then_branch", "else_branch")
    if any(n not in scopes for n in names):
        return
    for k, out in enumerate(node.output):
        found = []
        for name in names:
            body, scope = scopes[name]
            inner = body.output[k].name if k < len(body.output) else ""
            found.append((scope.types.get(inner), scope.values.get(inner) if inner else None))
        first = found[0][0]
        if not out or first is None or not first.is_concrete:
            continue
        if any(
            t is None or (t.elem_type, t.shape) != (first.elem_type, first.shape) for t, _v in found
        ):
            continue  # the branches differ, and which runs is unknown
        types[out] = first.renamed(out)
        value = found[0][1]
        if chosen is not None and value is not None:
            values[out] = value


def type_body_inputs(
    node: onnx.NodeProto,
    body: onnx.GraphProto,
    own: dict[str, TensorInfo],
    outer: Mapping[str, TensorInfo],
) -> None:
    """Type the inputs of a Loop's or Scan's body from the node's inputs, where they are
    concrete: a Loop's iteration number and condition (scalars; its state is typed only
    where it keeps its shape, ``shapes.loops``), a Scan's states and one slice of each
    scanned input (opset 9 on), as ONNX's inference of a Scan gives them. An If's branches
    have no inputs."""
    if node.op_type == "Loop":
        given: list[TensorInfo | None] = [
            TensorInfo("", TensorProto.INT64, ()),
            TensorInfo("", TensorProto.BOOL, ()),
        ]
    elif node.op_type == "Scan":
        given = _scan_body_inputs(node, body, outer)
    else:
        return
    for vi, info in zip(body.input, given, strict=False):
        if info is not None and info.is_concrete:
            own[vi.name] = info.renamed(vi.name)


def _scan_body_inputs(
    node: onnx.NodeProto, body: onnx.GraphProto, outer: Mapping[str, TensorInfo]
) -> list[TensorInfo | None]:
    """A Scan's body inputs (opset 9 on): its states as given, each scanned input without
    its scan axis; [] where the attributes do not fit."""
    attrs = {a.name: a for a in node.attribute}
    n_scan = attrs["num_scan_inputs"].i if "num_scan_inputs" in attrs else 0
    n_state = len(body.input) - n_scan
    if n_scan < 0 or n_state < 0 or len(node.input) < n_state + n_scan:
        return []
    axes = list(attrs["scan_input_axes"].ints) if "scan_input_axes" in attrs else []
    given: list[TensorInfo | None] = [outer.get(i) for i in node.input[:n_state]]
    for j, name in enumerate(node.input[n_state : n_state + n_scan]):
        info = outer.get(name)
        if info is None or info.shape is None:
            given.append(None)
            continue
        axis = axes[j] if j < len(axes) else 0
        rank = len(info.shape)
        if not -rank <= axis < rank:
            given.append(None)
            continue
        axis %= rank
        given.append(TensorInfo("", info.elem_type, info.shape[:axis] + info.shape[axis + 1 :]))
    return given


def body_graphs(
    graph: onnx.GraphProto, depth: int = 0
) -> Iterator[tuple[BodyKey, onnx.GraphProto]]:
    """Each body of an If, Loop or Scan in ``graph`` and below it, by ``BodyKey``, as deep as
    ``infer._propagate`` goes."""
    if depth >= MAX_NESTING:
        return
    for node in graph.node:
        if node.op_type in SUBGRAPH_OPS and node.domain in DEFAULT_DOMAINS:
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    yield (node.name, a.name), a.g
                    yield from body_graphs(a.g, depth + 1)


def flat_types(
    types: MutableMapping[str, TensorInfo], bodies: Mapping[BodyKey, Scope | None]
) -> None:
    """Add each body's own tensors to ``types`` (``ShapeResult.types``), where no graph
    around it names them; where two bodies name one, a concrete type over an unknown one."""
    added: set[str] = set()
    for scope in bodies.values():
        if scope is None or not isinstance(scope.types, ChainMap):
            continue
        for name, info in scope.types.maps[0].items():
            old = types.get(name)
            if old is None or (name in added and info.is_concrete and not old.is_concrete):
                types[name] = info
                added.add(name)


def cache_branch_value(
    graph: onnx.GraphProto, branch: tuple[str, str], symbols: Mapping[str, int], values: KnownValues
) -> dict[str, str]:
    """Give optimum's ``use_cache_branch`` its value at this point, the cache length above 0
    (``load.kv.cache_branch_symbol``); returns why, by input (``ShapeResult.assumed``)."""
    flag, past = branch
    length = symbols.get(past)
    vi = next((vi for vi in graph.input if vi.name == flag), None)
    if length is None or vi is None:
        return {}
    shape = tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
    values[flag] = np.full(shape, length > 0, dtype=np.bool_)
    return {
        flag: f"{flag} is {str(length > 0).lower()} at {past} = {length} (optimum's merged "
        f"decoder runs its branch without the cache at the first step, {past} = 0, and the "
        f"one with it from {past} = 1)"
    }
