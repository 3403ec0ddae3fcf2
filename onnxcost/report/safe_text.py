"""Model strings are data: every text renderer passes names, op types and other model text here.

A model file is untrusted input. A node name may hold rich markup (``[bold red]``, ``[link=...]``),
terminal escape sequences (CSI ``\\x1b[31m``, OSC 8 hyperlinks), a newline that forges a second
line of output, Markdown that renders a link or HTML, a formula a spreadsheet runs from CSV, or
bytes that are not UTF-8 (protobuf then hands out ``bytes`` instead of ``str``). Each function
here turns such a value into text that shows what the model says and does nothing else:

- ``plain``: C0/C1 control characters, DEL, line/paragraph separators and bidirectional
  overrides written as Python escapes (``\\x1b``, ``\\n``, ``\\u202e``); bytes that are not
  UTF-8 as ``\\xff``. The base of all the others.
- ``text``: a rich ``Text`` (never parsed as markup or emoji codes).
- ``md``: Markdown-active characters (``\\ | ` [ ] < >``) backslash-escaped; ``md_code``: a
  code span no backtick in the text can close.
- ``csv_cell`` (and ``csv_writer``, which applies it to every cell): a text cell that begins with ``= + - @``, tab or CR prefixed with ``'``
  (OWASP's CSV-injection rule); numbers pass through as numbers.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.table import Table
    from rich.text import Text

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_MARKDOWN = re.compile(r"([\\|`\[\]<>])")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    named = _NAMED.get(c)
    if named is not None:
        return named
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def plain(value: object) -> str:
    """``value`` as one line of printable text: control characters and invalid UTF-8 escaped.

    ``"a\\nb"`` -> ``a\\nb`` (a backslash and an n), ``"\\x1b[31m"`` -> ``\\x1b[31m`` (text),
    ``b"\\xff"`` -> ``\\xff``, a lone surrogate ``"\\udcff"`` -> ``\\udcff``.
    """
    # Kept: a model's names are text (load.names), but this takes any value (onnxruntime's
    # profile, provider messages, a caller's own bytes).
    if isinstance(value, bytes | bytearray):
        s = bytes(value).decode("utf-8", "backslashreplace")
    else:
        s = value if isinstance(value, str) else str(value)
        if s.isascii():
            if s.isprintable():
                return s
        else:
            try:
                s.encode("utf-8")
            except UnicodeEncodeError:
                s = s.encode("utf-8", "backslashreplace").decode("utf-8")
    return _CONTROL.sub(_escape, s)


def text(value: object, style: str = "") -> Text:
    """A rich ``Text`` of ``plain(value)``: rich draws it as is, markup and ``:emoji:`` codes too."""
    from rich.text import Text

    return Text(plain(value), style=style)


def hanging(lead: str | Text, value: object, style: str = "") -> Table:
    """``lead`` then ``text(value)``, its wrapped lines aligned under the value's first
    character (``  - finding`` wraps under ``finding``; rich has no hanging indent, so a
    two-column grid)."""
    from rich.table import Table
    from rich.text import Text

    first = lead if isinstance(lead, Text) else Text(lead)
    grid = Table.grid()
    grid.add_column(no_wrap=True, width=first.cell_len)
    grid.add_column()
    grid.add_row(first, text(value, style))
    return grid


def md(value: object) -> str:
    """Text for a Markdown table cell or line: ``plain`` with ``\\ | ` [ ] < >`` escaped.

    ``a|b`` -> ``a\\|b``; ``[x](http://y)`` -> ``\\[x\\](http://y)`` (no link);
    ``<img src=x>`` -> ``\\<img src=x\\>`` (no HTML).
    """
    return _MARKDOWN.sub(r"\\\1", plain(value))


def md_code(value: object) -> str:
    """A Markdown code span of ``plain(value)``, fenced by more backticks than it holds.

    ``a*b`` -> ```a*b``` (no emphasis); ``x`y`` -> ````x`y````, as CommonMark reads it."""
    s = plain(value)
    runs = re.findall(r"`+", s)
    fence = "`" * (max(map(len, runs), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def csv_cell(value: object) -> object:
    """A CSV cell: numbers unchanged; text ``plain`` and, if a spreadsheet would run it, ``'``-prefixed.

    ``=HYPERLINK("http://x","y")`` -> ``'=HYPERLINK("http://x","y")``; ``-0.5`` and ``12`` stay.
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    s = plain(value)
    raw = value if isinstance(value, str) else s  # a leading tab is "\\t" once plain
    if (raw.startswith(_FORMULA_START) or s.startswith(_FORMULA_START)) and not _is_number(s):
        return "'" + s
    return s


class _CsvWriter:
    """``csv.writer`` whose every cell goes through ``csv_cell``."""

    def __init__(self, out: TextIO) -> None:
        self._w = csv.writer(out, lineterminator="\n")

    def writerow(self, row: Iterable[object]) -> None:
        self._w.writerow([csv_cell(v) for v in row])


def csv_writer(out: TextIO) -> _CsvWriter:
    """A CSV writer (``\\n`` line ends) that writes each cell as ``csv_cell`` makes it."""
    return _CsvWriter(out)


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


__all__ = ["csv_cell", "csv_writer", "md", "md_code", "plain", "text"]
