"""The CSV writer: a ``Table``'s headers and rows; numbers stay numbers, text goes through
``csv_cell`` (control characters escaped, spreadsheet formulas defused)."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from onnxcost.report.safe_text import csv_writer

if TYPE_CHECKING:
    from onnxcost.report.tables import Table


def to_csv(table: Table) -> str:
    """A header row, then one row per table row (``\\n`` line ends); the title is not written."""
    buf = io.StringIO()
    w = csv_writer(buf)
    w.writerow(table.headers)
    for row in table.rows:
        w.writerow(row)
    return buf.getvalue()


__all__ = ["to_csv"]
