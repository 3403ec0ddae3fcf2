"""Benchmark of ``analyze --symbolic`` against one concrete analysis (issues 12 and 22), not a
timed test.

Issue 22's cases, each in-process on a prepared model (``onnxcost.prepare``: loaded and
indexed once, as a notebook or a sweep holds it):

- GPT-2 small (12 layers, Hugging Face's ``GPT2LMHeadModel`` at its default config, random
  weights) as the torch exporter writes it (``dynamo=True``: the TorchScript exporter stops
  at transformers' mask code), in (batch, seq); needs torch, onnxscript and transformers;
- a 2-layer GPT-2 with a KV cache in optimum's naming (``zoo.save("gpt2", params={"layers":
  2, "kv_cache": "true"})``), in (batch, seq, past_seq);
- the built-in llama shape at 8 layers with a KV cache, weights declared, in (batch, seq,
  past_seq);
- with ``--all``, also the 12-layer GPT-2 with a KV cache and the 32-layer llama.

Each case alternates a concrete analysis and a symbolic one and reports the median wall
time and the median CPU time (``time.process_time``: what the shared machine's other work
does not inflate) of each, their ratio, and how the formulas were found (the one walk, or
how many concrete analyses the sampler ran).

With ``--partial``, instead: the 2-layer GPT-2 and the 8-layer llama ending in a Resize the
walk does not carry, ``--symbolic`` sampling the lost nodes alone against sampling the whole
model (as before), alternating with a concrete analysis.

Usage: python scripts/bench_symbolic.py [--runs 7] [--out DIR] [--all | --partial]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper

import onnxcost
from onnxcost import zoo
from onnxcost.prepare import PreparedModel, prepare


def _timed(source: PreparedModel, symbolic: bool) -> tuple[float, float, str]:
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


def case(label: str, source: str | Path, runs: int) -> None:
    """Alternating concrete and symbolic analyses of ``source``, prepared once: medians and
    their ratios."""
    prepared = prepare(source)
    _timed(prepared, True)  # warm: imports, onnx schemas
    times: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    analyses = ""
    for _ in range(runs):
        for symbolic in (False, True):
            wall, cpu, analyses_run = _timed(prepared, symbolic)
            times[symbolic].append((wall, cpu))
            if symbolic:
                analyses = analyses_run
    med = {
        s: (statistics.median(w for w, _c in t), statistics.median(c for _w, c in t))
        for s, t in times.items()
    }
    (cw, cc), (sw, sc) = med[False], med[True]
    print(
        f"{label}, {len(prepared.view.order):,} nodes: concrete {cw:.3f} s wall / {cc:.3f} s "
        f"CPU; symbolic {sw:.3f} s wall / {sc:.3f} s CPU ({analyses}): {sw / cw:.2f}x wall, "
        f"{sc / cc:.2f}x CPU",
        flush=True,
    )


def _ending_uncarried(source: Path, path: Path) -> None:
    """``source`` with a Resize by scales computed in the graph (1s: the walk carries stored
    scales only) after its first output, which becomes the output: only that last node is
    not carried."""
    proto = onnx.load(str(source), load_external_data=False)
    out = proto.graph.output[0]
    rank = len(out.type.tensor_type.shape.dim)
    ones = onnx.numpy_helper.from_array(np.ones(rank, np.float32), "bench_ones")
    proto.graph.initializer.append(ones)
    proto.graph.node.extend(
        [
            onnx.helper.make_node("Mul", ["bench_ones", "bench_ones"], ["bench_scales"]),
            onnx.helper.make_node("Resize", [out.name, "", "bench_scales"], ["bench_resized"]),
        ]
    )
    resized = onnx.ValueInfoProto()
    resized.CopyFrom(out)
    resized.name = "bench_resized"
    proto.graph.output.insert(0, resized)
    onnx.save(proto, str(path))


def partial(label: str, source: Path, runs: int) -> None:
    """``--symbolic`` on a model whose last node only is not carried: the lost nodes sampled
    alone (now) and the whole model sampled (before, ``formulas._lost_only`` off), alternating
    with a concrete analysis; medians and their ratios to it."""
    from onnxcost.symbolic import formulas

    prepared = prepare(source)
    alone = formulas._lost_only
    routes = {"concrete": False, "alone": True, "whole": True}
    times: dict[str, list[float]] = {r: [] for r in routes}
    runs_of: dict[str, str] = {}
    _timed(prepared, True)  # warm
    for _ in range(runs):
        for route, symbolic in routes.items():
            formulas._lost_only = (lambda *_a: None) if route == "whole" else alone  # type: ignore[assignment]
            wall, _cpu, runs_of[route] = _timed(prepared, symbolic)
            times[route].append(wall)
    formulas._lost_only = alone  # type: ignore[assignment]
    med = {r: statistics.median(t) for r, t in times.items()}
    c = med["concrete"]
    print(
        f"{label}, {len(prepared.view.order):,} nodes, the last not carried: concrete "
        f"{c:.3f} s; --symbolic sampling the lost nodes alone {med['alone']:.3f} s "
        f"({med['alone'] / c:.2f}x; {runs_of['alone']}), sampling the whole model "
        f"{med['whole']:.3f} s ({med['whole'] / c:.2f}x; {runs_of['whole']})",
        flush=True,
    )


def _torch_gpt2(path: Path) -> bool:
    """GPT-2 small as the torch exporter writes it, at ``path``; False without torch."""
    try:
        import torch
        import transformers
    except ImportError:
        return False
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(use_cache=False)).eval()

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gpt2 = model

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            return self.gpt2(input_ids=input_ids).logits  # type: ignore[no-any-return]

    dims = {
        0: torch.export.Dim("batch", min=1, max=64),
        1: torch.export.Dim("seq", min=2, max=1024),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            Logits(),
            (torch.randint(0, 50257, (2, 8)),),
            input_names=["input_ids"],
            dynamic_shapes=(dims,),
            dynamo=True,
            verbose=False,
        )
    assert program is not None
    onnx.save(program.model_proto, path)
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "bench_symbolic")
    ap.add_argument("--all", action="store_true", help="also the 12-layer GPT-2 KV, 32-layer llama")
    ap.add_argument(
        "--partial",
        action="store_true",
        help="only the llama shape (8 layers) and the 2-layer GPT-2 ending in a node the walk "
        "does not carry, before and after the lost nodes were sampled alone",
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    exported = args.out / "gpt2_torch_dynamo.onnx"
    kv2, llama8 = args.out / "gpt2_kv_2layers.onnx", args.out / "llama_kv_8layers.onnx"
    if not kv2.exists():
        zoo.save("gpt2", kv2, params={"layers": 2, "kv_cache": "true"})
    if not llama8.exists():
        zoo.save("llama", llama8, weights=False, params={"layers": 8, "kv_cache": "true"})
    print(f"medians of {args.runs} alternating runs")
    if args.partial:
        for label, model in (("2-layer GPT-2 KV", kv2), ("llama shape, 8 layers, KV", llama8)):
            ending = model.with_name(model.stem + "_resized.onnx")
            _ending_uncarried(model, ending)
            partial(label, ending, args.runs)
        return
    if exported.exists() or _torch_gpt2(exported):
        case("GPT-2 small, torch export (batch, seq)", exported, args.runs)
    else:
        print("GPT-2 small, torch export: skipped (needs torch, onnxscript and transformers)")
    case("2-layer GPT-2 with a KV cache, optimum's naming (batch, seq, past_seq)", kv2, args.runs)
    case("llama shape, 8 layers, KV cache, weights declared", llama8, args.runs)
    if args.all:
        kv, llama = args.out / "gpt2_kv.onnx", args.out / "llama_kv.onnx"
        if not kv.exists():
            zoo.save("gpt2", kv, params={"kv_cache": "true"})
        if not llama.exists():
            zoo.save("llama", llama, weights=False, params={"kv_cache": "true"})
        case("GPT-2 small with a KV cache (batch, seq, past_seq)", kv, args.runs)
        case("llama shape, 32 layers, KV cache, weights declared", llama, args.runs)


if __name__ == "__main__":
    main()
