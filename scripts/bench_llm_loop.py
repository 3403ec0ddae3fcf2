"""Tokens/s of ``llm --bench``'s two loops: the KV cache kept on the device (IO binding) against
the cache copied through the host every step (numpy feeds), issue 24 item 2.

    python scripts/bench_llm_loop.py [--model gpt2] [--dtype fp32] [--provider cpu]
                                     [--prompt 128] [--generate 64] [--rounds 5] [--threads 1]
                                     [-p KEY=VALUE]... [--json FILE]

One model (default: the built-in GPT-2 small with its KV cache, random weights from seed 0,
fp32 unless --dtype), built once; each round runs ``run_llm_loop`` with ``cache="device"`` and ``cache="host"``
in this process, swapping which goes first every round (each opens its own session and does
its untimed warm-up). Prints the median tokens/s of each loop over the rounds, their ratio
(device / host), the median time to first token and decode step, and checks that both loops
generated the same tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from typing import Any

from onnxcost import zoo
from onnxcost.bench.providers import resolve_provider
from onnxcost.bench.session import SessionConfig
from onnxcost.llm.cost import llm_report
from onnxcost.llm.loop import CACHES, LoopTiming, run_llm_loop
from onnxcost.prepare import prepare


def measure(args: argparse.Namespace) -> dict[str, Any]:
    params = {"kv_cache": "true", **dict(p.split("=", 1) for p in args.param)}
    if args.dtype == "fp32":
        model = prepare(args.model, weights=True, params=params)
    else:  # a built-in at another dtype: built here, then prepared as a ModelProto
        proto = zoo.build(args.model, dtype=args.dtype, weights=True, params=params)
        model = prepare(proto, weights=True)
    layout = llm_report(model, prompt=args.prompt, generate=args.generate).layout
    config = SessionConfig(resolve_provider(args.provider), intra_op_threads=args.threads)
    runs: dict[str, list[LoopTiming]] = {c: [] for c in CACHES}
    for r in range(args.rounds):
        order = CACHES if r % 2 == 0 else CACHES[::-1]
        for cache in order:
            runs[cache].append(
                run_llm_loop(
                    model,
                    layout,
                    prompt=args.prompt,
                    generate=args.generate,
                    config=config,
                    cache=cache,
                )
            )
    tokens = {c: {t.tokens for t in runs[c]} for c in CACHES}
    same = len(tokens["device"] | tokens["host"]) == 1
    out: dict[str, Any] = {
        "model": model.display,
        "params": params,
        "dtype": args.dtype,
        "provider": config.provider,
        "threads": args.threads,
        "prompt": args.prompt,
        "generate": args.generate,
        "rounds": args.rounds,
        "load_average": os.getloadavg(),
        "same_tokens": same,
    }
    for cache in CACHES:
        timings = runs[cache]
        out[cache] = {
            "tokens_per_s": [t.tokens_per_s for t in timings],
            "median_tokens_per_s": statistics.median(t.tokens_per_s for t in timings),
            "median_ttft_ms": statistics.median(t.ttft_ms for t in timings),
            "median_decode_ms": statistics.median(t.decode_median_ms or 0.0 for t in timings),
        }
    out["ratio_device_over_host"] = (
        out["device"]["median_tokens_per_s"] / out["host"]["median_tokens_per_s"]
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt2", help="a decoder file or built-in name")
    parser.add_argument("-p", "--param", action="append", default=[], help="KEY=VALUE")
    parser.add_argument("--dtype", default="fp32", help="a built-in's dtype: fp32, fp16, bf16")
    parser.add_argument("--provider", default="cpu")
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--generate", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    out = measure(args)
    for cache in CACHES:
        f = out[cache]
        print(
            f"{cache:6s} {f['median_tokens_per_s']:9.1f} tokens/s  ttft {f['median_ttft_ms']:8.2f}"
            f" ms  decode {f['median_decode_ms']:7.3f} ms  (medians of {args.rounds})"
        )
    print(f"device / host: {out['ratio_device_over_host']:.3f}x on {out['provider']}")
    print(f"same tokens in every run: {out['same_tokens']}; load average {out['load_average']}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return 0 if out["same_tokens"] else 1


if __name__ == "__main__":
    sys.exit(main())
