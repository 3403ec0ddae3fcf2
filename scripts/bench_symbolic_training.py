"""Cost of ``--symbolic --training`` (issue 22 item 2): ``onnxcost.analyze(prepared,
symbolic=True, training=True)`` against ``onnxcost.analyze(prepared, training=True)``,
in-process (CPU time of the process), the two alternating run by run, medians. The model is
prepared once (built, loaded, indexed): what is timed is the analysis itself.

Cases: the built-in GPT-2 small (``gpt2``, 2,030 nodes, batch x seq) and the 8-layer
LLaMA-shape built-in with a KV cache (``llama`` layers=8 kv_cache=true, batch x seq x
past_seq), or built-in names given on the command line.

Usage: python scripts/bench_symbolic_training.py [--runs 7] [MODEL ...]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import onnxcost
from onnxcost import zoo
from onnxcost.prepare import PreparedModel, prepare


def _cases(names: list[str], tmp: Path) -> list[tuple[str, PreparedModel]]:
    if names:
        return [(n, prepare(n)) for n in names]
    llama = zoo.save(
        "llama", tmp / "llama8kv.onnx", weights=False, params={"layers": 8, "kv_cache": "true"}
    )
    return [("gpt2", prepare("gpt2")), ("llama 8 layers, KV cache", prepare(llama))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name, prepared in _cases(args.models, Path(tmp)):
            onnxcost.analyze(prepared, training=True)  # warm: imports, caches
            a = onnxcost.analyze(prepared, symbolic=True, training=True)
            assert a.symbolic is not None
            concrete: list[float] = []
            symbolic: list[float] = []
            for _ in range(args.runs):
                for times, more in ((concrete, {}), (symbolic, {"symbolic": True})):
                    start = time.process_time()
                    onnxcost.analyze(prepared, training=True, **more)  # type: ignore[arg-type]
                    times.append(time.process_time() - start)
            c, s = statistics.median(concrete), statistics.median(symbolic)
            print(
                f"{name}: --training {c * 1e3:.1f} ms, --symbolic --training {s * 1e3:.1f} ms, "
                f"ratio {s / c:.2f} ({a.symbolic.analyses} analyses)"
            )


if __name__ == "__main__":
    main()
