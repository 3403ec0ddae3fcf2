"""The local pool: ``workers`` cells at a time, each in a process of its own (``runner``).

A thread per worker starts a cell's process and waits for it; the rows are written as cells
finish (completion order), and at most ``2 × workers`` cells are in flight, so the driver's
memory does not grow with the number of cells. Cells that time the hardware (bench, llm
--bench) and share a device run one at a time unless the grid says ``exclusive = false``: a
lock per device (the cell's ``provider``, CPU by default), so timings do not disturb each other.
Ctrl-C (or any exception in the driver) kills the running cells at once and drops the cells
not started; the rows written stay, and ``--resume`` runs the rest.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from onnxcost.sweep.cells import Cell, argv
from onnxcost.sweep.grid import Grid
from onnxcost.sweep.runner import Running, run_cell

Row = dict[str, Any]


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def threads_per_cell(grid: Grid) -> float:
    """The CPUs one cell uses: ``[resources] cpu``, or the largest ``threads`` in the grid."""
    most = grid.resources.cpu
    for name, values in grid.axes:
        if name == "threads":
            most = max([most, *(float(v) for v in values if isinstance(v, int | float))])
    return max(most, 1.0)


def default_workers(grid: Grid) -> int:
    """Cores / threads per cell, at least 1."""
    return max(1, int(cores() // threads_per_cell(grid)))


def device_of(grid: Grid, cell: dict[str, Any]) -> str | None:
    """The device a cell times (its lock's name), or None when it times nothing."""
    timed = grid.command == "bench" or (grid.command == "llm" and bool(cell.get("bench")))
    if not timed or not grid.exclusive:
        return None
    provider = cell.get("provider", "cpu")
    return str(provider).lower()


def run_local(grid: Grid, todo: Iterable[Cell], workers: int, write: Callable[[Row], None]) -> int:
    """Run the cells of ``todo`` on ``workers`` threads; ``write`` each row as it comes (from
    this thread only). Returns how many cells ran."""
    locks: dict[str, threading.Lock] = {}
    guard = threading.Lock()
    running = Running()

    def one(c: Cell) -> Row:
        device = device_of(grid, dict(c.cell))
        args = argv(grid, c.cell)
        repeat = c.repeat if grid.repeat > 1 else None
        if device is None:
            return run_cell(args, cell=c.cell, cwd=grid.base, timeout_s=grid.timeout_s,
                            repeat=repeat, running=running)  # fmt: skip
        with guard:
            lock = locks.setdefault(device, threading.Lock())
        with lock:
            return run_cell(args, cell=c.cell, cwd=grid.base, timeout_s=grid.timeout_s,
                            repeat=repeat, running=running)  # fmt: skip

    ran = 0
    cells: Iterator[Cell] = iter(todo)
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="onnxcost-sweep")
    try:
        pending: set[Future[Row]] = set()
        for c in cells:
            pending.add(pool.submit(one, c))
            if len(pending) >= 2 * workers:
                break
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                write(f.result())
                ran += 1
                nxt = next(cells, None)
                if nxt is not None:
                    pending.add(pool.submit(one, nxt))
    except BaseException:  # Ctrl-C: end the running cells now, not when they finish
        running.stop()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return ran


__all__ = ["cores", "default_workers", "device_of", "run_local", "threads_per_cell"]
