"""``--symbolic --training``: the training totals' formulas from one training pass over the
symbolic walk (``symbolic/training_walk.py``), checked against concrete analyses with
training; where the pass does not carry or a check disagrees, sampled as before."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from onnxcost_testing import parse

import onnxcost
from onnxcost import zoo
from onnxcost.symbolic.domain import _sign
from onnxcost.symbolic.maximum import Maximum
from onnxcost.symbolic.result import SymbolicCosts
from onnxcost.symbolic.training import TRAINING_KEYS, training_vector
from onnxcost.symdim import SymDim

GPT2 = {"layers": 2, "hidden": 64, "heads": 4, "vocab": 50, "max_positions": 64}
LLAMA = {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "intermediate": 96, "vocab": 50}
KV = {"kv_cache": 1}


def _mlp() -> onnx.ModelProto:
    """x [batch, 8] -> MatMul W1 [8, 16] -> Add b1 -> Relu -> MatMul W2 [16, 4] -> Add b2."""
    m = parse(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[batch, 8] x) => (float[batch, 4] y) {
          m1 = MatMul(x, W1)
          a1 = Add(m1, b1)
          h = Relu(a1)
          m2 = MatMul(h, W2)
          y = Add(m2, b2)
        }
        """
    )
    rng = np.random.default_rng(0)
    for name, shape in [("W1", (8, 16)), ("b1", (16,)), ("W2", (16, 4)), ("b2", (4,))]:
        values = rng.standard_normal(shape).astype(np.float32)
        m.graph.initializer.append(numpy_helper.from_array(values, name))
    return m


def _walked(costs: SymbolicCosts, warnings: tuple[str, ...]) -> None:
    """The training formulas are the walk's: one concrete analysis with training at the
    random point and one at each symbol's 0 the model allows, beside the walk's own one."""
    zeros = sum(costs.zero_allowed.values())
    assert costs.analyses == 1 + 1 + zeros, warnings
    assert not any("training formulas were sampled" in w for w in warnings), warnings


def test_an_mlp_by_hand() -> None:
    # Per row of the batch (fp32, 4 bytes):
    # forward MACs: x W1 8 x 16 = 128, h W2 16 x 4 = 64: 192.
    # backward MACs: x needs no gradient, so x W1 computes dW1 = x^T g only (128); h W2
    # computes dh = g W2^T (64) and dW2 = h^T g (64): 256 = 2 x 192 - 128, twice the forward
    # less the first layer's input gradient.
    # backward FLOPs: the matmuls 2 x 256 = 512; Relu's g where y > 0: 1 x 16; each bias's
    # gradient sums the batch's rows: numel(Y) - numel(b) adds, 16 b - 16 and 4 b - 4, and 0
    # where the batch is 0 (not -20): 548 b - 20 + 20 max(0, 1 - b).
    # trainable params: 8 x 16 + 16 + 16 x 4 + 4 = 212; weights, gradients 848 bytes each,
    # AdamW's two moments 8 x 212 = 1,696.
    # saved: x for dW1 (8 x 4 = 32 b) and Relu's output h (16 x 4 = 64 b), which dW2 keeps
    # too, once: 96 b.
    # peak: the forward's live bytes step by step (x and h kept to the end): MatMul1 x + m1
    # = 32 b + 64 b; Add x + m1 + a1 = 160 b; Relu x + a1 + h = 160 b; MatMul2 112 b; Add2
    # 128 b. The backward's: 96 b saved plus the most gradient bytes at one node, Relu's
    # dh and da1 (or Add1's da1 and dm1), 64 b + 64 b: 224 b >= 160 b wherever b >= 1.
    # 848 + 848 + 1,696 + 224 b = 3,392 + 224 b.
    a = onnxcost.analyze(_mlp(), symbolic=True, training=True)
    costs = a.symbolic
    assert costs is not None
    _walked(costs, a.warnings)
    python = {k: f.python() for k, f in costs.totals.items() if f is not None}
    assert python["macs"] == "192*batch"
    assert python["backward_macs"] == "256*batch"
    assert python["backward_flops"] == "-20 + 548*batch + 20*max(0, 1 - batch)"
    assert python["trainable_params"] == "212"
    assert python["gradient_bytes"] == "848"
    assert python["optimizer_bytes"] == "1696"
    assert python["saved_activation_bytes"] == "96*batch"
    assert python["peak_bytes"] == "3392 + 224*batch"
    at_zero = training_vector(
        onnxcost.analyze(_mlp(), dims={"batch": 0}, training=True).totals.training
    )
    assert at_zero is not None
    assert costs.totals["backward_flops"].evaluate({"batch": 0}) == at_zero[1] == 0  # type: ignore[union-attr]


def _points(costs: SymbolicCosts, rng: random.Random, n: int) -> list[dict[str, int]]:
    """n random points within the model's positions, every symbol at 1, and each allowed 0."""
    limit = costs.limit
    points = []
    for _ in range(n):
        point = {s: rng.randint(1, 9) for s in costs.symbols}
        if limit is not None:
            spare = limit.budget
            for s in limit.symbols:
                point[s] = rng.randint(1, max(1, spare // len(limit.symbols)))
        points.append(point)
    points.append(dict.fromkeys(costs.symbols, 1))
    points += [{**points[0], s: 0} for s in costs.symbols if costs.zero_allowed[s]]
    return points


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("mlp", {}),
        ("resnet20_cifar", {}),
        ("gpt2", GPT2),
        ("llama", LLAMA),
        ("gpt2", GPT2 | KV | {"hidden": 32}),
        ("llama", LLAMA | KV | {"hidden": 32, "intermediate": 48}),
    ],
)
def test_training_formulas_come_from_the_walk_and_hold(
    tmp_path: Path, name: str, params: dict[str, int]
) -> None:
    path = zoo.save(name, tmp_path / f"{name}.onnx", weights=False, params=params)
    a = onnxcost.analyze(path, symbolic=True, training=True)
    costs = a.symbolic
    assert costs is not None
    _walked(costs, a.warnings)
    for point in _points(costs, random.Random(11), 3):
        concrete = onnxcost.analyze(path, dims=point, training=True).totals.training
        want = training_vector(concrete)
        assert want is not None
        for key, value in zip(TRAINING_KEYS, want, strict=True):
            # every total has a formula: on a decoder the peak is the max of a few steps'
            # live bytes (the backward's overtakes the forward's as seq grows), but for the
            # llama with a KV cache, whose peak is the max of more than 8 of them
            f = costs.totals[key]
            if f is None:
                assert (key, name, params.get("kv_cache")) == ("peak_bytes", "llama", 1)
                assert any("no 8 of them or fewer are proven" in w for w in a.warnings)
                continue
            assert f.evaluate(point) == value, (point, key, f.python())


def test_options_and_conventions_carry(tmp_path: Path) -> None:
    # Mixed precision, SGD with momentum, the inputs' gradients, a frozen embedding and the
    # torch convention: the same pass, the same checks.
    path = zoo.save("gpt2", tmp_path / "gpt2.onnx", weights=False, params=GPT2)
    options = {
        "mixed_precision": "fp16",
        "optimizer": "sgd-momentum",
        "frozen": "wte",
        "convention": "torch",
    }
    a = onnxcost.analyze(path, symbolic=True, training=True, **options)  # type: ignore[arg-type]
    costs = a.symbolic
    assert costs is not None
    _walked(costs, a.warnings)
    point = {"batch": 3, "seq": 7}
    want = training_vector(
        onnxcost.analyze(path, dims=point, training=True, **options).totals.training
    )  # type: ignore[arg-type]
    assert want is not None
    for key, value in zip(TRAINING_KEYS, want, strict=True):
        f = costs.totals[key]
        assert f is None or f.evaluate(point) == value, key


def test_a_pass_that_fails_over_symbols_is_sampled_and_said(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from onnxcost.symbolic import training_walk

    def fails(**kwargs: object) -> object:
        raise TypeError("the truth of batch depends on its symbols")

    monkeypatch.setattr(training_walk, "train", fails)
    a = onnxcost.analyze(_mlp(), symbolic=True, training=True)
    costs = a.symbolic
    assert costs is not None
    assert costs.analyses > 3  # the sampler's analyses
    assert any("training formulas were sampled" in w and "TypeError" in w for w in a.warnings), (
        a.warnings
    )
    assert costs.totals["backward_macs"].python() == "256*batch"  # type: ignore[union-attr]


def test_a_check_that_disagrees_is_sampled_and_said(monkeypatch: pytest.MonkeyPatch) -> None:
    # A concrete analysis one MAC off at the check point (as a wrong backward rule over
    # SymDims would be): the walk is not trusted.
    from onnxcost.symbolic import training_walk

    concrete = training_walk._concrete

    def one_off(*args: object) -> list[int] | None:
        found = concrete(*args)  # type: ignore[arg-type]
        return None if found is None else [found[0] + 1, *found[1:]]

    monkeypatch.setattr(training_walk, "_concrete", one_off)
    a = onnxcost.analyze(_mlp(), symbolic=True, training=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses > 3
    assert any("backward_macs is not a concrete analysis's at batch=" in w for w in a.warnings), (
        a.warnings
    )


def test_the_peak_is_the_max_of_the_steps_no_other_is_at_most() -> None:
    # Steps of s^2, 100 s and 50 bytes, s >= 1: 50 <= 100 s everywhere, and s^2 and 100 s
    # cross at s = 100 (the backward's overtakes the forward's): max(s^2, 100 s). Where s = 0
    # is allowed, 50 is the largest there (0, 0, 50): max(s^2, 100 s, 50).
    s = SymDim.of("s")
    steps = [s * s, 100 * s, SymDim.of(50)]
    peak = Maximum(("s",), None, {"s": 7})(steps)  # type: ignore[arg-type]
    assert isinstance(peak, SymDim)
    assert [peak.evaluate({"s": v}) for v in (1, 99, 100, 101, 300)] == [
        100,
        9900,
        10000,
        10201,
        90000,
    ]
    assert str(peak) == "max(100*s, s**2)"
    with_zero = Maximum(("s",), None, {"s": 7}, zeros=("s",))(steps)  # type: ignore[arg-type]
    assert isinstance(with_zero, SymDim)
    assert with_zero.evaluate({"s": 0}) == 50
    assert with_zero.evaluate({"s": 300}) == 90000
    # One step at least every other: that step alone (s^2 + 100 s against s^2 and 100 s).
    alone = Maximum(("s",), None, {"s": 7})([s * s + 100 * s, s * s, 100 * s])  # type: ignore[arg-type]
    assert alone == s * s + 100 * s


def test_a_negative_term_paid_for_by_a_larger_monomial_decides_the_sign() -> None:
    # b, s >= 1: 16 b s^2 + 17968 b s - 8 s >= 0, as b s >= s (the 8 s paid from 17968 b s);
    # b s - 2 s is -s at b = 1: undecided; s^2 - 3 s - 1 is -3 at s = 1: undecided.
    b, s = SymDim.of("b"), SymDim.of("s")
    assert _sign(16 * b * s * s + 17968 * b * s - 8 * s, ("b", "s"), None) == 1
    assert _sign(8 * s - 16 * b * s * s - 17968 * b * s, ("b", "s"), None) == -1
    assert _sign(b * s - 2 * s, ("b", "s"), None) is None
    assert _sign(s * s - 3 * s - 1, ("s",), None) is None
