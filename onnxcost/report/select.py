"""Node selection shared by every format: --op-type filter, --top cut, --sort-by order, computed
once per report so table, JSON, CSV, Markdown and HTML list the same nodes in the same order."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from onnxcost.analysis.records import NodeRecord
from onnxcost.errors import UsageError
from onnxcost.report.safe_text import plain

SortKey = Literal["order", "macs", "flops", "bytes", "params"]
SORT_KEYS: tuple[SortKey, ...] = ("order", "macs", "flops", "bytes", "params")

DEFAULT_CUT = 30
"""Nodes a screen format (table, Markdown) lists without --top, when there are more than..."""
SHOW_ALL_UP_TO = 50
"""...this many: up to 50 it lists them all."""


def _macs(n: NodeRecord) -> int:
    return n.macs


def _flops(n: NodeRecord) -> int:
    return n.flops


def _bytes(n: NodeRecord) -> int:
    return n.bytes_read + n.bytes_written


def _params(n: NodeRecord) -> int:
    return n.params


COST_KEYS: dict[str, Callable[[NodeRecord], int]] = {
    "macs": _macs,
    "flops": _flops,
    "bytes": _bytes,
    "params": _params,
}
"""--sort-by key -> the cost it ranks by (descending)."""


@dataclass(frozen=True, slots=True)
class Selection:
    """The nodes a report lists, in the order it lists them, and how many the filter kept."""

    nodes: tuple[NodeRecord, ...]
    matched: int
    """Nodes that passed --op-type (all without it); ``matched - len(nodes)`` were cut."""
    sort_key: str = "order"
    """What they are ranked by: 'order' (graph order) or a cost (``COST_KEYS``)."""

    @property
    def hidden(self) -> int:
        return self.matched - len(self.nodes)


def select(
    nodes: Sequence[NodeRecord],
    *,
    sort_by: SortKey | None = None,
    top: int | None = None,
    op_type: str | None = None,
    screen: bool = False,
) -> Selection:
    """The one selection every renderer prints: --op-type filter, --top cut, order.

    Filter: op types that fully match the ``op_type`` regex (case-sensitive). Cut: ``top``
    nodes (0: all); without ``top``, a ``screen`` format (table, Markdown) lists all up to
    SHOW_ALL_UP_TO nodes, else DEFAULT_CUT, and the others (JSON, CSV, HTML) list all.
    Order: with ``sort_by`` a cost, costliest first (stable: ties keep graph order); with
    ``sort_by`` 'order', graph order (a cut keeps the first nodes); without ``sort_by``,
    graph order when nothing is cut, else the costliest by FLOPs, costliest first, the same
    with and without --top. One pass to filter and at most one sort: O(n log n) for n nodes.
    """
    kept: Sequence[NodeRecord] = nodes
    if op_type:
        try:
            pattern = re.compile(op_type)
        except re.error as e:
            raise UsageError(f"--op-type {op_type!r} is not a valid regular expression: {e}") from e
        kept = [n for n in nodes if pattern.fullmatch(n.op_type)]
    limit = top
    if limit is None:  # the format's default
        limit = DEFAULT_CUT if screen and len(kept) > SHOW_ALL_UP_TO else 0
    cut = 0 < limit < len(kept)
    key = sort_by if sort_by is not None else ("flops" if cut else "order")
    ordered = kept if key == "order" else sorted(kept, key=COST_KEYS[key], reverse=True)
    listed = ordered[:limit] if cut else ordered
    return Selection(tuple(listed), len(kept), key)


def select_nodes(
    nodes: Sequence[NodeRecord],
    *,
    sort_by: SortKey = "order",
    top: int | None = None,
    op_type: str | None = None,
) -> list[NodeRecord]:
    """``select(...).nodes`` as a list, ``sort_by`` defaulting to graph order (kept for callers
    of the earlier API)."""
    return list(select(nodes, sort_by=sort_by, top=top, op_type=op_type).nodes)


def op_type_miss(nodes: Sequence[NodeRecord], op_type: str, limit: int = 20) -> str:
    """What to say when ``--op-type`` selects nothing: the pattern and the op types there are."""
    present = sorted({plain(n.op_type) for n in nodes})
    listed = ", ".join(present[:limit]) + (
        f", ... ({len(present)} in all)" if len(present) > limit else ""
    )
    return (
        f"no node's op type matches '{plain(op_type)}' (a full, case-sensitive match); "
        f"op types in this model: {listed or 'none'}"
    )
