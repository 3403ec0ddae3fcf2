"""Local sweeps for real: one process per cell, a crash and a timeout recorded as rows, and a
sweep killed with SIGKILL then resumed that loses and repeats no cell."""

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

ROW_KEYS = {"cell", "status", "result", "host", "started", "seconds"}


def _rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_local_sweep_of_analyze_cells(tmp_path: Path) -> None:
    (tmp_path / "g.toml").write_text(
        'command = "analyze"\nmodels = ["mlp"]\ntimeout_s = 120\n[grid]\ndim = ["batch=1", "batch=8"]\n'
    )
    r = cli("sweep", "g.toml", "-o", "out.jsonl", "--workers", "2", "-f", "csv", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = _rows(tmp_path / "out.jsonl")
    assert sorted(json.dumps(row["cell"]) for row in rows) == [
        '{"model": "mlp", "dim": "batch=1"}',
        '{"model": "mlp", "dim": "batch=8"}',
    ]
    for row in rows:
        assert set(row) == ROW_KEYS
        assert row["status"] == "ok"
        assert isinstance(row["seconds"], float)
        assert row["result"]["schema"] == "onnxcost.analysis/1"  # type: ignore[index]
    # MLP 784-128-32-10: 784*128 + 128*32 + 32*10 = 100,352 + 4,096 + 320 = 104,768 MACs per
    # sample; batch 8: 838,144.
    assert r.stdout.splitlines() == [
        "metric,model,batch=1,batch=8",
        "totals.macs,mlp,104768,838144",
    ]
    # The result is the command's own JSON, unchanged.
    alone = cli("analyze", "mlp", "--dim", "batch=8", "-f", "json", cwd=tmp_path)
    eight = next(row for row in rows if row["cell"]["dim"] == "batch=8")  # type: ignore[index]
    assert eight["result"] == json.loads(alone.stdout)


def test_a_crash_and_a_timeout_are_rows_not_the_end_of_the_sweep(tmp_path: Path) -> None:
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    (tmp_path / "crash.toml").write_text('command = "analyze"\nmodels = ["bad.onnx", "mlp"]\n')
    r = cli("sweep", "crash.toml", "-o", "crash.jsonl", "--workers", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    by_model = {row["cell"]["model"]: row for row in _rows(tmp_path / "crash.jsonl")}  # type: ignore[index]
    assert by_model["mlp"]["status"] == "ok"
    bad = by_model["bad.onnx"]
    assert bad["status"] == "error"
    assert bad["result"] is None
    assert str(bad["reason"]).startswith("exit 1: onnxcost: error: ")
    assert "bad.onnx" in str(bad["reason"])

    # A real slow cell: resnet50 with onnxruntime's peak builds a session, far past 0.5 s.
    (tmp_path / "slow.toml").write_text(
        'command = "analyze"\nmodels = ["resnet50"]\ntimeout_s = 0.5\n[grid]\nort-peak = [true]\n'
    )
    t0 = time.perf_counter()
    r = cli("sweep", "slow.toml", "-o", "slow.jsonl", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert time.perf_counter() - t0 < 30
    (row,) = _rows(tmp_path / "slow.jsonl")
    assert row["status"] == "timeout"
    assert row["cell"] == {"model": "resnet50", "ort-peak": True}
    assert row["reason"] == "still running after timeout_s=0.5: killed"
    assert 0.5 <= float(row["seconds"]) < 10  # type: ignore[arg-type]
    # The table shows the status where the figure would be.
    r = cli("sweep", "--report", "slow.jsonl", "-f", "csv", cwd=tmp_path)
    assert r.stdout.splitlines() == ["metric,model,ort-peak", "status,resnet50,timeout"]


def test_killed_with_sigkill_then_resumed_every_cell_once_no_row_rewritten(tmp_path: Path) -> None:
    (tmp_path / "g.toml").write_text(
        'command = "analyze"\nmodels = ["mlp"]\n[grid]\ndim = ["batch=1", "batch=2", "batch=3", "batch=4"]\n'
    )
    out = tmp_path / "r.jsonl"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    driver = subprocess.Popen(
        [sys.executable, "-m", "onnxcost", "sweep", "g.toml", "-o", "r.jsonl", "--workers", "1"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not (out.exists() and out.read_bytes().count(b"\n") >= 1):
        assert driver.poll() is None, "the sweep ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    before = out.read_bytes()
    assert 1 <= before.count(b"\n") < 4
    r = cli("sweep", "g.toml", "-o", "r.jsonl", "--resume", "--workers", "2", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    after = out.read_bytes()
    assert after.startswith(before)  # appended to, never rewritten
    cells = [row["cell"]["dim"] for row in _rows(out)]  # type: ignore[index]
    assert sorted(cells) == ["batch=1", "batch=2", "batch=3", "batch=4"]
    # A second resume has nothing left to do and writes nothing.
    r = cli("sweep", "g.toml", "-o", "r.jsonl", "--resume", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "ran 0 cells" in r.stderr
    assert "4 already in the file" in r.stderr
    assert out.read_bytes() == after


@pytest.mark.parametrize("fmt", ["json", "markdown", "table"])
def test_report_renders_a_file_without_running(tmp_path: Path, fmt: str) -> None:
    rows = [
        {"cell": {"model": "m", "batch": 1}, "status": "ok", "result": {"schema": "onnxcost.bench/1", "latency_ms": {"median": 2.0, "mean": 9.0}}},
        {"cell": {"model": "m", "batch": 8}, "status": "error", "result": None, "reason": "exit 1: boom"},
    ]  # fmt: skip
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = cli("sweep", "--report", "r.jsonl", "-f", fmt, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    if fmt == "json":
        got = json.loads(r.stdout)
        assert got["metrics"] == [
            {"metric": "latency_ms.median", "columns": ["1", "8"],
             "rows": [{"model": "m", "values": [2.0, "error"]}], "missing": 0}
        ]  # fmt: skip
        assert got["failures"] == [
            {"cell": {"model": "m", "batch": 8}, "status": "error", "reason": "exit 1: boom"}
        ]
    else:
        assert "latency_ms.median by" in r.stdout
        assert "exit 1: boom" in r.stdout
