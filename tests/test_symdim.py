"""The symbolic dims' algebra (``onnxcost.symdim``, issue 22): canonical form, exact
floor/ceil-division, min and max; every value checked against Python's own integer
arithmetic or by hand."""

from __future__ import annotations

import ast
import random

import pytest

from onnxcost.symdim import SymDim, as_dim, sym_max, sym_min

b, s = SymDim.of("batch"), SymDim.of("seq")


def test_a_polynomial_is_canonical_and_evaluates() -> None:
    p = 2 * b * s + 3
    assert p == s * b * 2 + 3
    assert hash(p) == hash(s * b * 2 + 3)
    assert (s + 1) * (s - 1) == s * s - 1  # the cross terms cancel
    assert p.evaluate({"batch": 4, "seq": 5}) == 43  # 2*4*5 + 3
    assert str(p) == "2*batch*seq + 3"
    assert str(s * s - 2 * s) == "seq**2 - 2*seq"
    assert (p - p) == 0
    assert str(p - p) == "0"
    assert p.symbols == {"batch", "seq"}
    assert p.is_polynomial
    assert not p.is_constant
    assert as_dim(SymDim.of(7)) == 7
    assert isinstance(as_dim(SymDim.of(7)), int)


def test_floor_division_takes_out_what_it_divides() -> None:
    assert (4 * s + 6) // 2 == 2 * s + 3  # every coefficient divisible: a polynomial
    assert ((4 * s + 6) // 2).is_polynomial
    # (4s + 7) // 2 = 2s + 3 + floor(1/2) = 2s + 3: the constant folds too.
    assert (4 * s + 7) // 2 == 2 * s + 3
    # (s + 7) // 4 = 1 + floor((s + 3) / 4): a floor atom stays, the 4 of the 7 leaves.
    q = (s + 7) // 4
    assert not q.is_polynomial
    assert str(q) == "((seq + 3) // 4) + 1"
    assert [q.evaluate({"seq": v}) for v in range(6)] == [1, 2, 2, 2, 2, 3]  # 7//4 .. 12//4
    with pytest.raises(ValueError, match="int >= 1"):
        s // 0


def test_conv_and_pool_output_sizes() -> None:
    # Conv k=3, stride 2, pads 1+1, dilation 1: (h + 2 - 3) // 2 + 1; at h = 224:
    # 223 // 2 + 1 = 112 (ResNet's stem: 224 -> 112).
    h = SymDim.of("h")
    out = (h + 2 - (3 - 1) - 1) // 2 + 1
    assert out.evaluate({"h": 224}) == 112
    # MaxPool k=3, stride 2, ceil_mode: ceil((h - 3) / 2) + 1; at h = 8: ceil(5/2) + 1 = 4.
    ceil_out = (h - 3).ceil_div(2) + 1
    assert ceil_out.evaluate({"h": 8}) == 4
    assert ceil_out.evaluate({"h": 9}) == 4  # ceil(6/2) + 1


def test_min_and_max_fold_where_they_can() -> None:
    assert sym_min(3, 5) == 3
    assert sym_max(3, 5) == 5
    assert sym_min(s, s) == s
    # seq <= seq + 1 for every seq: min is seq, max seq + 1 (transformers' mask arithmetic)
    assert (sym_min(s, s + 1), sym_max(s + 1, s)) == (s, s + 1)
    assert (sym_min(s + 2, s - 3), sym_max(s + 2, s - 3)) == (s - 3, s + 2)
    m = sym_min(s, 16)  # a Slice end clamped to a 16-row table
    assert isinstance(m, SymDim)
    assert not m.is_polynomial
    assert m.evaluate({"seq": 20}) == 16
    assert m.evaluate({"seq": 9}) == 9
    assert sym_min(s, 16) == sym_min(16, s)  # stored sorted
    assert (m + 1).evaluate({"seq": 30}) == 17
    assert str(m) == "min(16, seq)"
    assert eval(str(m + 1), {"min": min}, {"seq": 4}) == 5  # Python syntax


def _random_dim(rng: random.Random, depth: int = 0) -> SymDim:
    x = SymDim.of(rng.randint(-5, 9))
    for _ in range(rng.randint(1, 3)):
        term = SymDim.of(rng.randint(-4, 6))
        for name in rng.sample(["a", "b", "c"], rng.randint(0, 2)):
            term = term * SymDim.of(name)
        x = x + term
    if depth < 2 and rng.random() < 0.5:
        op = rng.choice(["floor", "ceil", "min", "max", "mul"])
        y = _random_dim(rng, depth + 1)
        d = rng.randint(1, 6)
        x = {
            "floor": lambda: x // d,
            "ceil": lambda: x.ceil_div(d),
            "min": lambda: SymDim.of(sym_min(x, y)),
            "max": lambda: SymDim.of(sym_max(x, y)),
            "mul": lambda: x * y,
        }[op]()
    return x


@pytest.mark.parametrize("seed", range(300))
def test_random_expressions_equal_python_integer_arithmetic(seed: int) -> None:
    rng = random.Random(seed)
    x, y = _random_dim(rng), _random_dim(rng)
    d = rng.randint(1, 7)
    for _ in range(5):
        v = {n: rng.randint(-20, 40) for n in "abc"}
        xv, yv = x.evaluate(v), y.evaluate(v)
        # Python's own ints are the reference: // floors, -(-p // d) is the ceiling.
        assert (x + y).evaluate(v) == xv + yv
        assert (x - y).evaluate(v) == xv - yv
        assert (x * y).evaluate(v) == xv * yv
        assert (x // d).evaluate(v) == xv // d
        assert x.ceil_div(d).evaluate(v) == -(-xv // d)
        assert SymDim.of(sym_min(x, y)).evaluate(v) == min(xv, yv)
        assert SymDim.of(sym_max(x, y)).evaluate(v) == max(xv, yv)
        # The text is Python that gives the same value.
        tree = ast.parse(str(x // d), mode="eval")
        assert eval(compile(tree, "<dim>", "eval"), {"min": min, "max": max}, v) == xv // d


def test_unbounded_reads_a_clamp_by_a_constant_as_its_argument() -> None:
    m = SymDim.of(sym_min(s + 1, 1024))
    assert (2 * m + b).unbounded() == 2 * s + 2 + b  # 2 * (s + 1) + batch
    assert SymDim.of(sym_max(s, 3)).unbounded() == SymDim.of(sym_max(s, 3))  # max stays


def test_a_symbolic_dim_has_no_truth_value() -> None:
    # `if n` in a cost formula must not take the non-zero branch for a symbol that may be 0.
    with pytest.raises(TypeError, match="depends on its symbols"):
        bool(s)
    assert not SymDim.of(0)
    assert SymDim.of(3)


def test_adding_or_scaling_by_an_int_keeps_the_form_canonical() -> None:
    # The int fast paths of + and *: a cancelled constant and a zero scale leave no term, so
    # the results equal (and hash as) the dims made the long way.
    assert (s + 3) + (-3) == s
    assert hash((s + 3) + (-3)) == hash(s)
    assert (s + 3) + (-3) == s + SymDim.of(0)
    assert (2 * s) * 0 == 0
    assert ((2 * s) * 0).is_constant
    assert ((2 * s) * 0).terms == {}
    assert SymDim.of(0).terms == {}
    assert (s * 3).evaluate({"seq": 5}) == 15


def test_a_floor_of_a_floor_is_one_floor() -> None:
    # Two stride-2 stages: floor((1 + floor((1 + h) / 2)) / 2) == floor((h + 3) / 4), as
    # floor(floor(x / a) / d) == floor(x / (a*d)) for an integer x
    h = SymDim.of("h")
    twice = (1 + (1 + h) // 2) // 2
    assert twice == (h + 3) // 4
    assert str(twice) == "((h + 3) // 4)"
    for v in range(-20, 40):
        assert twice.evaluate({"h": v}) == (1 + (1 + v) // 2) // 2
