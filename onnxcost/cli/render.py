"""Output plumbing: stdout or a file, a page, Netron's attachment, rich tables at a width.

No ``from __future__ import annotations`` in cli/: typer evaluates the annotations at each
start (see onnxcost/cli/__init__.py); names imported for type checking only are quoted.
"""

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from onnxcost.cli.guard import reader_gone
from onnxcost.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from onnxcost.analysis.walk import Analysis
    from onnxcost.bench.result import BenchResult
    from onnxcost.prepare import PreparedModel


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


def print_fitted(table: Callable[[int | None], "RenderableType"], wide: bool) -> None:
    """A ``report.fit`` table laid out for the report width (``report_width``) on stdout."""
    console = pipe_console(report_width(wide))
    console.print(table(console.width))
