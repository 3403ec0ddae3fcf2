"""Bench cells on one device run one at a time, even with free workers, unless the grid says
``exclusive = false``: read off each row's start and end (``started`` + ``seconds``)."""

from __future__ import annotations

import itertools
import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from conftest import cli

pytestmark = [pytest.mark.slow, pytest.mark.ort]

SLACK = timedelta(milliseconds=2)
"""``started`` is written to the millisecond: two cells one after the other may seem to share
up to a millisecond; a real overlap is most of a cell (seconds)."""


def _spans(path: Path) -> list[tuple[datetime, datetime]]:
    spans = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        assert row["status"] == "ok", row
        start = datetime.fromisoformat(row["started"])
        spans.append((start, start + timedelta(seconds=row["seconds"])))
    return spans


def _overlaps(spans: list[tuple[datetime, datetime]]) -> int:
    return sum(
        1
        for (a0, a1), (b0, b1) in itertools.combinations(spans, 2)
        if min(a1, b1) - max(a0, b0) > SLACK
    )


@pytest.mark.parametrize("exclusive", [True, False])
def test_bench_cells_on_one_device_run_one_at_a_time(tmp_path: Path, exclusive: bool) -> None:
    (tmp_path / "g.toml").write_text(
        f'command = "bench"\nmodels = ["mlp"]\nexclusive = {str(exclusive).lower()}\n'
        "[grid]\nruns = [20, 21, 22]\nwarmup = [1]\n"
    )
    r = cli("sweep", "g.toml", "-o", "r.jsonl", "--workers", "3", "-q", "-f", "csv", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    spans = _spans(tmp_path / "r.jsonl")
    assert len(spans) == 3
    if exclusive:
        assert _overlaps(spans) == 0
    else:  # 3 workers, 3 cells started together: every pair overlaps
        assert _overlaps(spans) == 3
