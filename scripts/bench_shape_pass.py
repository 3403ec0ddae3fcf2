"""Benchmark of the one symbolic walk (``onnxcost.symbolic.node_costs``, issue 22): every
node's shapes, MACs, FLOPs, bytes read and written and params as formulas, against one
concrete analysis of the same prepared model, not a timed test.

Cases as ``scripts/bench_symbolic.py`` writes them (same --out): the built-in GPT-2 small,
GPT-2 small with a KV cache, and the 32-layer llama with a KV cache, weights declared.
Alternating runs, medians of wall and CPU time (``time.process_time``).

Usage: python scripts/bench_shape_pass.py [--runs 7] [--out DIR]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import onnxcost
from onnxcost import zoo
from onnxcost.prepare import prepare
from onnxcost.symbolic.node_costs import node_costs


def case(source: str, runs: int) -> None:
    p = prepare(source)
    onnxcost.analyze(p)
    node_costs(p)  # warm
    times: dict[str, list[tuple[float, float]]] = {"analysis": [], "walk": [], "no params": []}
    classes = uncarried = 0
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        onnxcost.analyze(p)
        times["analysis"].append((time.perf_counter() - wall, time.process_time() - cpu))
        wall, cpu = time.perf_counter(), time.process_time()
        found = node_costs(p)
        times["walk"].append((time.perf_counter() - wall, time.process_time() - cpu))
        wall, cpu = time.perf_counter(), time.process_time()
        node_costs(p, count_params=False)
        times["no params"].append((time.perf_counter() - wall, time.process_time() - cpu))
        classes = len(set(found.classes))
        uncarried = sum(b is None for b in found.bytes_read)
    med = {
        k: (statistics.median(w for w, _c in t), statistics.median(c for _w, c in t))
        for k, t in times.items()
    }
    aw, ac = med["analysis"]
    walks = "; ".join(
        f"node_costs{' (' + k + ')' if k != 'walk' else ''} {w * 1000:.1f} ms wall / "
        f"{c * 1000:.1f} ms CPU: {w / aw:.2f}x wall, {c / ac:.2f}x CPU"
        for k, (w, c) in med.items()
        if k != "analysis"
    )
    print(
        f"{source}: {len(p.view.order)} nodes, {classes} classes, {uncarried} without bytes; "
        f"analysis {aw * 1000:.1f} ms wall / {ac * 1000:.1f} ms CPU; {walks}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "bench_symbolic")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    kv, llama = args.out / "gpt2_kv.onnx", args.out / "llama_kv.onnx"
    if not kv.exists():
        zoo.save("gpt2", kv, params={"kv_cache": "true"})
    if not llama.exists():
        zoo.save("llama", llama, weights=False, params={"kv_cache": "true"})
    print(f"medians of {args.runs} alternating runs")
    for source in ("gpt2", str(kv), str(llama)):
        case(source, args.runs)


if __name__ == "__main__":
    main()
