"""Names made text once, when a model is prepared.

Protobuf hands out a string field that is not UTF-8 as ``bytes``, which neither sorts nor
compares with ``str``. Preparing rewrites each such name as text, every undecodable byte
written ``\\xff`` (``name_text``): graph, node, tensor, input, output, initializer,
value_info and function names, op types, domains and dim_params. ``text_names`` does the
model's own fields; ``build`` (``onnxcost.load.graph``), which reads every node of the main
graph anyway, does its nodes and their subgraphs (``text_nodes``, ``text_graph``) only where
it finds bytes, so a model of plain names pays no pass over its nodes. Nothing after
preparing sees bytes. Attribute values of type STRING are bytes by ONNX's schema, not names.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableSequence

import onnx

from onnxcost.load.tensors import name_text


def text_names(model: onnx.ModelProto) -> bool:
    """Make the names of ``model`` text, in place, but for its main graph's nodes (``build``
    does those); whether any was bytes."""
    changed = _fields(model.opset_import, "domain")
    for f in model.functions:
        changed |= _fields((f,), "name", "domain", "overload")
        changed |= _strings(f.input) | _strings(f.output) | _strings(f.attribute)
        changed |= _fields(f.opset_import, "domain") | _value_infos(f.value_info)
        changed |= text_nodes(f.node, subgraphs=True)
    return _graph_fields(model.graph) | changed


def text_graph(graph: onnx.GraphProto) -> bool:
    """Make every name of ``graph`` text, its nodes' and subgraphs' included."""
    return _graph_fields(graph) | text_nodes(graph.node, subgraphs=True)


def text_nodes(nodes: Iterable[onnx.NodeProto], *, subgraphs: bool) -> bool:
    """Make the names, op types, domains, inputs and outputs of ``nodes`` text (and, with
    ``subgraphs``, every name of the graphs their attributes hold)."""
    changed = False
    for n in nodes:
        changed |= _fields((n,), "name", "op_type", "domain", "overload")
        changed |= _strings(n.input) | _strings(n.output)
        if subgraphs:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    changed |= text_graph(a.g)
                elif a.type == onnx.AttributeProto.GRAPHS:
                    for g in a.graphs:
                        changed |= text_graph(g)
    return changed


def _graph_fields(g: onnx.GraphProto) -> bool:
    changed = _fields((g,), "name") | _fields(g.initializer, "name")
    changed |= _fields([s.values for s in g.sparse_initializer], "name")
    changed |= _fields([s.indices for s in g.sparse_initializer], "name")
    return _value_infos(g.input) | _value_infos(g.output) | _value_infos(g.value_info) | changed


def _value_infos(infos: Iterable[onnx.ValueInfoProto]) -> bool:
    changed = False
    for vi in infos:
        changed |= _fields((vi,), "name")
        if vi.type.HasField("tensor_type"):
            changed |= _fields(vi.type.tensor_type.shape.dim, "dim_param")
    return changed


def _fields(messages: Iterable[object], *names: str) -> bool:
    changed = False
    for m in messages:
        for field in names:
            value = getattr(m, field)
            if isinstance(value, bytes):
                setattr(m, field, name_text(value))
                changed = True
    return changed


def _strings(values: MutableSequence[str]) -> bool:
    if bytes not in set(map(type, values)):
        return False
    texts = [name_text(v) for v in values]
    del values[:]
    values.extend(texts)
    return True
