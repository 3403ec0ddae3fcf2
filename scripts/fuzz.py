"""Fuzz onnxcost with structure-aware and byte-level mutated models (issue 11).

    python scripts/fuzz.py --cases 100000 --cli-cases 5000 --seed 1 [--workers 2] [--save DIR]
    python scripts/fuzz.py --cases 0 --family-cases 500 --family llm --family scopes

--family-cases runs the families of issue 27 (derived dims, deep scopes, nested functions,
hostile llm and --ort-peak inputs, reordered protobuf fields, library calls), each a whole
case of its own: model, flags or library call (tests/fuzzing.py, FAMILIES).

Cases come from the Hypothesis strategies in tests/fuzzing.py (seeded: the same --seed gives
the same cases) and run in worker processes that each handle many cases, under a per-case
timeout and an address-space limit; a worker that hangs or dies is replaced. Prints a
summary: cases, findings by signature (uncaught exceptions, hangs, modified inputs, dead
workers), time. Exit 1 if anything was found. --save writes each finding's model there.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections import Counter
from pathlib import Path

from hypothesis import given, seed

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import fuzzing

slowest: list[tuple[float, str]] = []


def _run(
    strategy: object,
    n: int,
    seed_value: int,
    pool: fuzzing.Pool,
    save: Path | None,
    findings: Counter[str],
    examples: dict[str, str],
    counts: Counter[str],
) -> None:
    def record(done: list[tuple[fuzzing.Case, fuzzing.Outcome]]) -> None:
        for case, outcome in done:
            counts["cases"] += 1
            slowest.append((outcome.seconds, case.label))
            slowest.sort(reverse=True)
            del slowest[5:]
            if counts["cases"] % 1000 == 0:
                found = sum(findings.values())
                print(f"{counts['cases']} cases, {found} findings", file=sys.stderr, flush=True)
            counts[outcome.kind] += 1
            if outcome.kind == "ok":
                continue
            key = f"{outcome.kind}: {outcome.signature}"
            findings[key] += 1
            if key not in examples:
                call = case.cli or f"{case.api}(**{dict(case.kwargs)!r:.300})"
                examples[key] = f"{case.label} {call}\n{outcome.detail[-1500:]}"
                if save is not None:
                    save.mkdir(parents=True, exist_ok=True)
                    name = f"finding{len(examples):03d}.onnx"
                    (save / name).write_bytes(case.model)
                    (save / (name + ".txt")).write_text(examples[key])
                    for other, data in case.files:  # external data, a victim model
                        (save / f"{name}.{other}").write_bytes(data)

    if n <= 0:
        return

    @fuzzing.generation_settings(n)
    @seed(seed_value)
    @given(strategy)
    def one(case: fuzzing.Case) -> None:
        record(pool.submit(case))

    one()
    record(pool.drain())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000, help="in-process analyze cases")
    parser.add_argument(
        "--cli-cases", type=int, default=0, help="CLI cases (CliRunner; a few real processes)"
    )
    parser.add_argument(
        "--family-cases", type=int, default=0, help="cases of the issue-27 families (CLI and API)"
    )
    parser.add_argument(
        "--family",
        action="append",
        choices=sorted(fuzzing.FAMILIES),
        help="only this family (repeatable; default: all)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    parser.add_argument(
        "--memory-gib", type=float, default=3.0, help="address-space limit per worker"
    )
    parser.add_argument("--save", type=Path, default=None, help="write each finding's model here")
    args = parser.parse_args()
    # SIGINT (also in a background job, where the shell ignores it) or SIGTERM stops the run
    # early; the summary then covers the cases that completed.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    findings: Counter[str] = Counter()
    examples: dict[str, str] = {}
    counts: Counter[str] = Counter()
    start = time.perf_counter()
    interrupted = False
    in_process: dict[str, int] | None = None
    cli_done: dict[str, int] | None = None
    with fuzzing.Pool(args.workers, args.timeout, int(args.memory_gib * 2**30)) as pool:
        try:
            _run(
                fuzzing.models(), args.cases, args.seed, pool, args.save, findings, examples, counts
            )
            in_process = dict(counts)
            _run(
                fuzzing.cli_cases(),
                args.cli_cases,
                args.seed,
                pool,
                args.save,
                findings,
                examples,
                counts,
            )
            cli_done = dict(counts)
            _run(
                fuzzing.family_cases(tuple(args.family or fuzzing.FAMILIES)),
                args.family_cases,
                args.seed,
                pool,
                args.save,
                findings,
                examples,
                counts,
            )
        except KeyboardInterrupt:  # Ctrl-C: report what completed
            interrupted = True
            in_process = dict(counts) if in_process is None else in_process
            cli_done = dict(counts) if cli_done is None else cli_done
    elapsed = time.perf_counter() - start
    in_process = dict(counts) if in_process is None else in_process
    cli_done = dict(counts) if cli_done is None else cli_done
    cli = {k: cli_done.get(k, 0) - in_process.get(k, 0) for k in counts}
    family = {k: counts[k] - cli_done.get(k, 0) for k in counts}
    if interrupted:
        print("interrupted: the figures below are the cases that completed")
    print(
        f"seed {args.seed}: {in_process.get('cases', 0)} in-process cases, {cli.get('cases', 0)} CLI cases, "
        f"{family.get('cases', 0)} family cases "
        f"in {elapsed:.0f} s ({args.workers} workers, {args.timeout:g} s timeout, {args.memory_gib:g} GiB)"
    )
    print("  slowest: " + "; ".join(f"{label} {t:.1f} s" for t, label in slowest))
    for kind in ("crash", "hang", "modified", "died"):
        print(f"  {kind}: {counts[kind]}")
    for key, n in findings.most_common():
        print(f"  {n:6d}  {key}")
        print("          " + examples[key].splitlines()[0][:200])
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
