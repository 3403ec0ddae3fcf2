"""``onnxcost sweep``: a grid of models × options, one process per cell, locally or on Ray; and
the pivot of its results (``--report``).

No ``from __future__ import annotations`` in cli/: typer evaluates the annotations at each
start (see onnxcost/cli/__init__.py); names imported for type checking only are quoted.
"""

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from onnxcost.cli.guard import run_guarded
from onnxcost.cli.options import DebugOpt, SweepFormat, WideOpt
from onnxcost.cli.render import Format, Views, render
from onnxcost.errors import UsageError

if TYPE_CHECKING:
    from onnxcost.report.sweep import Pivot
    from onnxcost.sweep.grid import Option


def command_options(root: Any) -> "dict[str, dict[str, Option]]":
    """The long options of each command a sweep may run, read off ``root`` (the app's command
    group), each with its own parsing of a value (click's type: ranges, choices; the shape
    flags' parsers)."""
    from onnxcost.sweep.grid import COMMANDS, Option

    out: dict[str, dict[str, Option]] = {}
    for name in COMMANDS:
        command = root.commands.get(name)
        if command is None:
            continue
        opts: dict[str, Option] = {}
        for param in command.params:
            if param.param_type_name != "option":
                continue
            for flag in param.opts:
                if flag.startswith("--"):
                    long = flag[2:]
                    opts[long] = Option(long, bool(param.is_flag), bool(param.multiple),
                                        _check(long, param))  # fmt: skip
        out[name] = opts
    return out


def _check(name: str, param: Any) -> Any:
    def check(value: str) -> None:
        from onnxcost.cli.options import parse_params
        from onnxcost.shapes.flags import parse_dim, parse_input_shape

        own = {"dim": parse_dim, "input-shape": parse_input_shape}
        if name in own:
            own[name](value)
        elif name == "param":
            parse_params([value])
        try:
            param.type.convert(value, param, None)
        except Exception as e:  # click's BadParameter: its message is the reason
            raise ValueError(getattr(e, "message", None) or str(e)) from None

    return check


def _views(p: "Pivot", title: str) -> Views:
    from onnxcost.analysis.records import to_json
    from onnxcost.report import sweep
    from onnxcost.report.writers.rich import to_rich

    def table(console: Any) -> None:
        console.print(sweep.summary_line(p))
        for t in sweep.tables(p):
            console.print(to_rich(t, console.width))

    return Views(
        table=table,
        json=lambda: to_json(sweep.to_dict(p)),
        csv=lambda: sweep.to_csv(p),
        markdown=lambda: sweep.to_markdown(p),
        html=lambda: sweep.to_html(p, title),
    )


def _pivot(path: Path, metric: list[str] | None) -> "Pivot":
    from onnxcost.report.sweep import pivot
    from onnxcost.sweep.results import Skipped, rows

    skipped = Skipped()
    p = pivot(rows(path, skipped), metric or ())
    if skipped.lines:
        typer.echo(
            f"onnxcost: warning: {path}: {skipped.lines} lines are not rows (cut short by a "
            f"kill?) and were skipped",
            err=True,
        )
    for m, n in p.misses.items():
        typer.echo(f"onnxcost: warning: --metric {m}: {n} ok rows have no such figure", err=True)
    return p


def sweep_cmd(
    ctx: typer.Context,
    grid: Annotated[
        Path | None,
        typer.Argument(
            help="GRID.toml: command, models, a grid table of option values (see docs/sweep.md).",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="The results file (JSONL, a row per cell; default GRID.jsonl here); with "
            "--report, where the rendered report goes (default stdout).",
            show_default=False,
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option("--resume", help="Run only the cells the results file lacks; keep its rows."),
    ] = False,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            help="Cells at a time (default: the cores / each cell's threads).",
            min=1,
            show_default=False,
        ),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            help="Run the cells on a Ray cluster: auto (this machine's, `ray start`) or the "
            "head's address (pip install 'onnxcost\\[ray]').",
            show_default=False,
        ),
    ] = None,
    report: Annotated[
        Path | None,
        typer.Option(
            "--report",
            help="Render this results file; run nothing.",
            show_default=False,
        ),
    ] = None,
    metric: Annotated[
        list[str] | None,
        typer.Option(
            "--metric",
            "-m",
            help="The figure in the table: a dotted path into each result, e.g. latency_ms, "
            "macs, totals.flops (repeatable; default: the command's headline).",
            show_default=False,
        ),
    ] = None,
    format: Annotated[
        SweepFormat, typer.Option("--format", "-f", help="Output format of the table.")
    ] = "table",
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No line per finished cell on stderr.")
    ] = False,
    wide: WideOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Run a grid of models × options, one process per cell, locally or on Ray; show the table."""

    def go() -> None:
        fmt = Format(format)
        if report is not None:
            if grid is not None or resume or workers or ray:
                raise UsageError("--report renders a results file: pass no GRID and no run flags")
            out = None
            if output is not None:
                from onnxcost.cli.options import checked_output

                out = checked_output(output, [str(report)], False)
            render(_views(_pivot(report, metric), report.name), fmt, out, wide=wide)
            return
        if grid is None:
            raise UsageError("pass a GRID.toml to run, or --report results.jsonl to render one")
        if workers is not None and ray is not None:
            raise UsageError("--workers is for the local pool; on Ray the cluster's resources "
                             "decide how many cells run at once")  # fmt: skip
        from onnxcost import zoo
        from onnxcost.sweep import grid as grids
        from onnxcost.sweep import run
        from onnxcost.sweep.cells import count

        checked = grids.load(grid, command_options(ctx.find_root().command), builtins=zoo.names())
        results = output if output is not None else Path(f"{grid.stem}.jsonl")
        if results.suffix.lower() == ".onnx" or results.resolve() == grid.resolve():
            raise UsageError(f"-o {results}: the results file is JSONL, e.g. -o results.jsonl")
        total = count(checked)
        typer.echo(
            f"onnxcost: sweep: {total} cells of onnxcost {checked.command} -> {results}"
            + (f" on Ray at {ray}" if ray else ""),
            err=True,
        )
        done = [0]

        def progress(row: Any) -> None:
            done[0] += 1
            if not quiet:
                reason = f": {row['reason']}" if row.get("reason") else ""
                typer.echo(
                    f"[{done[0]}/{total}] {row['status']} {row['seconds']:.1f}s "
                    f"{_cell_text(row['cell'])}{reason}",
                    err=True,
                )

        try:
            summary = run(checked, results, resume=resume, workers=workers, ray=ray,
                          on_row=progress)  # fmt: skip
        except KeyboardInterrupt:
            typer.echo(f"onnxcost: sweep: interrupted after {done[0]} cells, the running ones "
                       f"killed and not recorded; --resume runs the rest", err=True)  # fmt: skip
            raise
        counts = ", ".join(f"{n} {s}" for s, n in sorted(summary.statuses.items())) or "nothing"
        skipped = f"; {summary.skipped} already in the file" if summary.skipped else ""
        typer.echo(f"onnxcost: sweep: ran {summary.ran} cells ({counts}){skipped}", err=True)
        if fmt is Format.html and sys.stdout.isatty():
            typer.echo(f"onnxcost: render the page with: onnxcost sweep --report {results} "
                       f"-f html -o sweep.html", err=True)  # fmt: skip
            return
        render(_views(_pivot(results, metric), grid.name), fmt, None, wide=wide)

    run_guarded(debug, go)


def _cell_text(cell: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in cell.items())
