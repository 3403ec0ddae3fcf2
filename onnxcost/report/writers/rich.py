"""The terminal writer: a ``Table`` as a rich table that fits the console (``report.fit``).

Every cell is ``plain`` text in a rich ``Text`` (never read as markup); a table too wide
drops the columns its ``drop`` lists, then cuts the text columns that allow it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onnxcost.report.fit import fitted
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
        trim=[i for i, c in enumerate(cols) if c.cut],
        tail=[i for i, c in enumerate(cols) if c.cut == "end"],
        show_header=table.show_header,
        styles=[c.style for c in cols],
    )


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


__all__ = ["to_grid", "to_rich"]
