"""The `onnxcost` command line: the typer app, its --version, and one registration per command.

Each command is a module of this package (``analyze.py``, ``bench.py``, ...): adding one is
that module plus one entry of ``COMMANDS`` below. Exit codes: 0 ok, 1 a problem with the
model, the environment or a budget (one line on stderr; --debug shows the traceback; see
``guard.run_guarded``), 2 usage errors.

No ``from __future__ import annotations`` in cli/: typer evaluates the annotations at each
start (see onnxcost/cli/__init__.py); names imported for type checking only are quoted.
"""

import atexit
import copy
import gc
import importlib
import os
import sys
from typing import Annotated, Any

import typer

from onnxcost._version import __version__

COMMANDS = {
    "analyze": "analyze:analyze",
    "annotate": "annotate:annotate",
    "ops": "ops:ops",
    "llm": "llm:llm_cmd",
    "compare": "compare:compare_cmd",
    "check": "check:check_cmd",
    "bench": "bench:bench",
    "calibrate": "calibrate:calibrate",
    "predict": "predict:predict_cmd",
    "providers": "providers:providers",
    "sweep": "sweep:sweep_cmd",
    "zoo": "zoo:zoo_app",
}
"""Each command (in the order ``--help`` lists them): its module of this package and the
function (or, for ``zoo``, the typer app of its subcommands) that implements it."""


def _version(value: bool) -> None:
    if value:
        typer.echo(f"onnxcost {__version__}")
        raise typer.Exit()


def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """What an ONNX model costs: FLOPs, MACs, parameters, memory traffic, and measured latency."""


def build(only: str | None = None) -> typer.Typer:
    """The typer app with every command, or with the command ``only`` alone: ``main`` builds
    the one it runs, so a start imports and converts that command's module only (each other
    one adds its imports and typer's reading of its parameters: 17 ms of the 0.28 s of
    ``onnxcost analyze`` on a small model, ``scripts/bench_analyze.py``)."""
    app = typer.Typer(
        name="onnxcost",
        help="What an ONNX model costs: FLOPs, MACs, parameters, memory traffic, and measured "
        "latency.",
        no_args_is_help=True,
        add_completion=True,
        pretty_exceptions_enable=False,
    )
    app.callback()(_root)
    for name, where in COMMANDS.items():
        if only is None or name == only:
            module, attr = where.split(":")
            found = getattr(importlib.import_module(f"onnxcost.cli.{module}"), attr)
            if isinstance(found, typer.Typer):
                app.add_typer(found, name=name)
            else:
                app.command(name)(found)
    return app


def invoked(args: list[str]) -> str | None:
    """The command that ``args`` (the command line after ``onnxcost``) runs, where it names one
    first; None where it needs the whole app: no command, a flag of the root (``--help``,
    ``--version``), a name that is no command (whose error lists them), shell completion, or
    ``sweep``, which checks a grid file against the other commands' options."""
    if not args or "_ONNXCOST_COMPLETE" in os.environ:
        return None
    return args[0] if args[0] in COMMANDS and args[0] != "sweep" else None


def __getattr__(name: str) -> Any:
    """``app``: the whole typer app (for tests and ``typer.testing.CliRunner``), built on first
    use."""
    if name == "app":
        globals()["app"] = found = build()
        return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    plain_help(typer.main.get_command(build(invoked(sys.argv[1:]))))()


if __name__ == "__main__":
    main()
