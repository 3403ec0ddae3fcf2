"""Signals, for real: a cell killed by SIGKILL while it runs is a row naming the signal; Ctrl-C
(SIGINT to the driver) kills the running cells at once, keeps the rows written, and --resume
runs the rest. The slow cells are ``bench mlp --min-seconds N``: onnxruntime times the MLP for
at least N seconds, so they run until killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, cli

pytestmark = [pytest.mark.slow, pytest.mark.ort]


def _rows(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (read from /proc/*/stat)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after it.
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(entry.name))
    return out


def _cmdline(pid: int) -> list[str]:
    try:
        return (Path(f"/proc/{pid}/cmdline").read_bytes().decode()).split("\0")
    except OSError:
        return []


def _wait_for_cell(driver: subprocess.Popen[bytes], marker: str, timeout: float = 120) -> int:
    """The pid of the driver's cell whose command line holds ``marker``, once it runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert driver.poll() is None, "the sweep ended before its slow cell started"
        for pid in _children(driver.pid):
            if marker in _cmdline(pid):
                return pid
        time.sleep(0.05)
    raise AssertionError(f"no cell with {marker} started in {timeout} s")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _driver(tmp_path: Path, *args: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "onnxcost", "sweep", "g.toml", "-o", "r.jsonl", *args],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip


def test_a_cell_killed_by_sigkill_is_a_row_naming_the_signal(tmp_path: Path) -> None:
    (tmp_path / "g.toml").write_text(
        'command = "bench"\nmodels = ["mlp"]\ntimeout_s = 300\n[grid]\nmin-seconds = [300]\n'
    )
    driver = _driver(tmp_path, "--workers", "1")
    cell = _wait_for_cell(driver, "300")
    time.sleep(0.5)
    os.kill(cell, signal.SIGKILL)
    _, err = driver.communicate(timeout=60)
    assert driver.returncode == 0, err.decode()
    (row,) = _rows(tmp_path / "r.jsonl")
    assert row["cell"] == {"model": "mlp", "min-seconds": 300}
    assert row["status"] == "error"
    assert row["result"] is None
    assert row["reason"] == "killed by SIGKILL (out of memory, or killed from outside)"
    assert float(row["seconds"]) < 60  # type: ignore[arg-type]


def test_ctrl_c_kills_the_running_cells_keeps_the_rows_and_resume_runs_the_rest(
    tmp_path: Path,
) -> None:
    # One worker: mlp at 0 s (fast, written), then 6 s, then 7 s. Ctrl-C during the 6 s cell:
    # without the fix the driver waited for it and the queued 7 s cell (~13 s); now it ends the
    # cell at once and starts no other.
    (tmp_path / "g.toml").write_text(
        'command = "bench"\nmodels = ["mlp"]\ntimeout_s = 300\n'
        "[grid]\nmin-seconds = [0, 6, 7]\nruns = [20]\nwarmup = [1]\n"
    )
    out = tmp_path / "r.jsonl"
    driver = _driver(tmp_path, "--workers", "1")
    cell = _wait_for_cell(driver, "6")
    assert len(_rows(out)) == 1  # the 0 s cell finished first
    before = out.read_bytes()
    t0 = time.monotonic()
    driver.send_signal(signal.SIGINT)
    _, err = driver.communicate(timeout=60)
    stopped_s = time.monotonic() - t0
    assert driver.returncode == 130, err.decode()
    assert stopped_s < 4, f"the driver took {stopped_s:.1f} s to stop"
    assert not _alive(cell)
    assert err.decode().splitlines()[-2:] == [
        "onnxcost: sweep: interrupted after 1 cells, the running ones killed and not recorded; "
        "--resume runs the rest",
        "onnxcost: error: interrupted",
    ]
    assert out.read_bytes() == before  # the killed cell left no row

    r = cli("sweep", "g.toml", "-o", "r.jsonl", "--resume", "--workers", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes().startswith(before)
    rows = _rows(out)
    assert [row["cell"]["min-seconds"] for row in rows] == [0, 6, 7]  # type: ignore[index]
    assert [row["status"] for row in rows] == ["ok", "ok", "ok"]
