"""Is the profiled top 10 stable? Profile a model several times and compare the slowest nodes.

    python scripts/bench_stability.py [MODEL] --repeats 5 --profile-runs 50 [--threads N]

Each repeat is a full ``run_bench(MODEL, profile=True)`` with ``--profile-runs`` profiled runs
(node times are medians over them). The script prints each repeat's top 10 by median and
then, against the first repeat: how many repeats have the same top-10 set, the same order,
and Kendall's tau of the order (1.0: identical; pairs of nodes ranked the other way round
lower it by 2 / (10 x 9 / 2) each). The same for the ranking by p10 (each node's 10th
percentile over the runs), which a busy machine disturbs far less than the median: a node
is slowed by other processes in some runs, never sped up.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Sequence

from onnxcost.bench import BenchOptions, run_bench


def kendall_tau(a: Sequence[str], b: Sequence[str]) -> float:
    """Kendall's tau between two orderings of the same items: (concordant - discordant) / pairs."""
    pos = {name: i for i, name in enumerate(b)}
    pairs = list(itertools.combinations(a, 2))
    agree = sum(1 if pos[x] < pos[y] else -1 for x, y in pairs)
    return agree / len(pairs) if pairs else 1.0


Row = tuple[str, float, float, float]


def profiled(model: str, profile_runs: int, threads: int | None) -> list[Row]:
    """(label, median ms, p10 ms, p90 ms) of every row of one profiled bench."""
    r = run_bench(
        model,
        BenchOptions(
            profile=True,
            profile_runs=profile_runs,
            threads=threads,
            warmup=5,
            runs=10,
            min_seconds=0.0,
        ),
    )
    assert r.profile is not None
    return [
        (
            row.sources[0] if row.sources else row.name,
            row.median_us / 1e3,
            row.spread.p10_us / 1e3,
            row.spread.p90_us / 1e3,
        )
        for row in r.profile.nodes
    ]


def stable_prefix(orders: list[list[str]]) -> int:
    """The largest k for which every repeat has the same top-k set."""
    k = 0
    while k < min(map(len, orders)) and all(
        set(o[: k + 1]) == set(orders[0][: k + 1]) for o in orders
    ):
        k += 1
    return k


def summary(what: str, orders: list[list[str]]) -> str:
    """Same set, same order and Kendall's tau of each repeat's top list against the first."""
    first = orders[0]
    same_set = sum(set(o) == set(first) for o in orders)
    same_order = sum(o == first for o in orders)
    taus = [kendall_tau(first, o) for o in orders[1:] if set(o) == set(first)]
    n = len(orders)
    return (
        f"by {what}: same top-{len(first)} set {same_set}/{n}, same order {same_order}/{n}, "
        f"Kendall tau vs the first (where the set is the same): "
        f"{', '.join(f'{t:.2f}' for t in taus) or '-'}; the top-k set is the same in every "
        f"repeat up to k = {stable_prefix(orders)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="resnet18")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile-runs", type=int, default=50)
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    by_median: list[list[str]] = []
    by_p10: list[list[str]] = []
    for i in range(args.repeats):
        rows = profiled(args.model, args.profile_runs, args.threads)
        slowest = sorted(rows, key=lambda r: -r[1])[: args.top]
        by_median.append([label for label, *_ in slowest])
        by_p10.append([r[0] for r in sorted(rows, key=lambda r: -r[2])[: args.top]])
        print(f"repeat {i + 1}:")
        for rank, (label, med, p10, p90) in enumerate(slowest, 1):
            print(f"  {rank:2d}. {label:<40} {med:7.3f} ms  (p10-p90 {p10:.3f}-{p90:.3f})")
    print(
        f"{args.model}, --profile-runs {args.profile_runs}, --threads {args.threads or 'default'}, "
        f"{args.repeats} repeats"
    )
    print("  " + summary("median", by_median))
    print("  " + summary("p10", by_p10))


if __name__ == "__main__":
    main()
