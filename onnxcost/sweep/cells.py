"""A grid's cells: every model × every combination of the grid's values, in a stable order.

The order: models as the file lists them (a glob's matches sorted), then the product of the
axes in the file's order, the last axis varying fastest (``itertools.product``); with
``repeat`` N, each cell N times in a row (``repeat`` 0..N-1). Cells are made one at a time:
a sweep of a million cells never holds them all.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from onnxcost.sweep.grid import Grid


@dataclass(frozen=True)
class Cell:
    """One run: ``cell`` as its row names it (``{"model": ..., option: value, ...}``) and its
    ``repeat`` index (0 unless the grid repeats)."""

    cell: Mapping[str, Any]
    repeat: int = 0

    @property
    def key(self) -> str:
        """What ``--resume`` matches a row by (``cell_key``)."""
        return cell_key(self.cell, self.repeat)


def cell_key(cell: Mapping[str, Any], repeat: int = 0) -> str:
    """Canonical JSON of a cell (keys sorted, no spaces), with its repeat index when not 0."""
    text = json.dumps(cell, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text if not repeat else f"{text}#{repeat}"


def cells(grid: Grid) -> Iterator[Cell]:
    """The grid's cells in order (see the module's docstring)."""
    names = [name for name, _ in grid.axes]
    for model in grid.models:
        for values in itertools.product(*(v for _, v in grid.axes)):
            cell: dict[str, Any] = {"model": model}
            for name, value in zip(names, values, strict=True):
                cell[name] = list(value) if isinstance(value, tuple) else value
            for r in range(grid.repeat):
                yield Cell(cell, r)


def count(grid: Grid) -> int:
    """How many runs the grid makes (cells × repeat)."""
    n = len(grid.models) * grid.repeat
    for _, values in grid.axes:
        n *= len(values)
    return n


def argv(grid: Grid, cell: Mapping[str, Any]) -> list[str]:
    """The command line of ``cell`` after ``python -m onnxcost``: the command, each value as
    ``--option value`` (a list repeats the option; a flag is passed when true), ``-f json``,
    then ``--`` and the model (a name that starts with a dash stays a name)."""
    args = [grid.command]
    for name, value in cell.items():
        if name == "model":
            continue
        if name in grid.flags:
            if value:
                args.append(f"--{name}")
        elif isinstance(value, list):
            for v in value:
                args.extend((f"--{name}", str(v)))
        else:
            args.extend((f"--{name}", str(value)))
    args.extend(("-f", "json", "--", str(cell["model"])))
    return args


__all__ = ["Cell", "argv", "cell_key", "cells", "count"]
