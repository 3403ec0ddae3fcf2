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
    keeps more of them). Without such a cut, characters from both ends. Leading spaces (a
    tree's indentation) stay where they leave ``MIN_TRIM`` characters for the rest.
    """
    if len(s) <= width:
        return s
    if width <= 1:
        return ELLIPSIS[:width]
    indent = len(s) - len(s.lstrip(" "))
    if 0 < indent <= width - MIN_TRIM:
        return s[:indent] + middle_trim(s[indent:], width - indent)
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


def distinct_trims(cells: Sequence[str], width: int) -> list[str]:
    """``middle_trim`` of each cell, but where two different cells would read the same, each
    keeps the scope that tells them apart: ``/layer2/layer2.0/downsample/downsample.0/Conv``
    and its layer3 and layer4 twins all trim to ``…/downsample/downsample.0/Conv`` at 30; here
    they read ``/layer2/…/downsample.0/Conv`` and so on (``_apart``). A few passes, as a new
    cut can meet another cell's; cells that are equal stay equal."""
    out = [middle_trim(c, width) for c in cells]
    for _pass in range(4):
        sources: dict[str, set[str]] = {}
        for cell, cut in zip(cells, out, strict=True):
            sources.setdefault(cut, set()).add(cell)
        fixed: dict[str, str] = {}
        for group in sources.values():
            if len(group) > 1:
                fixed.update(_apart(sorted(group), width))
        changed = [fixed.get(cell, cut) for cell, cut in zip(cells, out, strict=True)]
        if changed == out:
            break
        out = changed
    return out


def _apart(group: Sequence[str], width: int) -> dict[str, str]:
    """Each of ``group`` (different strings) cut to ``width`` keeping the first ``/`` part
    where they differ, then as many last parts as fit: ``/HEAD/DIFF/…/LAST`` or, shorter,
    ``…/DIFF/…/LAST``. A string whose cut does not fit keeps ``middle_trim``'s."""
    split = [s.split("/") for s in group]
    # The smallest and largest lists share the longest prefix that all share.
    first, last = min(split), max(split)
    p = 0
    while p < min(len(first), len(last)) and first[p] == last[p]:
        p += 1
    out = {}
    for s, parts in zip(group, split, strict=True):
        if p >= len(parts) - 1:
            continue  # no part of its own before the last: nothing to keep apart
        rest = parts[p + 1 :]
        heads = ["/".join(parts[: p + 1]) + "/"]
        if p > 1 or (p == 1 and parts[0]):
            heads.append(ELLIPSIS + "/" + parts[p] + "/")
        for head in heads:
            cut = ""
            for k in range(min(len(rest), width), 0, -1):
                tail = "/".join(rest[len(rest) - k :])
                cut = head + ("" if k == len(rest) else ELLIPSIS + "/") + tail
                if len(cut) <= width:
                    break
                cut = ""
            if cut:
                out[s] = cut
                break
    return out


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
    trim: bool = True,
) -> list[str]:
    """``lead`` then ``items`` joined by ``sep``, broken between items (never inside one) into
    lines of at most ``width`` characters (None: one line); a continuation line starts with
    ``indent`` spaces (default: the lead's width, a hanging indent). An item too long for a line
    of its own is trimmed in the middle (``middle_trim``; with ``trim`` False, kept whole: a
    formula's term); past ``max_lines`` lines the last line ends ``… N more``."""
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
        if not rows[-1] and trim:
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
    styles: Sequence[str] = (),
) -> Table:
    """A rich table of ``rows`` (plain strings, never markup) laid out by ``layout``; every
    cell on one line. Columns in ``tail`` (also listed in ``trim``) are prose, cut at their end
    (``tail_trim``) rather than in the middle; ``styles``, a rich style per column."""
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
            style=(styles[i] or None) if styles else None,
        )
    # Column by column: a trimmed name column keeps different names apart (distinct_trims).
    cells = {i: _cut([row[i] for row in rows], lay.limits.get(i), i in tail) for i in lay.shown}
    for r in range(len(rows)):
        t.add_row(*(Text(cells[i][r]) for i in lay.shown))
    return t


def _cut(column: list[str], limit: int | None, at_end: bool) -> list[str]:
    if limit is None:
        return column
    if at_end:
        return [tail_trim(cell, limit) for cell in column]
    return distinct_trims(column, limit)


__all__ = [
    "ELLIPSIS",
    "Layout",
    "distinct_trims",
    "fitted",
    "layout",
    "middle_trim",
    "table_width",
    "tail_trim",
    "wrap_items",
]
