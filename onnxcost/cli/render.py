"""``render(result, format, output)``: every command's output, in every format it offers.

A result type's writers are listed once (``views``); ``render`` picks one by ``Format`` and
sends its text to stdout or a file (``emit``), a page never onto a terminal (``emit_page``),
Netron's attachment to a .json file (``emit_netron``), and rich tables at the report width.
Adding a format is a member of ``Format`` and a field of ``Views``.

No ``from __future__ import annotations`` in cli/: typer evaluates the annotations at each
start (see onnxcost/cli/__init__.py); names imported for type checking only are quoted.
"""

import enum
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import typer

from onnxcost.cli.guard import reader_gone
from onnxcost.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from onnxcost.analysis.result import Analysis
    from onnxcost.bench.result import BenchResult
    from onnxcost.compare import Comparison
    from onnxcost.llm.cost import LlmReport
    from onnxcost.predict.versus import Versus
    from onnxcost.prepare import PreparedModel
    from onnxcost.report.select import Selection
    from onnxcost.report.tables import Table


class Format(str, enum.Enum):
    """Every output format. A command offers a subset (``options.ListFormat``, ...)."""

    table = "table"
    json = "json"
    csv = "csv"
    markdown = "markdown"
    html = "html"
    netron = "netron"


@dataclass(frozen=True)
class Views:
    """One result's writers, one per format it has. ``json`` is the text without its last
    newline; a format without a writer (None) is drawn as the table."""

    table: Callable[["Console"], None]
    json: Callable[[], str]
    csv: Callable[[], str] | None = None
    markdown: Callable[[], str] | None = None
    html: Callable[[], str] | None = None
    netron: Callable[[Path | None], None] | None = None


def render(
    result: object,
    format: Format,
    output: Path | None,
    *,
    wide: bool = False,
    top: int | None = None,
    selection: "Selection | None" = None,
    depth: int | None = None,
    tree: bool = False,
    model: "PreparedModel | None" = None,
    static: "Analysis | None" = None,
) -> None:
    """Write ``result`` (an Analysis, BenchResult, Comparison, LlmReport, or ``Views`` a command
    made) in ``format`` to ``output`` or stdout.

    ``wide``: keep every table column. ``top``: bench's profile rows (None: all).
    ``selection``, ``depth``, ``tree``: analyze's chosen nodes and scope tree. ``model``:
    for netron, the model prepared with ``keep_source=True``; ``static``: bench's analysis of it.
    """
    v = views(result, top=top, selection=selection, depth=depth, tree=tree, model=model,
              static=static)  # fmt: skip
    if format is Format.netron and v.netron is not None:
        v.netron(output)
    elif format is Format.html and v.html is not None:
        emit_page(v.html, output)
    elif format is Format.json:
        emit(v.json() + "\n", output)
    elif format is Format.csv and v.csv is not None:
        emit(v.csv(), output)
    elif format is Format.markdown and v.markdown is not None:
        emit(v.markdown(), output)
    else:
        render_rich(v.table, output, wide=wide)


def table_views(
    table: "Table", json: Callable[[], str], draw: Callable[["Console"], None] | None = None
) -> Views:
    """The views of a result that is one ``Table`` (``ops``, ``providers``, ``zoo list``): CSV
    and Markdown write it, the terminal draws it fitted to its width, or ``draw`` draws it."""

    def fit(console: "Console") -> None:
        from onnxcost.report.writers.rich import to_rich

        console.print(to_rich(table, console.width))

    def markdown() -> str:
        from onnxcost.report.writers.markdown import to_markdown

        return "\n".join(to_markdown(table)) + "\n"

    def csv() -> str:
        from onnxcost.report.writers.csv import to_csv

        return to_csv(table)

    return Views(table=draw or fit, json=json, csv=csv, markdown=markdown)


def views(
    result: object,
    *,
    top: int | None = None,
    selection: "Selection | None" = None,
    depth: int | None = None,
    tree: bool = False,
    model: "PreparedModel | None" = None,
    static: "Analysis | None" = None,
) -> Views:
    """The writers of ``result`` (see ``render``)."""
    if isinstance(result, Views):
        return result
    if _is(result, "onnxcost.analysis.result", "Analysis"):
        return _analysis_views(cast("Analysis", result), selection, depth, tree, model)
    if _is(result, "onnxcost.bench.result", "BenchResult"):
        return _bench_views(cast("BenchResult", result), top, model, static)
    if _is(result, "onnxcost.compare.records", "Comparison"):
        return _compare_views(cast("Comparison", result))
    if _is(result, "onnxcost.llm.cost", "LlmReport"):
        return _llm_views(cast("LlmReport", result))
    raise TypeError(f"no views of {type(result).__name__}")


def _is(result: object, module: str, name: str) -> bool:
    """``isinstance(result, module.name)`` without importing ``module``: a result of that class
    has loaded it. Importing bench, compare and llm to test an analysis took 0.2 s of
    ``onnxcost analyze``'s 1.5 s."""
    loaded = sys.modules.get(module)
    return loaded is not None and isinstance(result, getattr(loaded, name))


def _analysis_views(
    result: "Analysis",
    chosen: "Selection | None",
    depth: int | None,
    tree: bool,
    model: "PreparedModel | None",
) -> Views:
    """analyze: every format shows the same chosen nodes in the same order."""
    from onnxcost.analysis.records import to_json
    from onnxcost.report import table

    if chosen is None:
        from onnxcost.report.select import Selection

        chosen = Selection(tuple(result.nodes), len(result.nodes))
    cut = chosen.nodes

    def as_json() -> str:
        data = result.to_dict()
        if cut != result.nodes:
            position = {id(n): k for k, n in enumerate(result.nodes)}
            data["nodes"] = [data["nodes"][position[id(n)]] for n in cut]
        if tree or depth is not None:  # the scope tree, as the table shows it, unfolded
            from onnxcost.report.tree import scope_json

            data["scopes"] = scope_json(result, depth)
        return to_json(data)

    # The other formats' modules are imported where asked for: not at each table's start.
    def as_csv() -> str:
        from onnxcost.report import as_text

        if tree or depth is not None:  # the scope tree instead of the nodes, as the table
            return as_text.scopes_csv(result, depth)
        return as_text.to_csv(cut)

    def as_markdown() -> str:
        from onnxcost.report import as_text

        return as_text.to_markdown(result, cut, depth=depth, tree=tree)

    def as_html() -> str:
        from onnxcost.report import html

        return html.analysis_html(result, cut)

    return Views(
        table=lambda c: table.render(
            result,
            c,
            cut,
            hidden=chosen.hidden,
            depth=depth,
            tree=tree,
            sort_key=chosen.sort_key,
        ),
        json=as_json,
        csv=as_csv,
        markdown=as_markdown,
        html=as_html,
        netron=None if model is None else lambda out: emit_netron(model, result, out),
    )


def _bench_views(
    result: "BenchResult",
    top: int | None,
    model: "PreparedModel | None",
    static: "Analysis | None",
) -> Views:
    from onnxcost.analysis.records import to_json
    from onnxcost.report import bench, html

    netron = None
    if model is not None and static is not None:
        netron = lambda out: emit_netron(model, static, out, bench=result)  # noqa: E731
    return Views(
        table=lambda c: bench.render_table(result, c, top=top),
        json=lambda: to_json(result.to_dict()),
        csv=lambda: bench.to_csv(result),
        markdown=lambda: bench.to_markdown(result, top=top),
        html=lambda: html.bench_html(result),
        netron=netron,
    )


def _compare_views(result: "Comparison") -> Views:
    from onnxcost.analysis.records import to_json
    from onnxcost.report import compare, html

    return Views(
        table=lambda c: compare.render(result, c),
        json=lambda: to_json(result.to_dict()),
        markdown=lambda: compare.to_markdown(result),
        html=lambda: html.compare_html(result),
    )


def _llm_views(report: "LlmReport") -> Views:
    from onnxcost.analysis.records import to_json
    from onnxcost.report import html, llm

    return Views(
        table=lambda c: llm.render(report, c),
        json=lambda: to_json(report.to_dict()),
        markdown=lambda: llm.to_markdown(report),
        html=lambda: html.llm_html(report),
    )


def pipe_console(width: int | None = None) -> "Console":
    """A rich Console on stdout that ends quietly on a closed pipe (rich's own default exits 1)."""
    from rich.console import Console

    class _PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            reader_gone()

    return _PipeConsole(highlight=False, width=width)


def emit(text: str, output: Path | None) -> None:
    """Write ``text`` to stdout, or to ``output`` all at once (see ``checked_output``)."""
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()  # a closed pipe fails here, inside run_guarded, not at exit
        return
    from onnxcost.load.outputs import write_atomic

    write_atomic(output, text)
    typer.echo(f"wrote {output}", err=True)


def emit_page(render: Callable[[], str], output: Path | None) -> None:
    """Write an HTML page to ``output`` or a redirected stdout; never onto a terminal."""
    if output is None and sys.stdout.isatty():
        raise UsageError(
            "--format html writes a page: add --output report.html (or redirect stdout to a file)"
        )
    emit(render(), output)


def emit_netron(
    model: "PreparedModel",
    result: "Analysis",
    output: Path | None,
    bench: "BenchResult | None" = None,
) -> None:
    """Write Netron's attachment for ``model`` (prepared with ``keep_source=True``: Netron
    shows the node names as the file has them); say how many nodes it cannot carry."""
    from onnxcost.report.netron import attachment, node_names

    if output is not None and output.suffix.lower() != ".json":
        raise UsageError(
            f"--format netron: Netron opens an attachment only from a .json file; "
            f"name it {output.with_suffix('.json')}"
        )
    proto = model.source
    assert proto is not None  # prepared with keep_source=True
    att = attachment(result, node_names(proto), graph_name=proto.graph.name, bench=bench)
    emit(att.to_json(), output)
    if att.left_out:
        typer.echo(
            f"onnxcost: note: {att.left_out} nodes have no name of their own in the file (empty "
            f"or shared with another node): Netron cannot show their metrics",
            err=True,
        )


WIDE = 10_000
"""Console width with --wide: every column kept, lines as long as the table."""


def report_width(wide: bool = False) -> int | None:
    """The width a report is laid out for: a terminal's own (None), else ``COLUMNS`` when set,
    else 120; with ``wide``, no limit."""
    if wide:
        return WIDE
    if sys.stdout.isatty():
        return None
    columns = os.environ.get("COLUMNS", "").strip()
    return int(columns) if columns.isdigit() and int(columns) > 0 else 120


def render_rich(
    draw: Callable[["Console"], None], output: Path | None, *, wide: bool = False
) -> None:
    """Draw with rich on the terminal (see ``report_width``), or as plain text into ``output``
    (200 columns, or no limit with ``wide``)."""
    from rich.console import Console

    if output is None:
        draw(pipe_console(report_width(wide)))
        return
    import io

    buffer = io.StringIO()
    draw(Console(file=buffer, width=WIDE if wide else 200, no_color=True, highlight=False))
    emit(buffer.getvalue(), output)


def versus_views(result: "BenchResult", prediction: "Versus", top: int) -> Views:
    """The bench report's views with predicted against measured after them (JSON:
    ``predicted``)."""
    from onnxcost.analysis.records import to_json, to_jsonable
    from onnxcost.report.predict import render_versus, versus_markdown

    base = views(result, top=top or None)

    def table(console: "Console") -> None:
        base.table(console)
        render_versus(prediction, console, top)

    def as_json() -> str:
        data = result.to_dict()
        data["predicted"] = to_jsonable(prediction)
        return to_json(data)

    def markdown() -> str:
        return (base.markdown() if base.markdown is not None else "") + versus_markdown(
            prediction, top
        )

    return Views(table=table, json=as_json, markdown=markdown)
