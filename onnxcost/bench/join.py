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
   anchored inputs and at nodes already claimed (or kept by name by another kernel), gives
   its source nodes.
4. A kernel that reads an input its walk did not need absorbed more after it was named (the
   NCHWc Conv that adds a residual and applies Relu): its region grows forward through the
   node reading that input and the activations after it, and its output's anchor moves there.

A group with no source nodes (an inserted node) or a kernel not in the optimized graph and
named like no source node is still a row of its own: its time is shown, never dropped.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import onnx

from onnxcost.analysis.records import Layout, NodeRecord, When, shown
from onnxcost.analysis.scopes import common_scope
from onnxcost.bench.profile import KernelStat, PerRunTimes, Spread

MappingKind = Literal["direct", "renamed", "fused", "inserted", "unattributed"]

_HINT_SUFFIXES = (re.compile(r"_nchwc$"), re.compile(r"_token_\d+$"))
_COPY_OPS = frozenset({"MemcpyFromHost", "MemcpyToHost", "ReorderInput", "ReorderOutput"})
"""Inserted ops whose output holds the same values as their first input."""
_ACTIVATIONS = frozenset(
    {
        "Relu",
        "LeakyRelu",
        "Clip",
        "Sigmoid",
        "HardSigmoid",
        "Tanh",
        "HardSwish",
        "Elu",
        "Selu",
        "Softplus",
        "Gelu",
    }
)
"""Ops a fused kernel may have absorbed after a residual Add."""


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

    Every optimized node is in exactly one group; every source node in at most one. A source
    node whose name a kernel keeps belongs to that kernel.
    """
    graph = _SourceGraph([n for n in sources if n.graph == ""])
    anchor, hinted = _anchors(optimized, graph)
    reserved = {k.name: k.name for k in optimized if k.name in graph.by_name}
    claimed: set[str] = set()
    out: list[KernelGroup] = []
    for group in _groups(optimized, anchor):
        names = {k.name for k in group}
        blocked = claimed | {n for n, owner in reserved.items() if owner not in names}
        produced = {o for k in group for o in k.outputs if o}
        reads = Counter(
            anchor[t] for k in group for t in k.inputs if t and t not in produced and t in anchor
        )
        targets = [anchor[o] for k in group for o in k.outputs if o in anchor]
        region = _walk_back(targets, set(reads), graph.producer, blocked)
        if len(targets) == 1 and any(o in hinted for k in group for o in k.outputs):
            end = _extend(targets[0], region, reads, graph, blocked)
            for k in group:
                for o in k.outputs:
                    if o in hinted:
                        anchor[o] = end
        claimed.update(region)
        ordered = tuple(n.name for n in graph.nodes if n.name in region)
        out.append(KernelGroup(tuple(k.name for k in group), ordered, _kind(group, ordered)))
    return tuple(out)


class _SourceGraph:
    """The source main graph: producers and readers of each tensor."""

    def __init__(self, nodes: Sequence[NodeRecord]) -> None:
        self.nodes = nodes
        self.producer = {t: n for n in nodes for t in n.outputs if t}
        self.readers: dict[str, list[NodeRecord]] = {}
        for n in nodes:
            for t in dict.fromkeys(n.inputs):
                if t:
                    self.readers.setdefault(t, []).append(n)
        self.tensors = set(self.producer) | set(self.readers)
        self.by_name = {n.name: n for n in nodes}


def _anchors(
    optimized: Sequence[GraphNode], graph: _SourceGraph
) -> tuple[dict[str, str], set[str]]:
    """Source tensor of each optimized tensor that has one; and which of them a name hint gave."""
    anchor = {t: t for t in graph.tensors}
    hinted: set[str] = set()
    for k in optimized:
        if all(not o or o in anchor for o in k.outputs):
            continue
        hint = _hint(k.name)
        src = graph.by_name.get(k.name) or graph.by_name.get(hint)
        if k.op_type in _COPY_OPS and k.inputs and k.inputs[0] in anchor and len(k.outputs) == 1:
            anchor[k.outputs[0]] = anchor[k.inputs[0]]
        elif hint in graph.tensors and len(k.outputs) == 1:
            anchor[k.outputs[0]] = hint
            hinted.add(k.outputs[0])
        elif src is not None and len(src.outputs) == len(k.outputs):
            for mine, theirs in zip(k.outputs, src.outputs, strict=True):
                if mine and mine not in anchor and theirs:
                    anchor[mine] = theirs
                    hinted.add(mine)
    return anchor, hinted


def _groups(optimized: Sequence[GraphNode], anchor: Mapping[str, str]) -> list[list[GraphNode]]:
    """Kernels joined to the readers of their unanchored outputs, in order of first member."""
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
    return [[optimized[i] for i in members[root]] for root in sorted(members)]


def _extend(
    target: str, region: set[str], reads: Counter[str], graph: _SourceGraph, blocked: set[str]
) -> str:
    """Follow fusions onnxruntime made after naming the kernel; return the tensor it really writes.

    A kernel named after one tensor may also have absorbed a residual Add and the activation
    after it (NCHWc Conv with Sum): it then reads an input (or the same input once more) that
    its named region does not. ``reads`` counts the source tensors the kernel reads. Walk
    forward from ``target`` through the node that reads such an input (and whose other inputs
    the kernel has), then through single activation nodes after it.
    """
    unused = reads - Counter(i for name in region for i in graph.by_name[name].inputs if i in reads)
    have = set(reads) | {target} | {o for name in region for o in graph.by_name[name].outputs}
    extended = False
    while +unused:
        nxt = [
            n
            for n in graph.readers.get(target, ())
            if n.name not in blocked
            and n.name not in region
            and any(unused[i] > 0 for i in n.inputs)
            and all(i in have or i not in graph.producer for i in n.inputs if i)
        ]
        if len(nxt) != 1 or not nxt[0].outputs:
            break
        node = nxt[0]
        region.add(node.name)
        unused -= Counter(i for i in node.inputs if unused[i] > 0)
        have.update(node.outputs)
        target, extended = node.outputs[0], True
    while extended:
        after = graph.readers.get(target, [])
        if (
            len(after) != 1
            or after[0].op_type not in _ACTIVATIONS
            or after[0].name in blocked | region
        ):
            break
        region.add(after[0].name)
        target = after[0].outputs[0]
    return target


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
        if (
            node is None
            or node.name in claimed
            or node.name in region
            or node.op_type == "Constant"
        ):
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
class NodeProfile(PerRunTimes):
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
    """Mean time per run (kept for the JSON contract; the report uses ``median_us``)."""
    share: float
    """This row's median / the sum of the top-level kernels' medians (a row nested in an If
    or Loop kernel is also inside that kernel's share)."""
    macs: int
    flops: int
    bytes_read: int
    bytes_written: int
    input_shapes: tuple[tuple[int, ...], ...]
    output_shapes: tuple[tuple[int, ...], ...]
    floor_us: float | None = None
    """Roofline floor max(flops / peak, bytes / bandwidth), when ceilings were calibrated."""
    bound: Literal["compute", "memory"] | None = None
    per_run_us: tuple[float, ...] = ()
    """The row's time in each profiled run (its kernels added up), in run order; empty when
    unknown, and then the figures below fall back to ``mean_us``."""
    scope: str | None = None
    """For an export of torch's dynamo exporter, the module its source nodes share
    (``NodeRecord.scope``, cut to their common part); None for every other row."""

    JSON_LAYOUT: ClassVar[Layout] = (
        "name",
        "op_type",
        "provider",
        "calls",
        "mean_us",
        "median_us",
        ("p10_us", "spread.p10_us"),
        ("p90_us", "spread.p90_us"),
        "share",
        "macs",
        "flops",
        "gflops_per_s",
        "gbytes_per_s",
        "bound",
        "bytes_read",
        "bytes_written",
        "arithmetic_intensity",
        "floor_us",
        "efficiency",
        "efficiency_suspect",
        "mapping",
        "kernels",
        "kernel_op_types",
        "sources",
        "input_shapes",
        "output_shapes",
        When("scope", ("scope",)),
    )
    """One entry of ``nodes`` in ``onnxcost.bench/1``."""

    @property
    def shown_name(self) -> str:
        """The name as the tables show it: a dynamo export's nodes in their module."""
        return shown(self.name, self.scope)

    @property
    def bytes_total(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def gflops_per_s(self) -> float | None:
        """Achieved GFLOP/s: flops / median time (None without time or flops)."""
        t = self.median_us
        return self.flops / (t * 1e3) if t > 0 and self.flops else None

    @property
    def gbytes_per_s(self) -> float | None:
        """Achieved GB/s: (bytes read + written) / median time."""
        t = self.median_us
        return self.bytes_total / (t * 1e3) if t > 0 and self.bytes_total else None

    @property
    def arithmetic_intensity(self) -> float | None:
        """FLOPs per byte moved."""
        return self.flops / self.bytes_total if self.bytes_total else None

    @property
    def efficiency(self) -> float | None:
        """Roofline floor / median time (1.0 = at the ceiling).

        Above 1.0 it is not an efficiency but a measurement problem: see ``efficiency_suspect``.
        """
        t = self.median_us
        return self.floor_us / t if self.floor_us is not None and t > 0 else None

    @property
    def efficiency_suspect(self) -> bool:
        """The node ran faster than its roofline floor (efficiency above 100%): the ceilings
        are too low (measured under other conditions) or time was attributed to another row."""
        e = self.efficiency
        return e is not None and e > 1.0


@dataclass(frozen=True, slots=True)
class OpTypeProfile(PerRunTimes):
    """All kernels of one op type as onnxruntime ran them (fused types like FusedConv apart)."""

    op_type: str
    count: int
    """Distinct kernels of this type."""
    calls: int
    """Executions per run."""
    mean_us: float
    share: float
    """Median / the sum of every op type's median."""
    cumulative_share: float
    per_run_us: tuple[float, ...] = ()
    """The op type's time in each profiled run, in run order."""

    JSON_LAYOUT: ClassVar[Layout] = (
        "op_type",
        "count",
        "mean_us",
        "median_us",
        ("p10_us", "spread.p10_us"),
        ("p90_us", "spread.p90_us"),
        "share",
        "cumulative_share",
        "calls",
    )
    """One entry of ``by_op_type`` in ``onnxcost.bench/1``."""


def join(
    stats: Sequence[KernelStat],
    groups: Sequence[KernelGroup],
    sources: Sequence[NodeRecord],
    *,
    op_types: Mapping[str, str] | None = None,
) -> tuple[NodeProfile, ...]:
    """One row per set of source nodes that ran (or per unmapped kernel), in order of first execution.

    Kernels in no group (subgraph kernels, or all of them without an optimized graph) are
    mapped by name.

    ``op_types``: kernel name -> op type from the optimized graph (``nchwc.Conv``), preferred
    over the trace's ``op_name``, which has no domain (and is missing from traces without args).
    """
    by_kernel = {k: g for g in groups for k in g.kernels}
    missing = [s.name for s in stats if s.name not in by_kernel]
    for g in map_by_name(missing, sources):
        by_kernel[g.kernels[0]] = g
    records = {n.name: n for n in sources}
    total = sum(s.median_us for s in stats if not s.nested)
    rows: dict[tuple[str, ...], list[KernelStat]] = {}
    group_of: dict[tuple[str, ...], KernelGroup] = {}
    for s in sorted(stats, key=lambda s: s.order):
        g = by_kernel[s.name]
        key = g.sources or g.kernels  # groups computing the same source nodes share a row
        rows.setdefault(key, []).append(s)
        group_of.setdefault(key, g)
    out = []
    for key, timed in rows.items():
        g = group_of[key]
        recs = [records[n] for n in g.sources if n in records]
        kernel_types = tuple(_kernel_type(s, op_types) for s in timed)
        mean = sum(s.mean_us for s in timed)
        per_run = _added(timed)
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
                share=Spread.of(per_run, mean).median_us / total if total > 0 else 0.0,
                macs=sum(r.macs for r in recs),
                flops=sum(r.flops for r in recs),
                bytes_read=sum(r.bytes_read for r in recs),
                bytes_written=sum(r.bytes_written for r in recs),
                input_shapes=timed[0].input_shapes,
                output_shapes=timed[-1].output_shapes,
                per_run_us=per_run,
                scope=_common_scope(recs),
            )
        )
    return tuple(out)


def _common_scope(recs: Sequence[NodeRecord]) -> str | None:
    """The module path the records share, None where one has none (``scopes.common_scope``)."""
    if not recs or any(r.scope is None for r in recs):
        return None
    return common_scope(r.scope for r in recs if r.scope is not None)


def _added(stats: Sequence[KernelStat]) -> tuple[float, ...]:
    """Per-run times of ``stats`` added up run by run (empty unless every one has them)."""
    if not stats or any(len(s.per_run_us) != len(stats[0].per_run_us) for s in stats):
        return ()
    return tuple(sum(runs) for runs in zip(*(s.per_run_us for s in stats), strict=True))


def _kernel_type(stat: KernelStat, op_types: Mapping[str, str] | None) -> str:
    return (op_types or {}).get(stat.name) or stat.op_type or "?"


def by_op_type(
    stats: Sequence[KernelStat], *, op_types: Mapping[str, str] | None = None
) -> tuple[OpTypeProfile, ...]:
    """Kernel time per op type, slowest median first, with cumulative shares (benchmark_model's
    table). An op type's per-run time is its kernels' added up run by run; share = its median /
    the sum of every op type's median.

    Kernels nested in a control-flow kernel are left out: their time is in their parent's.
    """
    acc: dict[str, list[KernelStat]] = {}
    for s in stats:
        if not s.nested:
            acc.setdefault(_kernel_type(s, op_types), []).append(s)
    rows = []
    for op, group in acc.items():
        per_run = _added(group)
        med = Spread.of(per_run, sum(s.mean_us for s in group)).median_us
        rows.append((op, group, per_run, med))
    total = sum(r[3] for r in rows)
    out = []
    running = 0.0
    for op, group, per_run, med in sorted(rows, key=lambda r: (-r[3], r[0])):
        share = med / total if total > 0 else 0.0
        running += share
        out.append(
            OpTypeProfile(
                op,
                len(group),
                round(sum(s.calls_per_run for s in group)),
                sum(s.mean_us for s in group),
                share,
                min(running, 1.0),
                per_run,
            )
        )
    return tuple(out)


def untimed_sources(rows: Sequence[NodeProfile], sources: Sequence[NodeRecord]) -> tuple[str, ...]:
    """Main-graph source nodes no kernel computes (folded as constants or removed by onnxruntime)."""
    timed = {n for r in rows for n in r.sources}
    return tuple(n.name for n in sources if n.graph == "" and n.name not in timed)
