"""Node selection shared by every format: --op-type filter, --sort-by order, --top cut."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from onnxcost.errors import UsageError
from onnxcost.records import NodeRecord
from onnxcost.report.safe_text import plain

SortKey = Literal["order", "macs", "flops", "bytes", "params"]
SORT_KEYS: tuple[SortKey, ...] = ("order", "macs", "flops", "bytes", "params")


def select_nodes(
    nodes: Sequence[NodeRecord],
    *,
    sort_by: SortKey = "order",
    top: int | None = None,
    op_type: str | None = None,
) -> list[NodeRecord]:
    """Filter by op-type regex (full match, case-sensitive), sort (stable, descending for costs), cut."""
    out = list(nodes)
    if op_type:
        try:
            pattern = re.compile(op_type)
        except re.error as e:
            raise UsageError(f"--op-type {op_type!r} is not a valid regular expression: {e}") from e
        out = [n for n in out if pattern.fullmatch(n.op_type)]
    if sort_by != "order":
        key = {
            "macs": lambda n: n.macs,
            "flops": lambda n: n.flops,
            "bytes": lambda n: n.bytes_read + n.bytes_written,
            "params": lambda n: n.params,
        }[sort_by]
        out.sort(key=key, reverse=True)
    if top is not None and top > 0:
        out = out[:top]
    return out


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
