"""Benchmark of the analyzer (issues: onnxcost analyze; 16), not a timed test.

Builds a 32-layer LLaMA-style decoder (8B-shaped: hidden 4096, 32 heads, 8 KV heads,
intermediate 14336, vocab 128256; fp16) whose weights are external data in a sparse file,
and the built-in GPT-2 small with its weights inline (``onnxcost zoo save gpt2``), then
measures:

1. in-process: ``onnxcost.analyze(path)`` against the floor ``onnx.load(path,
   load_external_data=False)`` + ``onnx.shape_inference.infer_shapes(..., data_prop=True)``,
   alternating runs, ratio of medians; and the same ratio at 8, 16 and 32 layers, to show
   how it grows with node count;
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
(writing the two GPT-2 files, 1.2 GB, takes a minute and 3 GB of memory, once per --out).
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
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


def ratio_of_medians(path: Path, runs: int) -> tuple[float, float, float]:
    """Median seconds of the floor and of analyze, measured alternately, and their ratio."""
    _floor(path)
    _analyze(path)  # warm caches (imports, schema lookups) for both
    floor, ours = [], []
    for _ in range(runs):
        t = time.perf_counter()
        _floor(path)
        floor.append(time.perf_counter() - t)
        t = time.perf_counter()
        _analyze(path)
        ours.append(time.perf_counter() - t)
    f, a = statistics.median(floor), statistics.median(ours)
    return f, a, a / f


def end_to_end(path: Path, runs: int) -> tuple[float, int]:
    """Median wall seconds and max peak RSS (KiB) of `onnxcost analyze PATH` in a fresh process."""
    walls, peak = [], 0
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "onnxcost", "analyze", str(path), "--top", "10"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        walls.append(time.perf_counter() - t)
        peak = max(peak, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before)
    return statistics.median(walls), peak


_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""Fresh processes cache compiled modules, as an installed package has them: without, each
start compiles onnxcost's sources again (0.1 to 0.2 s here)."""


def _run(command: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of ``command`` run in a fresh process."""
    t = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_ENV)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(command)} failed (exit {proc.returncode})")
    return wall, usage.ru_maxrss


def alternating(commands: dict[str, list[str]], runs: int) -> dict[str, tuple[float, float]]:
    """Median wall seconds and median peak RSS (MiB) of each command, the commands run in
    turn ``runs`` times, each in a fresh process (one warm-up round first, not counted)."""
    for command in commands.values():
        _run(command)
    walls: dict[str, list[float]] = {k: [] for k in commands}
    rss: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(runs):
        for key, command in commands.items():
            wall, kib = _run(command)
            walls[key].append(wall)
            rss[key].append(kib / 1024)
    return {k: (statistics.median(walls[k]), statistics.median(rss[k])) for k in commands}


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
    (lw, lr), (aw, ar) = result["onnx.load"], result["analyze"]
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
    bare, ours = result["bare"][0], result["analyze"][0]
    print(
        f"start-up: onnxcost --version {result['version'][0]:.2f} s; onnxcost analyze "
        f"{SMALL_MODEL.name} {ours:.2f} s against bare load + shape inference {bare:.2f} s: "
        f"ratio {ours / bare:.2f}"
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument(
        "--out", type=Path, default=None, help="where to write the models (default: a temp dir)"
    )
    ap.add_argument("--phases", action="store_true", help="also split analyze's time by stage")
    ap.add_argument("--skip-inline", action="store_true", help="leave out the GPT-2 inline case")
    ap.add_argument("--make-gpt2", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.make_gpt2 is not None:
        make_gpt2(args.make_gpt2)
        return
    out = args.out or Path(tempfile.mkdtemp(prefix="onnxcost-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"models in {out}; {args.runs} alternating runs each; medians")
    print(f"{'layers':>6} {'nodes':>6} {'params':>14} {'floor s':>8} {'analyze s':>9} {'ratio':>6}")
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
        built = time.perf_counter() - t
        a = onnxcost.analyze(path)
        f, s, r = ratio_of_medians(path, args.runs)
        print(
            f"{layers:>6} {a.model.node_count:>6} {a.totals.params:>14,} {f:>8.3f} {s:>9.3f} {r:>6.2f}  (written in {built:.2f} s)"
        )
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
