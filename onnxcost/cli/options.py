"""Options shared by several commands, defined once, and the parsers of their values.

No ``from __future__ import annotations`` in cli/: typer evaluates the annotations at each
start (see onnxcost/cli/__init__.py); names imported for type checking only are quoted.
"""

import enum
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from onnxcost.errors import UsageError

if TYPE_CHECKING:
    from onnxcost.compare import BenchSettings

# The formats each command offers: subsets of ``render.Format``, listed as click validates
# them ("'csv' is not one of 'table', 'json', 'markdown', 'html'") and --help shows them.
ListFormat = Literal["table", "json", "csv", "markdown"]
"""ops, zoo list, providers."""
PageFormat = Literal["table", "json", "markdown", "html"]
"""llm, compare."""
ReportFormat = Literal["table", "json", "csv", "markdown", "html", "netron"]
"""analyze, bench."""
SweepFormat = Literal["table", "json", "markdown", "csv", "html"]
"""sweep."""


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


# One flag, one short name in every command (tests/test_short_flags.py); the help is the
# command's own.
def provider_option(help: str, **more: Any) -> Any:
    """``--provider`` / ``-e`` (-p is --param; -e as onnxruntime_perf_test's execution provider)."""
    return typer.Option("--provider", "-e", help=help, **more)


def param_option(help: str, **more: Any) -> Any:
    """``--param`` / ``-p``: a built-in model's builder parameter KEY=VALUE (``parse_params``)."""
    return typer.Option("--param", "-p", help=help, **more)


def force_option(help: str) -> Any:
    """``--force``, for a command whose output is a model or a file that ``ForceOpt`` does not
    describe."""
    return typer.Option("--force", help=help)


class TrafficOpt(str, enum.Enum):
    runtime = "runtime"
    all_inputs = "all-inputs"


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
        help="Set a symbolic dim: SYMBOL=VALUE, e.g. batch=8 (repeatable). With analyze "
        "--symbolic, SYMBOL>=N gives the least value its formulas hold from, e.g. length>=400.",
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
FormatOpt = Annotated[ListFormat, typer.Option("--format", "-f", help="Output format.")]
PageFormatOpt = Annotated[PageFormat, typer.Option("--format", "-f", help="Output format.")]
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
TrafficFlag = Annotated[
    TrafficOpt,
    typer.Option(
        "--traffic",
        help="Bytes read and written: runtime (what a runtime moves: a Gather reads the rows it "
        "selects, subgraphs of constants fold at load) or all-inputs (every input and output "
        "of every node whole: torchstat's MemRead, onnxcost's bytes before the runtime rule).",
    ),
]

# Training flags of analyze and llm (docs/training.md).
TrainingOpt = Annotated[
    bool,
    typer.Option(
        "--training",
        help="Also the cost of a training step: backward per node, gradients, optimizer "
        "state, saved activations and peak memory.",
    ),
]
OptimizerOpt = Annotated[
    Literal["adam", "adamw", "sgd", "sgd-momentum"],
    typer.Option("--optimizer", help="With --training: the optimizer whose state is counted."),
]
FrozenOpt = Annotated[
    str | None,
    typer.Option(
        "--frozen",
        metavar="REGEX",
        help="With --training: initializers whose name this regex matches (re.search) are "
        "not trained, e.g. '^(?!.*lora)'.",
        show_default=False,
    ),
]
GradInputsOpt = Annotated[
    bool,
    typer.Option("--grad-inputs", help="With --training: the graph inputs need a gradient too."),
]
MixedPrecisionOpt = Annotated[
    Literal["fp16", "bf16"] | None,
    typer.Option(
        "--mixed-precision",
        help="With --training: half-precision activations and gradients, fp32 master "
        "weights and optimizer state.",
        show_default=False,
    ),
]


# Bench flags of compare and check (the same settings for every model measured).
GateBenchOpt = Annotated[
    bool, typer.Option("--bench", help="Also measure latency with onnxruntime (see --provider).")
]
GateProviderOpt = Annotated[
    str | None,
    provider_option(
        "Execution provider for --bench: cpu, cuda, tensorrt, ... (default cpu).",
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


def parse_shape_flags(
    input_shape: Sequence[str] | None, dim: Sequence[str] | None
) -> tuple[dict[str, tuple[int, ...]], dict[str, int]]:
    from onnxcost.shapes.flags import parse_dim, parse_input_shape

    shapes = dict(parse_input_shape(s) for s in input_shape or ())
    dims = dict(parse_dim(d) for d in dim or ())
    return shapes, dims


def split_least(dim: Sequence[str] | None, symbolic: bool) -> tuple[list[str], dict[str, int]]:
    """``--dim`` entries: the values (SYMBOL=N) as they are, and the least values
    (SYMBOL>=N, ``analyze --symbolic``'s) parsed; UsageError for one without ``symbolic``."""
    from onnxcost.errors import UsageError
    from onnxcost.shapes.flags import parse_least

    least = dict(parse_least(d) for d in dim or () if ">=" in d)
    if least and not symbolic:
        raise UsageError(
            f"--dim {next(iter(least))}>=N gives the least value of --symbolic's formulas; add "
            f"--symbolic, or give a value with --dim SYMBOL=N"
        )
    return [d for d in dim or () if ">=" not in d], least


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


def bench_settings(
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
