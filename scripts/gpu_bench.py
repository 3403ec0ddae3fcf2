"""The GPU table: bench the built-in models on CUDA, each (model, dtype) in its own process.

    python scripts/gpu_bench.py --out DIR [--models resnet18,resnet50,vit_b_16,bert_base,gpt2]
                                [--dtypes fp32,fp16] [--batches 1,8,32] [--budget-s 400]

For each model and dtype it saves the built-in (``onnxcost zoo save NAME FILE --dtype D``;
bert_base and gpt2 at seq 128) and runs ``run_bench`` on CUDAExecutionProvider three ways,
writing each result as ``onnxcost.bench/1`` JSON to DIR/<model>_<dtype>_<variant>.json:

- ``iobinding``: inputs and outputs on the GPU, the batch sweep, ``--profile`` (GPU times from
  CUPTI) and ``--calibrate`` (ceilings in the model's float dtype);
- ``copies``: ``--include-copies`` (host arrays in and out, copies timed);
- ``graph``: ``--cuda-graph``;
- ``profile32``: ``--profile`` at batch 32, where the GPU rather than the host sets the pace.

Then it prints one table row per model and dtype. A failure is written as
DIR/<model>_<dtype>_<variant>.error.txt and the rest goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

SEQ = 128
VARIANTS = ("iobinding", "copies", "graph", "profile32")


def _dims(batch: int) -> dict[str, int]:
    """The batch symbol; bert_base and gpt2 are saved at seq SEQ."""
    return {"batch": batch}


def one(
    name: str,
    dtype: str,
    batches: list[int],
    out: Path,
    tmp: Path,
    provider: str,
    skip: frozenset[str] = frozenset(),
) -> None:
    """Every variant of one model and dtype, in this process."""
    from onnxcost import zoo
    from onnxcost.bench import BenchOptions, run_bench

    params = {"seq": SEQ} if name in ("bert_base", "gpt2") else {}
    path = tmp / f"{name}_{dtype}.onnx"
    zoo.save(name, str(path), dtype=dtype, params=params)
    common: dict[str, Any] = {
        "provider": provider,
        "dims": _dims(1),
        "warmup": 20,
        "min_warmup_s": 1.0,
        "runs": 200,
        "min_seconds": 1.0,
    }
    variants: dict[str, dict[str, Any]] = {
        "iobinding": {
            "batches": batches,
            "profile": True,
            "profile_runs": 20,
            "calibrate": True,
            "trace_out": str(out / f"{name}_{dtype}_trace.json"),
        },
        "copies": {"include_copies": True},
        "graph": {"cuda_graph": True},
        "profile32": {"dims": _dims(32), "profile": True, "profile_runs": 20},
    }
    if provider != "CUDAExecutionProvider":
        del variants["copies"], variants["graph"]
    for variant in skip & set(variants):
        del variants[variant]
    import onnxcost

    flops = {b: onnxcost.analyze(str(path), dims=_dims(b)).totals.flops for b in batches}
    (out / f"{name}_{dtype}_flops.json").write_text(json.dumps(flops))
    for variant, extra in variants.items():
        stem = out / f"{name}_{dtype}_{variant}"
        t0 = time.perf_counter()
        try:
            result = run_bench(str(path), BenchOptions(**{**common, **extra}))
        except Exception:  # a script: record the failure and go on
            stem.with_suffix(".error.txt").write_text(traceback.format_exc())
            print(f"{name} {dtype} {variant}: FAILED ({time.perf_counter() - t0:.1f} s)")
            continue
        stem.with_suffix(".json").write_text(json.dumps(result.to_dict(), indent=1))
        print(
            f"{name} {dtype} {variant}: median {result.latency.median_ms:.3f} ms "
            f"({time.perf_counter() - t0:.1f} s)",
            flush=True,
        )


def table(out: Path) -> None:
    """One row per model and dtype from the iobinding/graph/copies JSON files."""
    print(
        f"{'model':10} {'dtype':5} {'batch':>5} {'median ms':>10} {'p99 ms':>8} "
        f"{'items/s':>9} {'GPU MiB':>8} {'TFLOP/s':>8} {'ceiling':>8} {'graph ms':>9} {'copies ms':>9}"
    )
    for path in sorted(out.glob("*_iobinding.json")):
        data = json.loads(path.read_text())
        stem = path.name.removesuffix("_iobinding.json")
        extra = {}
        for variant in ("graph", "copies"):
            other = out / f"{stem}_{variant}.json"
            extra[variant] = (
                json.loads(other.read_text())["latency_ms"]["median"] if other.exists() else None
            )
        roof = data.get("roofline") or {}
        flops_file = out / f"{stem}_flops.json"
        flops = json.loads(flops_file.read_text()) if flops_file.exists() else {}
        peak = (roof.get("ceilings") or {}).get("peak_flops_per_s") or 0
        model, dtype = stem.rsplit("_", 1)
        for point in data.get("sweep") or [None]:
            lat = point["latency_ms"] if point else data["latency_ms"]
            batch = point["batch"] if point else data["batch"]
            print(
                f"{model:10} {dtype:5} {batch:>5} {lat['median']:>10.3f} {lat['p99']:>8.3f} "
                f"{batch * 1000 / lat['median']:>9.1f} {data['memory'].get('gpu_used_delta_mb') or 0:>8.0f} "
                f"{flops.get(str(batch), 0) / lat['median'] / 1e9:>8.2f} "
                f"{peak / 1e12:>8.1f} "
                f"{extra['graph'] if batch == data['batch'] and extra['graph'] else 0:>9.3f} "
                f"{extra['copies'] if batch == data['batch'] and extra['copies'] else 0:>9.3f}"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--models", default="resnet18,resnet50,vit_b_16,bert_base,gpt2")
    parser.add_argument("--dtypes", default="fp32,fp16")
    parser.add_argument("--batches", default="1,8,32")
    parser.add_argument(
        "--budget-s", type=float, default=400.0, help="stop starting new models after this"
    )
    parser.add_argument("--provider", default="CUDAExecutionProvider")
    parser.add_argument("--skip", default="", help="variants to leave out, e.g. copies,graph")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    batches = [int(b) for b in args.batches.split(",")]
    if args.one:
        name, dtype = args.one.split(":")
        with tempfile.TemporaryDirectory() as tmp:
            skip = frozenset(filter(None, args.skip.split(",")))
            one(name, dtype, batches, out, Path(tmp), args.provider, skip)
        return 0
    start = time.perf_counter()
    for dtype in args.dtypes.split(","):
        for name in args.models.split(","):
            left = args.budget_s - (time.perf_counter() - start)
            if left < 20:
                print(f"{name} {dtype}: skipped (budget spent)")
                continue
            cmd = [sys.executable, __file__, "--out", str(out), "--batches", args.batches]
            cmd += ["--provider", args.provider, "--skip", args.skip]
            try:
                subprocess.run(
                    [*cmd, "--one", f"{name}:{dtype}"], timeout=left, check=False, env=os.environ
                )
            except subprocess.TimeoutExpired:
                print(f"{name} {dtype}: stopped at the budget")
    table(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
