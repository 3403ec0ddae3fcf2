"""Validate ``onnxcost predict`` on this machine: predicted against measured latency.

    python scripts/bench_predict.py [--device FILE] [--threads 1] [--timing wall|thread]
        [--save FILE] [--seconds 1.5] [--only NAME ...] [--json OUT] [--measured OUT]

Calibrates (or reads a device file), then for every model of the validation set (none of
them used by the calibration, which runs single-node models only): predicts its latency,
and measures it in the same run with a bare onnxruntime loop (a fresh session with the
device file's provider, threads and optimization level, seeded random inputs,
``perf_counter_ns`` and the thread's CPU time around each ``session.run``; 3 warm-up runs,
then 5 rounds of ``--seconds`` / 5, at least 5 runs each). Prints a table: model, predicted
ms, measured ms (the least of the 5 round medians, as calibrate measures, and the median of
all runs), error %, then the share within +-15% and the median |error| against each.
``--measured OUT --device FILE`` predicts again against the measurements of an earlier run
(the time model changed, the measurements kept: a comparison within one run's noise).
``--timing thread`` (one thread, CPU provider) calibrates and compares by the thread's CPU
time, which leaves out what other processes take on a shared machine.

The set: the models in models/ (decoder at batch 1, seq 1, past 16), built-ins at small
sizes, the ONNX package's light models (onnx/backend/test/data/light, when shipped), a
single compute-bound convolution and a tiny two-node model.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxcost import zoo
from onnxcost.api import analyze
from onnxcost.bench._ort import import_ort
from onnxcost.bench.inputs import input_specs, make_inputs
from onnxcost.bench.session import SessionConfig, opt_level, prepare_model, session_options
from onnxcost.predict.calibrate import calibrate_device
from onnxcost.predict.device import Device, load_device
from onnxcost.predict.run import predict_analysis, static_inputs
from onnxcost.prepare import prepare

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Case:
    name: str
    model: Callable[[], Any]
    dims: dict[str, int]


def _single_conv() -> onnx.ModelProto:
    """Conv 3x3, 96 -> 96 channels, on 1x96x48x48 (a shape the calibration does not run)."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(
        (rng.standard_normal((96, 96, 3, 3)) * 0.05).astype(np.float32), "w"
    )
    b = numpy_helper.from_array(np.zeros(96, np.float32), "b")
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", pads=[1, 1, 1, 1])
    graph = helper.make_graph(
        [node],
        "single_conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 96, 48, 48])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 96, 48, 48])],
        [w, b],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _tiny() -> onnx.ModelProto:
    """Mul then Sigmoid of a [1, 10] input: a run that is all overhead."""
    node1 = helper.make_node("Mul", ["x", "x"], ["m"], name="mul")
    node2 = helper.make_node("Sigmoid", ["m"], ["y"], name="sigmoid")
    graph = helper.make_graph(
        [node1, node2],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _path(path: Path) -> Callable[[], str]:
    return lambda: str(path)


def _zoo(name: str, **params: Any) -> Callable[[], onnx.ModelProto]:
    return lambda: zoo.build(name, params=params)


def cases() -> list[Case]:
    out = [
        Case("single_conv 96@48", _single_conv, {}),
        Case("tiny Mul+Sigmoid", _tiny, {}),
    ]
    for path in sorted((ROOT / "models").glob("*.onnx")):
        dims = {"batch": 1}
        if path.name.startswith("decoder"):
            dims.update({"seq": 1, "past_seq": 16, "total_seq": 17})
        out.append(Case(f"models/{path.name}", _path(path), dims))
    small: list[tuple[str, dict[str, Any], dict[str, int]]] = [
        ("mlp", {}, {"batch": 1}),
        ("resnet20_cifar", {}, {"batch": 1}),
        ("resnet18", {"image_size": 64}, {"batch": 1}),
        ("resnet50", {"image_size": 64}, {"batch": 1}),
        ("mobilenet_v2", {"image_size": 96}, {"batch": 1}),
        ("vit_b_16", {"image_size": 64, "layers": 2, "hidden": 192, "heads": 3, "mlp_dim": 768}, {"batch": 1}),
        ("bert_base", {"layers": 2, "hidden": 256, "heads": 4, "intermediate": 1024, "vocab": 1000}, {"batch": 1, "seq": 64}),
        ("gpt2", {"layers": 2, "hidden": 256, "heads": 4, "vocab": 1000}, {"batch": 1, "seq": 32}),
        ("llama", {"layers": 2, "hidden": 256, "heads": 4, "kv_heads": 4, "intermediate": 688, "vocab": 1000}, {"batch": 1, "seq": 32}),
    ]  # fmt: skip
    for name, params, dims in small:
        label = name + ("" if not params else " (small)")
        out.append(Case(f"zoo {label}", _zoo(name, **params), dims))
    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    for path in sorted(light.glob("light_*.onnx")):
        out.append(Case(f"onnx {path.stem}", _path(path), {}))
    return out


ROUNDS = 5


def measure(model: Any, dims: dict[str, int], device: Device, seconds: float) -> dict[str, float]:
    """A bare onnxruntime loop in ``ROUNDS`` rounds of ``seconds / ROUNDS`` (at least 5 runs
    each): the median of all runs and the least round median, by the wall clock and by the
    thread's CPU time."""
    ort = import_ort()
    prepared = prepare(model)
    analysis = analyze(prepared, dims=dims)
    specs = input_specs(analysis.inputs, analysis.inputs, analysis.nodes)
    feeds = make_inputs(specs)
    config = SessionConfig(
        provider=device.provider,
        intra_op_threads=device.threads,
        opt_level=opt_level(device.opt_level),
    )
    ort_model = prepare_model(prepared)
    session = ort.InferenceSession(
        ort_model.source,
        session_options(config, external_folder=ort_model.external_folder),
        providers=[device.provider],
    )
    run = session.run
    for _ in range(3):
        run(None, feeds)
    wall: list[list[int]] = []
    cpu: list[list[int]] = []
    for _ in range(ROUNDS):
        w: list[int] = []
        c: list[int] = []
        start = time.perf_counter()
        while len(w) < 5 or time.perf_counter() - start < seconds / ROUNDS:
            t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
            run(None, feeds)
            c1, t1 = time.thread_time_ns(), time.perf_counter_ns()
            w.append(t1 - t0)
            c.append(c1 - c0)
        wall.append(w)
        cpu.append(c)
    return {
        "wall_median_ms": statistics.median(x for r in wall for x in r) / 1e6,
        "cpu_median_ms": statistics.median(x for r in cpu for x in r) / 1e6,
        "wall_least_round_ms": min(statistics.median(r) for r in wall) / 1e6,
        "cpu_least_round_ms": min(statistics.median(r) for r in cpu) / 1e6,
        "runs": float(sum(len(r) for r in wall)),
    }


H100_BATCH1_FP32 = {
    # docs/gpu.md, "The H100 figures": median ms at batch 1, fp32, inputs bound on the GPU.
    "resnet18": (0.849, {}),
    "resnet50": (1.465, {}),
    "vit_b_16": (1.971, {}),
    "bert_base": (2.090, {"seq": 128}),
    "gpt2": (2.138, {"seq": 128}),
}


CONV_CLASSES = ("conv", "conv_1x1", "conv_depthwise", "conv_grouped")


def fit_overheads(rows: list[tuple[float, float, int, int]]) -> tuple[float, float]:
    """(conv, other) per-node overhead in us minimising the squared relative error of
    measured = predicted without overhead + conv nodes x conv + other nodes x other, over
    ``rows`` of (measured ms, predicted ms, conv nodes, other nodes)."""
    # Normal equations of the weighted least squares, each row divided by its measured ms.
    scc = sco = soo = syc = syo = 0.0
    for ms, lat, conv, other in rows:
        y, c, o = (ms - lat) * 1e3 / ms, conv / ms, other / ms
        scc, sco, soo, syc, syo = scc + c * c, sco + c * o, soo + o * o, syc + y * c, syo + y * o
    det = scc * soo - sco * sco
    return (syc * soo - syo * sco) / det, (scc * syo - sco * syc) / det


def h100_leave_one_out() -> int:
    """The H100 built-in's per-node overheads (convolutions, other nodes), left out one model
    at a time: fitted on the other four's measured batch-1 latencies (``fit_overheads``),
    then the fifth predicted with them."""
    import dataclasses

    from onnxcost.predict.device import BUILTIN
    from onnxcost.predict.run import predict

    bare = dataclasses.replace(BUILTIN["H100"], node_overhead_us=0.0, curves={})
    rows: dict[str, tuple[float, float, int, int]] = {}
    for name, (ms, dims) in H100_BATCH1_FP32.items():
        p = predict(name, bare, dims={"batch": 1, **dims})
        run = [n for n in p.nodes if n.bound != "free"]
        conv = sum(1 for n in run if n.op_class in CONV_CLASSES)
        rows[name] = (ms, p.latency_ms, conv, len(run) - conv)
    print(
        "| model (batch 1, fp32) | measured ms | conv nodes | other nodes | overheads fitted "
        "on the others (conv, other; us) | predicted ms | error % |"
    )
    print("| --- | ---: | ---: | ---: | --- | ---: | ---: |")
    errors = []
    for name, (ms, lat, conv, other) in rows.items():
        a, b = fit_overheads([r for k, r in rows.items() if k != name])
        predicted = lat + (a * conv + b * other) / 1e3
        errors.append(abs(predicted - ms) / ms * 100)
        print(
            f"| {name} | {ms:.3f} | {conv} | {other} | {a:.2f}, {b:.2f} | {predicted:.3f} | "
            f"{(predicted - ms) / ms * 100:+.1f} |"
        )
    a, b = fit_overheads(list(rows.values()))
    print(
        f"fitted on all five: {a:.2f} us per convolution, {b:.2f} us per other node; "
        f"leave-one-out median |error| {statistics.median(errors):.1f}%"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", help="a device file or built-in name (default: calibrate)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--timing", choices=("wall", "thread"), default="wall")
    ap.add_argument("--save", type=Path, help="write the calibrated device file here")
    ap.add_argument("--seconds", type=float, default=1.5, help="measuring time per model")
    ap.add_argument("--only", nargs="*", help="only the cases whose name contains one of these")
    ap.add_argument("--json", type=Path, help="write the rows as JSON here")
    ap.add_argument(
        "--measured",
        type=Path,
        help="a --json file of an earlier run: predict again (with --device, e.g. that run's "
        "saved device file) against its measurements instead of measuring",
    )
    ap.add_argument(
        "--h100-loo",
        action="store_true",
        help="only the H100 built-in's leave-one-out check on the project's measured figures",
    )
    args = ap.parse_args(argv)
    if args.h100_loo:
        return h100_leave_one_out()
    if args.device:
        device = load_device(args.device)
    else:
        t0 = time.perf_counter()
        device = calibrate_device(SessionConfig(intra_op_threads=args.threads), timing=args.timing)
        print(f"calibrated in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        if args.save:
            args.save.write_text(device.to_json(), encoding="utf-8")
    clock = "cpu" if device.timing == "thread" else "wall"
    measured: dict[str, dict[str, float]] = {}
    if args.measured:
        keys = ("wall_least_round_ms", "wall_median_ms", "cpu_least_round_ms", "cpu_median_ms")
        for row in json.loads(args.measured.read_text(encoding="utf-8"))["rows"]:
            measured[row["model"]] = {k: row[k] for k in keys if k in row}
    rows: list[dict[str, Any]] = []
    print(
        f"| model | predicted ms | measured ms ({clock}, least round median) | error % | "
        f"measured ms ({clock}, median of all runs) | error % | bound |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for case in cases():
        if args.only and not any(o in case.name for o in args.only):
            continue
        if args.measured and case.name not in measured:
            continue
        model = case.model()
        proto = (
            model
            if isinstance(model, onnx.ModelProto)
            else onnx.load(model, load_external_data=False)
        )
        symbols = {
            d.dim_param
            for i in proto.graph.input
            for d in i.type.tensor_type.shape.dim
            if d.dim_param
        }
        case.dims = {k: v for k, v in case.dims.items() if k in symbols}
        analysis = analyze(model, dims=case.dims)
        pred = predict_analysis(analysis, device, static_shapes=static_inputs(proto))
        m = measured.get(case.name) or measure(model, case.dims, device, args.seconds)
        least, median = m[f"{clock}_least_round_ms"], m[f"{clock}_median_ms"]
        error = (pred.latency_ms - least) / least * 100
        error_median = (pred.latency_ms - median) / median * 100
        top = max(("compute", "memory", "overhead"), key=pred.bound_us)
        rows.append(
            {"model": case.name, "predicted_ms": pred.latency_ms, **m, "error_pct": error,
             "error_vs_median_pct": error_median, "bound": top}
        )  # fmt: skip
        print(
            f"| {case.name} | {pred.latency_ms:.4f} | {least:.4f} | {error:+.1f} | "
            f"{median:.4f} | {error_median:+.1f} | {top} |",
            flush=True,
        )
    for key, what in (("error_pct", "least round median"), ("error_vs_median_pct", "median")):
        errors = [abs(float(r[key])) for r in rows]
        within = sum(1 for e in errors if e <= 15) / len(errors) if errors else 0.0
        print(
            f"{len(rows)} models against the {what} ({clock} clock): {within:.0%} within "
            f"+-15%, median |error| {statistics.median(errors):.1f}%"
        )
    if args.json:
        args.json.write_text(json.dumps({"device": device.to_dict(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
