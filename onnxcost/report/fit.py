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


def tail_trim(s: str, width: int) -> str:
    """``s`` cut to ``width`` characters at its end with ``…``, for prose (a formula, a note):
    the start reads on. The cut goes back to the last space when that loses under a third."""
    if len(s) <= width:
        return s
    if width <= 1:
        return ELLIPSIS[:width]
    cut = s[: width - 1]
    space = cut.rfind(" ")
    if space >= 2 * (width - 1) // 3:
        cut = cut[:space]
    return cut.rstrip(" ,;:|") + ELLIPSIS


def wrap_items(
    lead: str,
    items: Sequence[str],
    width: int | None,
    *,
    sep: str = ", ",
    indent: int | None = None,
    max_lines: int | None = None,
) -> list[str]:
    """``lead`` then ``items`` joined by ``sep``, broken between items (never inside one) into
    lines of at most ``width`` characters (None: one line); a continuation line starts with
    ``indent`` spaces (default: the lead's width, a hanging indent). An item too long for a line
    of its own is trimmed in the middle (``middle_trim``); past ``max_lines`` lines the last line
    ends ``… N more``."""
    if width is None:
        return [lead + sep.join(items)]
    hang = " " * (len(lead) if indent is None else indent)
    glue = sep.rstrip()
    rows: list[list[str]] = [[]]
    for k, item in enumerate(items):
        end = glue if k < len(items) - 1 else ""
        start = lead if len(rows) == 1 else hang
        fits = len(start + sep.join([*rows[-1], item]) + end) <= width
        # A full line goes on to the next; so does a first item too long beside a long lead.
        if not fits and (rows[-1] or (len(rows) == 1 and len(hang) < len(lead))):
            rows.append([])
            start = hang
        if not rows[-1]:
            item = middle_trim(item, max(1, width - len(start) - len(end)))
        rows[-1].append(item)
    if max_lines is not None and len(rows) > max_lines:
        rows = rows[:max_lines]
        shown = sum(map(len, rows))
        start = lead if max_lines == 1 else hang
        while True:
            tail = f"{ELLIPSIS} {len(items) - shown} more"
            if len(rows[-1]) <= 1 or len(start + sep.join([*rows[-1], tail])) <= width:
                break
            rows[-1].pop()
            shown -= 1
        rows[-1].append(tail)
    return [
        (lead.rstrip() if not row else (lead if i == 0 else hang) + sep.join(row))
        + (glue if row and i < len(rows) - 1 else "")
        for i, row in enumerate(rows)
    ]


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
    title: str | Text | None,
    headers: Sequence[str],
    numeric: Sequence[bool],
    rows: Sequence[Sequence[str]],
    width: int | None,
    *,
    drop: Sequence[int] = (),
    trim: Sequence[int] = (),
    tail: Sequence[int] = (),
    show_header: bool = True,
) -> Table:
    """A rich table of ``rows`` (plain strings, never markup) laid out by ``layout``; every
    cell on one line. Columns in ``tail`` (also listed in ``trim``) are prose, cut at their end
    (``tail_trim``) rather than in the middle."""
    lay = layout(headers, rows, width, drop=drop, trim=trim)
    t = Table(
        title=title,
        box=box.SIMPLE_HEAD,
        title_justify="left",
        title_style="bold",
        show_header=show_header,
    )
    for i in lay.shown:
        t.add_column(
            Text(headers[i]),
            justify="right" if numeric[i] else "left",
            no_wrap=True,
            overflow="ellipsis",
        )
    for row in rows:
        t.add_row(*(Text(_cut(row[i], lay.limits.get(i), i in tail)) for i in lay.shown))
    return t


def _cut(cell: str, limit: int | None, at_end: bool) -> str:
    if limit is None:
        return cell
    return tail_trim(cell, limit) if at_end else middle_trim(cell, limit)


def drop_order(headers: Sequence[str], keep: Sequence[str]) -> list[int]:
    """Every column not named in ``keep`` (nor the first), rightmost first: tables list their
    most telling figures first."""
    return [i for i in reversed(range(len(headers))) if i and headers[i] not in keep]


__all__ = [
    "ELLIPSIS",
    "Layout",
    "drop_order",
    "fitted",
    "layout",
    "middle_trim",
    "table_width",
    "tail_trim",
    "wrap_items",
]
