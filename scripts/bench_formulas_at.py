"""Benchmark of a point from the formulas (``a.at(...)``) against a concrete analysis at the
same point (issue 22: at least 100x), not a timed test.

Cases as ``scripts/bench_symbolic.py`` writes them (same --out): the built-in GPT-2 small at
batch 8, seq 512; GPT-2 small with a KV cache at batch 8, seq 1, past_seq 1023; the
32-layer llama with a KV cache, weights declared, at batch 8, seq 1, past_seq 2046 (its
2,048 positions). Each: the formulas found once (``analyze(..., symbolic=True)``), then
alternating a concrete ``analyze(prepared, dims=point)`` and 1,000 ``a.at(**point)``;
medians of --runs; and whether the totals are identical.

Usage: python scripts/bench_formulas_at.py [--runs 5] [--out DIR]
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
from onnxcost.symbolic.dims import with_derived

_KEYS = ("macs", "flops", "bytes_read", "bytes_written", "params", "param_bytes")


def case(source: str, point: dict[str, int], runs: int) -> None:
    prepared = prepare(source)
    a = onnxcost.analyze(prepared, symbolic=True)
    dims = with_derived(prepared.proto, {}, point)
    concrete, at = [], []
    for _ in range(runs):
        t = time.perf_counter()
        c = onnxcost.analyze(prepared, dims=dims)
        concrete.append(time.perf_counter() - t)
        t = time.perf_counter()
        for _ in range(1000):
            f = a.at(**point)
        at.append((time.perf_counter() - t) / 1000)
    same = all(getattr(f, k) == getattr(c.totals, k) for k in _KEYS)
    cm, am = statistics.median(concrete), statistics.median(at)
    print(
        f"{source} at {point}: concrete analysis {cm * 1000:.1f} ms, a.at {am * 1e6:.0f} us: "
        f"{cm / am:,.0f}x; totals identical: {same}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "bench_symbolic")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    kv, llama = args.out / "gpt2_kv.onnx", args.out / "llama_kv.onnx"
    if not kv.exists():
        zoo.save("gpt2", kv, params={"kv_cache": "true"})
    if not llama.exists():
        zoo.save("llama", llama, weights=False, params={"kv_cache": "true"})
    print(f"medians of {args.runs} alternating runs")
    case("gpt2", {"batch": 8, "seq": 512}, args.runs)
    case(str(kv), {"batch": 8, "seq": 1, "past_seq": 1023}, args.runs)
    case(str(llama), {"batch": 8, "seq": 1, "past_seq": 2046}, args.runs)


if __name__ == "__main__":
    main()
