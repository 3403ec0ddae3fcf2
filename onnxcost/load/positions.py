"""How many positions a model has, where a stored table says so (``position_limit``): read by
``llm`` (--prompt + --generate) and by ``--symbolic`` (its check points stay within it)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import onnx
from onnx import numpy_helper

if TYPE_CHECKING:
    from onnxcost.load.graph import GraphView

_POSITIONAL = re.compile(r"pos|wpe", re.IGNORECASE)
_PASS_THROUGH = frozenset({"Squeeze", "Unsqueeze", "Identity", "Cast", "Reshape", "Slice"})
"""Ops between a stored table and the Gather that reads it by position: none makes the table
longer (a Slice keeps at most its rows), so its stored length is the limit."""
_INTEGERS = frozenset({onnx.TensorProto.INT64, onnx.TensorProto.INT32})
"""The element types of a constant offset added to the positions."""
_CLAMPS = frozenset({"Min", "Clip"})
"""Ops that keep computed indices within a table whatever the length: no limit from it."""


def _scalar(
    nodes: Sequence[onnx.NodeProto],
    writer: Mapping[str, int],
    initializers: Sequence[onnx.TensorProto],
    name: str,
) -> int | None:
    """The value of ``name`` where it is a stored integer of one element (an initializer or a
    Constant's), else None."""
    k = writer.get(name)
    if k is not None:
        node = nodes[k]
        if node.op_type != "Constant" or not node.attribute or node.attribute[0].name != "value":
            return None
        tensor = node.attribute[0].t
    else:
        tensor = next((t for t in initializers if t.name == name), onnx.TensorProto())
    if tensor.data_type not in _INTEGERS or math.prod(tensor.dims) != 1:
        return None
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        return None
    return int(numpy_helper.to_array(tensor).reshape(-1)[0])


def position_limit(proto: onnx.ModelProto, view: GraphView | None = None) -> int | None:
    """How many positions the model has, where a table says so: the first dim of a
    position-embedding table (GPT-2's ``wpe``) or of rotary cos/sin tables (Llama's, read
    through Slice and Squeeze), each a stored tensor that a Gather reads by position, less a
    constant added to the positions on the way (OPT's 130 rows read from row 2: 128
    positions); None if none.

    A Gather reads by position when its indices are an input named like ``position_ids``, or
    are computed (not an input) from a Range, not clamped (Min, Clip: T5's relative position
    buckets), or from a table named like ``pos``/``wpe``.
    ``view``: the main graph's index (``PreparedModel.view``), whose columns are read in place
    of each node's fields (an 8-layer llama's 1,482 nodes: 2.8 -> 0.3 ms)."""
    graph = proto.graph
    nodes: Sequence[onnx.NodeProto]
    if view is None:
        nodes = graph.node
        op_types: Sequence[str] = [node.op_type for node in nodes]
        outputs: Sequence[Sequence[str]] = [node.output for node in nodes]
        inputs_of: Sequence[Sequence[str]] = [node.input for node in nodes]
        writer: Mapping[str, int] = {o: k for k, outs in enumerate(outputs) for o in outs}
    else:
        nodes, op_types, outputs, inputs_of = view.order, view.op_types, view.outputs, view.inputs
        writer = view.writer
    stored = {t.name: list(t.dims) for t in graph.initializer}
    inputs = {vi.name for vi in graph.input} - stored.keys()

    def table(name: str) -> tuple[str, list[int]] | None:
        for _ in range(8):
            if name in stored:
                return name, stored[name]
            k = writer.get(name)
            if k is None:
                return None
            if op_types[k] == "Constant":  # a stored tensor too, read where it is reached
                attrs = nodes[k].attribute
                if attrs and attrs[0].name == "value":
                    return name, list(attrs[0].t.dims)
                return None
            if op_types[k] not in _PASS_THROUGH or not inputs_of[k]:
                return None
            name = inputs_of[k][0]
        return None

    def from_range(name: str) -> bool:
        """Computed from a Range and not clamped on the way: T5's relative position buckets
        (``Min(bucket, num_buckets - 1)``) index their table at any length."""
        todo, seen, ranged = [name], set[int](), False
        while todo and len(seen) < 64:
            k = writer.get(todo.pop())
            if k is None or k in seen:
                continue
            seen.add(k)
            if op_types[k] in _CLAMPS:
                return False
            ranged |= op_types[k] == "Range"
            todo += [i for i in inputs_of[k] if i]
        return ranged

    def offset(name: str) -> int:
        """A constant added to the positions before the Gather (OPT's learned positions start
        at row 2): that many rows are never read by position. 0 where there is none."""
        for _ in range(8):
            k = writer.get(name)
            if k is None:
                return 0
            if op_types[k] == "Add" and len(inputs_of[k]) == 2:
                found = [_scalar(nodes, writer, graph.initializer, i) for i in inputs_of[k]]
                return max(0, next((c for c in found if c is not None), 0))
            if op_types[k] not in _PASS_THROUGH or not inputs_of[k]:
                return 0
            name = inputs_of[k][0]
        return 0

    limits = []
    for k, op in enumerate(op_types):
        if op != "Gather":
            continue
        node = nodes[k]
        if node.domain not in ("", "ai.onnx") or len(node.input) < 2:
            continue
        if any(a.name == "axis" and a.i != 0 for a in node.attribute):
            continue
        found = table(node.input[0])
        if found is None:
            continue
        name, dims = found
        while len(dims) > 2 and dims[0] == 1:
            dims = dims[1:]  # [1, 1, N, D] cos/sin buffers
        if len(dims) != 2 or dims[0] < 1:
            continue
        indices = node.input[1]
        if indices in inputs:
            positional = bool(_POSITIONAL.search(indices))
        else:
            positional = bool(_POSITIONAL.search(name)) or from_range(indices)
        if positional:
            limits.append(dims[0] - offset(indices))
    return min(limits) if limits else None
