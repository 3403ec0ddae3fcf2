"""Run a command's work: a domain error becomes one line on stderr and an exit code.

No ``from __future__ import annotations`` in cli/: typer evaluates the annotations at each
start (see onnxcost/cli/__init__.py); names imported for type checking only are quoted.
"""

import gc
import os
import sys
from collections.abc import Callable
from typing import NoReturn, TypeVar

import typer

from onnxcost.errors import OnnxcostError, UsageError

T = TypeVar("T")


def _fail(message: str, code: int) -> NoReturn:
    """One line on stderr: model text in ``message`` cannot forge a second line or a colour."""
    from onnxcost.report.safe_text import plain

    typer.echo(f"onnxcost: error: {plain(message)}", err=True)
    raise typer.Exit(code)


def reader_gone() -> NoReturn:
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


def run_guarded(debug: bool, fn: Callable[[], T]) -> T:
    """Run ``fn``; turn expected failures into one line on stderr and an exit code."""
    debug = debug or os.environ.get("ONNXCOST_DEBUG", "") not in ("", "0")
    # A command's objects (records, shapes, one or a few per node) live until it ends and form
    # no cycles: the cyclic collector would only re-walk them, about a sixth of a 10,000-node
    # analysis. The command pauses it for its whole process (an analysis also pauses it for
    # its own span, analysis.collector, and gives the caller's setting back).
    gc.disable()
    try:
        return fn()
    except typer.Exit:
        raise
    except BrokenPipeError:
        reader_gone()
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
