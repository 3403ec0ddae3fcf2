"""The networkx view of an ONNX graph: nodes are ONNX nodes, edges are tensors.

Built once per (sub)graph; gives topological order, producers and consumers, and the
checks that make a graph analysable (no cycle, no tensor read before anything writes it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import networkx as nx
import onnx

from onnxcost.costs._context import TensorInfo
from onnxcost.errors import GraphError
from onnxcost.shapes import may_have_subgraphs


def name_nodes(graph: onnx.GraphProto, taken: set[str] | None = None) -> None:
    """Give every node (subgraphs included) a unique, stable name: ``<op_type>_<index>`` if empty."""
    taken = set() if taken is None else taken
    for i, node in enumerate(graph.node):
        base = node.name or f"{node.op_type}_{i}"
        name, k = base, 1
        while name in taken:
            name, k = f"{base}_{k}", k + 1
        taken.add(name)
        node.name = name
        if not may_have_subgraphs(node):
            continue
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                name_nodes(a.g, taken)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    name_nodes(g, taken)


@dataclass(frozen=True)
class GraphView:
    dag: nx.DiGraph
    """Node name -> {'node': NodeProto, 'index': int}; edges carry 'tensors' and 'bytes'."""
    order: tuple[onnx.NodeProto, ...]
    """Topological order (the file's own when it already is one)."""
    producer: Mapping[str, str]
    last_use: Mapping[str, int]
    """Tensor -> index in ``order`` of its last consumer."""


def _outer_inputs(node: onnx.NodeProto) -> Iterable[str]:
    """Tensors that a node's subgraphs read from the enclosing scope (implicit inputs)."""
    for a in node.attribute:
        graphs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
        for g in graphs:
            local = {i.name for i in g.input} | {t.name for t in g.initializer}
            local |= {o for n in g.node for o in n.output}
            for n in g.node:
                for i in n.input:
                    if i and i not in local:
                        yield i
                yield from (i for i in _outer_inputs(n) if i not in local)


def build(
    graph: onnx.GraphProto,
    types: Mapping[str, TensorInfo],
    outer: frozenset[str] = frozenset(),
    scope: str = "",
) -> GraphView:
    """Check ``graph`` and build its DiGraph. ``outer`` names tensors visible from enclosing graphs."""
    where = f" (in subgraph {scope})" if scope else ""
    dag: nx.DiGraph = nx.DiGraph()
    producer: dict[str, str] = {}
    for i, node in enumerate(graph.node):
        dag.add_node(node.name, node=node, index=i)
        for o in node.output:
            if o:
                if o in producer:
                    raise GraphError(
                        f"tensor {o!r} is written by both {producer[o]!r} and {node.name!r}{where}: "
                        f"the graph is not in SSA form; re-export the model"
                    )
                producer[o] = node.name
    available = {vi.name for vi in graph.input} | {t.name for t in graph.initializer} | outer
    has_subgraphs = False
    for node in graph.node:
        reads = [i for i in node.input if i]
        if may_have_subgraphs(node) and any(
            a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
            for a in node.attribute
        ):
            has_subgraphs = True
            reads += list(_outer_inputs(node))
        for t in reads:
            src = producer.get(t)
            if src is None:
                if t not in available:
                    raise GraphError(
                        f"node {node.name!r} ({node.op_type}){where} reads tensor {t!r}, which no node, "
                        f"input or initializer provides; the model is malformed: re-export it or "
                        f"run onnx.checker.check_model to locate the break"
                    )
                continue
            if dag.has_edge(src, node.name):
                dag.edges[src, node.name]["tensors"].append(t)
            else:
                info = types.get(t)
                nbytes = info.nbytes if info is not None and info.is_concrete else 0
                dag.add_edge(src, node.name, tensors=[t], bytes=nbytes)
    order = _topological(graph, dag, where)
    last_use: dict[str, int] = {}
    for k, node in enumerate(order):
        for t in node.input:
            if t:
                last_use[t] = k
        if has_subgraphs:
            for t in _outer_inputs(node):
                last_use[t] = k
    return GraphView(dag, order, producer, last_use)


def _topological(graph: onnx.GraphProto, dag: nx.DiGraph, where: str) -> tuple[onnx.NodeProto, ...]:
    index = {n.name: i for i, n in enumerate(graph.node)}
    if all(index[u] < index[v] for u, v in dag.edges):
        return tuple(graph.node)
    if not nx.is_directed_acyclic_graph(dag):
        cycle = [u for u, _v in nx.find_cycle(dag)]
        shown = " -> ".join([*cycle[:6], "..."] if len(cycle) > 6 else [*cycle, cycle[0]])
        raise GraphError(
            f"the graph has a cycle{where}: {shown}; an ONNX graph must be acyclic: re-export the model"
        )
    names = nx.lexicographical_topological_sort(dag, key=lambda n: index[n])
    return tuple(dag.nodes[n]["node"] for n in names)
