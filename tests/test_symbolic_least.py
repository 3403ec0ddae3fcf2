"""A symbol's least value (issue 22: wav2vec2): ``--symbolic`` on a model that is valid only
from some size on, found from the walk's floors or given (``--dim n>=50``, ``least=``)."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_symbolic_onewalk import _conv_model, _every_formula_holds
from typer.testing import CliRunner

import onnxcost
from onnxcost.cli.app import app
from onnxcost.errors import ShapeError, UsageError
from onnxcost.predict.sweep import predict_sweep
from onnxcost.shapes.flags import parse_dim, parse_least
from onnxcost.symbolic import formulas
from onnxcost.symbolic.shape_core import _UncarriedError
from onnxcost.symbolic.shapes import _exact_div
from onnxcost.symdim import SymDim

# --- a stride-4 chain: least n = 24 -----------------------------------------------------------


def _chain() -> onnx.ModelProto:
    """x [b, 1, n] -> Conv1d kernel 8, stride 4, 2 filters -> Conv1d kernel 8, stride 4,
    3 filters; no pads, no bias.

    By hand, ONNX's sizes (its division rounds toward 0): n1 = trunc((n - 8) / 4) + 1 and
    n2 = trunc((n1 - 8) / 4) + 1. n2 >= 1 needs (n1 - 8) / 4 > -1, i.e. n1 >= 5, i.e.
    trunc((n - 8) / 4) >= 4, i.e. n >= 24: the least n at which every size is 1 or more is
    24 (at n = 23: n1 = trunc(15 / 4) + 1 = 4, n2 = trunc(-4 / 4) + 1 = 0; from n = 5 to 23
    the model analyses with an empty output, below 5 n2 is negative and it does not).
    MACs: the first Conv b * 2 * n1 * (1 * 8) = 16*b*n1, the second b * 3 * n2 * (2 * 8) =
    48*b*n2."""
    rng = np.random.default_rng(0)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], kernel_shape=[8], strides=[4]),
        helper.make_node("Conv", ["c1", "w2"], ["c2"], kernel_shape=[8], strides=[4]),
    ]
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 1, "n"])],
        [helper.make_tensor_value_info("c2", TensorProto.FLOAT, None)],
        [weight("w1", 2, 1, 8), weight("w2", 3, 2, 8)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_least_length_is_found_from_the_walks_floors() -> None:
    model = _chain()
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.least == {"n": 24}
    assert a.symbolic.analyses == 1  # one walk, not the sampler
    assert a.symbolic.zero_allowed["n"] is False
    # the analysis reported is the one at b = 1, n = 24: n1 = 5, n2 = 1,
    # MACs = 16 * 1 * 5 + 48 * 1 * 1 = 80 + 48 = 128
    assert a.totals.macs == 128
    assert "the counts are at b=1, n=24" in a.symbolic.describe()[0]
    said = (
        "the formulas hold for n >= 24 (the least n at which every size is 1 or more: tensor "
        "'c2' has a dim of 0 at n=23); the counts are at n=24"
    )
    assert said in a.warnings, a.warnings
    macs = a.formulas["macs"]
    assert macs is not None
    # b = 2, n = 100: n1 = trunc(92 / 4) + 1 = 24, n2 = trunc(16 / 4) + 1 = 5:
    # MACs = 2 * (16 * 24 + 48 * 5) = 2 * (384 + 240) = 1,248
    assert macs(b=2, n=100) == 1_248
    assert macs(b=1, n=24) == 128
    rng = random.Random(7)
    points = [{"b": 1, "n": 24}, {"b": 3, "n": 24}, {"b": 2, "n": 27}, {"b": 1, "n": 36}]
    points += [{"b": rng.randint(1, 9), "n": rng.randint(24, 5_000)} for _ in range(6)]
    for point in points:
        _every_formula_holds(a, model, point)
    with pytest.raises(ShapeError, match="n=23 is below 24"):
        a.at(b=1, n=23)


def test_a_least_value_given_holds_from_there_and_one_too_small_is_one_line() -> None:
    model = _chain()
    a = onnxcost.analyze(model, symbolic=True, least={"n": 50})
    assert a.symbolic is not None
    assert a.symbolic.least == {"n": 50}
    # at b = 1, n = 50: n1 = trunc(42 / 4) + 1 = 11, n2 = trunc(3 / 4) + 1 = 1:
    # MACs = 16 * 11 + 48 * 1 = 224
    assert a.totals.macs == 224
    assert any("n >= 50 (the least value given)" in w for w in a.warnings)
    for point in ({"b": 1, "n": 50}, {"b": 4, "n": 51}, {"b": 2, "n": 777}):
        _every_formula_holds(a, model, point)
    # from n = 5 the model analyses (an empty output up to 23): a least value there is taken
    low = onnxcost.analyze(model, symbolic=True, least={"n": 5})
    for point in ({"b": 1, "n": 5}, {"b": 2, "n": 23}, {"b": 3, "n": 24}, {"b": 1, "n": 99}):
        _every_formula_holds(low, model, point)
    # below 5 it does not: one line, with the walk's least value
    with pytest.raises(ShapeError, match=r"n>=4: the model's shapes do not resolve.*n>=24"):
        onnxcost.analyze(model, symbolic=True, least={"n": 4})
    with pytest.raises(ShapeError, match=r"matches no free symbolic dim.*b, n"):
        onnxcost.analyze(model, symbolic=True, least={"q": 3})
    with pytest.raises(ShapeError, match="n is set by --dim n=40"):
        onnxcost.analyze(model, symbolic=True, dims={"n": 40}, least={"n": 24})
    with pytest.raises(UsageError, match="needs symbolic=True"):
        onnxcost.analyze(model, least={"n": 24})


def test_a_least_value_given_where_the_model_does_not_analyse_at_one() -> None:
    # b >= 2 given: the analysis at b = 2, n = 1 does not run at all (a negative Conv
    # output); the walk still finds n's least value, 24
    a = onnxcost.analyze(_chain(), symbolic=True, least={"b": 2})
    assert a.symbolic is not None
    assert a.symbolic.least == {"b": 2, "n": 24}
    # b = 2, n = 24: MACs = 2 * 128 = 256
    assert a.totals.macs == 256


@pytest.mark.parametrize("pads", [1, 0])
def test_a_model_valid_from_one_keeps_its_output(pads: int) -> None:
    # Conv 3x3 stride 2 pad 1: every walked size is floor((h + 1) / 2) >= 1 from h = 1.
    # Without pads, trunc((h - 3) / 2) + 1 is 0 at h = 1 (an empty output), and the model
    # analyses there: it needs no least value either.
    a = onnxcost.analyze(_conv_model(pads=pads), symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.least == {}
    assert "least" not in a.to_dict()
    assert "the counts are at b=1, h=1, w=1" in a.symbolic.describe()[0]


# --- the sampler, from a least value ------------------------------------------------------------


def _reshaped(start: int = 0, *, widen: bool = False) -> onnx.ModelProto:
    """x [b, s] -> y = x[:, start:] ([b, s - start] from start on), or x joined with its first
    column (``widen``: [b, s + 1]) -> z = Reshape(y, [-1, c]) for y's c columns -> MatMul(z^T,
    z): c * b * c MACs, and a Reshape whose -1 is the elements over a sum of terms (b*c / c)."""

    def ints(name: str, values: list[int]) -> onnx.TensorProto:
        return numpy_helper.from_array(np.array(values, dtype=np.int64), name)

    front = (
        [
            helper.make_node("Slice", ["x", "zero", "one", "one"], ["first"]),
            helper.make_node("Concat", ["x", "first"], ["y"], axis=1),
        ]
        if widen
        else [helper.make_node("Slice", ["x", "start", "big", "one"], ["y"])]
    )
    nodes = [
        *front,
        helper.make_node("Shape", ["y"], ["sy"]),
        helper.make_node("Slice", ["sy", "one", "two"], ["n"]),
        helper.make_node("Concat", ["minus", "n"], ["target"], axis=0),
        helper.make_node("Reshape", ["y", "target"], ["z"]),
        helper.make_node("Transpose", ["z"], ["zt"], perm=[1, 0]),
        helper.make_node("MatMul", ["zt", "z"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes,
        "reshaped",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s"])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [
            ints("start", [start]),
            ints("zero", [0]),
            ints("one", [1]),
            ints("two", [2]),
            ints("big", [2**62]),
            ints("minus", [-1]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_sampler_takes_a_least_value_given(monkeypatch: pytest.MonkeyPatch) -> None:
    # x[:, 3:] has s - 3 columns: none at s = 3 (the Reshape's -1 then divides by 0); s >= 4
    model = _reshaped(3)
    monkeypatch.setattr(formulas, "one_walk_costs", lambda *args, **kwargs: None)
    a = onnxcost.analyze(model, symbolic=True, least={"s": 4})
    assert a.symbolic is not None
    assert a.symbolic.analyses > 1  # sampled
    assert a.symbolic.least == {"s": 4}
    # MACs = (s - 3)^2 * b = 9b - 6bs + bs^2; at b = 2, s = 10: 7 * 2 * 7 = 98
    macs = a.formulas["macs"]
    assert macs is not None
    assert macs.python() == "9*b - 6*b*s + b*s**2"
    assert macs(b=2, s=10) == 98
    # at b = 1, s = 4 (the least point): 1 * 1 * 1 = 1
    assert a.totals.macs == 1
    for point in ({"b": 1, "s": 4}, {"b": 5, "s": 4}, {"b": 2, "s": 10}, {"b": 7, "s": 33}):
        _every_formula_holds(a, model, point)


def test_training_formulas_are_sampled_from_a_least_value() -> None:
    # the training pass over the walk takes every symbol from 1: with a least value the
    # training totals are sampled from it, in the model's s. No weight trains here, so the
    # training FLOPs are the forward's, 2 * MACs = 2 * (s - 3)^2 * b = 18b - 12bs + 2bs^2;
    # at b = 3, s = 9: 2 * 36 * 3 = 216
    model = _reshaped(3)
    a = onnxcost.analyze(model, symbolic=True, least={"s": 4}, training=True)
    assert a.symbolic is not None
    flops = a.formulas["training_flops"]
    assert flops is not None
    assert flops.python() == "18*b - 12*b*s + 2*b*s**2"
    assert flops(b=3, s=9) == 216
    assert any("takes every symbol from 1, not from a least value" in w for w in a.warnings)
    for point in ({"b": 1, "s": 4}, {"b": 3, "s": 9}):
        want = onnxcost.analyze(model, dims=point, training=True).totals.training
        assert want is not None
        assert a.at(**point).training_flops == want.training_flops


# --- the flag ---------------------------------------------------------------------------------


def test_the_least_flag_is_parsed_and_a_value_keeps_its_form() -> None:
    assert parse_least("length>=400") == ("length", 400)
    assert parse_least(" n >= 36 ") == ("n", 36)
    assert parse_dim("batch=8") == ("batch", 8)  # SYMBOL=N as before
    for bad in ("n>=", ">=3", "n>=x", "n>=-1", "n>=0", "n>=9" * 10):
        with pytest.raises(UsageError, match="--dim"):
            parse_least(bad)
    with pytest.raises(UsageError, match="only analyze --symbolic takes"):
        parse_dim("n>=36")


def _saved(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "chain.onnx"
    onnx.save(_chain(), path)
    return path, hashlib.md5(path.read_bytes()).hexdigest()


def test_the_cli_gives_the_least_point_in_text_and_json(tmp_path: Path) -> None:
    path, digest = _saved(tmp_path)
    runner = CliRunner()
    text = runner.invoke(app, ["analyze", str(path), "--symbolic"])
    assert text.exit_code == 0, text.output
    assert "Formulas in b, n (exact; the counts are at b=1, n=24)" in text.output
    assert "the formulas hold for n >= 24" in text.output
    out = runner.invoke(app, ["analyze", str(path), "--symbolic", "-f", "json"])
    assert out.exit_code == 0, out.output
    data: dict[str, Any] = json.loads(out.output)
    assert data["least"] == {"n": 24}
    assert data["symbols"] == ["b", "n"]
    assert data["totals"]["macs"] == 128  # at b = 1, n = 24 (above)
    # the JSON's formula evaluates to the hand count at b = 2, n = 100 (above): 1,248
    assert eval(data["formulas"]["macs"], {"max": max, "min": min}, {"b": 2, "n": 100}) == 1_248
    given = runner.invoke(app, ["analyze", str(path), "--symbolic", "--dim", "n>=50"])
    assert given.exit_code == 0, given.output
    assert "the counts are at b=1, n=50" in given.output
    assert hashlib.md5(path.read_bytes()).hexdigest() == digest


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--symbolic", "--dim", "n>=4"], 1, "do not resolve there"),
        (["--symbolic", "--dim", "q>=3"], 1, "matches no free symbolic dim"),
        (["--symbolic", "--dim", "n>=x"], 2, "is not SYMBOL>=N"),
        (["--symbolic", "--dim", "n>=0"], 2, "between 1 and 2**62"),
        (["--dim", "n>=40"], 2, "add --symbolic"),
        (["--symbolic", "--dim", "n=40", "--dim", "n>=24"], 1, "give one of them"),
    ],
)
def test_a_bad_least_value_is_one_line(
    tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    path, digest = _saved(tmp_path)
    result = CliRunner().invoke(app, ["analyze", str(path), *args])
    assert result.exit_code == code, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith("onnxcost: error: ")
    assert message in lines[0]
    assert "Traceback" not in result.output
    assert hashlib.md5(path.read_bytes()).hexdigest() == digest


# --- Reshape's -1 over a sum (wav2vec2's view of its frames) ------------------------------------


def test_long_division_finds_the_quotient_or_refuses() -> None:
    b, s = SymDim.of("b"), SymDim.of("s")
    frames = SymDim.of("length") // 10 - 1  # wav2vec2's floor(length / 10) - 1 frames
    # 32*b*frames / (16*b*frames) = 2, each a sum of two terms once expanded
    assert _exact_div(32 * b * frames, 16 * b * frames) == 2
    assert _exact_div(b * s + b, s + 1) == b
    # (s + 1) * (b*s - b) = b*s^2 - b*s + b*s - b = b*s^2 - b
    assert _exact_div(b * s * s - b, s + 1) == b * s - b
    for p, q in ((b * s + 1, s + 1), (2 * s + 1, 2 * s + 2), (b * s, 2 * s + 2)):
        with pytest.raises(_UncarriedError, match="-1 of Reshape"):
            _exact_div(p, q)


def test_a_reshapes_minus_one_over_a_sum_is_walked() -> None:
    # x [b, s] joined with its first column: y [b, s + 1]; its Reshape to [-1, s + 1] has
    # -1 = (b*s + b) / (s + 1) = b, a quotient by a divisor of two terms (long division): the
    # walk carries it (it was sampled, 12 analyses, for want of that), and MatMul(z^T, z)
    # costs (s + 1) * b * (s + 1) MACs; at b = 3, s = 5: 6 * 3 * 6 = 108.
    model = _reshaped(widen=True)
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1
    macs = a.formulas["macs"]
    assert macs is not None
    assert macs(b=3, s=5) == 108
    for point in ({"b": 1, "s": 1}, {"b": 3, "s": 5}, {"b": 2, "s": 40}):
        _every_formula_holds(a, model, point)


def test_predict_sweeps_from_the_formulas_from_the_least_value() -> None:
    # the walk's shapes are checked against the analysis at its own point (n = 24), so the
    # points at or past it come from the formulas; one below it from an analysis, saying why
    sweep = predict_sweep(_chain(), "A100", {"n": [24, 100, 23], "b": [2]})
    assert [(pt.values["n"], pt.source) for pt in sweep.points] == [
        (24, "formulas"),
        (100, "formulas"),
        (23, "analysis"),
    ]
    assert sweep.points[2].why == "n=23 is below 24, the least n the formulas hold from"


def test_a_least_point_that_breaks_the_model_is_named_as_chosen_not_as_flags_given() -> None:
    # x [b, s] reshaped to [b, 2, -1] needs an even s. With --dim b=2, --symbolic analyses s
    # at its least value, 1, where the Reshape breaks: the error said "the shapes from
    # --dim b=2, --dim s=1 do not fit the model ... fix the flags", though s=1 was no flag.
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([0, 2, -1], np.int64), "shape")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    with pytest.raises(ShapeError) as raised:
        onnxcost.analyze(model, symbolic=True, dims={"b": 2})
    message = str(raised.value)
    assert message.startswith("--symbolic: the model's shapes break at s=1 (with --dim b=2)")
    assert "node 'Reshape_0' (Reshape)" in message
    assert "--dim s=1" not in message
    # a concrete analysis there, with both dims given, is the user's own flags: as before
    with pytest.raises(ShapeError, match="the shapes from --dim b=2, --dim s=1 do not fit"):
        onnxcost.analyze(model, dims={"b": 2, "s": 1})
