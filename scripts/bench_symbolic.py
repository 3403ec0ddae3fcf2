"""Benchmark of ``analyze --symbolic`` against one concrete analysis (issue 12), not a timed test.

Cases: the built-in GPT-2 small by name (``onnxcost.analyze("gpt2")``), in (batch, seq);
GPT-2 small from a file as ``onnxcost zoo save gpt2 FILE`` writes it (weights inline,
499 MB), in (batch, seq); and the same with a KV cache (``--param kv_cache=true``), in
(batch, seq, past_seq); and the built-in llama (8B-shaped, 32 layers, 5,778 nodes) with
a KV cache, its weights declared, not written. Each case alternates a concrete analysis and a symbolic one in
the same process and reports the median wall time and the median CPU time
(``time.process_time``: what the shared machine's other work does not inflate) of each,
their ratio, and how many concrete analyses the symbolic one ran.

Usage: python scripts/bench_symbolic.py [--runs 7] [--out DIR]
(writes the two GPT-2 files, 1 GB, once per --out).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import onnxcost
from onnxcost import zoo


def _timed(source: str, symbolic: bool) -> tuple[float, float, str]:
    wall, cpu = time.perf_counter(), time.process_time()
    a = onnxcost.analyze(source, symbolic=symbolic)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    s = a.symbolic
    if s is None:
        return wall, cpu, "1 analysis"
    runs = f"{s.analyses} analyses"
    if s.reduced_analyses:
        runs += f" + {s.reduced_analyses} of the reduced model ({s.reduced_nodes} of {len(a.nodes)} nodes)"
    return wall, cpu, runs


def case(label: str, source: str, runs: int) -> None:
    """Alternating concrete and symbolic analyses of ``source``: medians and their ratios."""
    _timed(source, True)  # warm: imports, onnx schemas, the page cache
    times: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    analyses = ""
    for _ in range(runs):
        for symbolic in (False, True):
            wall, cpu, analyses_run = _timed(source, symbolic)
            times[symbolic].append((wall, cpu))
            if symbolic:
                analyses = analyses_run
    med = {
        s: (statistics.median(w for w, _c in t), statistics.median(c for _w, c in t))
        for s, t in times.items()
    }
    (cw, cc), (sw, sc) = med[False], med[True]
    print(
        f"{label}: concrete {cw:.3f} s wall / {cc:.3f} s CPU; symbolic {sw:.3f} s wall / "
        f"{sc:.3f} s CPU ({analyses}): {sw / cw:.1f}x wall, {sc / cc:.1f}x CPU"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "bench_symbolic")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    plain, kv = args.out / "gpt2.onnx", args.out / "gpt2_kv.onnx"
    llama = args.out / "llama_kv.onnx"
    if not plain.exists():
        zoo.save("gpt2", plain)
    if not kv.exists():
        zoo.save("gpt2", kv, params={"kv_cache": "true"})
    if not llama.exists():
        zoo.save("llama", llama, weights=False, params={"kv_cache": "true"})
    print(f"medians of {args.runs} alternating runs")
    case("built-in gpt2 (batch, seq)", "gpt2", args.runs)
    case("GPT-2 small file (batch, seq)", str(plain), args.runs)
    case("GPT-2 small with a KV cache (batch, seq, past_seq)", str(kv), args.runs)
    case("the built-in llama, 32 layers, with a KV cache, weights declared", str(llama), args.runs)


if __name__ == "__main__":
    main()
