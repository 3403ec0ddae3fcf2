"""``onnxcost sweep``: a grid of models × options, one process per cell, locally or on Ray.

``grid`` reads and checks GRID.toml, ``cells`` expands it, ``runner`` runs one cell,
``results`` appends rows to the JSONL file (and reads it back for ``--resume``), ``local`` is
the process pool and ``ray_backend`` the Ray cluster (the only module that imports Ray).
``report.sweep`` draws the pivot of a results file.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onnxcost.sweep.cells import Cell, cells, count
from onnxcost.sweep.grid import Grid, GridError, Option, Resources, load, parse
from onnxcost.sweep.results import ResultsError, Writer, done, rows


@dataclass
class Summary:
    """What a sweep did: the cells it ran by status, and the cells it skipped (``--resume``)."""

    path: Path
    total: int
    skipped: int = 0
    statuses: Counter[str] = field(default_factory=Counter)

    @property
    def ran(self) -> int:
        return sum(self.statuses.values())


def run(
    grid: Grid,
    output: Path,
    *,
    resume: bool = False,
    workers: int | None = None,
    ray: str | None = None,
    on_row: Callable[[Mapping[str, Any]], None] | None = None,
) -> Summary:
    """Run the cells of ``grid`` that ``output`` lacks (all of them unless ``resume``), locally
    on ``workers`` processes or on the Ray cluster at ``ray``, appending a row per cell."""
    have = done(output) if resume and output.exists() else set()
    summary = Summary(output, count(grid))

    def todo() -> Any:
        for c in cells(grid):
            if c.key in have:
                summary.skipped += 1
                continue
            yield c

    with Writer(output, fresh=not resume) as writer:

        def write(row: dict[str, Any]) -> None:
            writer.write(row)
            summary.statuses[str(row["status"])] += 1
            if on_row is not None:
                on_row(row)

        if ray is not None:
            from onnxcost.sweep.ray_backend import run_ray

            run_ray(grid, todo(), ray, write)
        else:
            from onnxcost.sweep.local import default_workers, run_local

            run_local(grid, todo(), workers or default_workers(grid), write)
    return summary


__all__ = [
    "Cell",
    "Grid",
    "GridError",
    "Option",
    "Resources",
    "ResultsError",
    "Summary",
    "cells",
    "count",
    "load",
    "parse",
    "rows",
    "run",
]
