"""The peak of live activation bytes as a formula (``symbolic/peak.py``), and the floors'
bounds that prove a step's bytes at least another's (``domain._below``). Expected values by
hand in the comments; each is also a concrete analysis's at the same point."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxcost
from onnxcost.symbolic.domain import _sign
from onnxcost.symdim import SymDim

PEAK = "peak_activation_bytes"


def _model(
    nodes: list[onnx.NodeProto], weights: dict[str, tuple[int, ...]], out: str
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s", 16])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
        [
            numpy_helper.from_array(np.ones(shape, np.float32), name)
            for name, shape in weights.items()
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _moving() -> onnx.ModelProto:
    """x [b, s, 16] (64·b·s bytes): big = x @ W [16, 250] (1,000·b·s); small = the sum of
    big's last axis (4·b·s); xt = x transposed; sc = x @ xt [b, s, s] (4·b·s²); o = sc @ small
    [b, s, 1] (4·b·s). Live at each step (a tensor from its writer to its last reader; o, the
    output, to the end):
      0 big:   x + big                = 1,064·b·s
      1 small: x + big + small        = 1,068·b·s
      2 xt:    x + small + xt         =   132·b·s
      3 sc:    x + small + xt + sc    =   132·b·s + 4·b·s²
      4 o:     small + sc + o         =     8·b·s + 4·b·s²
    so the peak is max(1,068·b·s, 4·b·s² + 132·b·s): step 1 for short sequences, step 3 past
    s = 234 (4·s = 1,068 - 132)."""
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["big"]),
        helper.make_node("ReduceSum", ["big", "axes"], ["small"], keepdims=1),
        helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["x", "xt"], ["sc"]),
        helper.make_node("MatMul", ["sc", "small"], ["o"]),
    ]
    m = _model(nodes, {"W": (16, 250)}, "o")
    m.graph.initializer.append(numpy_helper.from_array(np.array([-1], np.int64), "axes"))
    return m


def test_the_peak_that_moves_with_seq_is_the_max_of_two_steps() -> None:
    m = _moving()
    a = onnxcost.analyze(m, symbolic=True)
    peak = a.formulas[PEAK]
    assert peak is not None, a.warnings
    assert peak.python() == "max(1068*b*s, 132*b*s + 4*b*s**2)"
    # (b=2, s=3): 1,068·6 = 6,408 against 132·6 + 4·2·9 = 864: 6,408.
    # (b=1, s=300): 1,068·300 = 320,400 against 132·300 + 4·90,000 = 399,600: 399,600.
    # (b=0, s=5): nothing live but the weights: 0.
    for point, want in (
        ({"b": 2, "s": 3}, 6_408),
        ({"b": 1, "s": 300}, 399_600),
        ({"b": 0, "s": 5}, 0),
    ):
        assert a.at(**point).peak_activation_bytes == want
        assert onnxcost.analyze(m, dims=point).totals.peak_activation_bytes == want


def test_a_chain_peaks_at_one_step() -> None:
    """x [b, s, 16] (64·b·s) -> h = x @ W [16, 32] (128·b·s) -> r = Relu(h) (128·b·s) -> o =
    r @ W2 [32, 4] (16·b·s). Step 0: x + h = 192·b·s; step 1: h + r = 256·b·s; step 2: r + o
    = 144·b·s. The peak: 256·b·s, at b=3, s=5 3,840."""
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MatMul", ["r", "W2"], ["o"]),
    ]
    m = _model(nodes, {"W": (16, 32), "W2": (32, 4)}, "o")
    a = onnxcost.analyze(m, symbolic=True)
    assert a.formulas[PEAK].python() == "256*b*s"
    assert a.at(b=3, s=5).peak_activation_bytes == 3_840
    assert onnxcost.analyze(m, dims={"b": 3, "s": 5}).totals.peak_activation_bytes == 3_840


def test_the_json_and_the_terminal_give_the_peak() -> None:
    a = onnxcost.analyze(_moving(), symbolic=True)
    assert a.to_dict()["formulas"][PEAK] == "max(1068*b*s, 132*b*s + 4*b*s**2)"
    assert "peak activation bytes = max(1,068·b·s, 132·b·s + 4·b·s²)" in a.symbolic.describe()


def _floor(p: SymDim, d: int) -> SymDim:
    return p // d  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # F = ((h + 1) // 2)·((w + 1) // 2) >= (h/2)·(w/2): 480·b·F - 12·b·h·w >= 108·b·h·w
        ("480*b*F - 12*b*h*w", 1),
        # 4·F >= h·w, as above; equal where h and w are even
        ("4*b*F - b*h*w", 1),
        # (h + 1) // 2 <= h for h >= 1
        ("G - h", -1),
        # 2·((h + 1) // 2) - h: 1 for odd h, 0 for even: >= 0
        ("2*G - h", 1),
        # 3·((h + 1) // 2) - 2·h: 1 at h = 1, -1 at h = 4: no one sign
        ("3*G - 2*h", None),
    ],
)
def test_floors_are_bounded_to_prove_a_sign(text: str, want: int | None) -> None:
    b, h, w = (SymDim.of(x) for x in "bhw")
    g = _floor(h + 1, 2)
    f = g * _floor(w + 1, 2)
    d = eval(text, {}, {"b": b, "h": h, "w": w, "F": f, "G": g})
    assert _sign(d, ("b", "h", "w"), None) == want
    for hv in range(1, 9):  # the sign claimed holds at every small point
        for wv in range(1, 9):
            value = d.evaluate({"b": 2, "h": hv, "w": wv})
            assert want is None or value * want >= 0, (hv, wv, value)


def test_no_peak_where_a_node_s_walked_size_misses(monkeypatch: pytest.MonkeyPatch) -> None:
    from test_symbolic_slice import _slice_model

    from onnxcost.symbolic import onewalk

    # x[:, -1:] over s, with the walk's bytes written of every node made to miss the
    # analysis at every symbol = 1 (as a shape rule wrong there would): the peak is made from
    # those sizes, so it has no formula either, and the warning says why.
    check = onewalk._Class.check

    def missing(self: onewalk._Class, q: int, values: object, want: int, where: str) -> None:
        if q == onewalk._WRITTEN:
            self.misses.setdefault(q, "made to miss" + where)
        check(self, q, values, want, where)  # type: ignore[arg-type]

    monkeypatch.setattr(onewalk._Class, "check", missing)
    a = onnxcost.analyze(_slice_model(-1, 2**62), symbolic=True)
    assert a.formulas[PEAK] is None
    assert f"no exact formula for {PEAK}: a node's walked bytes written miss a concrete " in (
        " ".join(a.warnings)
    )
    assert any("'Slice_0'" in w and "bytes_written" in w for w in a.warnings)


def test_a_peak_is_exact_at_a_0_where_the_reading_from_1_is_not() -> None:
    from test_symbolic_slice import _slice_model

    # x [b, s] -> y = x[:, -1:] -> z = Relu(y), float32. Live at the Slice: x (4·b·s bytes)
    # and y (4·b·min(1, s)); at the Relu: y and z (4·b·min(1, s) each). The peak is
    # 4·b·s + 4·b·min(1, s): at b = 2, 8·s + 8 from s = 1 (s = 3: 32), and 0 at s = 0,
    # where within's reading (every symbol >= 1: min(1, s) = 1) said 8.
    a = onnxcost.analyze(_slice_model(-1, 2**62), symbolic=True)
    peak = a.formulas[PEAK]
    assert peak is not None, a.warnings
    assert peak.evaluate({"b": 2, "s": 0}) == 0
    assert peak.evaluate({"b": 2, "s": 3}) == 32
    for s in range(6):
        want = onnxcost.analyze(_slice_model(-1, 2**62), dims={"b": 2, "s": s})
        assert peak.evaluate({"b": 2, "s": s}) == want.totals.peak_activation_bytes, s


@pytest.mark.parametrize(("budget", "want"), [(1024, 1), (1998, 1), (1999, None), (2100, None)])
def test_a_position_bound_proves_a_sign_past_degree_1(budget: int, want: int | None) -> None:
    from onnxcost.symbolic.limits import PositionLimit

    # GPT-2 small's logits step against an attention step: 204,100·b·s - (12,288·b·s +
    # 96·b·s²) = b·s·(191,812 - 96·s), >= 0 exactly while s <= 1,998 (96 x 1,998 = 191,808;
    # at 1,999, 191,904 > 191,812). With s <= budget, s² <= budget·s: at least
    # (191,812 - 96·budget)·b·s, >= 0 for a budget up to 1,998; past it, undecided (it is
    # negative at s = budget, b = 1: not provable, and not so).
    b, s = SymDim.of("b"), SymDim.of("s")
    d = 204_100 * b * s - 12_288 * b * s - 96 * b * s * s
    limit = PositionLimit(positions=budget, symbols=("s",), budget=budget)
    assert _sign(d, ("b", "s"), limit) == want
    assert _sign(-d, ("b", "s"), limit) == (None if want is None else -want)
    assert _sign(d, ("b", "s"), None) is None  # no bound on s: b·s·(191,812 - 96·s) < 0 late


def test_gpt2_small_peaks_at_its_logits_over_its_positions() -> None:
    # By hand (docs/symbolic.md): for batch >= 1 the LM head's step holds the most, the
    # logits (50,257 x 4 = 201,028 bytes a token) and the final hidden state (768 x 4 =
    # 3,072): 204,100·batch·seq at every seq within the 1,024 positions, where the attention
    # scores (96·batch·seq² more) pass it only from seq = 1,999. At batch = 0 only what has
    # no batch dim is live: the positions (int64, 8 bytes) and their embeddings (768 x 4 =
    # 3,072), 3,080·seq. So two steps, where the linear proof kept six.
    a = onnxcost.analyze("gpt2", symbolic=True)  # the built-in
    peak = a.formulas[PEAK]
    assert peak is not None, a.warnings
    assert peak.expression is not None
    assert str(peak.expression).startswith("max(")
    assert str(peak.expression).count(",") == 1
    for batch, seq in ((1, 1), (2, 1000), (8, 1024), (3, 77)):
        assert peak.evaluate({"batch": batch, "seq": seq}) == 204_100 * batch * seq
    assert peak.evaluate({"batch": 0, "seq": 500}) == 3_080 * 500


def test_a_formula_row_too_long_is_kept_whole_and_a_max_opened() -> None:
    from onnxcost.report.table import formula_rows

    lead = "  backward FLOPs = "  # 19 columns
    # A term of 41 columns ends a line of 60 only without its " +" (19 + 41 + 2 = 62): the
    # max is opened, one argument a line under its first.
    rows = formula_rows(lead, "2·b·h + max(0, -4 + 16·b·⌊(1 + h)/2⌋·⌊(1 + w)/2⌋) + 3·b", 60)
    assert rows == [
        "  backward FLOPs = 2·b·h +",
        "                   max(0,",
        "                       -4 + 16·b·⌊(1 + h)/2⌋·⌊(1 + w)/2⌋) +",
        "                   3·b",
    ]
    # One term longer than a line: whole (it was cut in its middle with "…", another formula).
    long_term = "5·b·min(2·⌊(1 + h)/2⌋, h)·min(2·⌊(1 + w)/2⌋, w)·min(3·⌊(1 + d)/3⌋, d)"
    rows = formula_rows(lead, f"1 + {long_term}", 40)
    assert rows == ["  backward FLOPs = 1 +", " " * 19 + long_term]
    assert all("…" not in r for r in rows)


def test_within_decides_only_what_holds_at_an_allowed_0_too() -> None:
    from onnxcost.symbolic.domain import within
    from onnxcost.symdim import sym_max, sym_min

    b, h, w = (SymDim.of(s) for s in "bhw")
    symbols = ("b", "h", "w")
    # A bias gradient's adds over an [b, 8, h, w] output: max(0, 8·b·h·w - 8). For every
    # symbol >= 1 it is 8·b·h·w - 8 (>= 0 at b = h = w = 1), but at b = 0 it is 0, not -8:
    # with b's 0 allowed, the max stays.
    adds = sym_max(0, 8 * b * h * w - 8)
    assert within(adds, symbols, None) == 8 * b * h * w - 8
    assert within(adds, symbols, None, zeros=("b",)) == adds
    # A crop to x's height after a stride-2 down and up: min(2·⌊(h + 1)/2⌋, h) = h for every
    # h >= 1 (2·⌈h/2⌉ >= h), and at b = 0 both sides are what they were: decided all the same.
    crop = sym_min(2 * ((h + 1) // 2), h)
    assert within(crop, symbols, None, zeros=("b",)) == h
