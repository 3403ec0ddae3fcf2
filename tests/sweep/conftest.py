"""Helpers of the sweep tests: the real options of the commands, and running the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import onnxcost

ROOT = Path(onnxcost.__file__).resolve().parent.parent


def cli(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m onnxcost *args`` in ``cwd`` with this checkout's onnxcost."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "onnxcost", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="session")
def options() -> dict[str, object]:
    import typer.main

    from onnxcost.cli.app import app
    from onnxcost.cli.sweep import command_options

    return command_options(typer.main.get_command(app))  # type: ignore[return-value]
