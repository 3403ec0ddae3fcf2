"""The terminal writer: a ``Table`` as a rich table that fits the console (``report.fit``).

Every cell is ``plain`` text in a rich ``Text`` (never read as markup); a table too wide
drops the columns its ``drop`` lists, then cuts the text columns that allow it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onnxcost.report.fit import fitted, layout
from onnxcost.report.safe_text import plain, text

if TYPE_CHECKING:
    from rich.table import Table as RichTable

    from onnxcost.report.tables import Table


def to_rich(table: Table, width: int | None, *, title_style: str = "bold") -> RichTable:
    """``table`` fitted to ``width`` characters (None: no limit), its title in ``title_style``."""
    cols = table.columns
    return fitted(
        text(table.title, style=title_style) if table.title else None,
        table.headers,
        table.numeric,
        [[plain(cell) for cell in row] for row in table.rows],
        width,
        drop=table.drop,
        trim=_trim_order(table),
        tail=[i for i, c in enumerate(cols) if c.cut == "end"],
        show_header=table.show_header,
        styles=[c.style for c in cols],
    )


def is_cut(table: Table, width: int | None) -> bool:
    """Whether ``to_rich(table, width)`` leaves out a column or cuts a cell: then a command
    says where to read the table whole."""
    cells = [[plain(cell) for cell in row] for row in table.rows]
    lay = layout(table.headers, cells, width, drop=table.drop, trim=_trim_order(table))
    return bool(lay.limits) or len(lay.shown) < len(table.columns)


def _trim_order(table: Table) -> list[int]:
    """The columns ``to_rich`` may cut, in the order ``layout`` breaks a tie of widths by:
    prose (cut at its end) before names, the rightmost prose first."""
    cols = table.columns
    prose = [i for i in reversed(range(len(cols))) if cols[i].cut == "end"]
    return prose + [i for i, c in enumerate(cols) if c.cut == "middle"]


def to_grid(table: Table) -> RichTable:
    """``table`` without title, header or borders, two spaces between columns; a column with
    a ``cut`` folds its long cells onto more lines instead (a listing of figures)."""
    from rich.table import Table as RichTable

    grid = RichTable.grid(padding=(0, 2))
    for c in table.columns:
        if c.cut:
            grid.add_column(style=c.style or None, overflow="fold")
        else:
            grid.add_column(style=c.style or None, no_wrap=True)
    for row in table.rows:
        grid.add_row(*(text(cell) for cell in row))
    return grid


__all__ = ["is_cut", "to_grid", "to_rich"]
