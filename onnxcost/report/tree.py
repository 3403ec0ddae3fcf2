"""The scope hierarchy of a model, from its node names (torchinfo's and fvcore's ``max_depth``).

An exporter writes a module path into every node name: ``/layer1/layer1.0/conv1/Conv`` is the
Conv of module ``layer1.layer1.0.conv1``. The tree has one scope per path prefix; every scope
carries the subtotal of all the nodes beneath it. Nodes whose name has no scope (``/Flatten``,
``Constant_3``) sit together under one ``(other)`` scope at the top.

Repeated blocks fold: consecutive sibling scopes named ``<prefix><int>`` (``layers.0``,
``layers.1``, ...) whose contents are identical (the same nodes below them, by relative name,
op type and every cost) become one scope ``layers.0 … layers.31`` with ``repeat`` 32, whose
subtotal is that of all 32 and whose children are those of the first block (one block's costs).

The tree keeps ``MAX_DEPTH`` levels: a name's scopes past that fold into one scope at the last
level, whose label joins them and whose ``levels`` says how many it stands for. So a name of
30,000 scopes costs memory in proportion to its length (every scope's path is a prefix of the
name: ``MAX_DEPTH`` of them at most), and nothing here or in the views recurses per level.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from onnxcost import units
from onnxcost.analysis.records import NodeRecord
from onnxcost.report.safe_text import plain
from onnxcost.report.tables import Column, Table

if TYPE_CHECKING:
    from onnxcost.analysis.result import Analysis

OTHER = "(other)"
OWN = "(own nodes)"
"""The row of the nodes directly in a scope that also has scopes below it."""
MAX_DEPTH = 32
"""Scope levels the tree keeps; deeper scopes fold into one scope at this level."""
_DIGITS = "0123456789"


@dataclass(frozen=True, slots=True)
class Scope:
    """One scope: its label, full path, how many identical blocks it stands for, and subtotals.

    The subtotals (``count`` .. ``bytes_written``) cover every block it stands for; ``children``
    and ``nodes`` (the nodes directly in it) are those of its first block. ``levels`` is the
    number of name scopes it stands for: more than 1 only at ``MAX_DEPTH``, where the deeper
    scopes of a name fold into one (its label joins them with ``/``).
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
    levels: int = 1

    @property
    def bytes_total(self) -> int:
        return self.bytes_read + self.bytes_written

    def walk(self, max_depth: int | None = None) -> Iterator[tuple[int, Scope]]:
        """Every scope beneath this one, depth first in graph order, with its depth (1 = top)."""
        stack: list[tuple[int, Iterator[Scope]]] = [(1, iter(self.children))]
        while stack:
            depth, it = stack[-1]
            child = next(it, None)
            if child is None:
                stack.pop()
                continue
            yield depth, child
            if max_depth is None or depth < max_depth:
                stack.append((depth + 1, iter(child.children)))


@dataclass
class _Building:
    name: str
    path: str
    levels: int = 1
    depth: int = 0
    children: dict[str, _Building] = field(default_factory=dict)
    nodes: list[NodeRecord] = field(default_factory=list)


def _all_parts(rec: NodeRecord) -> list[str]:
    """The node's subgraph's scope, then its module path (``NodeRecord.scope``: torch's
    dynamo exporter's record) or else its name's parts but the last."""
    prefix = [p for p in plain(rec.graph).split("/") if p]
    if rec.scope is not None:
        return [*prefix, *(p for p in rec.scope.split("/") if p)]
    parts = [p for p in plain(rec.name).split("/") if p]
    return [*prefix, *parts[:-1]]


def scope_parts(rec: NodeRecord) -> list[str]:
    """The scope path of a node: its subgraph's scope, then its name's parts but the last
    (read ``plain``: a name that is not UTF-8 comes as bytes); past ``MAX_DEPTH`` parts, the
    rest joined with ``/`` into the last."""
    parts = _all_parts(rec)
    if len(parts) > MAX_DEPTH:
        parts[MAX_DEPTH - 1 :] = ["/".join(parts[MAX_DEPTH - 1 :])]
    return parts


def scope_tree(nodes: Sequence[NodeRecord], *, fold: bool = True) -> Scope:
    """The root scope (label '') of ``nodes``, in graph order; repeated blocks folded if ``fold``."""
    root = _Building("", "")
    other: list[NodeRecord] = []
    for rec in nodes:
        parts = _all_parts(rec)
        if not parts:
            other.append(rec)
            continue
        levels = max(1, len(parts) - MAX_DEPTH + 1)
        if levels > 1:
            parts[MAX_DEPTH - 1 :] = ["/".join(parts[MAX_DEPTH - 1 :])]
        here = root
        for k, part in enumerate(parts):
            child = here.children.get(part)
            if child is None:
                deep = levels if k == MAX_DEPTH - 1 else 1
                child = _Building(part, f"{here.path}/{part}", deep, k + 1)
                here.children[part] = child
            here = child
        here.nodes.append(rec)
    if other:
        root.children[OTHER] = _Building(OTHER, OTHER, depth=1, nodes=other)
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


def _freeze(root: _Building, fold: bool) -> Scope:
    """The frozen tree of ``root``, children before parents (a stack, not recursion)."""
    done: dict[int, Scope] = {}
    stack: list[tuple[_Building, bool]] = [(root, False)]
    while stack:
        b, expanded = stack.pop()
        if not expanded:
            stack.append((b, True))
            stack.extend((c, False) for c in b.children.values())
            continue
        children = [done.pop(id(c)) for c in b.children.values()]
        if fold:
            children = _fold(children, b.depth + 1)
        done[id(b)] = Scope(
            label=b.name,
            path=b.path,
            repeat=1,
            children=tuple(children),
            nodes=tuple(b.nodes),
            levels=b.levels,
            **_sums(children, b.nodes),
        )
    return done[id(root)]


def _signature(s: Scope, depth: int) -> tuple[object, ...]:
    """What makes two blocks the same: each node's name below the block, op type and costs.

    ``depth`` is the number of scope parts of the block's own path.
    """
    out: list[object] = []
    # Depth first with each scope's depth and node count: the same tree gives the same tuple.
    for d, c in [(0, s), *s.walk()]:
        out.append((d, c.repeat, c.levels, len(c.nodes)))
        for rec in c.nodes:
            # A name of its scope's nodes (``/h.0/attn/MatMul``: ``MatMul``); a node that has
            # its scope from the exporter's record is named by number (``node_MatMul_42``).
            own = "" if rec.scope is not None else plain(rec.name).rsplit("/", 1)[-1]
            below = (*scope_parts(rec)[depth:], own)
            out.append(
                (below, rec.op_type, rec.domain, rec.macs, rec.flops, rec.params, rec.bytes_total)
            )
    return tuple(out)


def _fold(children: list[Scope], depth: int) -> list[Scope]:
    """Runs of consecutive ``prefix<n>`` siblings with identical contents become one scope;
    ``depth`` is the number of scope parts of their paths."""
    out: list[Scope] = []
    i = 0
    while i < len(children):
        first = children[i]
        stem = first.label.rstrip(_DIGITS)
        j = i + 1
        if stem != first.label and first.label != OTHER:
            sig = _signature(first, depth)
            while j < len(children):
                label = children[j].label
                if label.rstrip(_DIGITS) != stem or label == stem:
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
                    levels=first.levels,
                    **_sums(run),
                )
            )
        i = j
    return out


def own_nodes(s: Scope) -> Scope:
    """The nodes directly in ``s`` (one block's, as its children) as a scope of their own."""
    return Scope(OWN, s.path, 1, children=(), nodes=s.nodes, **_sums((), s.nodes))


def scope_rows(root: Scope, max_depth: int | None = None) -> list[tuple[int, str, Scope]]:
    """The rows of the tree to ``max_depth`` (None: all): (depth, label, scope), each node of
    the model in exactly one row at the bottom of its branch.

    A scope with rows below it whose nodes sit partly directly in it gets an ``(own nodes)``
    row after its scopes, so that the rows below a scope add up to it; a folded one adds up
    N blocks and the rows below it are one block's, and its label says both:
    ``layers.0 … layers.31 (32 x; below: 1 block)``. A scope that stands for deeper
    levels of a name says how many: ``s31/…/s299 (269 levels)``.
    """
    out: list[tuple[int, str, Scope]] = []
    for depth, s in root.walk(max_depth):
        below = (max_depth is None or depth < max_depth) and bool(s.children or s.repeat > 1)
        notes = [f"{s.levels:,} levels"] if s.levels > 1 else []
        if s.repeat > 1:
            notes.append(f"{s.repeat} x; below: 1 block" if below else f"{s.repeat} x")
        out.append((depth, s.label + (f" ({', '.join(notes)})" if notes else ""), s))
        if below and s.children and s.nodes:
            # After the last row of this scope's subtree: placed when the walk leaves it.
            out.append((-depth - 1, OWN, own_nodes(s)))
    return _place_own_rows(out)


def _place_own_rows(rows: list[tuple[int, str, Scope]]) -> list[tuple[int, str, Scope]]:
    """Moves each ``(own nodes)`` row (marked with a negative depth) past its scope's subtree."""
    out: list[tuple[int, str, Scope]] = []
    pending: list[tuple[int, str, Scope]] = []
    for depth, label, s in rows:
        if depth < 0:
            pending.append((-depth, label, s))
            continue
        while pending and pending[-1][0] > depth:
            out.append(pending.pop())
        out.append((depth, label, s))
    out.extend(reversed(pending))
    return out


def tree_rows(
    root: Scope, max_depth: int | None = None, indent: str = "  "
) -> list[tuple[str, Scope]]:
    """``scope_rows`` with each label indented by its depth."""
    return [(indent * (depth - 1) + label, s) for depth, label, s in scope_rows(root, max_depth)]


def scope_json(a: Analysis, depth: int | None) -> list[dict[str, object]]:
    """The scopes of ``a`` to ``depth`` levels (None: all), unfolded, depth first in graph
    order, for the JSON of ``analyze --depth N`` / ``--tree``: each one's path (``/gpt2/
    transformer/h.0``; ``(other)`` for the nodes without a scope), depth and the subtotal of
    every node beneath it."""
    root = scope_tree(a.counted_nodes, fold=False)
    return [
        {
            "scope": s.path,
            "depth": d,
            "nodes": s.count,
            "params": s.params,
            "macs": s.macs,
            "flops": s.flops,
            "bytes_read": s.bytes_read,
            "bytes_written": s.bytes_written,
        }
        for d, s in root.walk(depth)
    ]


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


def tree_view(a: Analysis, depth: int | None, title: str, indent: str = "  ") -> Table:
    """The scope tree as a table: a narrow terminal drops written, read, nodes and params
    (in that order), then cuts the scope labels in the middle."""
    cols = (Column(TREE_HEADERS[0], cut="middle"), *(Column(h, True) for h in TREE_HEADERS[1:]))
    rows = tuple(tuple(row) for row in tree_table(a, depth, indent))
    return Table(title, cols, rows, drop=(7, 6, 1, 2))


__all__ = [
    "MAX_DEPTH",
    "OTHER",
    "OWN",
    "TREE_HEADERS",
    "Scope",
    "own_nodes",
    "scope_json",
    "scope_parts",
    "scope_rows",
    "scope_tree",
    "tree_rows",
    "tree_table",
    "tree_view",
]
