"""Capture the real CUDA traces the offline GPU-profile tests read (run on an NVIDIA GPU).

Run from the repository root with onnxruntime-gpu and libcupti installed:
``python tests/data/ort_traces/capture_cuda.py [OUTDIR]`` (default: next to this file).
Each case profiles a saved test model on CUDAExecutionProvider through onnxcost's own session
code for 6 runs while ``onnxcost.bench.cupti`` collects the GPU's activity, keeps the last
KEEP = 3 runs (the first run's cuDNN search and the warm-up are cut, so tests parse with
skip_runs=0), and writes:

- ``<case>.trace.json``: onnxruntime's own profile (host times only): the kept runs'
  ``model_run``, executor and node events, as onnxruntime wrote them;
- ``<case>.cupti.json``: what CUPTI recorded for them: ``gpu`` (kernels, copies, memsets:
  kind, name, start_ns, end_ns, correlation, stream, bytes, copy_kind), ``calls`` (the
  runtime/driver calls that launched them: start_ns, end_ns, correlation, thread),
  ``offset_ns`` (CUPTI clock - system clock) and ``profiling_start_ns``
  (``InferenceSession.get_profiling_start_time_ns()``);
- ``<case>.graph.json``: the optimized graph onnxruntime saved.

Cases: cbr_cuda (cbr.onnx at N=8, inputs and outputs bound on the GPU: kernels only),
cbr_cuda_copies (the same from host arrays: HtoD and DtoH copies in every run), res_cuda
(res.onnx, a residual block, N=2).
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from onnxcost.bench.cupti import CuptiCollector
from onnxcost.bench.inputs import InputSpec, make_inputs
from onnxcost.bench.join import load_graph_nodes
from onnxcost.bench.session import (
    SessionConfig,
    device_runner,
    open_session,
    plain_runner,
    prepare_model,
    warm_up_onnxruntime,
)

HERE = Path(__file__).resolve().parent
RUNS = 6
KEEP = 3
CASES = {
    "cbr_cuda": ("cbr.onnx", {"x": (8, 3, 32, 32)}, True),
    "cbr_cuda_copies": ("cbr.onnx", {"x": (8, 3, 32, 32)}, False),
    "res_cuda": ("res.onnx", None, True),
}


def capture(case: str, out: Path) -> None:
    source, shapes, on_device = CASES[case]
    model = prepare_model(str(HERE / source))
    config = SessionConfig(provider="CUDAExecutionProvider")
    specs = []
    for rec in model.inputs:
        shape = (
            shapes[rec.name]
            if shapes
            else tuple(d if isinstance(d, int) else 2 for d in rec.shape or ())
        )
        specs.append(InputSpec(rec.name, rec.dtype, tuple(shape)))
    feeds = make_inputs(specs, 0)
    with tempfile.TemporaryDirectory() as tmp:
        optimized = str(Path(tmp) / "optimized.onnx")
        opened = open_session(
            model, config, profile_prefix=str(Path(tmp) / "p"), optimized_model_path=optimized
        )
        session = opened.session
        runner = (
            device_runner(session, feeds, device_id=0)
            if on_device
            else plain_runner(session, feeds)
        )
        collector = CuptiCollector()
        collector.start()
        for _ in range(RUNS):
            runner()
        activity = collector.stop()
        trace = json.loads(Path(session.end_profiling()).read_text())
        start_ns = int(session.get_profiling_start_time_ns())
        nodes = load_graph_nodes(optimized)
    record = {
        "offset_ns": activity.offset_ns,
        "profiling_start_ns": start_ns,
        "gpu": [asdict(g) for g in activity.gpu],
        "calls": [asdict(c) for c in activity.calls],
    }
    trace, record = trim(trace, record, KEEP)
    _write(out / f"{case}.trace.json", trace)
    _write(out / f"{case}.cupti.json", record)
    _write(out / f"{case}.graph.json", [n.as_dict() for n in nodes])
    print(f"{case}: {len(trace)} trace events, {len(record['gpu'])} GPU records")


def _write(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, separators=(",", ":")) + "\n", encoding="utf-8")


def trim(
    trace: list[dict[str, Any]], record: dict[str, Any], keep: int
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The last ``keep`` runs: their model_run/executor/node events, the GPU records whose
    launching call started inside them, and those calls."""
    runs = sorted((e["ts"], e["ts"] + e["dur"]) for e in trace if e.get("name") == "model_run")
    runs = runs[-keep:]

    def inside(ts: float, dur: float = 0.0) -> bool:
        return any(start - 1 <= ts and ts + dur <= end + 1 for start, end in runs)

    events = [
        e
        for e in trace
        if e.get("cat") in ("Session", "Node")
        and e.get("name") not in ("model_loading_uri", "session_initialization")
        and inside(e["ts"], e["dur"])
    ]
    origin = record["offset_ns"] + record["profiling_start_ns"]
    kept = {c["correlation"] for c in record["calls"] if inside((c["start_ns"] - origin) / 1e3)}
    out = dict(record)
    out["gpu"] = [g for g in record["gpu"] if g["correlation"] in kept]
    used = {g["correlation"] for g in out["gpu"]}
    out["calls"] = [c for c in record["calls"] if c["correlation"] in used]
    return events, out


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--trim":  # trim a capture saved whole
        source = Path(sys.argv[2])
        for case in CASES:
            trace = json.loads((source / f"{case}.trace.json").read_text())
            record = json.loads((source / f"{case}.cupti.json").read_text())
            trace, record = trim(trace, record, KEEP)
            _write(HERE / f"{case}.trace.json", trace)
            _write(HERE / f"{case}.cupti.json", record)
            _write(
                HERE / f"{case}.graph.json", json.loads((source / f"{case}.graph.json").read_text())
            )
        return 0
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    out.mkdir(parents=True, exist_ok=True)
    warm_up_onnxruntime(SessionConfig(provider="CUDAExecutionProvider"))
    for case in CASES:
        capture(case, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
