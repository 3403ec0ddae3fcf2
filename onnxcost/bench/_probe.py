"""One max-batch probe, in its own process: ``python -m onnxcost.bench._probe SPEC.json OUT.json``.

Reads the spec the parent wrote, runs the model at that batch briefly, and writes
``{"ok": true, "throughput_per_s": ..., "median_ms": ..., "rss_bytes": ...}`` (the process's
peak resident set: what it took of the host's memory, interpreter and onnxruntime included) or ``{"ok": false, "error": ...,
"oom": ...}`` to OUT.json. It prints nothing: the parent reads the file (and, if this process
was killed for memory, its exit signal).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from onnxcost.bench._ort import is_oom, ort_error_types, run_error
from onnxcost.bench.inputs import InputSpec, make_inputs
from onnxcost.bench.memory import maxrss_bytes
from onnxcost.bench.session import OrtModel, SessionConfig, make_runner, open_session
from onnxcost.bench.timing import run_loop
from onnxcost.errors import OnnxcostError


def probe(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the spec; the result as a JSON-able dict."""
    config = SessionConfig.from_json(spec["config"]).with_options(enable_cuda_graph=None)
    path, folder = str(spec["model"]), spec.get("external_folder")
    # with external data in another folder, hand over bytes: onnxruntime then reads the data
    # from ``folder`` instead of from beside the file the parent wrote
    data = Path(path).read_bytes() if folder is not None else None
    model = OrtModel(path, path, data, folder, (), (), False)
    specs = [
        InputSpec(d["name"], d["dtype"], tuple(d["shape"]), d.get("high"), d.get("fill"))
        for d in spec["inputs"]
    ]
    batch = int(spec["batch"])
    try:
        opened = open_session(model, config)
        runner, _ = make_runner(
            opened.session, make_inputs(specs), config, include_copies=bool(spec["include_copies"])
        )
        try:
            run_loop(runner, runs=int(spec["warmup"]), min_seconds=0.0, phase="warmup")
            loop = run_loop(
                runner,
                runs=int(spec["runs"]),
                min_seconds=float(spec["min_seconds"]),
                phase="timed",
            )
        except ort_error_types() as e:
            raise run_error(e, config.provider, f"batch {batch}") from e
    except OnnxcostError as e:
        return {"ok": False, "error": str(e), "oom": is_oom(e)}
    return {
        "ok": True,
        "throughput_per_s": loop.throughput_per_s(batch),
        "median_ms": loop.stats.median_ms,
        "rss_bytes": maxrss_bytes(),
    }


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2:
        return 2
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    result = probe(spec)
    Path(argv[1]).write_text(json.dumps(result), encoding="utf-8")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
