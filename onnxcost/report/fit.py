"""Tables that fit the terminal: every row on one line, whatever the width.

A table too wide for the console first drops its least important columns (the numeric ones
the caller lists first in ``drop``), never the identifying ones (op type, node name); then it
trims the long text columns in the middle, keeping a name's first and last parts:
``/layer1/layer1.0/conv1/Conv`` -> ``/layer1/…/conv1/Conv``. Rich's SIMPLE_HEAD box takes
3 characters per column plus 1 (a space each side of a cell, one between cells), so a table
of cell widths w_1..w_n is sum(w_i) + 3n + 1 characters wide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.table import Table
from rich.text import Text

ELLIPSIS = "…"
MIN_TRIM = 12
"""A trimmed text column is never narrower than this (or its header)."""


def table_width(widths: Sequence[int]) -> int:
    """Characters a SIMPLE_HEAD table of these cell widths takes: sum + 3 per column + 1."""
    return sum(widths) + 3 * len(widths) + 1


def middle_trim(s: str, width: int) -> str:
    """``s`` cut to ``width`` characters with ``…`` in the middle, at ``/`` boundaries if it can.

    ``/layer1/layer1.0/conv1/Conv`` at 20 -> ``/layer1/…/conv1/Conv``: the first part, then as
    many trailing parts as fit (or only trailing parts, ``…/layer1.0/conv1/Conv``, where that
    keeps more of them). Without such a cut, characters from both ends.
    """
    if len(s) <= width:
        return s
    if width <= 1:
        return ELLIPSIS[:width]
    parts = s.split("/")
    if len(parts) > 2:
        head = "/".join(parts[:2]) if parts[0] == "" else parts[0]
        rest = parts[2:] if parts[0] == "" else parts[1:]
        best, best_k = "", 0
        # The first part and as many last parts as fit; or, if that keeps more of the end,
        # only last parts: /layer1/…/conv1/Conv, or …/layer1.0/conv1/Conv.
        for lead in (f"{head}/{ELLIPSIS}/", f"{ELLIPSIS}/"):
            k = 0
            while k < len(rest) and len(lead) + len("/".join(rest[len(rest) - k - 1 :])) <= width:
                k += 1
            if best_k < k < len(rest):
                best, best_k = lead + "/".join(rest[len(rest) - k :]), k
        if best:
            return best
    keep = width - 1
    front = (keep + 1) // 2
    return s[:front] + ELLIPSIS + s[len(s) - (keep - front) :]


@dataclass(frozen=True, slots=True)
class Layout:
    """Which columns a table shows, and the widest each trimmed text column may be."""

    shown: tuple[int, ...]
    limits: dict[int, int]


def layout(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int | None,
    *,
    drop: Sequence[int] = (),
    trim: Sequence[int] = (),
) -> Layout:
    """Fit a table into ``width`` (None: no limit). ``drop``: columns that may go, the first to
    go first; ``trim``: text columns that may be cut in the middle, the widest cut first."""
    natural = [
        max([len(h), *(len(r[i]) for r in rows)]) if rows else len(h) for i, h in enumerate(headers)
    ]
    shown = list(range(len(headers)))
    limits: dict[int, int] = {}
    if width is None:
        return Layout(tuple(shown), limits)
    widths = dict(enumerate(natural))

    def total() -> int:
        return table_width([widths[i] for i in shown])

    for i in drop:
        if total() <= width:
            break
        if i in shown:
            shown.remove(i)
    trimmable = [i for i in trim if i in shown]
    while total() > width and trimmable:
        widest = max(trimmable, key=lambda i: widths[i])
        floor = max(MIN_TRIM, len(headers[widest]))
        if widths[widest] <= floor:
            trimmable.remove(widest)
            continue
        others = [widths[i] for i in trimmable if i != widest]
        # Cut the widest to the excess, but not below the next widest: cuts stay balanced.
        target = max(floor, widths[widest] - (total() - width), max(others, default=0))
        widths[widest] = limits[widest] = min(target, widths[widest] - 1)
    return Layout(tuple(shown), limits)


def fitted(
    title: str | Text,
    headers: Sequence[str],
    numeric: Sequence[bool],
    rows: Sequence[Sequence[str]],
    width: int | None,
    *,
    drop: Sequence[int] = (),
    trim: Sequence[int] = (),
) -> Table:
    """A rich table of ``rows`` (plain strings, never markup) laid out by ``layout``; every
    cell on one line."""
    lay = layout(headers, rows, width, drop=drop, trim=trim)
    t = Table(
        title=title,
        box=box.SIMPLE_HEAD,
        title_justify="left",
        title_style="bold",
    )
    for i in lay.shown:
        t.add_column(
            Text(headers[i]),
            justify="right" if numeric[i] else "left",
            no_wrap=True,
            overflow="ellipsis",
        )
    for row in rows:
        t.add_row(
            *(
                Text(middle_trim(row[i], lay.limits[i]) if i in lay.limits else row[i])
                for i in lay.shown
            )
        )
    return t


def drop_order(headers: Sequence[str], keep: Sequence[str]) -> list[int]:
    """Every column not named in ``keep`` (nor the first), rightmost first: tables list their
    most telling figures first."""
    return [i for i in reversed(range(len(headers))) if i and headers[i] not in keep]


__all__ = ["ELLIPSIS", "Layout", "drop_order", "fitted", "layout", "middle_trim", "table_width"]
