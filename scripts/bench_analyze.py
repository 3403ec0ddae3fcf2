"""Benchmark of the analyzer (issues: onnxcost analyze; 16), not a timed test.

Builds a 32-layer LLaMA-style decoder (8B-shaped: hidden 4096, 32 heads, 8 KV heads,
intermediate 14336, vocab 128256; fp16) whose weights are external data in a sparse file,
and the built-in GPT-2 small with its weights inline (``onnxcost zoo save gpt2``), then
measures:

1. in-process: ``onnxcost.analyze(path)`` against the floor ``onnx.load(path,
   load_external_data=False)`` + ``onnx.shape_inference.infer_shapes(..., data_prop=True)``,
   alternating runs, ratio of medians (of wall and of CPU time); and the same ratio at 8, 16
   and 32 layers, to show how it grows with node count; and on a 10k-node model the analyzer
   was not tuned on: transformers' LlamaForCausalLM (small, 46 layers) as torch's dynamo
   exporter writes it unoptimized, built once in a child process (40 s; needs torch and
   transformers, else left out with a line saying so; ``--skip-torch`` leaves it out);
2. end to end: wall time and peak RSS of the ``onnxcost analyze`` command on the 8B model;
3. inline weights: ``onnxcost analyze`` of GPT-2 small as torch.onnx.export writes it (LM
   head untied: 652 MB) and of the built-in as ``zoo save`` writes it (tied: 499 MB), each
   against a bare ``onnx.load`` of the same file, each a fresh process, alternating runs:
   median wall time and peak RSS of each;
4. start-up: ``onnxcost --version``, and ``onnxcost analyze`` of a small model (models/
   mlp_torch_script.onnx) against a bare process that loads it and runs ONNX shape
   inference, fresh processes, alternating runs, medians;
5. with ``--phases``: where ``analyze`` spends its time on the 8B model (load, graph
   index with naming, shapes, and the rest: costs, summaries, peak memory), as shares of the whole.

Usage: python scripts/bench_analyze.py [--runs 7] [--out DIR] [--phases] [--skip-inline]
[--skip-torch]
(writing the two GPT-2 files, 1.2 GB, takes a minute and 3 GB of memory, once per --out).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx

import onnxcost
from onnxcost import zoo
from onnxcost.load.graph import build
from onnxcost.load.model import load_model
from onnxcost.shapes.infer import infer

ROOT = Path(__file__).resolve().parent.parent
SMALL_MODEL = ROOT / "models" / "mlp_torch_script.onnx"
LLAMA_8B = {"hidden": 4096, "heads": 32, "kv_heads": 8, "intermediate": 14336, "vocab": 128256}


def _floor(path: Path) -> None:
    model = onnx.load(path, load_external_data=False)
    onnx.shape_inference.infer_shapes(model, data_prop=True)


def _analyze(path: Path) -> None:
    onnxcost.analyze(path)


def ratio_of_medians(path: Path, runs: int) -> tuple[float, float, float, float]:
    """Median wall seconds of the floor and of analyze, measured alternately, their ratio,
    and the ratio of their median CPU seconds (``time.process_time``: steadier where other
    processes share the cores)."""
    _floor(path)
    _analyze(path)  # warm caches (imports, schema lookups) for both
    floor, ours, floor_cpu, ours_cpu = [], [], [], []
    for _ in range(runs):
        for fn, wall, cpu in ((_floor, floor, floor_cpu), (_analyze, ours, ours_cpu)):
            t, c = time.perf_counter(), time.process_time()
            fn(path)
            wall.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
    f, a = statistics.median(floor), statistics.median(ours)
    return f, a, a / f, statistics.median(ours_cpu) / statistics.median(floor_cpu)


_OWN_PEAK = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: sys.stderr.write("
    "next(l for l in open('/proc/self/status') if l.startswith('VmHWM'))))\n"
    "sys.argv[0] = 'onnxcost'\n"
    "runpy.run_module('onnxcost', run_name='__main__', alter_sys=True)"
)
"""``python -m onnxcost`` that writes its own peak RSS (``VmHWM``) last on stderr at exit. A
child's ``ru_maxrss`` is no use here: it starts from the RSS of the process it was forked
from, this one (hundreds of MiB once the in-process cases have run)."""


def end_to_end(path: Path, runs: int) -> tuple[float, int]:
    """Median wall seconds and max peak RSS (KiB) of `onnxcost analyze PATH` in a fresh process."""
    walls, peak = [], 0
    for _ in range(runs):
        t = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", _OWN_PEAK, "analyze", str(path), "--top", "10"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        walls.append(time.perf_counter() - t)
        peak = max(peak, int(done.stderr.strip().splitlines()[-1].split()[1]))  # VmHWM: N kB
    return statistics.median(walls), peak


_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""Fresh processes cache compiled modules, as an installed package has them: without, each
start compiles onnxcost's sources again (0.1 to 0.2 s here)."""


def _run(command: list[str]) -> tuple[float, int, float]:
    """Wall seconds, peak RSS (KiB: from the fork, so at least this process's) and CPU
    seconds (user + system) of ``command`` run in a fresh process."""
    t = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_ENV)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(command)} failed (exit {proc.returncode})")
    return wall, usage.ru_maxrss, usage.ru_utime + usage.ru_stime


def alternating(commands: dict[str, list[str]], runs: int) -> dict[str, tuple[float, float, float]]:
    """Median wall seconds, median peak RSS (MiB) and median CPU seconds of each command, the
    commands run in turn ``runs`` times, each in a fresh process (one warm-up round first, not
    counted)."""
    for command in commands.values():
        _run(command)
    walls: dict[str, list[float]] = {k: [] for k in commands}
    rss: dict[str, list[float]] = {k: [] for k in commands}
    cpu: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(runs):
        for key, command in commands.items():
            wall, kib, seconds = _run(command)
            walls[key].append(wall)
            rss[key].append(kib / 1024)
            cpu[key].append(seconds)
    median = statistics.median
    return {k: (median(walls[k]), median(rss[k]), median(cpu[k])) for k in commands}


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _onnxcost(*args: str) -> list[str]:
    return [sys.executable, "-m", "onnxcost", *args]


def untied_gpt2(builtin: Path, path: Path) -> None:
    """The built-in GPT-2 as ``torch.onnx.export`` writes GPT2LMHeadModel: the LM head is a
    weight of its own (the token embedding transposed, 768 x 50257) instead of a Transpose
    of the tied embedding, which makes the file 652 MB (the size issue 16 quotes)."""
    from onnx import numpy_helper

    model = onnx.load(builtin)
    transpose = next(n for n in model.graph.node if n.name == "/lm_head/Transpose")
    wte = next(t for t in model.graph.initializer if t.name == transpose.input[0])
    head = numpy_helper.from_array(numpy_helper.to_array(wte).T.copy(), "onnx::MatMul_lm_head")
    model.graph.initializer.append(head)
    for node in model.graph.node:
        node.input[:] = [head.name if i == transpose.output[0] else i for i in node.input]
    model.graph.node.remove(transpose)
    onnx.save(model, path)


TORCH_LLAMA = {
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 1000,
    "max_position_embeddings": 256,
}
TORCH_LLAMA_LAYERS = 46
"""transformers' LlamaForCausalLM, small, as ``torch.onnx.export(dynamo=True, optimize=False)``
writes it: 215 nodes a layer, 10,088 in all at 46 layers (the exporter's optimizer would take
over 20 minutes on this many layers here)."""


def make_torch_llama(path: Path) -> None:
    """Write the unseen 10k-node case: a torch export the analyzer was not tuned on (every
    tensor declared in value_info, its own node names and Constant layout)."""
    import warnings

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    warnings.filterwarnings("ignore")
    config = LlamaConfig(**TORCH_LLAMA, num_hidden_layers=TORCH_LLAMA_LAYERS, use_cache=False)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    seq = {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq")}
    torch.onnx.export(
        model,
        (torch.ones(1, 8, dtype=torch.long),),
        str(path),
        input_names=["input_ids"],
        output_names=["logits"],
        dynamic_shapes={"input_ids": seq},
        dynamo=True,
        optimize=False,
    )


def torch_case(path: Path) -> bool:
    """Write the torch export in a child process unless it is there; False (and a line
    saying why) where torch or transformers is missing."""
    if path.exists():
        return True
    t = time.perf_counter()
    made = subprocess.run(
        [sys.executable, __file__, "--make-torch-llama", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if made.returncode:
        last = made.stderr.strip().splitlines()[-1:] or ["no message"]
        print(f"torch export left out: {last[0]}")
        return False
    print(f"wrote {path} in {time.perf_counter() - t:.0f} s")
    return True


def make_gpt2(path: Path) -> None:
    """Write the GPT-2 of ``inline_case``: the built-in, or (``*_untied``) as torch exports it."""
    if path.stem.endswith("_untied"):
        builtin = path.with_name(path.name.replace("_untied", ""))
        if not builtin.exists():
            zoo.save("gpt2", builtin)
        untied_gpt2(builtin, path)
    else:
        zoo.save("gpt2", path)


def inline_case(path: Path, runs: int) -> None:
    """GPT-2 small with inline weights: analyze against a bare onnx.load of the file."""
    if not path.exists():
        # Built in a child process: a child's peak RSS (ru_maxrss) starts from the RSS of the
        # process it was forked from, so this one must never hold the weights itself.
        t = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--make-gpt2", str(path)], check=True)
        print(f"wrote {path} in {time.perf_counter() - t:.0f} s")
    result = alternating(
        {
            "onnx.load": _python(f"import onnx; onnx.load({str(path)!r})"),
            "analyze": _onnxcost("analyze", str(path), "--top", "10"),
        },
        runs,
    )
    (lw, lr, _), (aw, ar, _) = result["onnx.load"], result["analyze"]
    print(
        f"inline weights, {path.name} ({path.stat().st_size / 1e6:.0f} MB): "
        f"bare onnx.load {lw:.2f} s, {lr:.0f} MiB; onnxcost analyze {aw:.2f} s, {ar:.0f} MiB; "
        f"time ratio {aw / lw:.2f}"
    )


def startup(runs: int) -> None:
    """Start-up: --version, and analyze of a small model against load + shape inference."""
    model = str(SMALL_MODEL)
    result = alternating(
        {
            "version": _onnxcost("--version"),
            "bare": _python(
                f"import onnx; m = onnx.load({model!r}); onnx.shape_inference.infer_shapes(m)"
            ),
            "analyze": _onnxcost("analyze", model),
        },
        runs,
    )
    (bare, _, bare_cpu), (ours, _, ours_cpu) = result["bare"], result["analyze"]
    print(
        f"start-up: onnxcost --version {result['version'][0]:.2f} s; onnxcost analyze "
        f"{SMALL_MODEL.name} {ours:.2f} s against bare load + shape inference {bare:.2f} s: "
        f"ratio {ours / bare:.2f}; CPU {ours_cpu:.2f} s against {bare_cpu:.2f} s: "
        f"ratio {ours_cpu / bare_cpu:.2f}"
    )


def phases(path: Path, runs: int) -> dict[str, float]:
    """Median seconds of each stage of ``analyze``, the stages run as ``analyze`` runs them
    (collector paused), and of a whole ``analyze`` in the same runs; 'rest' is the remainder."""
    times: dict[str, list[float]] = {k: [] for k in ("load", "index", "shapes", "total")}
    onnxcost.analyze(path)
    for _ in range(runs):
        gc.disable()
        t0 = time.perf_counter()
        proto = load_model(path).proto
        t1 = time.perf_counter()
        view = build(proto.graph, name_unnamed=True)
        t2 = time.perf_counter()
        infer(proto, None, None, view)
        t3 = time.perf_counter()
        gc.enable()
        for key, a, b in (("load", t0, t1), ("index", t1, t2), ("shapes", t2, t3)):
            times[key].append(b - a)
        t = time.perf_counter()
        onnxcost.analyze(path)
        times["total"].append(time.perf_counter() - t)
    out = {k: statistics.median(v) for k, v in times.items()}
    out["rest"] = out["total"] - sum(out[k] for k in ("load", "index", "shapes"))
    return out


def _ratio_row(label: str, path: Path, runs: int) -> str:
    a = onnxcost.analyze(path)
    f, s, r, cpu = ratio_of_medians(path, runs)
    return (
        f"{label:>12} {a.model.node_count:>6} {a.totals.params:>14,} {f:>8.3f} {s:>9.3f} "
        f"{r:>6.2f} {cpu:>9.2f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument(
        "--out", type=Path, default=None, help="where to write the models (default: a temp dir)"
    )
    ap.add_argument("--phases", action="store_true", help="also split analyze's time by stage")
    ap.add_argument("--skip-inline", action="store_true", help="leave out the GPT-2 inline case")
    ap.add_argument(
        "--skip-torch", action="store_true", help="leave out the 10k-node torch export case"
    )
    ap.add_argument("--make-gpt2", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--make-torch-llama", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.make_gpt2 is not None:
        make_gpt2(args.make_gpt2)
        return
    if args.make_torch_llama is not None:
        make_torch_llama(args.make_torch_llama)
        return
    out = args.out or Path(tempfile.mkdtemp(prefix="onnxcost-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"models in {out}; {args.runs} alternating runs each; medians")
    print(
        f"{'model':>12} {'nodes':>6} {'params':>14} {'floor s':>8} {'analyze s':>9} {'ratio':>6} "
        f"{'CPU ratio':>9}"
    )
    path8b = out / "llama_32l.onnx"
    for layers in (8, 16, 32):
        path = out / f"llama_{layers}l.onnx"
        t = time.perf_counter()
        zoo.save(
            "llama",
            path,
            dtype="fp16",
            weights=False,
            params={**LLAMA_8B, "layers": layers},
            force=True,
        )
        print(
            _ratio_row(f"8B, {layers} l", path, args.runs)
            + f"  (written in {time.perf_counter() - t:.2f} s)"
        )
    torch_path = out / f"torch_llama_{TORCH_LLAMA_LAYERS}l.onnx"
    if not args.skip_torch and torch_case(torch_path):
        print(_ratio_row("torch export", torch_path, args.runs))
    if args.phases:
        split = phases(path8b, args.runs)
        total = split["total"]
        print(
            f"phases of analyze on {path8b.name} (median of {args.runs}): "
            + ", ".join(
                f"{k} {split[k] * 1000:.1f} ms ({split[k] / total:.0%})"
                for k in ("load", "index", "shapes", "rest")
            )
            + f"; total {total * 1000:.1f} ms"
        )
    wall, rss_kib = end_to_end(path8b, args.runs)
    print(
        f"onnxcost analyze {path8b.name}: median wall {wall:.2f} s, peak RSS {rss_kib / 1024:.0f} MiB"
    )
    startup(args.runs)
    if not args.skip_inline:
        inline_case(out / "gpt2_untied.onnx", args.runs)
        inline_case(out / "gpt2.onnx", args.runs)


if __name__ == "__main__":
    main()
