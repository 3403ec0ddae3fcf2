"""How many positions a model has, where a stored table says so (``position_limit``): read by
``llm`` (--prompt + --generate) and by ``--symbolic`` (its check points stay within it)."""

from __future__ import annotations

import re

import onnx

_POSITIONAL = re.compile(r"pos|wpe", re.IGNORECASE)
_PASS_THROUGH = frozenset({"Squeeze", "Unsqueeze", "Identity", "Cast", "Reshape", "Slice"})
"""Ops between a stored table and the Gather that reads it by position: none makes the table
longer (a Slice keeps at most its rows), so its stored length is the limit."""


def position_limit(proto: onnx.ModelProto) -> int | None:
    """How many positions the model has, where a table says so: the first dim of a
    position-embedding table (GPT-2's ``wpe``) or of rotary cos/sin tables (Llama's, read
    through Slice and Squeeze), each a stored tensor that a Gather reads by position; None if none.

    A Gather reads by position when its indices are an input named like ``position_ids``, or
    are computed (not an input) from a Range or from a table named like ``pos``/``wpe``."""
    graph = proto.graph
    stored = {t.name: list(t.dims) for t in graph.initializer}
    producer: dict[str, onnx.NodeProto] = {}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            stored[node.output[0]] = list(node.attribute[0].t.dims)
        for out in node.output:
            producer[out] = node
    inputs = {vi.name for vi in graph.input} - stored.keys()

    def table(name: str) -> tuple[str, list[int]] | None:
        for _ in range(8):
            if name in stored:
                return name, stored[name]
            node = producer.get(name)
            if node is None or node.op_type not in _PASS_THROUGH or not node.input:
                return None
            name = node.input[0]
        return None

    def from_range(name: str) -> bool:
        todo, seen = [name], set[int]()
        while todo and len(seen) < 64:
            node = producer.get(todo.pop())
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            if node.op_type == "Range":
                return True
            todo += [i for i in node.input if i]
        return False

    limits = []
    for node in graph.node:
        if node.op_type != "Gather" or node.domain not in ("", "ai.onnx") or len(node.input) < 2:
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
            limits.append(dims[0])
    return min(limits) if limits else None
