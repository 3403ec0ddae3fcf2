"""Measure ``onnxcost sweep``: cells per second at N workers (or on a Ray cluster), and the
driver's peak RSS (VmHWM, read from /proc while it runs; the cells are other processes).

    python scripts/bench_sweep.py --cells 200 --workers 1 2 0        # 0: the default (all)
    python scripts/bench_sweep.py --cells 200 --ray 127.0.0.1:6379
    python scripts/bench_sweep.py --cells 20 --models mlp --workers 1   # Ray's overhead: vs --ray

The grid: ``analyze`` over the small built-ins (mlp, resnet20_cifar; or ``--models``) at
``--dim batch=1..K``, as many batches as make ``--cells`` cells.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("mlp", "resnet20_cifar")


def grid_text(cells: int, names: tuple[str, ...] = MODELS) -> str:
    batches = -(-cells // len(names))
    dims = ", ".join(f'"batch={b}"' for b in range(1, batches + 1))
    models = ", ".join(f'"{m}"' for m in names)
    return f'command = "analyze"\nmodels = [{models}]\ntimeout_s = 300\n[grid]\ndim = [{dims}]\n'


def vmhwm_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def run(
    cells: int, workers: int | None, ray: str | None, names: tuple[str, ...] = MODELS
) -> tuple[int, float, int, float]:
    """(cells run, seconds, the driver's peak RSS in KiB, the sum of the rows' seconds)."""
    with tempfile.TemporaryDirectory() as tmp:
        grid = Path(tmp) / "g.toml"
        grid.write_text(grid_text(cells, names))
        cmd = [sys.executable, "-m", "onnxcost", "sweep", str(grid), "-o", str(Path(tmp) / "r.jsonl"),
               "-q", "-f", "json"]  # fmt: skip
        if workers:
            cmd += ["--workers", str(workers)]
        if ray:
            cmd += ["--ray", ray]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        peak = 0
        while p.poll() is None:
            peak = max(peak, vmhwm_kb(p.pid))
            time.sleep(0.2)
        seconds = time.perf_counter() - t0
        if p.returncode != 0:
            raise SystemExit(p.stderr.read().decode() if p.stderr else "sweep failed")
        rows = [json.loads(line) for line in (Path(tmp) / "r.jsonl").open()]
        return len(rows), seconds, peak, sum(float(r["seconds"]) for r in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, nargs="+", default=[200])
    ap.add_argument("--workers", type=int, nargs="*", default=[1, 2, 0])
    ap.add_argument(
        "--ray", default=None, help="a Ray cluster's address (then --workers is ignored)"
    )
    ap.add_argument("--models", nargs="+", default=list(MODELS), help="built-ins to analyze")
    a = ap.parse_args()
    # outside: the wall time less the sum of the rows' seconds (each cell's own process),
    # what the driver (and Ray) add; with 1 worker or 1 CPU, per cell it is the overhead.
    print("| cells | where | seconds | cells/s | driver peak RSS | outside cells, s/cell |")
    print("|---:|---|---:|---:|---:|---:|")
    for cells in a.cells:
        runs = [(None, a.ray)] if a.ray else [(w or None, None) for w in a.workers]
        for workers, ray in runs:
            n, s, kb, inside = run(cells, workers, ray, tuple(a.models))
            where = f"Ray {ray}" if ray else f"{workers or 'default'} workers"
            print(f"| {n} | {where} | {s:.1f} | {n / s:.2f} | {kb / 1024:.0f} MiB "
                  f"| {(s - inside) / n:.3f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
