"""Capture the CLI's JSON (analyze, compare, llm, bench) for a before/after check of its contracts.

``capture OUT`` runs a fixed set of commands with ``--format json`` on small models (those in
models/ and tests/data/, built-in ones with small parameters), on CPUExecutionProvider with one
thread and few runs, and writes each command's JSON to ``OUT/NAME.json`` (and the command to
``OUT/commands.txt``). ``check BEFORE AFTER [--again BEFORE2 ...]`` compares two captures:
every object's keys and their order, every list's length and every leaf's type and value must
be the same. Measured figures differ from run to run; capture the old code more than once and
pass the other captures as ``--again``: a field where the old captures already differ from
each other (in any row of a list: ``nodes[].median_us``) is reported as measured, not as a
change. Nothing else is excused::

    python scripts/snapshot_json.py capture /tmp/before1   # on the old code
    python scripts/snapshot_json.py capture /tmp/before2   # again, for the measured fields
    python scripts/snapshot_json.py capture /tmp/after     # on the new code
    python scripts/snapshot_json.py check /tmp/before1 /tmp/after --again /tmp/before2
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TINY_GPT2 = ["-p", "layers=2", "-p", "hidden=32", "-p", "heads=4", "-p", "vocab=64"]
TINY_GPT2 += ["-p", "max_positions=32", "-p", "kv_cache=true"]
FAST_BENCH = ["--runs", "5", "--warmup", "1", "--min-seconds", "0", "--threads", "1", "-q"]
GATE_BENCH = ["--bench", "--runs", "5", "--warmup", "1", "--threads", "1"]


def _cases(tmp: Path) -> dict[str, list[str]]:
    """Name -> CLI arguments (``--format json`` is added)."""
    decoder = str(tmp / "gpt2_kv.onnx")
    m = "models/"
    opt = "tests/data/optimized/"
    cases: dict[str, list[str]] = {}
    for path in (
        m + "mlp_torch_dynamo.onnx",
        m + "resnet20_keras.onnx",
        m + "encoder_torch_dynamo.onnx",
        m + "decoder_kv_torch_dynamo.onnx",
        opt + "cnn_qdq.onnx",
        opt + "mlp_nbits4.onnx",
        opt + "lstm_dynamic_quant.onnx",
        "tests/data/fuzz/matmulnbits_graph_attribute.onnx",
        "mlp",
        "resnet20_cifar",
    ):
        cases[f"analyze_{Path(path).stem}"] = ["analyze", path]
    cases["analyze_mlp_torch"] = ["analyze", m + "mlp_torch_dynamo.onnx", "--convention", "torch"]
    cases["analyze_encoder_symbolic"] = ["analyze", m + "encoder_torch_dynamo.onnx", "--symbolic"]
    cases["analyze_decoder_symbolic"] = [
        "analyze",
        m + "decoder_kv_torch_dynamo.onnx",
        "--symbolic",
    ]
    cases["analyze_gpt2_kv_symbolic"] = ["analyze", decoder, "--symbolic"]
    cases["analyze_mlp_ort_peak"] = ["analyze", m + "mlp_torch_dynamo.onnx", "--ort-peak"]
    cases["compare_mlp"] = ["compare", m + "mlp_keras.onnx", m + "mlp_torch_dynamo.onnx"]
    cases["compare_resnet20"] = [
        "compare",
        m + "resnet20_keras.onnx",
        m + "resnet20_torch_dynamo.onnx",
    ]
    cases["compare_gpt2_opt"] = ["compare", opt + "gpt2_tiny_source.onnx"]
    cases["compare_gpt2_opt"].append(opt + "gpt2_tiny_optimized.onnx")
    cases["compare_three"] = ["compare", m + "mlp_keras.onnx", m + "mlp_torch_script.onnx"]
    cases["compare_three"].append(m + "mlp_torch_dynamo.onnx")
    cases["compare_mlp_bench"] = [*cases["compare_mlp"], *GATE_BENCH]
    llm = ["llm", "gpt2", *TINY_GPT2, "--prompt", "4", "--generate", "3"]
    cases["llm_gpt2"] = llm
    cases["llm_gpt2_one_token"] = ["llm", "gpt2", *TINY_GPT2, "--prompt", "4", "--generate", "1"]
    cases["llm_gpt2_roofline"] = [*llm, "--peak-tflops", "1", "--bandwidth-gbs", "50"]
    cases["llm_decoder_file"] = ["llm", m + "decoder_kv_torch_dynamo.onnx"]
    cases["llm_decoder_file"] += ["--prompt", "6", "--generate", "4", "--batch", "2"]
    cases["llm_gpt2_bench"] = [*llm, "--bench", "--threads", "1"]
    cases["llm_decoder_file_bench"] = [*cases["llm_decoder_file"], "--bench", "--threads", "1"]
    mlp = m + "mlp_torch_dynamo.onnx"
    cases["bench_mlp"] = ["bench", mlp, *FAST_BENCH]
    cases["bench_mlp_profile"] = ["bench", mlp, *FAST_BENCH, "--profile", "--profile-runs", "5"]
    cases["bench_mlp_batch"] = ["bench", mlp, *FAST_BENCH, "--batch", "1,2"]
    cases["bench_mlp_calibrate"] = ["bench", mlp, *FAST_BENCH, "--calibrate"]
    cases["bench_mlp_calibrate_cached"] = ["bench", mlp, *FAST_BENCH, "--calibrate", "--profile"]
    cases["bench_mlp_calibrate_cached"] += ["--profile-runs", "5"]
    cases["bench_mlp_max_batch"] = ["bench", mlp, *FAST_BENCH, "--max-batch", "2"]
    cases["bench_builtin_mlp_profile"] = ["bench", "mlp", *FAST_BENCH, "--profile"]
    cases["bench_builtin_mlp_profile"] += ["--profile-runs", "5"]
    return cases


def capture(out: Path, only: str | None) -> None:
    from typer.testing import CliRunner

    from onnxcost.cli.app import app

    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="onnxcost_snapshot_"))
    os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")  # --calibrate measures, then reads it
    os.chdir(ROOT)
    runner = CliRunner()
    saved = runner.invoke(app, ["zoo", "save", "gpt2", str(tmp / "gpt2_kv.onnx"), *TINY_GPT2])
    if saved.exit_code != 0:
        sys.exit(f"zoo save failed: {saved.output}")
    commands = []
    for name, args in _cases(tmp).items():
        if only and only not in name:
            continue
        r = runner.invoke(app, [*args, "--format", "json"])
        commands.append(f"{name}: onnxcost {' '.join(args)} --format json (exit {r.exit_code})")
        text = r.stdout if r.exit_code == 0 else f'{{"error": {json.dumps(r.output)}}}'
        (out / f"{name}.json").write_text(text.replace(str(tmp), "<tmp>"))
        print(commands[-1], flush=True)
    (out / "commands.txt").write_text("\n".join(commands) + "\n")


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where ``b`` differs from ``a``: key order, list length, leaf type or value."""
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            return [f"{path}: keys {list(a)} != {list(b)}"]
        return [d for k in a for d in differences(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} != {len(b)}"]
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in differences(x, y, f"{path}[{i}]")
        ]
    if type(a) is not type(b):
        return [f"{path}: type {type(a).__name__} != {type(b).__name__}"]
    return [] if a == b or (a != a and b != b) else [f"{path}: value {a!r} != {b!r}"]


def _field(difference: str) -> str:
    """The path of a difference with list indices dropped: ``.nodes[].median_us``."""
    return re.sub(r"\[\d+\]", "[]", difference.split(":")[0])


def check(before: Path, after: Path, again: list[Path]) -> int:
    failed = 0
    names = sorted(p.name for p in before.glob("*.json"))
    if sorted(p.name for p in after.glob("*.json")) != names:
        print("the captures hold different files")
        failed += 1
    for name in names:
        a_text, b_text = (before / name).read_text(), (after / name).read_text()
        a, b = json.loads(a_text), json.loads(b_text)
        measured = {
            _field(d)
            for other in again
            for d in differences(a, json.loads((other / name).read_text()))
        }
        found = differences(a, b)
        changed = [d for d in found if _field(d) not in measured]
        same_text = a_text == b_text
        print(
            f"{name}: {'identical text' if same_text else 'same structure'}, "
            f"{len(found) - len(changed)} measured figures differ"
            if not changed
            else f"{name}: {len(changed)} CHANGES"
        )
        for d in changed:
            print("   ", d)
        failed += bool(changed)
    print("OK" if not failed else f"{failed} files differ")
    return 1 if failed else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    cap = sub.add_parser("capture")
    cap.add_argument("out", type=Path)
    cap.add_argument("--only", help="Only the cases whose name contains this.")
    chk = sub.add_parser("check")
    chk.add_argument("before", type=Path)
    chk.add_argument("after", type=Path)
    chk.add_argument(
        "--again", type=Path, action="append", default=[], help="Another capture of the old code."
    )
    args = ap.parse_args()
    if args.command == "capture":
        capture(args.out, args.only)
    else:
        sys.exit(check(args.before, args.after, args.again))


if __name__ == "__main__":
    main()
