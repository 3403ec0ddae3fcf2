"""The Markdown writer: a ``Table`` as a GitHub table, every header and cell escaped (``md``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from onnxcost.report.safe_text import md

if TYPE_CHECKING:
    from onnxcost.report.tables import Table


def to_markdown(table: Table, level: int = 0) -> list[str]:
    """The table's lines; with a ``level``, first its title as a heading of that level and a
    blank line. Numeric columns are right-aligned (``---:``)."""
    head = [f"{'#' * level} {md(table.title)}", ""] if level else []
    return [
        *head,
        "| " + " | ".join(md(h) for h in table.headers) + " |",
        "|" + "|".join("---:" if n else "---" for n in table.numeric) + "|",
        *("| " + " | ".join(md(cell) for cell in row) + " |" for row in table.rows),
    ]


__all__ = ["to_markdown"]
