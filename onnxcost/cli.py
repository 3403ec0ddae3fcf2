"""The `onnxcost` command line: parse, call the library, pick a renderer, map errors to exit codes.

The only module that imports typer. Exit codes: 0 ok, 1 a problem with the model, the
environment or a budget (one line on stderr; --debug shows the traceback), 2 usage errors.
"""

from __future__ import annotations

import enum
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, TypeVar

import typer

from onnxcost import __version__
from onnxcost.errors import OnnxcostError, UsageError

if TYPE_CHECKING:
    from rich.console import Console

app = typer.Typer(
    name="onnxcost",
    help="What an ONNX model costs: FLOPs, MACs, parameters, memory traffic, and measured latency.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
zoo_app = typer.Typer(
    help="Built-in reference models, written directly as ONNX.", no_args_is_help=True
)
app.add_typer(zoo_app, name="zoo")

T = TypeVar("T")


class Format(str, enum.Enum):
    table = "table"
    json = "json"
    csv = "csv"
    markdown = "markdown"


class SortBy(str, enum.Enum):
    order = "order"
    macs = "macs"
    flops = "flops"
    bytes = "bytes"
    params = "params"


class ConventionOpt(str, enum.Enum):
    onnxcost = "onnxcost"
    torch = "torch"
    fvcore = "fvcore"


# Options shared by several commands, defined once.
ModelArg = Annotated[
    str,
    typer.Argument(
        help="An .onnx file, or a built-in model name (onnxcost zoo list).", show_default=False
    ),
]
InputShapeOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--input-shape",
        "-s",
        help="Fix an input's shape: NAME=1x3x224x224 (repeatable).",
        show_default=False,
    ),
]
DimOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--dim",
        "-d",
        help="Set a symbolic dim: SYMBOL=VALUE, e.g. batch=8 (repeatable).",
        show_default=False,
    ),
]
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="Output format.")]
OutputOpt = Annotated[
    Path | None,
    typer.Option(
        "--output", "-o", help="Write the report to FILE instead of stdout.", show_default=False
    ),
]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show the full traceback on errors.")]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"onnxcost {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """What an ONNX model costs: FLOPs, MACs, parameters, memory traffic, and measured latency."""


def _fail(message: str, code: int) -> NoReturn:
    typer.echo(f"onnxcost: error: {message}", err=True)
    raise typer.Exit(code)


def run_guarded(debug: bool, fn: Callable[[], T]) -> T:
    """Run ``fn``; turn expected failures into one line on stderr and an exit code."""
    debug = debug or os.environ.get("ONNXCOST_DEBUG", "") not in ("", "0")
    try:
        return fn()
    except typer.Exit:
        raise
    except UsageError as e:
        if debug:
            raise
        _fail(str(e), 2)
    except OnnxcostError as e:
        if debug:
            raise
        _fail(str(e), 1)
    except MemoryError as e:
        if debug:
            raise
        _fail("out of memory; try a smaller --dim/--input-shape or a machine with more memory", 1)
        raise AssertionError from e
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except OSError as e:
        if debug:
            raise
        _fail(f"{e.strerror or e}: {e.filename}" if e.filename else str(e), 1)


def parse_shape_flags(
    input_shape: Sequence[str] | None, dim: Sequence[str] | None
) -> tuple[dict[str, tuple[int, ...]], dict[str, int]]:
    from onnxcost.shapes import parse_dim, parse_input_shape

    shapes = dict(parse_input_shape(s) for s in input_shape or ())
    dims = dict(parse_dim(d) for d in dim or ())
    return shapes, dims


def emit(text: str, output: Path | None) -> None:
    """Write ``text`` to ``output`` (never the model file) or stdout."""
    if output is None:
        sys.stdout.write(text)
        return
    output.write_text(text, encoding="utf-8")
    typer.echo(f"wrote {output}", err=True)


def render_rich(draw: Callable[[Console], None], output: Path | None) -> None:
    """Draw with rich on the terminal, or as plain text into ``output``."""
    from rich.console import Console

    if output is None:
        # A pipe or CI log gets a wide, plain table instead of rich's 80-column default.
        width = None if sys.stdout.isatty() else 160
        draw(Console(highlight=False, width=width))
        return
    with output.open("w", encoding="utf-8") as f:
        draw(Console(file=f, width=200, no_color=True, highlight=False))
    typer.echo(f"wrote {output}", err=True)


@app.command()
def analyze(
    model: ModelArg,
    input_shape: InputShapeOpt = None,
    dim: DimOpt = None,
    convention: Annotated[
        ConventionOpt,
        typer.Option(
            help="FLOPs convention: onnxcost (2xMACs + all other arithmetic), torch (2xMACs), fvcore (=MACs)."
        ),
    ] = ConventionOpt.onnxcost,
    format: FormatOpt = Format.table,
    output: OutputOpt = None,
    top: Annotated[
        int | None,
        typer.Option(
            help="Show the N costliest/first nodes (0: all). Default: all up to 50 nodes, else 30."
        ),
    ] = None,
    sort_by: Annotated[
        SortBy, typer.Option("--sort-by", help="Order of the node list.")
    ] = SortBy.order,
    op_type: Annotated[
        str | None,
        typer.Option(
            "--op-type", help="Only nodes whose op type fully matches this regex, e.g. 'Conv|Gemm'."
        ),
    ] = None,
    depth: Annotated[
        int | None,
        typer.Option(
            help="Aggregate by node-name scope to this depth (tf.profiler's scope view).", min=1
        ),
    ] = None,
    debug: DebugOpt = False,
) -> None:
    """Static cost of every node: MACs, FLOPs, parameters, bytes read and written, peak activations."""

    def go() -> None:
        from onnxcost.analyze import analyze as run
        from onnxcost.report.select import select_nodes

        shapes, dims = parse_shape_flags(input_shape, dim)
        result = run(model, input_shapes=shapes, dims=dims, convention=convention.value)
        selected = select_nodes(result.nodes, sort_by=sort_by.value, op_type=op_type)
        if format in (Format.json, Format.csv):
            cut = selected if not top else selected[:top]
        else:
            limit = top if top is not None else (0 if len(selected) <= 50 else 30)
            if top is None and limit and sort_by is SortBy.order:
                selected = select_nodes(selected, sort_by="flops")
            cut = selected[:limit] if limit else selected
        if format is Format.json:
            import json

            data = result.to_dict()
            data["nodes"] = (
                [n for n in data["nodes"] if n["name"] in {c.name for c in cut}]
                if len(cut) != len(result.nodes)
                else data["nodes"]
            )
            emit(json.dumps(data, indent=2) + "\n", output)
        elif format is Format.csv:
            from onnxcost.report.as_text import to_csv

            emit(to_csv(cut), output)
        elif format is Format.markdown:
            from onnxcost.report.as_text import to_markdown

            emit(to_markdown(result, cut, depth=depth), output)
        else:
            from onnxcost.report.table import render

            render_rich(
                lambda c: render(result, c, cut, hidden=len(selected) - len(cut), depth=depth),
                output,
            )

    run_guarded(debug, go)


@app.command()
def ops(
    domain: Annotated[
        str | None, typer.Option(help="Only this domain ('' or ai.onnx, com.microsoft, ...).")
    ] = None,
    format: FormatOpt = Format.table,
) -> None:
    """List every operator with a cost formula, and those known to have none."""
    from onnxcost.opsinfo import known_unsupported, supported

    rows = supported(domain)
    missing = known_unsupported(domain)
    if format is Format.json:
        import json

        typer.echo(
            json.dumps(
                {
                    "supported": [r._asdict() for r in rows],
                    "unsupported": [m._asdict() for m in missing],
                },
                indent=2,
            )
        )
        return
    if format in (Format.csv, Format.markdown):
        sep = "," if format is Format.csv else " | "
        head = ["domain", "op_type", "opsets", "status", "formula"]
        lines = (
            [sep.join(head)]
            if format is Format.csv
            else ["| " + " | ".join(head) + " |", "|---|---|---|---|---|"]
        )
        for r in [*rows, *missing]:
            cells = [
                r.domain,
                r.op_type,
                r.opsets,
                r.status,
                r.formula.replace(",", ";") if format is Format.csv else r.formula,
            ]
            lines.append(
                sep.join(cells) if format is Format.csv else "| " + " | ".join(cells) + " |"
            )
        typer.echo("\n".join(lines))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(
        title=f"{len(rows)} operators with a formula, {len(missing)} without", title_justify="left"
    )
    for h in ("domain", "op", "opsets", "status", "formula"):
        t.add_column(h, overflow="fold")
    for r in [*rows, *missing]:
        t.add_row(r.domain, r.op_type, r.opsets, r.status, r.formula)
    Console().print(t)


@zoo_app.command("list")
def zoo_list(format: FormatOpt = Format.table) -> None:
    """The built-in models: name, what it is, inputs, parameters."""
    from onnxcost import zoo

    if format is Format.json:
        import json

        typer.echo(
            json.dumps(
                [
                    {"name": m.name, "summary": m.summary, "inputs": m.inputs, "params": m.params}
                    for m in zoo.MODELS.values()
                ],
                indent=2,
            )
        )
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(box=None)
    for h in ("name", "model", "inputs", "parameters (--param key=value)"):
        t.add_column(h, overflow="fold")
    for m in zoo.MODELS.values():
        t.add_row(m.name, m.summary, m.inputs, " ".join(f"{k}={v}" for k, v in m.params.items()))
    Console().print(t)


@zoo_app.command("save")
def zoo_save(
    name: Annotated[str, typer.Argument(help="A built-in model (onnxcost zoo list).")],
    file: Annotated[Path, typer.Argument(help="The .onnx file to write.")],
    opset: Annotated[
        int | None, typer.Option(help="ONNX opset to write (default: the model's).")
    ] = None,
    dtype: Annotated[
        str, typer.Option(help="Weight and activation type: fp32, fp16 or bf16.")
    ] = "fp32",
    no_weights: Annotated[
        bool,
        typer.Option(
            "--no-weights", help="Weights as external data in a sparse file: no memory, no disk."
        ),
    ] = False,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param", "-p", help="Builder parameter KEY=VALUE, e.g. layers=2 (repeatable)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the random weights.")] = 0,
    debug: DebugOpt = False,
) -> None:
    """Write a built-in model to FILE."""

    def go() -> None:
        from onnxcost import zoo

        params: dict[str, str | int] = {}
        for p in param or ():
            key, sep, value = p.partition("=")
            if not sep or not key:
                raise UsageError(f"--param {p!r} is not KEY=VALUE, e.g. --param layers=2")
            params[key.strip()] = (
                int(value) if value.strip().lstrip("-").isdigit() else value.strip()
            )
        path = zoo.save(
            name, file, dtype=dtype, opset=opset, weights=not no_weights, params=params, seed=seed
        )
        typer.echo(f"wrote {path}", err=True)

    run_guarded(debug, go)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
