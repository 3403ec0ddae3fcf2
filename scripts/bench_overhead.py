"""How much does ``run_bench`` add over a bare ``InferenceSession.run`` loop, and do profiles add up?

    python scripts/bench_overhead.py [--model PATH] [--rounds 7] [--runs 200] [--threads 1]

1. Overhead: alternates (a) a bare loop -- a fresh session with the same options, the same
   inputs, ``perf_counter_ns`` around each ``session.run`` -- and (b) ``run_bench`` with the
   same runs, swapping which goes first every round, and prints the ratio of the medians of
   the per-round median latencies (target: <= 1.02).
2. Profile sums: runs ``run_bench(profile=True, trace_out=...)`` and, for every kept run of
   the cleaned trace, compares the sum of its per-node times with its ``model_run`` time
   (target: within 10%).

Without ``--model`` it builds a small CNN (six 3x3 convolutions, 32 channels, 1x3x64x64).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxcost.bench import BenchOptions, read_trace, run_bench
from onnxcost.bench._ort import import_ort
from onnxcost.bench.inputs import input_specs, make_inputs
from onnxcost.bench.profile import parse_trace
from onnxcost.bench.providers import parse_provider_options
from onnxcost.bench.session import SessionConfig, prepare_model, session_options


def cnn(path: Path) -> None:
    """Six Conv(3x3, pad 1)+Relu layers, 32 channels, on x[1,3,64,64], then global average pool."""
    rng = np.random.default_rng(0)
    nodes, inits, prev, cin = [], [], "x", 3
    for i in range(6):
        w = numpy_helper.from_array(
            (rng.standard_normal((32, cin, 3, 3)) * 0.1).astype(np.float32), f"w{i}"
        )
        b = numpy_helper.from_array(np.zeros(32, np.float32), f"b{i}")
        inits += [w, b]
        nodes.append(
            helper.make_node(
                "Conv", [prev, w.name, b.name], [f"c{i}"], name=f"conv{i}", pads=[1, 1, 1, 1]
            )
        )
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"))
        prev, cin = f"r{i}", 32
    nodes.append(helper.make_node("GlobalAveragePool", [prev], ["y"], name="pool"))
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 64, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 1, 1])],
        inits,
    )
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path
    )


def bare_round(
    model: str, feeds: dict[str, np.ndarray], config: SessionConfig, warmup: int, runs: int
) -> float:
    """Median ms of ``runs`` bare calls after ``warmup`` (fresh session): ``session.run`` on
    the CPU; on CUDA ``run_with_iobinding`` with the inputs copied to the GPU once and the
    outputs left there, as the harness does."""
    ort = import_ort()
    providers: list[object] = [(config.provider, config.options)]
    if config.provider != "CPUExecutionProvider":
        ort.preload_dlls()
        providers.append("CPUExecutionProvider")
    session = ort.InferenceSession(model, session_options(config), providers=providers)
    if config.provider == "CUDAExecutionProvider":
        binding = session.io_binding()
        keep = [ort.OrtValue.ortvalue_from_numpy(a, "cuda", 0) for a in feeds.values()]
        for name, value in zip(feeds, keep, strict=True):
            binding.bind_ortvalue_input(name, value)
        for out in session.get_outputs():
            binding.bind_output(out.name, "cuda", 0)
        binding.synchronize_inputs()

        def once() -> object:
            return session.run_with_iobinding(binding)
    else:

        def once() -> object:
            return session.run(None, feeds)

    for _ in range(1 + warmup):
        once()
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        once()
        samples.append(time.perf_counter_ns() - t0)
    return statistics.median(samples) / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", help="an .onnx file with static input shapes (default: a built-in CNN)"
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads for both loops")
    parser.add_argument(
        "--provider",
        default="CPUExecutionProvider",
        help="CPUExecutionProvider or CUDAExecutionProvider (IO binding on the GPU)",
    )
    parser.add_argument(
        "--provider-option",
        action="append",
        default=None,
        help="KEY=VALUE for both loops; on CUDA the default is cudnn_conv_algo_search=HEURISTIC",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            model = str(Path(tmp) / "cnn.onnx")
            cnn(Path(model))
        options = args.provider_option
        if options is None and args.provider == "CUDAExecutionProvider":
            # cuDNN's exhaustive search (onnxruntime's default) times its candidates in each
            # new session and may pick other algorithms each time; seen on the H100: sessions
            # of one model at about 1.75 or 2.65 ms, bare and harness alike. Heuristic picks
            # are the same in every session, so the two loops compare like with like.
            options = ["cudnn_conv_algo_search=HEURISTIC"]
        provider_options = parse_provider_options(options)
        config = SessionConfig(
            provider=args.provider,
            provider_options=tuple(sorted(provider_options.items())),
            intra_op_threads=args.threads,
        )
        import onnxcost

        analysis = onnxcost.analyze(model)
        feeds = make_inputs(
            input_specs(analysis.inputs, prepare_model(model).inputs, analysis.nodes)
        )

        def harness_round() -> float:
            result = run_bench(
                model,
                BenchOptions(
                    provider=args.provider,
                    provider_options=provider_options,
                    threads=args.threads,
                    warmup=args.warmup,
                    min_warmup_s=0.0,
                    runs=args.runs,
                    min_seconds=0.0,
                ),
                analysis=analysis,
            )
            return result.latency.median_ms

        bare: list[float] = []
        harness: list[float] = []
        for i in range(args.rounds):
            # alternate which goes first, so neither always runs on a warmer machine
            if i % 2 == 0:
                bare.append(bare_round(model, feeds, config, args.warmup, args.runs))
                harness.append(harness_round())
            else:
                harness.append(harness_round())
                bare.append(bare_round(model, feeds, config, args.warmup, args.runs))
            print(f"round {i + 1}: bare {bare[-1]:.4f} ms, run_bench {harness[-1]:.4f} ms")
        ratio = statistics.median(harness) / statistics.median(bare)
        print(
            f"overhead: median of run_bench medians / median of bare medians = "
            f"{statistics.median(harness):.4f} / {statistics.median(bare):.4f} = {ratio:.4f} "
            f"({'within' if ratio <= 1.02 else 'OVER'} the 2% target)"
        )

        trace_path = Path(tmp) / "trace.json"
        prof = run_bench(
            model,
            BenchOptions(
                provider=args.provider,
                provider_options=provider_options,
                threads=args.threads,
                warmup=args.warmup,
                min_warmup_s=0.0,
                runs=10,
                min_seconds=0.0,
                profile=True,
                profile_runs=50,
                trace_out=trace_path,
            ),
            analysis=analysis,
        )
        trace = parse_trace(read_trace(trace_path))
        ratios = [trace.kernel_sum_us(r.index) / r.dur_us for r in trace.runs]
        within = sum(1 for q in ratios if abs(1 - q) <= 0.10)
        assert prof.profile is not None
        print(
            f"profile sums: per-run (sum of node times) / model_run over {len(ratios)} runs: "
            f"min {min(ratios):.3f}, median {statistics.median(ratios):.3f}, max {max(ratios):.3f}; "
            f"{within}/{len(ratios)} runs within 10%; mean coverage {prof.profile.coverage:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
