"""``onnxcost llm`` on hostile flags: huge token counts, a billion generated tokens (summed in
closed form), ceilings that are 0, infinite or NaN (issue 27)."""

from __future__ import annotations

import json
import random
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import onnxcost.llm.cost
from onnxcost import zoo
from onnxcost.bench.roofline import Ceilings
from onnxcost.cli.app import app
from onnxcost.errors import OnnxcostError, UsageError
from onnxcost.llm.cost import llm_report
from onnxcost.symbolic.formulas import Formula, sum_over
from onnxcost.symbolic.poly import SUM_BY_POINT, NoClosedFormError
from onnxcost.symdim import SymDim, sym_min

runner = CliRunner()

TINY_GPT2 = {"layers": 2, "hidden": 32, "heads": 4, "vocab": 64, "max_positions": 64}
KEYS = ("macs", "flops", "bytes_read", "bytes_written")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("llm_bounds") / "gpt2_kv.onnx"
    return zoo.save("gpt2", path, weights=False, params={**TINY_GPT2, "kv_cache": True})


def _one_line(code: int, output: str, want: int) -> str:
    assert code == want, output
    assert "Traceback" not in output
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    return lines[0]


# --- the generation in closed form ------------------------------------------------------------


def test_closed_form_equals_the_step_loop(tiny: Path) -> None:
    n, b = 5, 3
    r = llm_report(tiny, prompt=n, generate=50, batch=b)
    formulas = [r.decode_formulas[k] for k in KEYS]
    for m in range(1, 51):  # M tokens: decode steps at past = N .. N + M - 2
        for key, f in zip(KEYS, formulas, strict=True):
            assert f is not None
            loop = sum(f.evaluate({"batch": b, "past_seq": p}) for p in range(n, n + m - 1))
            assert sum_over(f, {"batch": b}, "past_seq", n, n + m - 2) == loop, (key, m)
    for m in (1, 2, 3, 50):  # and through llm_report
        got = llm_report(tiny, prompt=n, generate=m, batch=b).decode_total
        for key, f in zip(KEYS, formulas, strict=True):
            assert f is not None
            loop = sum(f.evaluate({"batch": b, "past_seq": p}) for p in range(n, n + m - 1))
            assert getattr(got, key) == loop, (key, m)
    # by hand, M = 4 at b = 3: MACs of a step A*b + C*b*(P + 1), A = 26,624 + ... per the
    # formula 26,752*b + 128*b*P; P = 5, 6, 7: 3 * 26,752 * 3 + 128 * 3 * 18 = 247,680
    got = llm_report(tiny, prompt=n, generate=4, batch=b).decode_total
    assert got.macs == 3 * 26_752 * 3 + 128 * 3 * (5 + 6 + 7) == 247_680


def test_a_billion_tokens_are_summed_not_stepped(
    tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = 0
    evaluate = Formula.evaluate

    def counted(self: Formula, values: Any) -> int:
        nonlocal calls
        calls += 1
        if calls > 10_000:  # the step-by-step loop makes 4 * 10**9 of them
            raise AssertionError("the generation is summed step by step")
        return evaluate(self, values)

    monkeypatch.setattr(Formula, "evaluate", counted)
    # The sum, not the positions limit, is under test: the model is taken as one without a
    # position table (a decoder whose positions are computed has no limit to find).
    monkeypatch.setattr(onnxcost.llm.cost, "position_limit", lambda proto: None)
    m = 10**9
    r = llm_report(tiny, prompt=4, generate=m)
    # MACs of a step at batch 1: 26,752 + 128*P, P = 4 .. 10**9 + 2 (M - 1 steps):
    # 26,752*(M - 1) + 128 * (sum of P) where sum of P = (4 + 10**9 + 2) * (M - 1) / 2
    steps = m - 1
    assert r.decode_total.macs == 26_752 * steps + 128 * (4 + m + 2) * steps // 2
    f = r.decode_formulas["macs"]
    assert f is not None
    start = time.perf_counter()
    sum_over(f, {"batch": 1}, "past_seq", 4, m + 2)
    assert time.perf_counter() - start < 0.1


def test_clamped_parts_sum_as_their_loop() -> None:
    # max(0, p) where p changes sign inside the range, and a total with clamped parts: the
    # runs where p >= 0 are found exactly (p = x**2 - 10x + 16 is < 0 only at 3 .. 7).
    f = Formula(("b", "x"), (((0, 0), 16), ((0, 1), -10), ((0, 2), 1)), clamped=True)
    assert sum_over(f, {"b": 1}, "x", 0, 20) == sum(max(0, x * x - 10 * x + 16) for x in range(21))
    rng = random.Random(27)
    for _ in range(500):
        terms = {(eb, ex): rng.randint(-40, 40) for eb in range(2) for ex in range(4)}
        g = Formula(("b", "x"), tuple(terms.items()), clamped=rng.random() < 0.5)
        part = Formula(("b", "x"), (((0, 1), 1), ((0, 0), -rng.randint(0, 30))), clamped=True)
        if rng.random() < 0.5:
            g = replace(g, parts=((rng.randint(1, 4), part),))
        b, lo = rng.randint(0, 3), rng.randint(-20, 20)
        hi = lo + rng.randint(-1, 60)
        loop = sum(g.evaluate({"b": b, "x": x}) for x in range(lo, hi + 1))
        assert sum_over(g, {"b": b}, "x", lo, hi) == loop, (g, b, lo, hi)
    # n(n - 1)/2, integer-valued with a denominator: 0 + 0 + 1 + 3 + 6 + 10 = 20 for n = 0..5
    half = Formula(("n",), (((1,), -1), ((2,), 1)), denominator=2)
    assert sum_over(half, {}, "n", 0, 5) == 20


def test_a_floor_of_the_summed_symbol_is_summed_by_points_or_refused() -> None:
    # f = x*floor((b + 1)/2) + 3*floor(x/2) - min(x, 4): x inside a floor and a min.
    b, x = SymDim.of("b"), SymDim.of("x")
    expr = x * ((b + 1) // 2) + 3 * (x // 2) - SymDim.of(sym_min(x, 4))
    f = Formula(("b", "x"), (), expression=expr)
    # at b = 3 (floor(4/2) = 2), x = 0 .. 5: 2x + 3*floor(x/2) - min(x, 4) is
    # 0, 2 - 1 = 1, 4 + 3 - 2 = 5, 6 + 3 - 3 = 6, 8 + 6 - 4 = 10, 10 + 6 - 4 = 12: 34
    assert sum_over(f, {"b": 3}, "x", 0, 5) == 34
    clamped = replace(f, clamped=True)  # max(0, ...) of each point, the same here: all >= 0
    assert sum_over(clamped, {"b": 3}, "x", 0, 5) == 34
    with pytest.raises(NoClosedFormError, match="x is inside a floor, min or max"):
        sum_over(f, {"b": 3}, "x", 0, SUM_BY_POINT)  # SUM_BY_POINT + 1 points
    # b inside the floor but x outside: a polynomial in x once b is bound, in closed form
    g = Formula(("b", "x"), (), expression=x * x * ((b + 1) // 2) + x)
    # at b = 4 (floor(5/2) = 2): sum of 2x^2 + x over x = 1 .. 10**6, with
    # sum x^2 = n(n + 1)(2n + 1)/6 and sum x = n(n + 1)/2
    n = 10**6
    assert sum_over(g, {"b": 4}, "x", 1, n) == 2 * n * (n + 1) * (2 * n + 1) // 6 + n * (n + 1) // 2


def test_llm_sums_step_by_step_where_there_is_no_closed_form(
    tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A decode formula with the cache length inside a floor has no closed-form sum: llm adds
    # the steps (each the formula's value, exact), and past 64 steps says it cannot.
    want = llm_report(tiny, prompt=5, generate=20, batch=2).decode_total

    def refuse(*args: object) -> int:
        raise NoClosedFormError("no closed form")

    monkeypatch.setattr(onnxcost.llm.cost, "sum_over", refuse)
    assert llm_report(tiny, prompt=5, generate=20, batch=2).decode_total == want
    monkeypatch.setattr(onnxcost.llm.cost, "position_limit", lambda proto: None)
    with pytest.raises(OnnxcostError, match="99 steps are too many to analyse one by one"):
        llm_report(tiny, prompt=5, generate=100, batch=2)


# --- flags out of range -----------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--prompt", "--batch", "--generate"])
def test_token_counts_past_the_range_are_one_line(tiny: Path, flag: str) -> None:
    args = {"--prompt": "3", "--generate": "2", "--batch": "1", flag: str(2**70)}
    r = runner.invoke(app, ["llm", str(tiny), *(x for kv in args.items() for x in kv)])
    line = _one_line(r.exit_code, r.output, 2)
    assert f"{flag} {2**70} is out of range" in line
    assert "between 1 and 2**40" in line
    with pytest.raises(UsageError, match="between 1 and 2"):
        llm_report(tiny, prompt=3, generate=2, batch=2**41)


@pytest.mark.parametrize("value", ["0", "inf", "nan", "1e-320"])
@pytest.mark.parametrize("flag", ["--peak-tflops", "--bandwidth-gbs"])
def test_ceilings_that_are_not_finite_are_refused(tiny: Path, flag: str, value: str) -> None:
    ceiling = {"--peak-tflops": "100", "--bandwidth-gbs": "1000", flag: value}
    args = ["llm", str(tiny), "--prompt", "3", "--generate", "2", "-f", "html"]
    r = runner.invoke(app, [*args, *(x for kv in ceiling.items() for x in kv)])
    line = _one_line(r.exit_code, r.output, 2)
    assert line.startswith(f"onnxcost: error: {flag} ")
    assert "out of range; pass a number from" in line


@pytest.mark.parametrize(
    ("peak", "bandwidth"), [(float("inf"), 1e12), (1e14, float("nan")), (1e-310, 1e12)]
)
def test_the_library_refuses_a_ceiling_with_no_finite_ridge(
    tiny: Path, peak: float, bandwidth: float
) -> None:
    ceilings = Ceilings(peak, bandwidth, "p", "d")
    with pytest.raises(UsageError, match="must lie between 1000 and 1e\\+21"):
        llm_report(tiny, prompt=3, generate=2, ceilings=ceilings)


def test_json_at_the_ends_of_the_ceiling_range_is_strict(tiny: Path) -> None:
    def no_constant(name: str) -> None:
        raise AssertionError(f"{name} in JSON")

    for peak, bandwidth in (("1e-9", "1e12"), ("1e9", "1e-6")):
        args = ["llm", str(tiny), "--prompt", "3", "--generate", "5", "-f", "json"]
        r = runner.invoke(app, [*args, "--peak-tflops", peak, "--bandwidth-gbs", bandwidth])
        assert r.exit_code == 0, r.output
        data = json.loads(r.stdout, parse_constant=no_constant)
        ridge = data["roofline"]["ceiling"]["ridge_flops_per_byte"]
        # 1e-9 TFLOP/s = 1e3 FLOP/s over 1e12 GB/s = 1e21 B/s; 1e21 / 1e3 the other way
        assert ridge == pytest.approx(1e3 / 1e21 if peak == "1e-9" else 1e21 / 1e3)
