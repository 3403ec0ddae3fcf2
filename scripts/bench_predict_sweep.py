"""Benchmark of ``predict --sweep`` against one concrete ``predict`` per point, not a timed
test.

Each case predicts a 64-point grid on a device two ways, in-process on one prepared model
(``onnxcost.prepare``: loaded and indexed once, as both ways get it):

- ``predict_sweep``: one symbolic analysis, then every point from its formulas;
- 64 calls of ``predict(prepared, device, dims=point)``: a concrete analysis each.

It checks that the two agree at every point (latency and every node's predicted time, exact),
then reports the median wall and CPU time (``time.process_time``: what the shared machine's
other work does not inflate) of each way over ``--runs`` alternated runs, and their ratio.

Cases: the built-in resnet20_cifar in batch 1..64; GPT-2 (the built-in at 2 layers, hidden
64, 64 positions) in batch 1..8 x seq 1..57 (step 8); models/decoder_kv_torch_dynamo.onnx
in batch 1..2 x past_seq 0..31 at seq 1; with ``--all`` also GPT-2 small (12 layers, 1,024
positions) in batch 1..8 x seq 64..512.

Usage: python scripts/bench_predict_sweep.py [--runs 5] [--device H100] [--all]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from onnxcost import zoo
from onnxcost.predict.run import predict
from onnxcost.predict.sweep import predict_sweep
from onnxcost.prepare import PreparedModel, prepare

ROOT = Path(__file__).resolve().parent.parent


def _grid(sweep: Mapping[str, Sequence[int]]) -> list[dict[str, int]]:
    return [dict(zip(sweep, v, strict=True)) for v in itertools.product(*sweep.values())]


def case(
    label: str,
    prepared: PreparedModel,
    sweep: Mapping[str, Sequence[int]],
    dims: Mapping[str, int],
    device: str,
    runs: int,
) -> None:
    points = _grid(sweep)
    got = predict_sweep(prepared, device, sweep, dims=dims)  # warm: imports, onnx schemas
    for pt in got.points:
        want = predict(prepared, device, dims={**dims, **pt.values})
        assert pt.source == "formulas", pt.why
        assert pt.prediction.latency_ms == want.latency_ms, pt.values
        assert [n.predicted_us for n in pt.prediction.nodes] == [
            n.predicted_us for n in want.nodes
        ], pt.values
    times: dict[str, list[tuple[float, float]]] = {"sweep": [], "concrete": []}
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        predict_sweep(prepared, device, sweep, dims=dims)
        times["sweep"].append((time.perf_counter() - wall, time.process_time() - cpu))
        wall, cpu = time.perf_counter(), time.process_time()
        for point in points:
            predict(prepared, device, dims={**dims, **point})
        times["concrete"].append((time.perf_counter() - wall, time.process_time() - cpu))
    sw = [statistics.median(t[k] for t in times["sweep"]) for k in (0, 1)]
    co = [statistics.median(t[k] for t in times["concrete"]) for k in (0, 1)]
    print(
        f"{label}: {len(points)} points, {len(prepared.view.order):,} nodes; sweep "
        f"{sw[0]:.3f} s wall / {sw[1]:.3f} s CPU; {len(points)} predicts {co[0]:.3f} s / "
        f"{co[1]:.3f} s; {co[0] / sw[0]:.1f}x faster wall, {co[1] / sw[1]:.1f}x CPU "
        f"(exact at every point)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--device", default="H100")
    ap.add_argument("--all", action="store_true", help="also GPT-2 small (12 layers)")
    args = ap.parse_args()
    small = {"layers": 2, "hidden": 64, "heads": 2, "vocab": 100, "max_positions": 64}
    cases = [
        ("resnet20_cifar", prepare("resnet20_cifar"), {"batch": range(1, 65)}, {}),
        (
            "gpt2 (2 layers, hidden 64)",
            prepare(zoo.build("gpt2", params=small)),
            {"batch": range(1, 9), "seq": range(1, 58, 8)},
            {},
        ),
        (
            "decoder_kv_torch_dynamo",
            prepare(str(ROOT / "models" / "decoder_kv_torch_dynamo.onnx")),
            {"batch": (1, 2), "past_seq": range(32)},
            {"seq": 1},
        ),
    ]
    if args.all:
        cases.append(
            (
                "gpt2 small",
                prepare("gpt2"),
                {"batch": range(1, 9), "seq": range(64, 513, 64)},
                {},
            )
        )
    for label, prepared, sweep, dims in cases:
        grid = {k: tuple(v) for k, v in sweep.items()}
        case(label, prepared, grid, dims, args.device, args.runs)


if __name__ == "__main__":
    main()
