"""Estimate vs measured memory of every built-in model, at batch 1 and 8, on the CPU provider.

    nice -n 10 python scripts/bench_memory.py [--batches 1,8] [--seq 128] [--models a,b]

Each (model, batch) runs in a fresh Python process (``--one``), so no model's memory, and no
allocator state, leaks into the next one's figures. The measurement is ``onnxcost bench``'s
(``onnxcost.bench.memory``): weights = host RSS growth over session creation; run peak = the
peak RSS over the runs (VmHWM, reset before them) minus the RSS after session creation. The
estimates are the analysis' ``totals.param_bytes`` and ``totals.peak_activation_bytes``.

Text models run at ``--seq`` tokens. The 8B-shaped ``llama`` cannot be materialised here (32
GB of fp32 weights), so it is shrunk to ``SHRUNK_LLAMA`` and the table says so.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

SHRUNK_LLAMA = {
    "layers": 2,
    "hidden": 512,
    "heads": 8,
    "kv_heads": 8,
    "intermediate": 1376,
    "max_positions": 512,
}
TEXT_MODELS = ("bert_base", "gpt2", "llama")


def measure(name: str, batch: int, seq: int) -> dict[str, Any]:
    """One model at one batch, in this process: the bench's ``memory`` object."""
    from onnxcost import zoo
    from onnxcost.bench import BenchOptions, run_bench

    params = SHRUNK_LLAMA if name == "llama" else None
    proto = zoo.build(name, params=params)
    dims = {"batch": batch} | ({"seq": seq} if name in TEXT_MODELS else {})
    result = run_bench(
        proto, BenchOptions(dims=dims, warmup=0, min_warmup_s=0.0, runs=1, min_seconds=0.0)
    )
    memory: dict[str, Any] = result.to_dict()["memory"]
    return memory


def _size(v: int | None) -> str:
    from onnxcost.units import nbytes

    return "-" if v is None else nbytes(v)


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--models", default="")
    parser.add_argument("--one", nargs=2, metavar=("MODEL", "BATCH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one[0], int(args.one[1]), args.seq)))
        return
    from onnxcost import zoo

    names = [n for n in args.models.split(",") if n] or list(zoo.MODELS)
    batches = [int(b) for b in args.batches.split(",")]
    print(
        "| model | batch | weights estimate | weights measured | ratio "
        "| peak activations estimate | run peak measured | ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in names:
        label = name + (" (shrunk, see below)" if name == "llama" else "")
        for batch in batches:
            proc = subprocess.run(
                [sys.executable, __file__, "--one", name, str(batch), "--seq", str(args.seq)],
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                print(f"| {label} | {batch} | failed: {tail[:120]} |||||")
                continue
            m = json.loads(proc.stdout.strip().splitlines()[-1])
            print(
                f"| {label} | {batch} | {_size(m['weights_estimate_bytes'])} "
                f"| {_size(m['weights_measured_bytes'])} | {_x(m['weights_ratio'])} "
                f"| {_size(m['activations_estimate_bytes'])} | {_size(m['run_peak_measured_bytes'])} "
                f"| {_x(m['run_peak_ratio'])} |",
                flush=True,
            )
    print()
    print(
        f"Text models at seq {args.seq}. llama shrunk to "
        + ", ".join(f"{k}={v}" for k, v in SHRUNK_LLAMA.items())
        + " (the 8B shape needs 32 GB of fp32 weights)."
    )


if __name__ == "__main__":
    main()
