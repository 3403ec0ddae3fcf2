"""One table model for every report: a title, columns, rows of text; the writers draw it.

A view (``report.table`` and ``report.as_text`` for an analysis, ``report.bench``,
``report.compare``, ``report.llm``) builds ``Table`` values from a result; a writer in
``report.writers`` turns one into a format: ``rich`` (the terminal, fitted to its width by
``report.fit``), ``markdown``, ``csv`` and ``html`` (a static table, or the data of one the
page's script draws). A new output format is one new writer.

Cells hold the model's text as it is (a name that is not UTF-8 may come as ``bytes``);
every writer escapes it for its format (``report.safe_text``), so no view escapes twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Cell = str | int | float | bytes | None
"""Text for the terminal, Markdown and HTML; CSV and a page's script keep numbers as numbers
(``None``: a figure left blank on the page)."""


@dataclass(frozen=True, slots=True)
class Column:
    """One column: its header, whether it holds figures (right-aligned), how the terminal may
    shorten its cells when the table is too wide (``cut``: ``middle`` keeps a name's first and
    last parts, ``end`` cuts prose at its end), a rich style for its cells, and how an HTML
    page's script formats its raw values (``kind``, ``writers.html.script_table``)."""

    header: str
    numeric: bool = False
    cut: Literal["", "middle", "end"] = ""
    style: str = ""
    kind: str = ""


@dataclass(frozen=True, slots=True)
class Table:
    """A titled table. ``drop`` lists the columns (by index) a narrow terminal may hide, the
    first to go first; the other formats show every column."""

    title: str
    columns: tuple[Column, ...]
    rows: tuple[tuple[Cell, ...], ...]
    drop: tuple[int, ...] = ()
    show_header: bool = True

    @property
    def headers(self) -> tuple[str, ...]:
        return tuple(c.header for c in self.columns)

    @property
    def numeric(self) -> tuple[bool, ...]:
        return tuple(c.numeric for c in self.columns)


def columns(
    headers: Sequence[str], numeric: Sequence[bool], *, cut_text: bool = True
) -> tuple[Column, ...]:
    """Columns from parallel headers and numeric flags; text columns cut in the middle."""
    return tuple(
        Column(h, n, "middle" if cut_text and not n else "")
        for h, n in zip(headers, numeric, strict=True)
    )


def drop_order(headers: Sequence[str], keep: Sequence[str]) -> tuple[int, ...]:
    """Every column not named in ``keep`` (nor the first), rightmost first: tables list their
    most telling figures first."""
    return tuple(i for i in reversed(range(len(headers))) if i and headers[i] not in keep)


def by_header(headers: Sequence[str], names: Sequence[str]) -> tuple[int, ...]:
    """The indexes of ``names`` (in their order) among ``headers``, skipping absent ones."""
    return tuple(headers.index(h) for h in names if h in headers)


__all__ = ["Cell", "Column", "Table", "by_header", "columns", "drop_order"]
