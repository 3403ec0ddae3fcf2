"""The `onnxcost` command line: parse, call the library, pick a renderer, map errors to exit codes.

The only module that imports typer. Exit codes: 0 ok, 1 a problem with the model, the
environment or a budget (one line on stderr; --debug shows the traceback), 2 usage errors.

Unlike the rest of the package, annotations here are evaluated where they are written (no
``from __future__ import annotations``): typer reads every command's parameter annotations
at each start, and as strings it would compile and evaluate each of them twice, a tenth of
``onnxcost analyze``'s start-up. Names imported for type checking only are quoted.
"""

import atexit
import copy
import enum
import gc
import math
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

from onnxcost._version import __version__
from onnxcost.errors import OnnxcostError, UsageError

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from onnxcost.analysis.walk import Analysis
    from onnxcost.bench.result import BenchResult
    from onnxcost.bench.roofline import Ceilings
    from onnxcost.compare import BenchSettings
    from onnxcost.prepare import PreparedModel

app = typer.Typer(
    name="onnxcost",
    help="What an ONNX model costs: FLOPs, MACs, parameters, memory traffic, and measured latency.",
    no_args_is_help=True,
    add_completion=True,
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


class ReportFormat(str, enum.Enum):
    """Formats of analyze and bench: the common ones plus a self-contained HTML page."""

    table = "table"
    json = "json"
    csv = "csv"
    markdown = "markdown"
    html = "html"
    netron = "netron"


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
        metavar="NAME=DIMS",
        help="Fix an input's shape: NAME=1x3x224x224 (repeatable).",
        show_default=False,
    ),
]
DimOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--dim",
        "-d",
        metavar="SYMBOL=N",
        help="Set a symbolic dim: SYMBOL=VALUE, e.g. batch=8 (repeatable).",
        show_default=False,
    ),
]
AllowReshapeOpt = Annotated[
    bool,
    typer.Option(
        "--allow-reshape",
        help="Let --input-shape change dims the model fixes (else that is an error).",
    ),
]
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="Output format.")]
ReportFormatOpt = Annotated[
    ReportFormat,
    typer.Option(
        "--format",
        "-f",
        help="Output format; html: one self-contained page (pip install 'onnxcost\\[html]'); "
        "netron: metrics for Netron to show beside the model (a .json file).",
    ),
]
OutputOpt = Annotated[
    Path | None,
    typer.Option(
        "--output", "-o", help="Write the report to FILE instead of stdout.", show_default=False
    ),
]
ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Let --output replace an existing *.onnx file that is not a model. Input models "
        "and other models are never replaced.",
    ),
]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show the full traceback on errors.")]
WideOpt = Annotated[
    bool,
    typer.Option(
        "--wide",
        help="Keep every table column, however wide (by default tables fit the terminal, "
        "or COLUMNS, or 120 when piped, by dropping the least telling columns).",
    ),
]

ConventionFlag = Annotated[
    ConventionOpt,
    typer.Option(
        help="FLOPs convention: onnxcost (2xMACs + all other arithmetic), torch (2xMACs), fvcore (=MACs)."
    ),
]


# Bench flags of compare and check (the same settings for every model measured).
GateBenchOpt = Annotated[
    bool, typer.Option("--bench", help="Also measure latency with onnxruntime (see --provider).")
]
GateProviderOpt = Annotated[
    str | None,
    typer.Option(
        "--provider",
        "-e",
        help="Execution provider for --bench: cpu, cuda, tensorrt, ... (default cpu).",
        show_default=False,
    ),
]
GateRunsOpt = Annotated[
    int | None,
    typer.Option(help="Timed runs per model for --bench (default 100).", show_default=False),
]
GateWarmupOpt = Annotated[
    int | None,
    typer.Option(help="Warm-up runs per model for --bench (default 10).", show_default=False),
]
GateThreadsOpt = Annotated[
    int | None,
    typer.Option(help="Intra-op threads for --bench (default: onnxruntime's).", show_default=False),
]


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
    """One line on stderr: model text in ``message`` cannot forge a second line or a colour."""
    from onnxcost.report.safe_text import plain

    typer.echo(f"onnxcost: error: {plain(message)}", err=True)
    raise typer.Exit(code)


def _reader_gone() -> NoReturn:
    """stdout's reader went away (``onnxcost analyze m.onnx | head``): stop without a word.

    Exit 141 (128 + SIGPIPE), as ``git log | head`` does. stdout is pointed at /dev/null first
    so that the interpreter's last flush of the lost output cannot fail again at exit.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is no real file (a test runner's buffer)
        pass
    raise typer.Exit(141)


def _console(width: int | None = None) -> "Console":
    """A rich Console on stdout that ends quietly on a closed pipe (rich's own default exits 1)."""
    from rich.console import Console

    class _PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            _reader_gone()

    return _PipeConsole(highlight=False, width=width)


def run_guarded(debug: bool, fn: Callable[[], T]) -> T:
    """Run ``fn``; turn expected failures into one line on stderr and an exit code."""
    debug = debug or os.environ.get("ONNXCOST_DEBUG", "") not in ("", "0")
    # A command's objects (records, shapes, one or a few per node) live until it ends and form
    # no cycles: the cyclic collector would only re-walk them, about a sixth of a 10,000-node
    # analysis. The command, not the library, pauses it for its own process.
    gc.disable()
    try:
        return fn()
    except typer.Exit:
        raise
    except BrokenPipeError:
        _reader_gone()
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
    finally:
        gc.enable()


def parse_shape_flags(
    input_shape: Sequence[str] | None, dim: Sequence[str] | None
) -> tuple[dict[str, tuple[int, ...]], dict[str, int]]:
    from onnxcost.shapes.flags import parse_dim, parse_input_shape

    shapes = dict(parse_input_shape(s) for s in input_shape or ())
    dims = dict(parse_dim(d) for d in dim or ())
    return shapes, dims


def checked_output(
    output: Path | None, inputs: Sequence[str], force: bool, flag: str = "--output"
) -> Path | None:
    """``output`` once it is known not to be an input model, its data, or another model.

    Called before any work, so that a refused path costs nothing."""
    if output is None:
        return None
    from onnxcost.load.outputs import check_output

    return check_output(output, inputs=inputs, force=force, flag=flag)


def parse_params(param: Sequence[str] | None) -> dict[str, str | int]:
    """``--param KEY=VALUE`` flags of a built-in model's builder (numbers become ints)."""
    params: dict[str, str | int] = {}
    for p in param or ():
        key, sep, value = p.partition("=")
        if not sep or not key:
            raise UsageError(f"--param {p!r} is not KEY=VALUE, e.g. --param layers=2")
        number = re.fullmatch(r"-?[0-9]{1,30}", value.strip())  # not isdigit: '²'
        params[key.strip()] = int(value) if number else value.strip()
    return params


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
        draw(_console(report_width(wide)))
        return
    import io

    buffer = io.StringIO()
    draw(Console(file=buffer, width=WIDE if wide else 200, no_color=True, highlight=False))
    emit(buffer.getvalue(), output)


@app.command()
def analyze(
    model: ModelArg,
    input_shape: InputShapeOpt = None,
    dim: DimOpt = None,
    allow_reshape: AllowReshapeOpt = False,
    convention: Annotated[
        ConventionOpt,
        typer.Option(
            help="FLOPs convention: onnxcost (2xMACs + all other arithmetic), torch (2xMACs), fvcore (=MACs)."
        ),
    ] = ConventionOpt.onnxcost,
    format: ReportFormatOpt = ReportFormat.table,
    output: OutputOpt = None,
    top: Annotated[
        int | None,
        typer.Option(
            help="List the N costliest nodes (by --sort-by, default FLOPs; 0: all). Default: "
            "table and markdown all up to 50 nodes, else 30; json, csv and html all.",
            min=0,
        ),
    ] = None,
    sort_by: Annotated[
        SortBy | None,
        typer.Option(
            "--sort-by",
            help="Order of the node list. Default: graph order, or FLOPs when nodes are cut.",
            show_default=False,
        ),
    ] = None,
    op_type: Annotated[
        str | None,
        typer.Option(
            "--op-type", help="Only nodes whose op type fully matches this regex, e.g. 'Conv|Gemm'."
        ),
    ] = None,
    depth: Annotated[
        int | None,
        typer.Option(
            help="Show the scope tree from node names to this depth instead of the nodes: "
            "subtotals and share per scope, repeated blocks folded.",
            min=1,
        ),
    ] = None,
    tree: Annotated[
        bool, typer.Option("--tree", help="Show the whole scope tree (see --depth).")
    ] = False,
    force: ForceOpt = False,
    symbolic: Annotated[
        bool,
        typer.Option(
            "--symbolic",
            help="Also give every cost as an exact formula in the unset symbolic dims.",
        ),
    ] = False,
    wide: WideOpt = False,
    ort_peak: Annotated[
        bool,
        typer.Option(
            "--ort-peak",
            help="Also the peak activation memory under onnxruntime's execution order "
            "(needs onnxruntime; builds a session).",
        ),
    ] = False,
    debug: DebugOpt = False,
) -> None:
    """Static cost of every node: MACs, FLOPs, parameters, bytes read and written, peak activations."""

    def go() -> None:
        from onnxcost.api import analyze as run
        from onnxcost.report.select import op_type_miss, select

        out = checked_output(output, [model], force)
        shapes, dims = parse_shape_flags(input_shape, dim)
        netron = format is ReportFormat.netron
        if netron:
            from onnxcost.prepare import prepare

            # Loaded once: analysed, and its node names as the file has them kept for Netron.
            prepared = prepare(model, weights=ort_peak, keep_source=True)
        result = run(
            prepared if netron else model,
            input_shapes=shapes,
            dims=dims,
            convention=convention.value,
            symbolic=symbolic,
            ort_peak=ort_peak,
            allow_reshape=allow_reshape,
        )
        if netron:
            emit_netron(prepared, result, out)
            return
        # One selection for every format: the same nodes in the same order.
        chosen = select(
            result.nodes,
            sort_by=None if sort_by is None else sort_by.value,
            top=top,
            op_type=op_type,
            screen=format in (ReportFormat.table, ReportFormat.markdown),
        )
        if op_type and not chosen.matched:
            typer.echo(f"onnxcost: warning: {op_type_miss(result.nodes, op_type)}", err=True)
        cut = chosen.nodes
        if format is ReportFormat.html:
            from onnxcost.report.html import analysis_html

            emit_page(lambda: analysis_html(result, cut), out)
        elif format is ReportFormat.json:
            from onnxcost.analysis.records import to_json

            data = result.to_dict()
            if cut != result.nodes:
                position = {id(n): k for k, n in enumerate(result.nodes)}
                data["nodes"] = [data["nodes"][position[id(n)]] for n in cut]
            emit(to_json(data) + "\n", out)
        elif format is ReportFormat.csv:
            from onnxcost.report.as_text import to_csv

            emit(to_csv(cut), out)
        elif format is ReportFormat.markdown:
            from onnxcost.report.as_text import to_markdown

            emit(to_markdown(result, cut, depth=depth, tree=tree), out)
        else:
            from onnxcost.report.table import render

            render_rich(
                lambda c: render(
                    result,
                    c,
                    cut,
                    hidden=chosen.hidden,
                    depth=depth,
                    tree=tree,
                    sort_key=chosen.sort_key,
                ),
                out,
                wide=wide,
            )

    run_guarded(debug, go)


@app.command()
def annotate(
    model: ModelArg,
    out: Annotated[
        Path,
        typer.Argument(
            help="The annotated copy to write (.onnx); never the input.", show_default=False
        ),
    ],
    input_shape: InputShapeOpt = None,
    dim: DimOpt = None,
    convention: ConventionFlag = ConventionOpt.onnxcost,
    force: Annotated[
        bool, typer.Option("--force", help="Replace OUT if it is an existing model.")
    ] = False,
    debug: DebugOpt = False,
) -> None:
    """Write a copy of MODEL with inferred shapes in value_info and costs in metadata_props."""

    def go() -> None:
        from onnxcost.load.outputs import check_output
        from onnxcost.report.annotate import annotated, write

        target = check_output(out, inputs=[model], force=force, writes_model=True, flag="OUT")
        shapes, dims = parse_shape_flags(input_shape, dim)
        proto, _result = annotated(
            model, input_shapes=shapes, dims=dims, convention=convention.value
        )
        check_output(target, inputs=[model], force=force, writes_model=True, flag="OUT")
        write(proto, model, target)
        typer.echo(f"wrote {out}", err=True)

    run_guarded(debug, go)


@app.command()
def ops(
    domain: Annotated[
        str | None, typer.Option(help="Only this domain ('' or ai.onnx, com.microsoft, ...).")
    ] = None,
    format: FormatOpt = Format.table,
    wide: WideOpt = False,
) -> None:
    """List every operator with a cost formula, and those known to have none."""
    from onnxcost.costs.catalog import known_unsupported, supported

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
    from rich.console import Group

    from onnxcost.report.fit import fitted

    # One table per domain, so the formula has the width a domain column would take. The op
    # type names the row; a narrow terminal loses the opset range, then trims the formula at
    # its end (--wide or --format markdown keeps it whole).
    by_domain: dict[str, list[Any]] = {}
    for r in [*rows, *missing]:
        by_domain.setdefault(r.domain, []).append(r)

    def tables(width: int | None) -> Group:
        parts = []
        for name, group in by_domain.items():
            costed = sum(1 for r in group if r.status != "unsupported")
            parts.append(
                fitted(
                    f"{name}: {costed} with a formula, {len(group) - costed} without",
                    ("op", "opsets", "status", "formula"),
                    (False,) * 4,
                    [[r.op_type, r.opsets, r.status, r.formula] for r in group],
                    width,
                    drop=[1],
                    trim=[3, 0],
                    tail=[3],
                )
            )
        return Group(*parts)

    _print_fitted(tables, wide)


def _print_fitted(table: Callable[[int | None], "RenderableType"], wide: bool) -> None:
    """A ``report.fit`` table laid out for the report width (``report_width``) on stdout."""
    console = _console(report_width(wide))
    console.print(table(console.width))


@zoo_app.command("list")
def zoo_list(format: FormatOpt = Format.table, wide: WideOpt = False) -> None:
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
    from onnxcost.report.fit import fitted

    # The name is what `zoo save` and `analyze` take: kept whole. A narrow terminal drops the
    # inputs, then trims the description and the parameters at their ends.
    _print_fitted(
        lambda width: fitted(
            None,
            ("name", "model", "inputs", "parameters (--param)"),
            (False,) * 4,
            [
                [m.name, m.summary, m.inputs, " ".join(f"{k}={v}" for k, v in m.params.items())]
                for m in zoo.MODELS.values()
            ],
            width,
            drop=[2],
            trim=[3, 1, 2],
            tail=[1, 2, 3],
        ),
        wide,
    )


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
    force: Annotated[
        bool, typer.Option("--force", help="Replace FILE (and its weights file) if it exists.")
    ] = False,
    debug: DebugOpt = False,
) -> None:
    """Write a built-in model to FILE."""

    def go() -> None:
        from onnxcost import zoo

        params = parse_params(param)
        path = zoo.save(
            name,
            file,
            dtype=dtype,
            opset=opset,
            weights=not no_weights,
            params=params,
            seed=seed,
            force=force,
        )
        typer.echo(f"wrote {path}", err=True)

    run_guarded(debug, go)


class LlmFormat(str, enum.Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"


@app.command("llm")
def llm_cmd(
    model: ModelArg,
    prompt: Annotated[int, typer.Option("--prompt", help="Prompt length N in tokens.", min=1)],
    generate: Annotated[
        int,
        typer.Option(
            "--generate", help="Tokens M to generate (the first from the prefill).", min=1
        ),
    ],
    batch: Annotated[int, typer.Option("--batch", help="Sequences generated at once.", min=1)] = 1,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param",
            "-p",
            help="Built-in model parameter KEY=VALUE, e.g. kv_cache=true (repeatable).",
            show_default=False,
        ),
    ] = None,
    dim: DimOpt = None,
    batch_dim: Annotated[
        str | None, typer.Option("--batch-dim", help="The batch dim's symbol.", show_default=False)
    ] = None,
    seq_dim: Annotated[
        str | None,
        typer.Option("--seq-dim", help="The new tokens' dim symbol.", show_default=False),
    ] = None,
    past_dim: Annotated[
        str | None,
        typer.Option("--past-dim", help="The cache length's dim symbol.", show_default=False),
    ] = None,
    convention: ConventionFlag = ConventionOpt.onnxcost,
    peak_tflops: Annotated[
        float | None,
        typer.Option(
            "--peak-tflops", help="Compute ceiling in TFLOP/s (with --bandwidth-gbs).", min=0
        ),
    ] = None,
    bandwidth_gbs: Annotated[
        float | None,
        typer.Option("--bandwidth-gbs", help="Memory bandwidth ceiling in GB/s.", min=0),
    ] = None,
    bench: Annotated[
        bool, typer.Option("--bench", help="Also run the generation loop in onnxruntime.")
    ] = False,
    provider: Annotated[
        str,
        typer.Option(
            "--provider", "-e", help="Execution provider for --bench and the cached calibration."
        ),
    ] = "cpu",
    threads: GateThreadsOpt = None,
    format: Annotated[LlmFormat, typer.Option("--format", "-f", help="Output format.")] = (
        LlmFormat.table
    ),
    output: OutputOpt = None,
    force: ForceOpt = False,
    debug: DebugOpt = False,
) -> None:
    """A decoder with a KV cache: weights, cache, prefill, decode steps, generation, roofline."""

    def go() -> None:
        from onnxcost.llm.cost import llm_report
        from onnxcost.prepare import prepare

        out = checked_output(output, [model], force)
        params = parse_params(param)
        _shapes, dims = parse_shape_flags(None, dim)
        ceilings = _llm_ceilings(peak_tflops, bandwidth_gbs)
        # One model, loaded or built once, analysed and (with --bench) run.
        prepared = prepare(model, weights=bench, params=params)
        report = llm_report(
            prepared,
            prompt=prompt,
            generate=generate,
            batch=batch,
            dims=dims,
            batch_dim=batch_dim,
            seq_dim=seq_dim,
            past_dim=past_dim,
            convention=convention.value,
            ceilings=ceilings,
            calibrated=lambda dtype: _cached_ceilings(provider, threads, dtype),
        )
        if bench:
            import dataclasses

            from onnxcost.bench.providers import resolve_provider
            from onnxcost.bench.session import SessionConfig
            from onnxcost.llm.loop import run_llm_loop

            timing = run_llm_loop(
                prepared,
                report.layout,
                prompt=prompt,
                generate=generate,
                batch=batch,
                config=SessionConfig(resolve_provider(provider), intra_op_threads=threads),
            )
            report = dataclasses.replace(report, bench=timing)
        if format is LlmFormat.json:
            import json

            emit(json.dumps(report.to_dict(), indent=2) + "\n", out)
        elif format is LlmFormat.html:
            from onnxcost.report.html import llm_html

            emit_page(lambda: llm_html(report), out)
        elif format is LlmFormat.markdown:
            from onnxcost.report.llm import to_markdown

            emit(to_markdown(report), out)
        else:
            from onnxcost.report.llm import render

            render_rich(lambda c: render(report, c), out)

    run_guarded(debug, go)


def _llm_ceilings(peak_tflops: float | None, bandwidth_gbs: float | None) -> "Ceilings | None":
    """The roofline ceiling from --peak-tflops and --bandwidth-gbs (both or neither)."""
    if (peak_tflops is None) != (bandwidth_gbs is None):
        raise UsageError("pass both --peak-tflops and --bandwidth-gbs, or neither")
    if peak_tflops is None or bandwidth_gbs is None:
        return None
    # Ceilings of 1e3 to 1e21 FLOP/s and bytes/s (llm.CEILING_RANGE) keep every ratio and
    # time finite. NaN fails every comparison.
    for flag, value, low, high in (
        ("--peak-tflops", peak_tflops, 1e-9, 1e9),
        ("--bandwidth-gbs", bandwidth_gbs, 1e-6, 1e12),
    ):
        if not low <= value <= high:
            raise UsageError(
                f"{flag} {value!r} is out of range; pass a number from {low:g} to {high:g}"
            )
    from onnxcost.bench.roofline import Ceilings

    return Ceilings(peak_tflops * 1e12, bandwidth_gbs * 1e9, "flags", "flags")


def _cached_ceilings(
    provider: str, threads: int | None, dtype: str
) -> "tuple[Ceilings, str] | None":
    """This provider's cached ``bench --calibrate`` figures for ``dtype``, if any."""
    try:
        from onnxcost.bench.providers import resolve_provider
        from onnxcost.bench.roofline import cached_ceilings
        from onnxcost.bench.session import SessionConfig

        config = SessionConfig(resolve_provider(provider), intra_op_threads=threads)
        hit = cached_ceilings(config, dtype)
    except (OnnxcostError, OSError):
        return None
    if hit is None:
        return None
    return hit, f"calibration of {hit.provider} on {hit.device}, {hit.measured_at}"


class CompareFormat(str, enum.Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"


def _bench_settings(
    bench: bool,
    provider: str | None,
    runs: int | None,
    warmup: int | None,
    threads: int | None,
) -> "BenchSettings | None":
    """The bench settings, or None without --bench (bench flags alone are a usage error)."""
    from onnxcost.compare import BenchSettings

    given = [
        flag
        for flag, value in (
            ("--provider", provider),
            ("--runs", runs),
            ("--warmup", warmup),
            ("--threads", threads),
        )
        if value is not None
    ]
    if not bench:
        if given:
            raise UsageError(f"{', '.join(given)} only apply with --bench; add --bench")
        return None
    return BenchSettings(
        provider=provider or "cpu",
        runs=100 if runs is None else runs,
        warmup=10 if warmup is None else warmup,
        threads=threads,
    )


@app.command("compare")
def compare_cmd(
    models: Annotated[
        list[str],
        typer.Argument(
            help="Two or more .onnx files or built-in model names; the first is the baseline.",
            show_default=False,
        ),
    ],
    input_shape: InputShapeOpt = None,
    dim: DimOpt = None,
    allow_reshape: AllowReshapeOpt = False,
    convention: ConventionFlag = ConventionOpt.onnxcost,
    label: Annotated[
        list[str] | None,
        typer.Option(
            "--label",
            "-l",
            help="Name the models in the report, one per model in order (default A, B, C...).",
            show_default=False,
        ),
    ] = None,
    format: Annotated[
        CompareFormat, typer.Option("--format", "-f", help="Output format.")
    ] = CompareFormat.table,
    output: OutputOpt = None,
    fail_if_worse: Annotated[
        float | None,
        typer.Option(
            "--fail-if-worse",
            metavar="PCT",
            help="Exit 1 if a later model's MACs, FLOPs, params, peak activation (or latency "
            "with --bench) exceed the first model's by more than PCT percent.",
            show_default=False,
        ),
    ] = None,
    bench: GateBenchOpt = False,
    provider: GateProviderOpt = None,
    runs: GateRunsOpt = None,
    warmup: GateWarmupOpt = None,
    threads: GateThreadsOpt = None,
    force: ForceOpt = False,
    wide: WideOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Compare models side by side: totals, op types, aligned layers, and what differs, in words."""

    def go() -> tuple[str, ...]:
        from onnxcost.compare import compare as run

        out = checked_output(output, models, force)
        if len(models) < 2:
            raise UsageError("compare needs at least two models: onnxcost compare A.onnx B.onnx")
        if fail_if_worse is not None and not 0 <= fail_if_worse < math.inf:
            raise UsageError(
                f"--fail-if-worse must be a finite percentage of 0 or more, not {fail_if_worse:g}"
            )
        settings = _bench_settings(bench, provider, runs, warmup, threads)
        shapes, dims = parse_shape_flags(input_shape, dim)
        result = run(
            models,
            input_shapes=shapes,
            dims=dims,
            convention=convention.value,
            labels=label or None,
            bench=settings,
            allow_reshape=allow_reshape,
        )
        if format is CompareFormat.json:
            from onnxcost.analysis.records import to_json

            emit(to_json(result.to_dict()) + "\n", out)
        elif format is CompareFormat.html:
            from onnxcost.report.html import compare_html

            emit_page(lambda: compare_html(result), out)
        elif format is CompareFormat.markdown:
            from onnxcost.report.compare import to_markdown

            emit(to_markdown(result), out)
        else:
            from onnxcost.report.compare import render

            render_rich(lambda c: render(result, c), out, wide=wide)
        return () if fail_if_worse is None else result.worse_than(fail_if_worse)

    worse = run_guarded(debug, go)
    if worse:
        from onnxcost.report.safe_text import plain

        for line in worse:
            typer.echo(f"onnxcost: worse: {plain(line)}", err=True)
        raise typer.Exit(1)


def _budget_option(flag: str, metavar: str, help: str) -> object:
    return typer.Option(flag, metavar=metavar, help=help, show_default=False)


@app.command("check")
def check_cmd(
    model: ModelArg,
    max_macs: Annotated[
        str | None, _budget_option("--max-macs", "N", "MACs budget, e.g. 2G (K/M/G/T).")
    ] = None,
    max_flops: Annotated[
        str | None, _budget_option("--max-flops", "N", "FLOPs budget, e.g. 4.5G.")
    ] = None,
    max_params: Annotated[
        str | None, _budget_option("--max-params", "N", "Parameter budget, e.g. 12M.")
    ] = None,
    max_param_bytes: Annotated[
        str | None,
        _budget_option("--max-param-bytes", "SIZE", "Weight size budget, e.g. 50MB or 48MiB."),
    ] = None,
    max_peak_activation: Annotated[
        str | None,
        _budget_option(
            "--max-peak-activation", "SIZE", "Peak activation memory budget, e.g. 64MB or 64MiB."
        ),
    ] = None,
    max_latency_ms: Annotated[
        str | None,
        _budget_option(
            "--max-latency-ms", "MS", "Median latency budget in milliseconds (needs --bench)."
        ),
    ] = None,
    input_shape: InputShapeOpt = None,
    dim: DimOpt = None,
    allow_reshape: AllowReshapeOpt = False,
    convention: ConventionFlag = ConventionOpt.onnxcost,
    bench: GateBenchOpt = False,
    provider: GateProviderOpt = None,
    runs: GateRunsOpt = None,
    warmup: GateWarmupOpt = None,
    threads: GateThreadsOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Gate a model on cost budgets for CI: exit 1 with one line per exceeded budget, else 0.

    Counts take K/M/G/T (powers of 1000); sizes take KB/MB/GB (1000) or KiB/MiB/GiB (1024).
    """

    def go() -> tuple[str, tuple[str, ...]]:
        from onnxcost.analysis import budget as b
        from onnxcost.api import analyze as run

        budgets = []
        for key, text, parse, flag in (
            ("macs", max_macs, b.parse_count, "--max-macs"),
            ("flops", max_flops, b.parse_count, "--max-flops"),
            ("params", max_params, b.parse_count, "--max-params"),
            ("param_bytes", max_param_bytes, b.parse_bytes, "--max-param-bytes"),
            ("peak_activation_bytes", max_peak_activation, b.parse_bytes, "--max-peak-activation"),
        ):
            if text is not None:
                budgets.append(b.budget(key, parse(text, flag)))
        if max_latency_ms is not None:
            if not bench:
                raise UsageError("--max-latency-ms needs a measurement: add --bench")
            budgets.append(b.budget("latency_ms", b.parse_ms(max_latency_ms, "--max-latency-ms")))
        if not budgets:
            raise UsageError(
                "no budget given: pass at least one of --max-macs, --max-flops, --max-params, "
                "--max-param-bytes, --max-peak-activation, --max-latency-ms"
            )
        from onnxcost.prepare import prepare

        settings = _bench_settings(bench, provider, runs, warmup, threads)
        shapes, dims = parse_shape_flags(input_shape, dim)
        prepared = prepare(model, weights=settings is not None)  # one model analysed and run
        result = run(
            prepared,
            input_shapes=shapes,
            dims=dims,
            convention=convention.value,
            allow_reshape=allow_reshape,
        )
        latency = None
        if settings is not None:
            import dataclasses

            from onnxcost.compare import measure

            unprofiled = dataclasses.replace(settings, profile=False)
            latency = measure(prepared, unprofiled, shapes, dims, result).latency_ms["median"]
        checks = b.check(result.totals, tuple(budgets), latency_ms=latency)
        return b.ok_line(model, checks), tuple(c.line() for c in checks if c.exceeded)

    from onnxcost.report.safe_text import plain

    ok, over = run_guarded(debug, go)
    if over:
        for line in over:
            typer.echo(f"onnxcost: over budget: {plain(line)}", err=True)
        raise typer.Exit(1)
    typer.echo(plain(ok))


BENCH_PROFILE_RUNS = 50
"""``onnxcost.bench.run.PROFILE_RUNS``, repeated so that --help imports no bench code (a test
keeps the two equal)."""
BENCH_TIMEOUT_S = 600.0
"""``onnxcost.bench.watchdog.DEFAULT_TIMEOUT_S`` (likewise)."""


class OptLevel(str, enum.Enum):
    disable = "disable"
    basic = "basic"
    extended = "extended"
    all = "all"


def _progress_callback(quiet: bool) -> tuple[Callable[[object], None] | None, Callable[[], None]]:
    """A rich progress bar on stderr (only on a terminal, never with --quiet) and its closer."""
    if quiet or not sys.stderr.isatty():
        return None, lambda: None
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    bar.start()
    tasks: dict[str, object] = {}

    def update(event: object) -> None:
        phase, done, total, message = (
            getattr(event, "phase", ""),
            getattr(event, "done", 0),
            getattr(event, "total", None),
            getattr(event, "message", ""),
        )
        if phase not in tasks:
            tasks[phase] = bar.add_task(message or phase, total=total)
        bar.update(tasks[phase], completed=done, total=total, description=message or phase)  # type: ignore[arg-type]

    return update, bar.stop


@app.command()
def bench(
    model: Annotated[
        str, typer.Argument(help="An .onnx file or a built-in model name (default: resnet18).")
    ] = "resnet18",
    provider: Annotated[
        str,
        typer.Option(
            "--provider",
            "-e",  # -p is --param everywhere; -e as onnxruntime_perf_test's execution provider
            help="Execution provider: CPUExecutionProvider, CUDAExecutionProvider, ...",
        ),
    ] = "CPUExecutionProvider",
    provider_option: Annotated[
        list[str] | None,
        typer.Option(
            "--provider-option", help="Provider option KEY=VALUE (repeatable).", show_default=False
        ),
    ] = None,
    threads: Annotated[
        int | None,
        typer.Option(
            help="Intra-op threads (default: onnxruntime's; at most 4 x the logical CPUs).", min=1
        ),
    ] = None,
    inter_threads: Annotated[
        int | None, typer.Option("--inter-threads", help="Inter-op threads.", min=1)
    ] = None,
    opt_level: Annotated[
        OptLevel, typer.Option("--opt-level", help="Graph optimization level.")
    ] = OptLevel.all,
    input_shape: InputShapeOpt = None,
    dim: DimOpt = None,
    allow_reshape: AllowReshapeOpt = False,
    inputs: Annotated[
        Path | None,
        typer.Option(
            "--inputs",
            help="Real input data: an .npz with one array per input name.",
            show_default=False,
        ),
    ] = None,
    warmup: Annotated[int, typer.Option(help="Warm-up runs (at least 0.2 s of them).", min=0)] = 10,
    runs: Annotated[
        int, typer.Option(help="Timed runs (at least --min-seconds of them).", min=1)
    ] = 100,
    min_seconds: Annotated[
        float, typer.Option("--min-seconds", help="Minimum time of the timed loop.", min=0)
    ] = 1.0,
    profile: Annotated[
        bool,
        typer.Option(
            "--profile", help="Per-node and per-op-type time, joined to the static costs."
        ),
    ] = False,
    profile_runs: Annotated[
        int,
        typer.Option(
            "--profile-runs",
            help="Profiled runs: node times are medians over them (with --profile).",
            min=1,
        ),
    ] = BENCH_PROFILE_RUNS,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="Write a cleaned Chrome trace (Perfetto) of the profiled runs.",
            show_default=False,
        ),
    ] = None,
    include_copies: Annotated[
        bool, typer.Option("--include-copies", help="Time host<->device copies too (CUDA).")
    ] = False,
    cuda_graph: Annotated[
        bool, typer.Option("--cuda-graph", help="Capture a CUDA graph (static shapes only).")
    ] = False,
    batch: Annotated[
        str | None,
        typer.Option(
            "--batch", help="Batch sweep: comma-separated sizes, e.g. 1,2,4,8.", show_default=False
        ),
    ] = None,
    max_batch: Annotated[
        int | None,
        typer.Option(
            "--max-batch",
            help="Find the largest batch that fits, up to N (probes in subprocesses).",
            min=1,
        ),
    ] = None,
    calibrate: Annotated[
        bool,
        typer.Option(
            "--calibrate",
            help="Peak FLOP/s and bandwidth of this provider for the roofline (cached once measured).",
        ),
    ] = False,
    recalibrate: Annotated[
        bool,
        typer.Option(
            "--recalibrate", help="Measure the ceilings again instead of reading the cache."
        ),
    ] = False,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            help="Seconds one run may take before it is stopped (0: no limit).",
            min=0,
        ),
    ] = BENCH_TIMEOUT_S,
    format: ReportFormatOpt = ReportFormat.table,
    output: OutputOpt = None,
    top: Annotated[
        int, typer.Option(help="Nodes shown in the profile table (0: all).", min=0)
    ] = 20,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
    force: ForceOpt = False,
    wide: WideOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Measure latency, throughput and (with --profile) per-node time with onnxruntime."""

    def go() -> None:
        from onnxcost.bench import run_bench

        out = checked_output(output, [model], force)
        trace_out = checked_output(trace, [model], force, flag="--trace")
        shapes, dims = parse_shape_flags(input_shape, dim)
        batches = None
        if batch:
            try:
                batches = [int(b) for b in batch.split(",") if b.strip()]
            except ValueError:
                raise UsageError(
                    f"--batch {batch!r} is not a comma-separated list of sizes, e.g. 1,2,4,8"
                ) from None
        netron = format is ReportFormat.netron
        static = None
        if netron:
            from onnxcost.api import analyze as run_analysis
            from onnxcost.prepare import prepare

            # Loaded once: run, analysed, and its node names as the file has them kept for Netron.
            prepared = prepare(model, weights=True, keep_source=True)
            static = run_analysis(
                prepared, input_shapes=shapes, dims=dims, allow_reshape=allow_reshape
            )
        callback, close = _progress_callback(quiet)
        try:
            result = run_bench(
                prepared if netron else model,
                allow_reshape=allow_reshape,
                provider=provider,
                provider_options=provider_option or None,
                threads=threads,
                inter_threads=inter_threads,
                opt_level=opt_level.value,
                input_shapes=shapes,
                dims=dims,
                inputs_file=inputs,
                warmup=warmup,
                runs=runs,
                min_seconds=min_seconds,
                profile=profile,
                trace_out=trace_out,
                include_copies=include_copies,
                cuda_graph=cuda_graph,
                batches=batches,
                max_batch=max_batch,
                calibrate=calibrate,
                recalibrate=recalibrate,
                profile_runs=profile_runs,
                timeout_s=timeout,
                ort_log=debug,
                analysis=static if inputs is None else None,  # an .npz may set other shapes
                progress=callback,
            )
        finally:
            close()
        if format is ReportFormat.html:
            from onnxcost.report.html import bench_html

            emit_page(lambda: bench_html(result), out)
        elif netron:
            assert static is not None
            emit_netron(prepared, static, out, bench=result)
        elif format is ReportFormat.json:
            from onnxcost.analysis.records import to_json

            emit(to_json(result.to_dict()) + "\n", out)
        elif format is ReportFormat.csv:
            from onnxcost.report.bench import to_csv

            emit(to_csv(result), out)
        elif format is ReportFormat.markdown:
            from onnxcost.report.bench import to_markdown

            emit(to_markdown(result, top=top or None), out)
        else:
            from onnxcost.report.bench import render_table

            render_rich(lambda c: render_table(result, c, top=top or None), out, wide=wide)

    run_guarded(debug, go)


@app.command()
def providers(
    format: FormatOpt = Format.table, debug: DebugOpt = False, wide: WideOpt = False
) -> None:
    """Execution providers in this onnxruntime build, and whether each really loads here."""

    def go() -> None:
        from onnxcost.bench import available_providers

        rows = available_providers()
        if format is Format.json:
            import json

            typer.echo(
                json.dumps(
                    [
                        {
                            "name": r.name,
                            "available": r.available,
                            "loads": r.loads,
                            "detail": r.detail,
                        }
                        for r in rows
                    ],
                    indent=2,
                )
            )
            return
        from onnxcost.report.fit import fitted, layout

        headers = ("provider", "state", "detail")
        cells = [
            [
                r.name,
                "loads"
                if r.loads
                else ("listed, does not load" if r.available else "not in this build"),
                r.detail,
            ]
            for r in rows
        ]
        console = _console(report_width(wide))
        # The provider's name is kept whole; the state and the detail (why it does not load,
        # what to install) are trimmed at their ends, and a line says where to read them whole.
        console.print(
            fitted(None, headers, (False,) * 3, cells, console.width, trim=[2, 1], tail=[2, 1])
        )
        if layout(headers, cells, console.width, trim=[2, 1]).limits:
            console.print("  (trimmed: --wide or --format json shows it all)")

    run_guarded(debug, go)


# What --help shows for a value in place of typer's <type> labels (choices stay as they are).
_METAVARS = {
    "<int>": "N", "<int range>": "N", "<float>": "X", "<float range>": "X",
    "<str>": "TEXT", "<list[str]>": "TEXT", "<path>": "PATH",
}  # fmt: skip


def plain_help(command: Any) -> Any:
    """``command`` (``typer.main.get_command(app)``) with help free of type labels: a flag shows
    nothing after its name, a value its metavar (N, TEXT, ... unless given; choices as they
    are), an argument its name only. Returns ``command``.

    typer 0.29 labels a parameter through its ``display_type_rich``; earlier versions label an
    option with its metavar and an argument with its type's metavar (``<str>``, ``<path>``)."""
    ctx = typer.Context(command)
    for param in command.get_params(ctx):
        kind = getattr(param, "param_type_name", "")
        typed = hasattr(param, "display_type_rich")
        if kind == "option" and param.metavar is None:
            label = param.display_type_rich(ctx) if typed else param.make_metavar(ctx)
            shown = "" if param.is_flag else str(label or "")
            param.metavar = _METAVARS.get(shown, shown)
        elif kind == "argument" and typed:
            setattr(param, "display_type_rich", lambda ctx: None)  # noqa: B010
        elif kind == "argument":
            param.type = copy.copy(param.type)  # types may be shared: label this one only
            setattr(param.type, "get_metavar", lambda param, ctx: "")  # noqa: B010
    for sub in getattr(command, "commands", {}).values():
        plain_help(sub)
    return command


def main() -> None:
    # The process ends with the command. Frozen, its heap is skipped by the collector's full
    # passes during interpreter shutdown (with onnx, typer and rich loaded, 80 ms of a small
    # model's 0.48 s); what those passes would free, the process's exit frees anyway.
    atexit.register(gc.freeze)
    plain_help(typer.main.get_command(app))()


if __name__ == "__main__":
    main()
