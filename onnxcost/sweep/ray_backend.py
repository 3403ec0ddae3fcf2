"""The sweep on a Ray cluster: each cell a Ray task with the grid's resources.

The only module of onnxcost that imports Ray (``pip install 'onnxcost[ray]'``). ``address``
is what ``ray.init`` takes: ``auto`` (the cluster this machine belongs to, ``ray start``) or
a head's address (``HOST:6379``, ``ray://HOST:10001``). A task runs the cell exactly as the
local pool does (``runner.run_cell``, one process per cell, with the timeout) on whichever node
has the resources: ``[resources] cpu`` and ``gpu`` as ``num_cpus`` and ``num_gpus``, and
``accelerator_type = "H100"`` as Ray's own label ``accelerator_type:H100``. A task whose
worker is lost (a node gone) is retried elsewhere up to ``MAX_RETRIES`` times; a cell that
fails is a row (the runner turns every failure into one), and an exception in the task itself
is not retried (``retry_exceptions=False``) but recorded. Rows come back as tasks finish
(``ray.wait``) and go to the file at once; at most ``in_flight`` tasks are pending, so the
driver's memory does not grow with the number of cells.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from onnxcost.errors import OnnxcostError
from onnxcost.sweep.cells import Cell, argv
from onnxcost.sweep.grid import Grid
from onnxcost.sweep.runner import run_cell

Row = dict[str, Any]

MAX_RETRIES = 3
"""Retries of a task whose worker or node died (Ray's ``max_retries``)."""

ACCELERATOR_SHARE = 0.001
"""How much of the ``accelerator_type:KIND`` resource a task asks for: Ray gives each node of
that kind 1 of it, and a task asks for a sliver, as ``@ray.remote(accelerator_type=...)`` does."""


class RayUnavailableError(OnnxcostError):
    """Ray is not installed, or no cluster answers at the address."""


def _cell_task(
    args: Sequence[str],
    cell: Mapping[str, Any],
    cwd: str | None,
    timeout_s: float | None,
    repeat: int | None,
) -> Row:
    """A cell on a Ray worker (the grid's folder is used only where it exists there)."""
    folder = Path(cwd) if cwd is not None and Path(cwd).is_dir() else None
    return run_cell(args, cell=cell, cwd=folder, timeout_s=timeout_s, repeat=repeat)


def options(grid: Grid) -> dict[str, Any]:
    """The task options of the grid's cells (``.options(**...)``)."""
    res = grid.resources
    opts: dict[str, Any] = {
        "num_cpus": res.cpu,
        "num_gpus": res.gpu,
        "max_retries": MAX_RETRIES,
        "retry_exceptions": False,
    }
    if res.accelerator_type:
        opts["resources"] = {f"accelerator_type:{res.accelerator_type}": ACCELERATOR_SHARE}
    return opts


def _lost(c: Cell, repeat: int | None, error: BaseException) -> Row:
    """The row of a cell whose task failed in Ray itself (after its retries)."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    row: Row = {
        "cell": dict(c.cell),
        "status": "error",
        "result": None,
        "host": socket.gethostname(),
        "started": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        "seconds": 0.0,
        "reason": f"ray: {type(error).__name__}: {lines[-1] if lines else ''}"[:500],
    }
    if repeat is not None:
        row["repeat"] = repeat
    return row


def run_ray(
    grid: Grid,
    todo: Iterable[Cell],
    address: str,
    write: Callable[[Row], None],
    *,
    in_flight: int | None = None,
) -> int:
    """Run the cells of ``todo`` as tasks on the Ray cluster at ``address``; ``write`` each row
    as its task finishes. Returns how many cells ran."""
    try:
        import ray as ray_module
    except ImportError as e:
        raise RayUnavailableError(
            "--ray needs Ray: pip install 'onnxcost[ray]' (on the driver and every node)"
        ) from e
    ray: Any = ray_module  # typed or not, depending on the version installed
    try:
        ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise RayUnavailableError(
            f"no Ray cluster at {address!r} ({str(e).splitlines()[0] if str(e) else e}): start "
            f"one with `ray start --head`, or pass the head's address, e.g. --ray HOST:6379"
        ) from e
    try:
        task = ray.remote(_cell_task).options(**options(grid))
        limit = in_flight or max(4, 2 * int(ray.cluster_resources().get("CPU", 1)))
        cwd = str(grid.base.resolve())
        pending: dict[Any, tuple[Cell, int | None]] = {}
        cells: Iterator[Cell] = iter(todo)
        ran = 0

        def submit(c: Cell) -> None:
            repeat = c.repeat if grid.repeat > 1 else None
            ref = task.remote(argv(grid, c.cell), dict(c.cell), cwd, grid.timeout_s, repeat)
            pending[ref] = (c, repeat)

        for c in cells:
            submit(c)
            if len(pending) >= limit:
                break
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                c, repeat = pending.pop(ref)
                try:
                    row: Row = ray.get(ref)
                except Exception as e:  # a worker lost past its retries, a task's own failure
                    row = _lost(c, repeat, e)
                write(row)
                ran += 1
                nxt = next(cells, None)
                if nxt is not None:
                    submit(nxt)
        return ran
    finally:
        ray.shutdown()


__all__ = ["MAX_RETRIES", "RayUnavailableError", "options", "run_ray"]
