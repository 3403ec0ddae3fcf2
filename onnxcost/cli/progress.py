"""A progress bar on stderr for the commands that measure (bench, calibrate).

No ``from __future__ import annotations`` in cli/: typer evaluates the annotations at each
start (see onnxcost/cli/__init__.py); names imported for type checking only are quoted.
"""

import sys
from collections.abc import Callable


def progress_callback(quiet: bool) -> tuple[Callable[[object], None] | None, Callable[[], None]]:
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
