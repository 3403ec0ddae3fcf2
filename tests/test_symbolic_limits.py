"""``--symbolic`` checks its formulas within the positions a model has (issue 22, found by
the fuzzer): a small decoder with 16 positions failed at its random check point batch=13,
seq=14, past_seq=9 (23 positions)."""

from __future__ import annotations

import random

import onnx
import pytest

import onnxcost
from onnxcost import zoo
from onnxcost.errors import ShapeError
from onnxcost.load.positions import position_limit
from onnxcost.prepare import prepare
from onnxcost.symbolic.dims import with_derived
from onnxcost.symbolic.limits import PositionLimit, find_limit, position_symbols
from onnxcost.symbolic.search import _Bound, _check_point

_SMALL = {"kv_cache": "true", "layers": 1, "hidden": 64, "heads": 4, "vocab": 100}
_LLAMA = {**_SMALL, "kv_heads": 2, "intermediate": 128}


def _decoder(name: str, positions: int) -> onnx.ModelProto:
    params = {**(_LLAMA if name == "llama" else _SMALL), "max_positions": positions}
    return zoo.build(name, params=params)  # small: weights inline


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_a_decoder_with_16_positions_is_checked_within_them(name: str) -> None:
    model = _decoder(name, 16)
    a = onnxcost.analyze(model, symbolic=True)  # was: ShapeError at seq + past_seq = 23 (gpt2)
    assert a.symbolic is not None
    assert a.symbolic.symbols == ("batch", "seq", "past_seq")
    assert (
        "the model has 16 positions (its position table): the formulas were checked at "
        "seq + past_seq <= 16 and hold there, not beyond"
    ) in a.warnings
    # Every total has its formula (llama's clamped rotary Slice gave null bytes before) and
    # it equals a concrete analysis at points within the 16 positions.
    assert all(f is not None for f in a.symbolic.totals.values())
    for point in ({"batch": 3, "seq": 5, "past_seq": 11}, {"batch": 7, "seq": 16, "past_seq": 0}):
        concrete = onnxcost.analyze(model, dims=with_derived(model, {}, point)).totals
        at = a.at(**point)
        assert (at.macs, at.flops, at.bytes_read, at.bytes_written) == (
            concrete.macs,
            concrete.flops,
            concrete.bytes_read,
            concrete.bytes_written,
        )


def test_too_few_positions_for_a_check_point_is_one_clear_error() -> None:
    # The one walk checks at a point past 1, symbols distinct: seq and past_seq at 2 and 3
    # at least, 5 positions; the model has 4. The sampler then needs seq from base 3 and
    # past_seq from base 4, each past its grid (+ max_degree 3 + 1): 7 + 8 = 15.
    with pytest.raises(ShapeError, match=r"has 4 positions .* = 15 at least, 4 allowed"):
        onnxcost.analyze(_decoder("gpt2", 4), symbolic=True)
    # with 8 positions the walk's check point fits
    a = onnxcost.analyze(_decoder("gpt2", 8), symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1


def test_the_limit_counts_the_later_dims_and_subtracts_a_fixed_one() -> None:
    model = _decoder("gpt2", 16)
    # input_ids [batch, seq], past_key_values.0.key [batch, heads, past_seq, head_dim]:
    # batch is every input's first dim; seq and past_seq come later.
    assert position_symbols(model, {}) == ("seq", "past_seq")
    assert find_limit(model, {}, {}, ("batch", "seq", "past_seq")) == PositionLimit(
        16, ("seq", "past_seq"), 16
    )
    # llm's decode step fixes seq = 1: past_seq may reach 16 - 1 = 15.
    assert find_limit(model, {}, {"seq": 1}, ("batch", "past_seq")) == PositionLimit(
        16, ("past_seq",), 15
    )
    # A model without a position table (an MLP) has no limit.
    assert find_limit(_relu(), {}, {}, ("n",)) is None


def _relu() -> onnx.ModelProto:
    return onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[batch, n] x) => (float[batch, n] y) { y = Relu(x) }"""
    )


@pytest.mark.parametrize("seed", range(200))
def test_check_points_stay_within_the_budget_and_past_the_grid(seed: int) -> None:
    start, max_degree = (2, 3, 4), 3
    limit = PositionLimit(16, ("seq", "past_seq"), 16)
    bound = _Bound.of(limit, ("batch", "seq", "past_seq"))
    point = _check_point(random.Random(seed), start, max_degree, bound)
    # Past the grid: each symbol at base + 3 + 1 or more (6, 7, 8); seq + past_seq <= 16.
    assert all(v >= b + max_degree + 1 for v, b in zip(point, start, strict=True))
    assert point[1] + point[2] <= 16
    assert len(set(point)) == 3


@pytest.mark.parametrize("name", ["gpt2", "llama"])
@pytest.mark.parametrize("positions", [16, 40])
def test_the_limit_from_the_prepared_index_is_the_protos(name: str, positions: int) -> None:
    # GPT-2 reads its wpe table (an initializer) by a Range; the llama reads its rotary
    # cos/sin tables through Slice and Squeeze: the limit is the table's rows either way.
    prepared = prepare(_decoder(name, positions))
    symbols = ("batch", "seq", "past_seq")
    want = PositionLimit(positions, ("seq", "past_seq"), positions)
    assert find_limit(prepared.proto, {}, {}, symbols) == want
    assert find_limit(prepared.proto, {}, {}, symbols, prepared.view) == want
    assert position_limit(prepared.proto, prepared.view) == positions
    relu = prepare(_relu())
    assert position_limit(relu.proto, relu.view) is None


def test_a_table_held_by_a_constant_limits_the_positions_by_either_path() -> None:
    # A 6 x 2 position table in a Constant, read by a Gather at Range(0, seq): 6 positions.
    model = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[b, seq] x) => (float[seq, 2] y) {
            table = Constant<value = float[6, 2] {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5}>()
            shape = Shape(x)
            one = Constant<value = int64[1] {1}>()
            n = Gather<axis = 0>(shape, one)
            start = Constant<value = int64 {0}>()
            step = Constant<value = int64 {1}>()
            last = Squeeze(n)
            ids = Range(start, last, step)
            y = Gather(table, ids)
        }"""
    )
    prepared = prepare(model)
    assert position_limit(prepared.proto) == 6
    assert position_limit(prepared.proto, prepared.view) == 6


def test_a_table_read_by_clamped_buckets_is_no_limit() -> None:
    # T5's relative position bias: a [32, heads] table read at min(relative position, 31),
    # computed from a Range: any length reads within it. llm refused T5's decoder at
    # --prompt 128 ('the model has 32 positions'), --symbolic checked it within 32.
    text = """<ir_version: 8, opset_import: ["" : 17]>
        g (float[b, seq] x) => (float[seq, 2] y) {
            table = Constant<value = float[4, 2] {0, 0, 1, 1, 2, 2, 3, 3}>()
            shape = Shape(x)
            one = Constant<value = int64[1] {1}>()
            n = Gather<axis = 0>(shape, one)
            start = Constant<value = int64 {0}>()
            step = Constant<value = int64 {1}>()
            last = Squeeze(n)
            ids = Range(start, last, step)
            top = Constant<value = int64 {3}>()
            buckets = Min(ids, top)
            y = Gather(table, INDICES)
        }"""
    for indices, limit in (("buckets", None), ("ids", 4)):  # clamped, or 4 positions
        prepared = prepare(onnx.parser.parse_model(text.replace("INDICES", indices)))
        assert position_limit(prepared.proto) == limit
        assert position_limit(prepared.proto, prepared.view) == limit
