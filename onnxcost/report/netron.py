"""Netron's metrics attachment: a JSON file that Netron shows beside the model it belongs to.

Netron (``metadata.Attachment`` in its source) accepts a ``.json`` file whose ``signature`` is
``"netron:attachment"`` and reads two lists, ``metadata`` and ``metrics``, of entries
``{kind, target, name, value, type}``. An entry belongs to the entity whose key is
``kind::target``: for a node, its name up to the first newline; for the model, ``""``; for a
graph, its name up to the first newline (``""`` when it has none). Within one key a repeated
``name`` overwrites the earlier one, so each metric is written once per target. A node
without a name, or whose name (to its first newline) another node shares, cannot be told
apart by that key: such nodes are left out, and counted in ``Attachment.left_out``.

Node metrics: ``macs``, ``flops``, ``params``, ``bytes_read``, ``bytes_written`` (numbers)
and ``status``; with a profiled bench, ``time_us`` (median time per run of the kernel that ran
the node) and ``share`` (that kernel's fraction of the run), and ``kernel_nodes`` where one
kernel ran several nodes (the time is the whole kernel's).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import onnx

from onnxcost.load.graph import iter_graphs
from onnxcost.load.tensors import name_text

if TYPE_CHECKING:
    from onnxcost.analysis.result import Analysis
    from onnxcost.bench.result import BenchResult

SIGNATURE = "netron:attachment"
NODE_METRICS = ("macs", "flops", "params", "bytes_read", "bytes_written", "status")


@dataclass(frozen=True, slots=True)
class Attachment:
    """The attachment's JSON object, and how many costed nodes Netron could not be shown."""

    data: dict[str, Any]
    left_out: int

    def to_json(self) -> str:
        return json.dumps(self.data, indent=1, ensure_ascii=False) + "\n"


def target_of(name: str) -> str:
    """The part of an entity's name that Netron matches: up to the first newline."""
    # Kept: Netron names the nodes of the model as loaded (PreparedModel.source), whose names
    # are not made text.
    return name_text(name).split("\n", 1)[0]


def node_names(model: onnx.ModelProto) -> list[str]:
    """The node names as written in the file, subgraphs included (Netron shows these)."""
    return [node.name for _scope, g in iter_graphs(model.graph) for node in g.node]


def _entry(kind: str, target: str, name: str, value: object, type_: str) -> dict[str, Any]:
    return {"kind": kind, "target": target, "name": name, "value": value, "type": type_}


def _totals(kind: str, target: str, a: Analysis) -> list[dict[str, Any]]:
    t = a.totals
    return [
        _entry(kind, target, "macs", t.macs, "int64"),
        _entry(kind, target, "flops", t.flops, "int64"),
        _entry(kind, target, "params", t.params, "int64"),
        _entry(kind, target, "param_bytes", t.param_bytes, "int64"),
        _entry(kind, target, "bytes_read", t.bytes_read, "int64"),
        _entry(kind, target, "bytes_written", t.bytes_written, "int64"),
        _entry(kind, target, "peak_activation_bytes", t.peak_activation_bytes, "int64"),
    ]


def _timings(bench: BenchResult | None) -> dict[str, tuple[float, float, int]]:
    """Source node name -> (kernel time per run in us, share of the run, nodes in the kernel)."""
    out: dict[str, tuple[float, float, int]] = {}
    if bench is None or bench.profile is None:
        return out
    for row in bench.profile.nodes:
        for source in row.sources:
            if source not in out:
                out[source] = (row.median_us, row.share, len(row.sources))
    return out


def attachment(
    a: Analysis,
    file_names: Iterable[str],
    *,
    graph_name: str = "",
    bench: BenchResult | None = None,
) -> Attachment:
    """The attachment for the model ``a`` analysed; ``file_names``: its nodes' names as written
    in the file (``node_names``), ``graph_name`` its main graph's name."""
    names = [n for n in file_names if n]
    in_file = set(names)
    shown = Counter(target_of(n) for n in names)
    times = _timings(bench)
    metrics = [*_totals("model", "", a), *_totals("graph", target_of(graph_name), a)]
    if bench is not None:
        metrics.append(_entry("model", "", "latency_median_ms", bench.latency.median_ms, "float64"))
    left_out = 0
    seen: set[str] = set()
    for rec in a.nodes:
        target = target_of(rec.name)
        if shown.get(target) != 1 or rec.name not in in_file:
            left_out += 1
            continue
        if target in seen:  # a record per node: never two for one target
            continue
        seen.add(target)
        metrics += [
            _entry("node", target, "macs", rec.macs, "int64"),
            _entry("node", target, "flops", rec.flops, "int64"),
            _entry("node", target, "params", rec.params, "int64"),
            _entry("node", target, "bytes_read", rec.bytes_read, "int64"),
            _entry("node", target, "bytes_written", rec.bytes_written, "int64"),
            _entry("node", target, "status", rec.status, "string"),
        ]
        if rec.name in times:
            us, share, kernel_nodes = times[rec.name]
            metrics += [
                _entry("node", target, "time_us", us, "float64"),
                _entry("node", target, "share", share, "float64"),
            ]
            if kernel_nodes > 1:
                metrics.append(_entry("node", target, "kernel_nodes", kernel_nodes, "int64"))
    metadata = [
        _entry("model", "", "onnxcost.convention", a.convention, "string"),
    ]
    data = {"signature": SIGNATURE, "metadata": metadata, "metrics": metrics}
    return Attachment(data, left_out)


def check(data: Mapping[str, Any], file_names: Sequence[str]) -> list[str]:
    """Every way ``data`` breaks Netron's reader rules for a model with ``file_names``: one line
    each (empty: none). The rules: signature; entries with kind and target; one value per name
    per target; node targets are node names to their first newline, naming one node; numbers
    for the cost metrics."""
    problems = []
    if data.get("signature") != SIGNATURE:
        problems.append(f"signature is {data.get('signature')!r}, not {SIGNATURE!r}")
    counts = Counter(target_of(n) for n in file_names if n)
    for container in ("metadata", "metrics"):
        seen: set[tuple[str, str, str]] = set()
        for item in data.get(container, []):
            kind, target, name = item.get("kind"), item.get("target"), item.get("name")
            if not kind or target is None:
                problems.append(f"{container}: an entry without kind or target: {item}")
                continue
            key = (kind, target, name)
            if key in seen:
                problems.append(f"{container}: {kind}::{target} has {name!r} twice")
            seen.add(key)
            if kind == "node":
                if "\n" in target or counts.get(target) != 1:
                    problems.append(f"{container}: node target {target!r} names no single node")
                if name in NODE_METRICS[:-1] and type(item.get("value")) is not int:
                    problems.append(f"{container}: {target!r} {name} is not an integer")
    return problems


__all__ = [
    "NODE_METRICS",
    "SIGNATURE",
    "Attachment",
    "attachment",
    "check",
    "node_names",
    "target_of",
]
