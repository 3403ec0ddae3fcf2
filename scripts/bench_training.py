"""Cost of ``--training`` (issue 23): ``onnxcost.analyze(prepared)`` against
``onnxcost.analyze(prepared, training=True)`` on built-in models, in-process (CPU time of the process: steadier than wall time on a shared machine), the two
alternating run by run, medians. The model is prepared once (built, loaded, indexed): what is
timed is the analysis itself.

Usage: python scripts/bench_training.py [--runs 11] [MODEL ...]   (default resnet18 gpt2)
"""

from __future__ import annotations

import argparse
import statistics
import time

import onnxcost
from onnxcost.prepare import prepare


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=["resnet18", "gpt2"])
    ap.add_argument("--runs", type=int, default=11)
    args = ap.parse_args()
    for name in args.models:
        prepared = prepare(name)
        onnxcost.analyze(prepared)  # warm: imports, caches
        onnxcost.analyze(prepared, training=True)
        plain: list[float] = []
        training: list[float] = []
        for _ in range(args.runs):
            for times, kwargs in ((plain, {}), (training, {"training": True})):
                start = time.process_time()
                onnxcost.analyze(prepared, **kwargs)  # type: ignore[arg-type]
                times.append(time.process_time() - start)
        p, t = statistics.median(plain), statistics.median(training)
        print(f"{name}: plain {p * 1e3:.1f} ms, --training {t * 1e3:.1f} ms, ratio {t / p:.2f}")


if __name__ == "__main__":
    main()
