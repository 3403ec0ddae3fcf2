"""The table model and its writers: each writer takes a Table and returns its format."""

from __future__ import annotations

import io

from rich.console import Console

from onnxcost.report.tables import Column, Table, by_header, drop_order
from onnxcost.report.writers.csv import to_csv
from onnxcost.report.writers.html import script_table, to_html
from onnxcost.report.writers.markdown import to_markdown
from onnxcost.report.writers.rich import is_cut, to_grid, to_rich

NAME = "/x/yyyyyyyyyyyy/zzzz/Conv"  # 25 characters
T = Table(
    "Nodes | all",
    (Column("name", cut="middle"), Column("a", True), Column("b", True)),
    ((NAME, 1, "2"),),
    drop=(2,),
)


def _drawn(renderable: object, width: int) -> list[str]:
    buf = io.StringIO()
    Console(file=buf, width=width).print(renderable)
    return [line.rstrip() for line in buf.getvalue().splitlines()]


def test_markdown_escapes_title_headers_and_cells_and_aligns_figures() -> None:
    t = Table("a|b", (Column("x|y"), Column("n", True)), (("[l](u)", 3),))
    assert to_markdown(t, level=2) == [
        "## a\\|b",
        "",
        "| x\\|y | n |",
        "|---|---:|",
        "| \\[l\\](u) | 3 |",
    ]
    assert to_markdown(t)[0] == "| x\\|y | n |"  # no heading without a level


def test_csv_keeps_numbers_and_defuses_formulas() -> None:
    t = Table("t", (Column("name"), Column("n", True)), (("=1+1", -5), ("-0.5", 7)))
    # OWASP's rule: a text cell starting with "=" is prefixed; numbers (and "-0.5") are not.
    assert to_csv(t) == "name,n\n'=1+1,-5\n-0.5,7\n"


def test_rich_drops_then_cuts_in_the_middle() -> None:
    # Natural widths 25, 1, 1: 27 + 3 per column x 3 + 1 = 37 characters.
    assert "b" in _drawn(to_rich(T, 37), 37)[2].split()
    # At 33, dropping b (the first in ``drop``) leaves 25 + 1 + 3 x 2 + 1 = 33: the name whole.
    lines = _drawn(to_rich(T, 33), 33)
    assert lines[2].split() == ["name", "a"]
    assert lines[4].split() == [NAME, "1"]
    # At 30 the name is cut to 25 - (33 - 30) = 22: the first part and the last two that fit.
    assert _drawn(to_rich(T, 30), 30)[4].split() == ["/x/…/zzzz/Conv", "1"]


def test_rich_title_is_text_not_markup() -> None:
    t = Table("[red]x[/red]", (Column("c"),), (("[bold]vvvvvvvvv",),))
    lines = _drawn(to_rich(t, None), 40)
    assert lines[0] == "[red]x[/red]"
    assert lines[4].strip() == "[bold]vvvvvvvvv"


def test_grid_folds_values_and_keeps_labels() -> None:
    t = Table("", (Column("k"), Column("v", cut="end")), (("key", "word " * 6),))
    # 40 columns: "key" + 2 of padding leave 35 for the 30-character value: one line.
    assert _drawn(to_grid(t), 40) == ["key  word word word word word word"]
    # 20: the value folds onto lines of 15 under its column.
    assert _drawn(to_grid(t), 20) == ["key  word word word", "     word word word"]


def test_drop_order_and_by_header() -> None:
    headers = ("node", "calls", "ms", "%", "GB/s")
    # Rightmost first, never the first column, never a kept one.
    assert drop_order(headers, ("ms",)) == (4, 3, 1)
    assert by_header(headers, ("GB/s", "missing", "calls")) == (4, 1)


def test_html_escapes_and_marks_numeric_cells() -> None:
    t = Table("a<b", (Column("op"), Column("n", True)), (("<img>", 3),))
    assert str(to_html(t, "t1")) == (
        '<h3>a&lt;b</h3><div class="tbl-wrap"><table id="t1">\n'
        '<thead><tr><th>op</th><th class="num">n</th></tr></thead>\n'
        '<tbody><tr><td class="text">&lt;img&gt;</td><td class="num">3</td></tr></tbody>'
        "</table></div>"
    )
    assert str(to_html(t, "t1", heading=False)).startswith('<div class="tbl-wrap">')


def test_script_table_keeps_raw_values_and_kinds() -> None:
    t = Table("", (Column("name", kind="text"), Column("us", True, kind="us")), (("a", 1.5),))
    assert script_table(t, "x", sort=1) == {
        "id": "x",
        "columns": [
            {"label": "name", "kind": "text", "numeric": False},
            {"label": "us", "kind": "us", "numeric": True},
        ],
        "rows": [["a", 1.5]],
        "sort": 1,
    }


def test_rich_cuts_prose_before_a_name_of_the_same_width() -> None:
    # Two 20-character cells: 20 + 20 + 3 x 2 + 1 = 47 characters (report.fit.table_width);
    # at 46 one column loses a character. The prose goes first (ops' formula before the op
    # type, as ops drew it before it had a Table); at 47 nothing is cut.
    name, prose = "aaaaaaaaaa/bbbbbbbbb", "word word word word."
    t = Table("", (Column("name", cut="middle"), Column("text", cut="end")), ((name, prose),))
    (row,) = [line for line in _drawn(to_rich(t, 46), 46) if "aaa" in line]
    assert name in row
    assert prose not in row
    assert (is_cut(t, 46), is_cut(t, 47)) == (True, False)
    (whole,) = [line for line in _drawn(to_rich(t, 47), 47) if "aaa" in line]
    assert name in whole
    assert prose in whole
