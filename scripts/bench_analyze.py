"""Benchmark of the analyzer (issue: onnxcost analyze), not a timed test.

Builds a 32-layer LLaMA-style decoder (8B-shaped: hidden 4096, 32 heads, 8 KV heads,
intermediate 14336, vocab 128256; fp16) whose weights are external data in a sparse file,
then measures:

1. in-process: ``onnxcost.analyze(path)`` against the floor ``onnx.load(path,
   load_external_data=False)`` + ``onnx.shape_inference.infer_shapes(..., data_prop=True)``,
   alternating runs, ratio of medians; and the same ratio at 8, 16 and 32 layers, to show
   how it grows with node count;
2. end to end: wall time and peak RSS of the ``onnxcost analyze`` command on the 8B model;
3. with ``--phases``: where ``analyze`` spends its time on the 8B model (load, graph
   index with naming, shapes, and the rest: costs, summaries, peak memory), as shares of the whole.

Usage: python scripts/bench_analyze.py [--runs 7] [--out DIR] [--phases]
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx

import onnxcost
from onnxcost import zoo
from onnxcost.graph import build
from onnxcost.model import load_model
from onnxcost.shapes import infer

LLAMA_8B = {"hidden": 4096, "heads": 32, "kv_heads": 8, "intermediate": 14336, "vocab": 128256}


def _floor(path: Path) -> None:
    model = onnx.load(path, load_external_data=False)
    onnx.shape_inference.infer_shapes(model, data_prop=True)


def _analyze(path: Path) -> None:
    onnxcost.analyze(path)


def ratio_of_medians(path: Path, runs: int) -> tuple[float, float, float]:
    """Median seconds of the floor and of analyze, measured alternately, and their ratio."""
    _floor(path)
    _analyze(path)  # warm caches (imports, schema lookups) for both
    floor, ours = [], []
    for _ in range(runs):
        t = time.perf_counter()
        _floor(path)
        floor.append(time.perf_counter() - t)
        t = time.perf_counter()
        _analyze(path)
        ours.append(time.perf_counter() - t)
    f, a = statistics.median(floor), statistics.median(ours)
    return f, a, a / f


def end_to_end(path: Path, runs: int) -> tuple[float, int]:
    """Median wall seconds and max peak RSS (KiB) of `onnxcost analyze PATH` in a fresh process."""
    walls, peak = [], 0
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "onnxcost", "analyze", str(path), "--top", "10"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        walls.append(time.perf_counter() - t)
        peak = max(peak, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before)
    return statistics.median(walls), peak


def phases(path: Path, runs: int) -> dict[str, float]:
    """Median seconds of each stage of ``analyze``, the stages run as ``analyze`` runs them
    (collector paused), and of a whole ``analyze`` in the same runs; 'rest' is the remainder."""
    times: dict[str, list[float]] = {k: [] for k in ("load", "index", "shapes", "total")}
    onnxcost.analyze(path)
    for _ in range(runs):
        gc.disable()
        t0 = time.perf_counter()
        proto = load_model(path).proto
        t1 = time.perf_counter()
        view = build(proto.graph, name_unnamed=True)
        t2 = time.perf_counter()
        infer(proto, None, None, view)
        t3 = time.perf_counter()
        gc.enable()
        for key, a, b in (("load", t0, t1), ("index", t1, t2), ("shapes", t2, t3)):
            times[key].append(b - a)
        t = time.perf_counter()
        onnxcost.analyze(path)
        times["total"].append(time.perf_counter() - t)
    out = {k: statistics.median(v) for k, v in times.items()}
    out["rest"] = out["total"] - sum(out[k] for k in ("load", "index", "shapes"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument(
        "--out", type=Path, default=None, help="where to write the models (default: a temp dir)"
    )
    ap.add_argument("--phases", action="store_true", help="also split analyze's time by stage")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="onnxcost-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"models in {out}; {args.runs} alternating runs each; medians")
    print(f"{'layers':>6} {'nodes':>6} {'params':>14} {'floor s':>8} {'analyze s':>9} {'ratio':>6}")
    path8b = out / "llama_32l.onnx"
    for layers in (8, 16, 32):
        path = out / f"llama_{layers}l.onnx"
        t = time.perf_counter()
        zoo.save("llama", path, dtype="fp16", weights=False, params={**LLAMA_8B, "layers": layers})
        built = time.perf_counter() - t
        a = onnxcost.analyze(path)
        f, s, r = ratio_of_medians(path, args.runs)
        print(
            f"{layers:>6} {a.model.node_count:>6} {a.totals.params:>14,} {f:>8.3f} {s:>9.3f} {r:>6.2f}  (written in {built:.2f} s)"
        )
    if args.phases:
        split = phases(path8b, args.runs)
        total = split["total"]
        print(
            f"phases of analyze on {path8b.name} (median of {args.runs}): "
            + ", ".join(
                f"{k} {split[k] * 1000:.1f} ms ({split[k] / total:.0%})"
                for k in ("load", "index", "shapes", "rest")
            )
            + f"; total {total * 1000:.1f} ms"
        )
    wall, rss_kib = end_to_end(path8b, args.runs)
    print(
        f"onnxcost analyze {path8b.name}: median wall {wall:.2f} s, peak RSS {rss_kib / 1024:.0f} MiB"
    )


if __name__ == "__main__":
    main()
