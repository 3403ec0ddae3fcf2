"""The scope hierarchy of a model, from its node names (torchinfo's and fvcore's ``max_depth``).

An exporter writes a module path into every node name: ``/layer1/layer1.0/conv1/Conv`` is the
Conv of module ``layer1.layer1.0.conv1``. The tree has one scope per path prefix; every scope
carries the subtotal of all the nodes beneath it. Nodes whose name has no scope (``/Flatten``,
``Constant_3``) sit together under one ``(other)`` scope at the top.

Repeated blocks fold: consecutive sibling scopes named ``<prefix><int>`` (``layers.0``,
``layers.1``, ...) whose contents are identical (the same nodes below them, by relative name,
op type and every cost) become one scope ``layers.0 … layers.31`` with ``repeat`` 32, whose
subtotal is that of all 32 and whose children are those of the first block (one block's costs).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from onnxcost.records import NodeRecord
from onnxcost.report import units
from onnxcost.report.safe_text import plain

if TYPE_CHECKING:
    from onnxcost.analyze import Analysis

OTHER = "(other)"
_NUMBERED = re.compile(r"^(.*?)(\d+)$")


@dataclass(frozen=True, slots=True)
class Scope:
    """One scope: its label, full path, how many identical blocks it stands for, and subtotals.

    The subtotals (``count`` .. ``bytes_written``) cover every block it stands for; ``children``
    and ``nodes`` (the nodes directly in it) are those of its first block.
    """

    label: str
    path: str
    repeat: int
    count: int
    macs: int
    flops: int
    params: int
    bytes_read: int
    bytes_written: int
    children: tuple[Scope, ...] = ()
    nodes: tuple[NodeRecord, ...] = ()

    @property
    def bytes_total(self) -> int:
        return self.bytes_read + self.bytes_written

    def walk(self, max_depth: int | None = None, _depth: int = 0) -> Iterator[tuple[int, Scope]]:
        """Every scope beneath this one, depth first in graph order, with its depth (1 = top)."""
        for child in self.children:
            yield _depth + 1, child
            if max_depth is None or _depth + 1 < max_depth:
                yield from child.walk(max_depth, _depth + 1)


@dataclass
class _Building:
    name: str
    path: str
    children: dict[str, _Building] = field(default_factory=dict)
    nodes: list[NodeRecord] = field(default_factory=list)


def scope_parts(rec: NodeRecord) -> list[str]:
    """The scope path of a node: its subgraph's scope, then its name's parts but the last
    (read ``plain``: a name that is not UTF-8 comes as bytes)."""
    parts = [p for p in plain(rec.name).split("/") if p]
    prefix = [p for p in plain(rec.graph).split("/") if p]
    return [*prefix, *parts[:-1]]


def scope_tree(nodes: Sequence[NodeRecord], *, fold: bool = True) -> Scope:
    """The root scope (label '') of ``nodes``, in graph order; repeated blocks folded if ``fold``."""
    root = _Building("", "")
    other: list[NodeRecord] = []
    for rec in nodes:
        parts = scope_parts(rec)
        if not parts:
            other.append(rec)
            continue
        here = root
        for part in parts:
            child = here.children.get(part)
            if child is None:
                child = here.children[part] = _Building(part, f"{here.path}/{part}")
            here = child
        here.nodes.append(rec)
    if other:
        root.children[OTHER] = _Building(OTHER, OTHER, nodes=other)
    return _freeze(root, fold)


def _sums(scopes: Sequence[Scope], recs: Sequence[NodeRecord] = ()) -> dict[str, int]:
    """Subtotals of some scopes and nodes: node count, MACs, FLOPs, params, bytes."""
    return {
        "count": len(recs) + sum(s.count for s in scopes),
        "macs": sum(r.macs for r in recs) + sum(s.macs for s in scopes),
        "flops": sum(r.flops for r in recs) + sum(s.flops for s in scopes),
        "params": sum(r.params for r in recs) + sum(s.params for s in scopes),
        "bytes_read": sum(r.bytes_read for r in recs) + sum(s.bytes_read for s in scopes),
        "bytes_written": sum(r.bytes_written for r in recs) + sum(s.bytes_written for s in scopes),
    }


def _freeze(b: _Building, fold: bool) -> Scope:
    children = [_freeze(c, fold) for c in b.children.values()]
    if fold:
        children = _fold(children)
    return Scope(
        label=b.name,
        path=b.path,
        repeat=1,
        children=tuple(children),
        nodes=tuple(b.nodes),
        **_sums(children, b.nodes),
    )


def _signature(s: Scope, depth: int) -> tuple[object, ...]:
    """What makes two blocks the same: each node's name below the block, op type and costs.

    ``depth`` is the number of scope parts of the block's own path.
    """
    out: list[object] = [s.repeat]
    for rec in s.nodes:
        below = (*scope_parts(rec)[depth:], plain(rec.name).rsplit("/", 1)[-1])
        out.append(
            (below, rec.op_type, rec.domain, rec.macs, rec.flops, rec.params, rec.bytes_total)
        )
    out.extend(_signature(c, depth) for c in s.children)
    return tuple(out)


def _fold(children: list[Scope]) -> list[Scope]:
    """Runs of consecutive ``prefix<n>`` siblings with identical contents become one scope."""
    out: list[Scope] = []
    i = 0
    while i < len(children):
        first = children[i]
        m = _NUMBERED.match(first.label)
        j = i + 1
        if m and first.label != OTHER:
            depth = first.path.count("/")
            sig = _signature(first, depth)
            while j < len(children):
                mj = _NUMBERED.match(children[j].label)
                if not mj or mj.group(1) != m.group(1):
                    break
                if _signature(children[j], depth) != sig:
                    break
                j += 1
        run = children[i:j]
        if len(run) == 1:
            out.append(first)
        else:
            out.append(
                Scope(
                    label=f"{first.label} … {run[-1].label}",
                    path=first.path,
                    repeat=len(run),
                    children=first.children,
                    nodes=first.nodes,
                    **_sums(run),
                )
            )
        i = j
    return out


def tree_rows(
    root: Scope, max_depth: int | None = None, indent: str = "  "
) -> list[tuple[str, Scope]]:
    """Each scope to ``max_depth`` (None: all) with its label indented by depth, a folded one
    with its count: ``layers.1 … layers.31 (31 x)``."""
    out = []
    for depth, s in root.walk(max_depth):
        label = s.label if s.repeat == 1 else f"{s.label} ({s.repeat} x)"
        out.append((indent * (depth - 1) + label, s))
    return out


TREE_HEADERS = ("scope", "nodes", "params", "MACs", "FLOPs", "% FLOPs", "read", "written")


def tree_table(a: Analysis, depth: int | None, indent: str = "  ") -> list[list[str]]:
    """The rows of the scope tree (``report.tree``) to ``depth`` levels, as text cells."""
    root = scope_tree(a.counted_nodes)
    return [
        [
            plain(label),
            str(s.count),
            units.count(s.params),
            units.count(s.macs),
            units.count(s.flops),
            units.percent(s.flops, root.flops),
            units.nbytes(s.bytes_read),
            units.nbytes(s.bytes_written),
        ]
        for label, s in tree_rows(root, depth, indent)
    ]


__all__ = ["OTHER", "TREE_HEADERS", "Scope", "scope_parts", "scope_tree", "tree_rows", "tree_table"]
