"""The HTML writer: a ``Table`` as a static ``<table>`` (``to_html``), or as the data of a
table that the page's script draws, sorts and filters (``script_table``).

Every header and cell is escaped (markupsafe, Jinja's own escaping); a page puts the static
table in with the ``section`` macro of ``templates/macros.html.j2``. A script-drawn table's
cells are raw values (numbers stay numbers) and each column's ``kind`` names how
``report.js`` formats them (``count``, ``bytes``, ``int``, ``us``, ``pct``, ``rate``; ``text``
wraps anywhere, ``plain`` is monospace); the script puts text on the page as ``textContent``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from markupsafe import Markup

    from onnxcost.report.tables import Table


def to_html(table: Table, table_id: str, heading: bool = True) -> Markup:
    """``<h3>`` title (with ``heading``), then the table: numeric cells ``num``, others ``text``."""
    from markupsafe import Markup, escape

    def cell(value: object, numeric: bool) -> str:
        return f'<td class="{"num" if numeric else "text"}">{escape(value)}</td>'

    numeric = table.numeric
    head = "".join(
        (f'<th class="num">{escape(h)}</th>' if n else f"<th>{escape(h)}</th>")
        for h, n in zip(table.headers, numeric, strict=True)
    )
    body = "".join(
        "<tr>" + "".join(cell(v, n) for v, n in zip(row, numeric, strict=True)) + "</tr>"
        for row in table.rows
    )
    title = f"<h3>{escape(table.title)}</h3>" if heading else ""
    return Markup(
        f'{title}<div class="tbl-wrap"><table id="{escape(table_id)}">\n'
        f"<thead><tr>{head}</tr></thead>\n<tbody>{body}</tbody></table></div>"
    )


def script_table(table: Table, table_id: str, **options: Any) -> dict[str, Any]:
    """The JSON of a script-drawn table: ``id``, ``columns`` (label, kind, numeric), ``rows``,
    then ``options`` (``sort``: the column sorted first; ``page``: rows per page;
    ``placeholder``: the filter box's hint)."""
    return {
        "id": table_id,
        "columns": [
            {"label": c.header, "kind": c.kind, "numeric": c.numeric} for c in table.columns
        ],
        "rows": [list(row) for row in table.rows],
        **options,
    }


__all__ = ["script_table", "to_html"]
