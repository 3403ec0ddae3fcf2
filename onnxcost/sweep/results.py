"""The results file: one JSON line per cell, appended, flushed and synced one row at a time.

A row on disk is never rewritten: ``--resume`` reads the keys of the rows already there
(``done``), and the sweep appends the cells that are missing. A line cut short by a kill
(no newline at its end, not JSON) is left as it is; the next row starts on a line of its own,
and readers skip such a line (``rows`` counts them).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from onnxcost.errors import OnnxcostError
from onnxcost.sweep.cells import cell_key


class ResultsError(OnnxcostError):
    """The results file cannot be read, or a sweep would write over one."""


def row_key(row: Mapping[str, Any]) -> str | None:
    """The ``cell_key`` of a row (None when the row has no cell)."""
    cell = row.get("cell")
    if not isinstance(cell, dict):
        return None
    repeat = row.get("repeat", 0)
    return cell_key(cell, repeat if isinstance(repeat, int) else 0)


class Skipped:
    """How many lines ``rows`` skipped (cut short by a kill, or not a row)."""

    def __init__(self) -> None:
        self.lines = 0


def rows(path: Path, skipped: Skipped | None = None) -> Iterator[dict[str, Any]]:
    """The rows of ``path``, one at a time (the file is never read whole)."""
    try:
        f = path.open("rb")
    except OSError as e:
        raise ResultsError(f"cannot read results file {path}: {e.strerror or e}") from e
    with f:
        for line in f:
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                row = None
            if isinstance(row, dict) and "cell" in row and "status" in row:
                yield row
            elif skipped is not None:
                skipped.lines += 1


def done(path: Path) -> set[str]:
    """The keys of the cells that have a row in ``path`` (whatever their status)."""
    keys: set[str] = set()
    for row in rows(path):
        key = row_key(row)
        if key is not None:
            keys.add(key)
    return keys


class Writer:
    """Appends rows to ``path``: each one written, flushed and fsynced before the next, so a
    killed sweep loses no finished cell. ``fresh``: refuse a file that already has rows."""

    def __init__(self, path: Path, *, fresh: bool) -> None:
        self.path = path
        self.written = 0
        if fresh and path.exists() and path.stat().st_size > 0:
            raise ResultsError(
                f"{path} already holds results: pass --resume to run only the cells it lacks, "
                f"or choose another -o"
            )
        try:
            self._f: IO[bytes] = path.open("ab")
        except OSError as e:
            raise ResultsError(f"cannot write results file {path}: {e.strerror or e}") from e
        if self._f.tell() > 0 and not _ends_with_newline(path):
            self._f.write(b"\n")  # a line cut by a kill stays as it was, alone on its line

    def write(self, row: Mapping[str, Any]) -> None:
        line = json.dumps(row, ensure_ascii=False, separators=(",", ":"))
        self._f.write(line.encode("utf-8") + b"\n")
        self._f.flush()
        os.fsync(self._f.fileno())
        self.written += 1

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> Writer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


__all__ = ["ResultsError", "Skipped", "Writer", "done", "row_key", "rows"]
