"""The symbolic shape pass (``onnxcost.symbolic.shapes``, issue 22's first slice): shapes as
``SymDim``s in one walk, checked against ONNX's own shape inference at random points on every
model in models/, tests/data and every built-in, and by hand on small graphs."""

from __future__ import annotations

import random
import struct
from collections.abc import Mapping
from pathlib import Path

import onnx
import pytest

import onnxcost
from onnxcost import zoo
from onnxcost.prepare import prepare
from onnxcost.symbolic.shapes import symbolic_shapes
from onnxcost.symdim import SymDim

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted(
    [*ROOT.glob("models/*.onnx"), *ROOT.glob("tests/data/**/*.onnx")],
    key=lambda p: str(p),
)
_SMALL_KV = {"layers": 2, "kv_cache": "true", "hidden": 256, "heads": 4, "vocab": 100}
BUILT = [
    *((name, {}) for name in zoo.MODELS),
    ("gpt2", _SMALL_KV),
    ("llama", {**_SMALL_KV, "kv_heads": 2, "intermediate": 512}),
]


def _inferred(proto: onnx.ModelProto, values: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
    """ONNX's shape inference (data_prop) of ``proto`` with its symbols at ``values``: the
    reference, none of onnxcost's code."""
    m = onnx.ModelProto()
    m.CopyFrom(proto)
    for vi in m.graph.input:
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param in values:
                v = values[d.dim_param]
                d.ClearField("dim_param")
                d.dim_value = v
    del m.graph.value_info[:]
    m = onnx.shape_inference.infer_shapes(m, data_prop=True)
    out = {}
    for vi in (*m.graph.value_info, *m.graph.output):
        t = vi.type.tensor_type
        if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
            out[vi.name] = tuple(d.dim_value for d in t.shape.dim)
    return out


def _check(proto: onnx.ModelProto) -> tuple[int, int]:
    """Every carried shape at two random points equals ONNX's; (shapes compared, uncarried)."""
    found = symbolic_shapes(proto)
    symbols = sorted(
        {
            s
            for shape in found.shapes.values()
            for d in shape
            if isinstance(d, SymDim)
            for s in d.symbols
        }
    )
    rng = random.Random(0)
    compared = 0
    for _ in range(2):
        values = {s: rng.randint(2, 9) for s in symbols}
        reference = _inferred(proto, values)
        for name, shape in found.shapes.items():
            if name in reference:
                got = tuple(d if isinstance(d, int) else d.evaluate(values) for d in shape)
                assert got == reference[name], (name, shape, values)
                compared += 1
    return compared, len(found.uncarried)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_matches_onnx_inference(path: Path) -> None:
    compared, uncarried = _check(prepare(path).proto)
    if path.parent.name == "models":
        assert uncarried == 0  # every export in models/ is carried whole
    assert compared > 0 or uncarried > 0


@pytest.mark.parametrize(("name", "params"), BUILT, ids=lambda v: str(v))
def test_every_built_in_is_carried_whole_and_matches(name: str, params: dict[str, str]) -> None:
    compared, uncarried = _check(zoo.build(name, weights=False, params=params))
    assert uncarried == 0
    assert compared > 0


def test_an_op_it_cannot_carry_is_named_and_only_what_follows_is_lost() -> None:
    proto = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[batch, 8] x) => (int64[2, n] y, float[batch, 8] z) {
            r = Relu(x)
            f = NonZero(r)
            y = Neg(f)
            z = Sigmoid(r)
        }"""
    )
    found = symbolic_shapes(proto)
    assert [(n, op) for n, op, _why in found.uncarried] == [
        ("NonZero_1", "NonZero"),
        ("Neg_2", "Neg"),
    ]
    assert found.shapes["z"] == (SymDim.of("batch"), 8)  # not downstream of NonZero
    assert "node 'NonZero_1' (NonZero): its shape is not carried" in found.warnings()[0]


def test_conv_pool_reshape_and_slice_by_hand() -> None:
    proto = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[n, 3, h, h] x, float[1, s] ids, float[8, 3, 3, 3] w, float[16, 4] table)
            => (float[n, 8, p, p] y, float[n, q] z, float[t, 4] u)
        <int64[1] zero = {0}, int64[1] big = {9223372036854775807}, int64[1] one = {1},
         int64[2] flat = {0, -1}> {
            c = Conv<strides = [2, 2], pads = [1, 1, 1, 1], kernel_shape = [3, 3]>(x, w)
            y = MaxPool<kernel_shape = [3, 3], strides = [2, 2], ceil_mode = 1>(c)
            z = Reshape(y, flat)
            sh = Shape(ids)
            end = Slice(sh, one, big)
            u = Slice(table, zero, end)
        }"""
    )
    shapes = symbolic_shapes(proto).shapes
    n, h = SymDim.of("n"), SymDim.of("h")
    # Conv: (h + 1 + 1 - (3 - 1) - 1) // 2 + 1 = (h - 1) // 2 + 1; at h = 224: 112.
    conv = (h - 1) // 2 + 1
    assert shapes["c"] == (n, 8, conv, conv)
    assert conv.evaluate({"h": 224}) == 112
    # MaxPool, ceil mode: ceil((c - 3) / 2) + 1; at h = 224, c = 112: ceil(109 / 2) + 1 = 56.
    pool = (conv - 3).ceil_div(2) + 1
    assert shapes["y"] == (n, 8, pool, pool)
    assert pool.evaluate({"h": 224}) == 56
    # Reshape [0, -1]: n stays, the rest is 8 * pool * pool (= n * 8 * pool**2 / n).
    assert shapes["z"] == (n, 8 * pool * pool)
    # Slice of a 16-row table to s rows: min(16, s).
    assert str(shapes["u"][0]) == "min(16, s)"
    assert shapes["u"][0].evaluate({"s": 40}) == 16  # type: ignore[union-attr]


def test_a_clamped_slice_broadcast_against_its_symbol_is_the_symbol() -> None:
    # GPT-2's causal mask: a 16-row table sliced to s rows (min(16, s)) meets the scores'
    # s rows; in a valid model s <= 16, so the sum has s rows, not min(16, s).
    proto = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[s, 4] x, float[16, 4] table) => (float[s, 4] v)
        <int64[1] zero = {0}> {
            sh = Shape(x)
            end = Slice(sh, zero, sh)
            n = Gather<axis = 0>(sh, zero)
            u = Slice(table, zero, n)
            v = Add(x, u)
        }"""
    )
    found = symbolic_shapes(proto)
    assert str(found.shapes["u"][0]) == "min(16, s)"
    assert found.shapes["v"] == (SymDim.of("s"), 4)
    # starts of length 1 and ends of length 2: a bad Slice is named, not a crash.
    assert found.uncarried == [("Slice_1", "Slice", "starts, ends and axes of unlike lengths")]


def test_dims_written_unlike_but_equal_wherever_symbols_are_at_least_1_broadcast() -> None:
    # The torch exporter's GPT-2 (dynamo) builds its causal mask this way: a first row
    # sliced off s rows is min(1, s) rows; with s more, min(1, s) + s; dropping the first
    # row of that leaves s + min(1, s) - min(1, s + min(1, s)) rows, and its first s rows
    # are min(s, s + min(1, s)). For s >= 1 both are s + 1 - 1 = s and s (at s = 0 both are
    # 0, which the walk at 0 sees with the 0 in place): they broadcast, not refuse.
    proto = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[s, 4] x) => (float[s, 4] out)
        <int64[1] zero = {0}, int64[1] one = {1}, int64[1] big = {9223372036854775807}> {
            y = Slice(x, zero, one)
            z = Concat<axis = 0>(x, y)
            w = Slice(z, one, big)
            sh = Shape(x)
            n = Gather<axis = 0>(sh, zero)
            v = Slice(z, zero, n)
            out = Add(w, v)
        }"""
    )
    found = symbolic_shapes(proto)
    assert found.uncarried == []
    assert str(found.shapes["y"][0]) == "min(1, s)"
    assert found.shapes["w"][0] != found.shapes["v"][0]  # unlike as written
    out = found.shapes["out"]
    for s in (1, 2, 7):  # ONNX's inference: out is [s, 4]
        assert [d if isinstance(d, int) else d.evaluate({"s": s}) for d in out] == [s, 4]
    assert _inferred(proto, {"s": 7})["out"] == (7, 4)


@pytest.mark.parametrize("raw", [True, False], ids=["raw_data", "int64_data"])
def test_a_shape_constant_is_read_from_raw_or_typed_data(raw: bool) -> None:
    # Reshape [b, 6] by the Constant (0, 2, 3): [b, 2, 3], whichever field holds the values.
    proto = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[b, 6] x) => (float[b, 2, 3] y) {
            y = Reshape(x, shape)
        }"""
    )
    values = struct.pack("<3q", 0, 2, 3) if raw else [0, 2, 3]
    value = onnx.helper.make_tensor("v", onnx.TensorProto.INT64, [3], values, raw=raw)
    assert bool(value.raw_data) == raw
    proto.graph.node.insert(0, onnx.helper.make_node("Constant", [], ["shape"], value=value))
    found = symbolic_shapes(proto)
    assert found.values["shape"] == (0, 2, 3)
    assert found.shapes["y"] == (SymDim.of("b"), 2, 3)


def test_gather_elements_and_the_scatters_take_their_inputs_shapes() -> None:
    # GatherElements: its indices' shape [b, s]; ScatterElements and ScatterND: their data's
    # [b, 10] (BERT's and RoBERTa's token type ids, as the torch exporter writes them, go
    # through a GatherElements: both were sampled for want of this rule).
    proto = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[b, 10] x, int64[b, s] i, float[b, s] u, int64[b, 1, 2] j, float[b, 1] v)
            => (float[b, s] g, float[b, 10] e, float[b, 10] n) {
            g = GatherElements<axis = 1>(x, i)
            e = ScatterElements<axis = 1>(x, i, u)
            n = ScatterND(x, j, v)
        }"""
    )
    found = symbolic_shapes(proto)
    assert found.uncarried == []
    b, s = SymDim.of("b"), SymDim.of("s")
    assert found.shapes["g"] == (b, s)
    assert found.shapes["e"] == found.shapes["n"] == (b, 10)
    for point in ({"b": 3, "s": 4}, {"b": 2, "s": 9}):
        want = _inferred(proto, point)
        for name in ("g", "e", "n"):
            got = tuple(d if isinstance(d, int) else d.evaluate(point) for d in found.shapes[name])
            assert got == want[name], (name, point)
    # and their costs come from the one walk, equal to a concrete analysis
    a = onnxcost.analyze(proto, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1, a.warnings
    for point in ({"b": 3, "s": 4}, {"b": 2, "s": 9}):
        concrete, at = onnxcost.analyze(proto, dims=point).totals, a.at(**point)
        for key in ("macs", "flops", "bytes_read", "bytes_written"):
            assert getattr(at, key) == getattr(concrete, key), (point, key)
