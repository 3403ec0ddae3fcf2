"""Join measured kernels to counted costs: which source nodes each onnxruntime kernel computes.

onnxruntime optimizes the graph before it runs it: it fuses nodes (Conv+BatchNormalization+Relu
-> one ``FusedConv``), rewrites them (the NCHWc transformer's ``r1_nchwc``, tensors named
``reorder_token_N``), inserts nodes (``ReorderInput``/``ReorderOutput``, ``Memcpy*``) and folds
constants away. The kernels in the profile are nodes of that optimized graph, which the
profiled session saves (``SessionOptions.optimized_model_filepath``). A kernel maps back to
the source nodes that lie between the source tensors it reads and the source tensors it writes:

1. Tensors with a source-graph name are anchors. A renamed output gets an anchor from the
   kernel's name (``r1_nchwc`` -> tensor ``r1``; ``conv1`` -> node conv1's outputs), and the
   output of an inserted copy or layout node is its input's anchor.
2. A kernel whose output still has no anchor is grouped with the kernels that read it.
3. Walking back from a group's anchored outputs through the source graph, stopping at its
   anchored inputs and at nodes already claimed, gives its source nodes.

A group with no source nodes (an inserted node) or a kernel not in the optimized graph and
named like no source node is still a row of its own: its time is shown, never dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import onnx

from onnxcost.bench.profile import KernelStat
from onnxcost.records import NodeRecord

MappingKind = Literal["direct", "renamed", "fused", "inserted", "unattributed"]

_HINT_SUFFIXES = (re.compile(r"_nchwc$"), re.compile(r"_token_\d+$"))
_COPY_OPS = frozenset({"MemcpyFromHost", "MemcpyToHost", "ReorderInput", "ReorderOutput"})
"""Inserted ops whose output holds the same values as their first input."""


@dataclass(frozen=True, slots=True)
class GraphNode:
    """A node of the optimized graph onnxruntime ran: enough to map it back to the source."""

    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    @property
    def kernel_type(self) -> str:
        """The op type, prefixed by the last part of an unusual domain (``nchwc.Conv``)."""
        if self.domain in ("", "ai.onnx", "com.microsoft"):
            return self.op_type
        return f"{self.domain.rsplit('.', 1)[-1]}.{self.op_type}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "op_type": self.op_type,
            "domain": self.domain,
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
        }

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> GraphNode:
        return GraphNode(
            str(d["name"]),
            str(d["op_type"]),
            str(d.get("domain", "")),
            tuple(d["inputs"]),
            tuple(d["outputs"]),
        )


def graph_nodes(model: onnx.ModelProto) -> tuple[GraphNode, ...]:
    """The main-graph nodes of ``model`` in file order (a saved optimized model is topological)."""
    return tuple(
        GraphNode(n.name, n.op_type, n.domain, tuple(n.input), tuple(n.output))
        for n in model.graph.node
    )


def load_graph_nodes(path: str) -> tuple[GraphNode, ...]:
    """``graph_nodes`` of a saved model, without reading its weights."""
    return graph_nodes(onnx.load(path, load_external_data=False))


@dataclass(frozen=True, slots=True)
class KernelGroup:
    """Kernels that together compute ``sources`` (empty when onnxruntime inserted them)."""

    kernels: tuple[str, ...]
    sources: tuple[str, ...]
    mapping: MappingKind


def _hint(name: str) -> str:
    for pattern in _HINT_SUFFIXES:
        name = pattern.sub("", name)
    return name


class _Groups:
    """Union-find over kernel indices."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def map_kernels(
    optimized: Sequence[GraphNode], sources: Sequence[NodeRecord]
) -> tuple[KernelGroup, ...]:
    """Group the optimized graph's nodes and give each group the source nodes it computes.

    Every optimized node is in exactly one group; every source node in at most one.
    """
    main = [n for n in sources if n.graph == ""]
    producer = {t: n for n in main for t in n.outputs if t}
    tensors = set(producer) | {t for n in main for t in n.inputs if t}
    by_name = {n.name: n for n in main}
    anchor: dict[str, str] = {t: t for t in tensors}

    for k in optimized:
        loose = [o for o in k.outputs if o and o not in anchor]
        if not loose:
            continue
        hint = _hint(k.name)
        src = by_name.get(k.name) or by_name.get(hint)
        if k.op_type in _COPY_OPS and k.inputs and k.inputs[0] in anchor and len(k.outputs) == 1:
            anchor[k.outputs[0]] = anchor[k.inputs[0]]
        elif hint in tensors and len(k.outputs) == 1:
            anchor[k.outputs[0]] = hint
        elif src is not None and len(src.outputs) == len(k.outputs):
            for mine, theirs in zip(k.outputs, src.outputs, strict=True):
                if mine and mine not in anchor and theirs:
                    anchor[mine] = theirs

    readers: dict[str, list[int]] = {}
    for i, k in enumerate(optimized):
        for t in k.inputs:
            if t:
                readers.setdefault(t, []).append(i)
    groups = _Groups(len(optimized))
    for i, k in enumerate(optimized):
        for o in k.outputs:
            if o and o not in anchor:
                for j in readers.get(o, ()):
                    groups.union(i, j)
    members: dict[int, list[int]] = {}
    for i in range(len(optimized)):
        members.setdefault(groups.find(i), []).append(i)

    claimed: set[str] = set()
    out: list[KernelGroup] = []
    for root in sorted(members):
        group = [optimized[i] for i in members[root]]
        produced = {o for k in group for o in k.outputs if o}
        stop = {
            anchor[t] for k in group for t in k.inputs if t and t not in produced and t in anchor
        }
        targets = [anchor[o] for k in group for o in k.outputs if o in anchor]
        region = _walk_back(targets, stop, producer, claimed)
        claimed.update(region)
        ordered = tuple(n.name for n in main if n.name in region)
        out.append(KernelGroup(tuple(k.name for k in group), ordered, _kind(group, ordered)))
    return tuple(out)


def _walk_back(
    targets: Iterable[str], stop: set[str], producer: Mapping[str, NodeRecord], claimed: set[str]
) -> set[str]:
    region: set[str] = set()
    todo = list(targets)
    while todo:
        t = todo.pop()
        if t in stop:
            continue
        node = producer.get(t)
        if node is None or node.name in claimed or node.name in region:
            continue
        region.add(node.name)
        todo.extend(i for i in node.inputs if i)
    return region


def _kind(group: Sequence[GraphNode], sources: Sequence[str]) -> MappingKind:
    if not sources:
        return "inserted"
    if len(sources) > 1:
        return "fused"
    if len(group) == 1 and group[0].name == sources[0]:
        return "direct"
    return "renamed"


def map_by_name(kernels: Iterable[str], sources: Sequence[NodeRecord]) -> tuple[KernelGroup, ...]:
    """The fallback without an optimized graph: node names, exact or with a known suffix.

    A kernel named after a tensor (``r1_nchwc``) is not mapped to that tensor's producer: it may
    compute a whole fused chain, and one node's costs would misstate its rate. It stays
    unattributed.
    """
    by_name = {n.name for n in sources}
    out = []
    for k in kernels:
        if k in by_name:
            out.append(KernelGroup((k,), (k,), "direct"))
        elif _hint(k) in by_name:
            out.append(KernelGroup((k,), (_hint(k),), "renamed"))
        else:
            out.append(KernelGroup((k,), (), "unattributed"))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class NodeProfile:
    """Measured time of one source node, or of the fused group of source nodes one kernel ran.

    Rows with ``mapping`` 'inserted' or 'unattributed' have no source nodes and no costs.
    """

    name: str
    op_type: str
    provider: str
    kernels: tuple[str, ...]
    kernel_op_types: tuple[str, ...]
    sources: tuple[str, ...]
    mapping: MappingKind
    calls: int
    """Kernel executions per run."""
    mean_us: float
    """Time per run."""
    share: float
    """Fraction of the top-level kernel time per run (a row nested in an If or Loop kernel is
    also inside that kernel's share)."""
    macs: int
    flops: int
    bytes_read: int
    bytes_written: int
    input_shapes: tuple[tuple[int, ...], ...]
    output_shapes: tuple[tuple[int, ...], ...]
    floor_us: float | None = None
    """Roofline floor max(flops / peak, bytes / bandwidth), when ceilings were calibrated."""
    bound: Literal["compute", "memory"] | None = None

    @property
    def bytes_total(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def gflops_per_s(self) -> float | None:
        """Achieved GFLOP/s: flops / time (None without time or flops)."""
        return self.flops / (self.mean_us * 1e3) if self.mean_us > 0 and self.flops else None

    @property
    def gbytes_per_s(self) -> float | None:
        """Achieved GB/s: (bytes read + written) / time."""
        return (
            self.bytes_total / (self.mean_us * 1e3)
            if self.mean_us > 0 and self.bytes_total
            else None
        )

    @property
    def arithmetic_intensity(self) -> float | None:
        """FLOPs per byte moved."""
        return self.flops / self.bytes_total if self.bytes_total else None

    @property
    def efficiency(self) -> float | None:
        """Roofline floor / measured time (1.0 = at the ceiling)."""
        return (
            self.floor_us / self.mean_us if self.floor_us is not None and self.mean_us > 0 else None
        )


@dataclass(frozen=True, slots=True)
class OpTypeProfile:
    """All kernels of one op type as onnxruntime ran them (fused types like FusedConv apart)."""

    op_type: str
    count: int
    """Distinct kernels of this type."""
    calls: int
    """Executions per run."""
    mean_us: float
    share: float
    cumulative_share: float


def join(
    stats: Sequence[KernelStat],
    groups: Sequence[KernelGroup],
    sources: Sequence[NodeRecord],
    *,
    op_types: Mapping[str, str] | None = None,
) -> tuple[NodeProfile, ...]:
    """One row per group that ran, in order of first execution; kernels in no group are mapped by name.

    ``op_types``: kernel name -> op type from the optimized graph (``nchwc.Conv``), preferred
    over the trace's ``op_name``, which has no domain (and is missing from traces without args).
    """
    by_kernel = {k: g for g in groups for k in g.kernels}
    missing = [s.name for s in stats if s.name not in by_kernel]
    for g in map_by_name(missing, sources):
        by_kernel[g.kernels[0]] = g
    records = {n.name: n for n in sources}
    total = sum(s.mean_us for s in stats if not s.nested)
    rows: dict[tuple[str, ...], list[KernelStat]] = {}
    group_of: dict[tuple[str, ...], KernelGroup] = {}
    for s in sorted(stats, key=lambda s: s.order):
        g = by_kernel[s.name]
        rows.setdefault(g.kernels, []).append(s)
        group_of[g.kernels] = g
    out = []
    for key, timed in rows.items():
        g = group_of[key]
        recs = [records[n] for n in g.sources if n in records]
        kernel_types = tuple(_kernel_type(s, op_types) for s in timed)
        mean = sum(s.mean_us for s in timed)
        out.append(
            NodeProfile(
                name="+".join(g.sources) if g.sources else "+".join(s.name for s in timed),
                op_type="+".join(dict.fromkeys(r.op_type for r in recs))
                if recs
                else "+".join(dict.fromkeys(kernel_types)),
                provider="/".join(dict.fromkeys(s.provider for s in timed if s.provider)),
                kernels=tuple(s.name for s in timed),
                kernel_op_types=kernel_types,
                sources=g.sources,
                mapping=g.mapping,
                calls=round(sum(s.calls_per_run for s in timed)),
                mean_us=mean,
                share=mean / total if total > 0 else 0.0,
                macs=sum(r.macs for r in recs),
                flops=sum(r.flops for r in recs),
                bytes_read=sum(r.bytes_read for r in recs),
                bytes_written=sum(r.bytes_written for r in recs),
                input_shapes=timed[0].input_shapes,
                output_shapes=timed[-1].output_shapes,
            )
        )
    return tuple(out)


def _kernel_type(stat: KernelStat, op_types: Mapping[str, str] | None) -> str:
    return (op_types or {}).get(stat.name) or stat.op_type or "?"


def by_op_type(
    stats: Sequence[KernelStat], *, op_types: Mapping[str, str] | None = None
) -> tuple[OpTypeProfile, ...]:
    """Kernel time per op type, most expensive first, with cumulative shares (benchmark_model's table).

    Kernels nested in a control-flow kernel are left out: their time is in their parent's.
    """
    acc: dict[str, list[float]] = {}
    for s in stats:
        if s.nested:
            continue
        op = _kernel_type(s, op_types)
        row = acc.setdefault(op, [0, 0.0, 0.0])
        row[0] += 1
        row[1] += s.calls_per_run
        row[2] += s.mean_us
    total = sum(r[2] for r in acc.values())
    out = []
    running = 0.0
    for op, (count, calls, mean) in sorted(acc.items(), key=lambda kv: (-kv[1][2], kv[0])):
        share = mean / total if total > 0 else 0.0
        running += share
        out.append(OpTypeProfile(op, int(count), round(calls), mean, share, min(running, 1.0)))
    return tuple(out)


def untimed_sources(rows: Sequence[NodeProfile], sources: Sequence[NodeRecord]) -> tuple[str, ...]:
    """Main-graph source nodes no kernel computes (folded as constants or removed by onnxruntime)."""
    timed = {n for r in rows for n in r.sources}
    return tuple(n.name for n in sources if n.graph == "" and n.name not in timed)
