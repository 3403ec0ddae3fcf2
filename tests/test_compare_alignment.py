"""The alignment of compute layers: the same steps as the textbook Needleman-Wunsch, fast on
long models."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from onnxcost.compare import BAND, ComputeNode, align
from onnxcost.compare.alignment import _merge_score as merge_score
from onnxcost.compare.alignment import _similarity as similarity

MAX_MERGE = 4


def reference_align(
    a: Sequence[ComputeNode], b: Sequence[ComputeNode]
) -> list[tuple[int, int, int, int]]:
    """The textbook Needleman-Wunsch, cell by cell over the whole matrix (the alignment
    onnxcost shipped before the banded, row-vectorised one): the oracle."""
    n, m = len(a), len(b)
    sim = [[similarity(x, y) for y in b] for x in a]
    sum_a, sum_b = [0], [0]
    for x in a:
        sum_a.append(sum_a[-1] + x.macs)
    for y in b:
        sum_b.append(sum_b[-1] + y.macs)
    score = [[0.0] * (m + 1) for _ in range(n + 1)]
    back = [[(0, 0)] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        for j in range(m + 1):
            if i == 0 and j == 0:
                continue
            best, step = float("-inf"), (0, 0)
            if i and j and sim[i - 1][j - 1] > 0:
                best, step = score[i - 1][j - 1] + sim[i - 1][j - 1], (1, 1)
            for k in range(2, MAX_MERGE + 1):  # prefix sums rule out most merges cheaply
                if i >= 1 and j >= k and sum_b[j] - sum_b[j - k] == a[i - 1].macs:
                    s = merge_score(a[i - 1], b[j - k : j])
                    if s > 0 and score[i - 1][j - k] + s > best:
                        best, step = score[i - 1][j - k] + s, (1, k)
                if j >= 1 and i >= k and sum_a[i] - sum_a[i - k] == b[j - 1].macs:
                    s = merge_score(b[j - 1], a[i - k : i])
                    if s > 0 and score[i - k][j - 1] + s > best:
                        best, step = score[i - k][j - 1] + s, (k, 1)
            if i and score[i - 1][j] > best:
                best, step = score[i - 1][j], (1, 0)
            if j and score[i][j - 1] > best:
                best, step = score[i][j - 1], (0, 1)
            score[i][j], back[i][j] = best, step
    steps = []
    i, j = n, m
    while i or j:
        di, dj = back[i][j]
        steps.append((i - di, di, j - dj, dj))
        i, j = i - di, j - dj
    steps.reverse()
    return steps


def matmul(i: int, k: int, n: int, family: str = "dense", op: str = "MatMul") -> ComputeNode:
    """A [8, k] x [k, n] MatMul: 8 * k * n MACs."""
    return ComputeNode(f"n{i}", op, "", family, 8 * k * n, (8, k), (k, n), (8, n), "", {})


def random_sequence(rng: random.Random, length: int) -> list[ComputeNode]:
    """Few distinct dims, families and op types, so pairs, ties and exact merges all occur."""
    out = []
    for i in range(length):
        k, n = rng.choice((2, 4, 8)), rng.choice((2, 4, 8))
        family, op = rng.choice((("dense", "MatMul"), ("dense", "Gemm"), ("conv", "Conv")))
        out.append(matmul(i, k, n, family, op))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_same_steps_as_the_textbook_alignment(seed: int) -> None:
    rng = random.Random(seed)
    a = random_sequence(rng, rng.randint(0, 30))
    b = random_sequence(rng, rng.randint(0, 30))
    assert align(a, b) == reference_align(a, b)


@pytest.mark.parametrize("seed", range(10))
def test_narrow_band_keeps_a_path_near_the_diagonal(seed: int) -> None:
    """Two exports of one model differ by a few inserted nodes: the best path stays within a
    few cells of the diagonal, so a band of 8 finds the same alignment as the whole matrix."""
    rng = random.Random(seed)
    a = random_sequence(rng, 60)
    b = list(a)
    for _ in range(3):
        b.insert(rng.randrange(len(b)), matmul(999, 16, 16))
    assert align(a, b, band=8) == reference_align(a, b)


def test_merges_a_fused_projection_against_its_parts() -> None:
    # One [8,4]x[4,12] MatMul (8*4*12 = 384 MACs) against three [8,4]x[4,4] (128 MACs each:
    # 3 * 128 = 384), between two equal layers on each side.
    a = [matmul(0, 4, 4), matmul(1, 4, 12), matmul(2, 4, 4)]
    b = [matmul(0, 4, 4), matmul(1, 4, 4), matmul(2, 4, 4), matmul(3, 4, 4), matmul(4, 4, 4)]
    assert align(a, b) == [(0, 1, 0, 1), (1, 1, 1, 3), (2, 1, 4, 1)]


def test_ten_thousand_matmuls_each_side_align_in_one_pass() -> None:
    """10,000 against 10,000 MatMuls, one removed and one added on the second side. The
    textbook alignment fills 10,001 x 10,001 cells (4,000 x 4,000 took 62 s and 1.4 GB);
    the banded one 10,001 x (2 x BAND + 1)."""
    dims = (64, 128, 256, 512)
    a = [matmul(i, dims[i % 4], dims[(i + 1) % 4]) for i in range(10_000)]
    b = list(a)
    b.insert(5_000, matmul(10_001, 32, 32))
    del b[100]
    steps = align(a, b)
    pairs = [(i, j) for i, di, j, dj in steps if di == dj == 1]
    only_a = [i for i, di, _j, dj in steps if di and not dj]
    only_b = [j for _i, di, j, dj in steps if dj and not di]
    assert len(pairs) == 9_999
    assert len(only_a) == 1
    assert len(only_b) == 1
    assert b[only_b[0]].name == "n10001"
    assert all(a[i].macs == b[j].macs for i, j in pairs)
    assert BAND < 10_000  # the band, not the whole matrix, was explored
