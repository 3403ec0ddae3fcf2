"""The symbolic walk carries onnxruntime's contrib ops and more of ONNX's (issue 22, item 1):
an onnxruntime-optimized model's ``--symbolic`` comes from the one walk (``analyses == 1``),
not the sampler, and its formulas equal a concrete analysis; each new ONNX-domain shape rule
equals ONNX's own shape inference at random points.

The expected values are concrete analyses (``analyze(dims=point)``) and ONNX's inference,
never the walk's own route."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import onnx
import pytest
from test_symbolic_shapes import _inferred

import onnxcost
from onnxcost.prepare import PreparedModel, prepare
from onnxcost.symbolic.dims import with_derived
from onnxcost.symbolic.shapes import symbolic_shapes
from onnxcost.symdim import SymDim

ROOT = Path(__file__).resolve().parent.parent
TOTAL_KEYS = ("macs", "flops", "bytes_read", "bytes_written", "params", "param_bytes")
NODE_KEYS = ("macs", "flops", "bytes_read", "bytes_written")


def _points(costs: Any, seed: str) -> list[dict[str, int]]:
    """Two random points (symbols in 2..12, within the model's position table) and every
    symbol at 1, seeded by the case's name."""
    rng = random.Random(seed)
    limit = costs.limit
    points = []
    while len(points) < 2:
        point = {s: rng.randint(2, 12) for s in costs.symbols}
        if limit is None or sum(point[s] for s in limit.symbols) <= limit.budget:
            points.append(point)
    return [*points, dict.fromkeys(costs.symbols, 1)]


def _check_walk(label: str, model: PreparedModel) -> None:
    """``--symbolic`` runs the one walk, and every total and every node's formula is given
    and equals a concrete analysis at each of ``_points``."""
    a = onnxcost.analyze(model, symbolic=True)
    costs: Any = a.symbolic
    assert costs is not None, label
    assert costs.symbols, label
    assert costs.analyses == 1, [w for w in a.warnings if "sampled" in w]
    assert all(costs.totals[k] is not None for k in TOTAL_KEYS), a.warnings
    assert all(f[k] is not None for f in costs.nodes for k in NODE_KEYS), a.warnings
    for point in _points(costs, label):
        concrete = onnxcost.analyze(model, dims=with_derived(model.proto, {}, point))
        at = a.at(**point)
        for key in TOTAL_KEYS:
            assert getattr(at, key) == getattr(concrete.totals, key), (label, point, key)
        for node, formulas in zip(concrete.nodes, costs.nodes, strict=True):
            for key in NODE_KEYS:
                want = getattr(node, key)
                assert formulas[key].evaluate(point) == want, (label, point, node.name, key)


# --- onnxruntime-optimized models ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["bert_fused", "gpt2_fused", "llama_fused", "vit_fused"])
def test_fused_models_are_walked_once(name: str) -> None:
    # Attention, EmbedLayerNormalization, SkipLayerNormalization, SkipSimplified-,
    # SimplifiedLayerNormalization, FastGelu, BiasGelu: each was the walk's first refusal.
    _check_walk(name, prepare(ROOT / "tests" / "data" / "fusions" / f"{name}.onnx"))


_SYMBOLS: dict[str, dict[int, str]] = {
    "image": {0: "batch"},
    "input_ids": {0: "batch", 1: "seq"},
    "hidden_states": {0: "batch", 1: "seq"},
    "x": {0: "seq", 1: "batch"},  # the LSTM's [seq, batch, input]
}
"""The input dims each optimized model (stored with concrete inputs) is given as symbols."""
_OPTIMIZED = [
    # (file, the contrib and quantized ops it brings to the walk)
    ("bert_tiny_optimized", "Attention, EmbedLayerNormalization, SkipLayerNormalization"),
    ("cnn_ort_extended", "FusedConv, FusedGemm"),
    ("cnn_qdq", "QuantizeLinear, DequantizeLinear"),
    ("cnn_qoperator", "QLinearConv, QGemm, QLinearAdd, QLinear*Pool, QLinearConcat"),
    ("gpt2_tiny_optimized", "BiasGelu, SkipLayerNormalization (its mask fixes seq)"),
    ("llama_mlp_optimized", "SkipSimplifiedLayerNormalization, SimplifiedLayerNormalization"),
    ("lstm_dynamic_quant", "DynamicQuantizeLSTM"),
    ("mlp_dynamic_quant_ort", "DynamicQuantizeMatMul, MatMulInteger"),
    ("mlp_nbits4", "MatMulNBits, GatherBlockQuantized"),
    ("mlp_nbits8", "MatMulNBits"),
]


def _with_symbols(path: Path) -> onnx.ModelProto:
    """The model with the inputs' dims of ``_SYMBOLS`` named, outputs' dims and value_info
    (declared at the stored shapes) cleared."""
    m = onnx.load(path)
    del m.graph.value_info[:]
    fixed_seq = path.stem.startswith("gpt2_tiny")
    for vi in m.graph.input:
        for k, name in _SYMBOLS.get(vi.name, {}).items():
            if name == "seq" and fixed_seq:
                continue
            d = vi.type.tensor_type.shape.dim[k]
            d.ClearField("dim_value")
            d.dim_param = name
    for vi in m.graph.output:
        for d in vi.type.tensor_type.shape.dim:
            d.ClearField("dim_value")
    return m


@pytest.mark.parametrize(("name", "ops"), _OPTIMIZED, ids=[n for n, _o in _OPTIMIZED])
def test_optimized_models_in_symbols_are_walked_once(name: str, ops: str) -> None:
    path = ROOT / "tests" / "data" / "optimized" / f"{name}.onnx"
    _check_walk(name, prepare(_with_symbols(path)))


def test_a_contrib_op_s_outputs_take_the_rule_s_types() -> None:
    # SkipLayerNormalization on float16: output and the sum are float16 (2 bytes), mean and
    # inv_std_var float (4 bytes), as onnxcost's rule gives them (the walk used to give every
    # output the first input's type). Bytes written, 4 outputs of [b, s, 8] and [b, s, 1]:
    # 2*8*b*s + 4*b*s + 4*b*s + 2*8*b*s = 40*b*s.
    proto = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
        g (float16[b, s, 8] x, float16[b, s, 8] skip) => (float16[b, s, 8] y, float16[b, s, 8] sum)
        <float16[8] gamma = {1, 1, 1, 1, 1, 1, 1, 1}, float16[8] beta = {0, 0, 0, 0, 0, 0, 0, 0}> {
            y, mean, inv, sum = com.microsoft.SkipLayerNormalization(x, skip, gamma, beta)
        }"""
    )
    model = prepare(proto)
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1
    assert str(a.symbolic.nodes[0]["bytes_written"]) == "40*b*s"
    assert onnxcost.analyze(model, dims={"b": 3, "s": 5}).totals.bytes_written == 40 * 3 * 5
    _check_walk("skip_layer_norm_fp16", model)


def test_a_contrib_op_without_a_rule_is_still_named() -> None:
    proto = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17, "com.example" : 1]>
        g (float[batch, 8] x) => (float[batch, 8] y) {
            y = com.example.Custom(x)
        }"""
    )
    found = symbolic_shapes(proto)
    assert found.uncarried == [("Custom_0", "Custom", "no symbolic rule for com.example's Custom")]


# --- ONNX-domain rules, against ONNX's own inference -----------------------------------------------


def _matches_onnx(text: str, symbols: tuple[str, ...]) -> dict[str, tuple[Any, ...]]:
    """The walk carries every node of the ONNX-text model, and every shape it gives equals
    ONNX's inference (data_prop) at three random points; returns the walk's shapes. The
    outputs are declared without shapes (``float y``: ONNX text's scalar, cleared)."""
    proto = onnx.parser.parse_model(text)
    for vi in proto.graph.output:
        vi.type.tensor_type.ClearField("shape")
    found = symbolic_shapes(proto)
    assert found.uncarried == []
    rng = random.Random(text)
    outputs = [o for node in proto.graph.node for o in node.output if o]
    for _ in range(3):
        values = {s: rng.randint(2, 9) for s in symbols}
        reference = _inferred(proto, values)
        for name in outputs:
            got = tuple(d if isinstance(d, int) else d.evaluate(values) for d in found.shapes[name])
            assert got == reference[name], (name, found.shapes[name], values)
    return found.shapes


_HEAD = '<ir_version: 8, opset_import: ["" : 18]>'
_B, _S = SymDim.of("b"), SymDim.of("s")


def test_argmax_and_argmin() -> None:
    shapes = _matches_onnx(
        _HEAD
        + """g (float[b, s, 8] x) => (int64[b, 1, 8] y, int64[b, s] z, int64[s, 8] w) {
            y = ArgMax<axis = 1>(x)
            z = ArgMin<axis = -1, keepdims = 0, select_last_index = 1>(x)
            w = ArgMax<keepdims = 0>(x)
        }""",
        ("b", "s"),
    )
    assert shapes["y"] == (_B, 1, 8)
    assert shapes["z"] == (_B, _S)
    assert shapes["w"] == (_S, 8)


def test_normalizations_and_quantization_keep_the_shape() -> None:
    shapes = _matches_onnx(
        _HEAD
        + """g (float[b, 3, s, s] x) => (float[b, 3, s, s] y, float[b, 3, s, s] d,
                float[b, 3, 1, 1] p) <float scale = {0.5}, uint8 zero = {3}> {
            y = LpNormalization<axis = 1, p = 2>(x)
            q = QuantizeLinear(x, scale, zero)
            d = DequantizeLinear(q, scale, zero)
            p = GlobalLpPool<p = 2>(x)
        }""",
        ("b", "s"),
    )
    assert shapes["q"] == (_B, 3, _S, _S)
    assert shapes["p"] == (_B, 3, 1, 1)


@pytest.mark.parametrize(
    ("equation", "a", "b", "expected"),
    [
        ("bij,bjk->bik", "b, s, 4", "b, 4, 6", ("b", "s", 6)),
        ("bhqd,bhkd->bhqk", "b, 2, s, 4", "b, 2, 5, 4", ("b", 2, "s", 5)),
        ("ij,jk", "s, 4", "4, 6", ("s", 6)),  # implicit: i, k (once each), sorted
        ("ba,ca", "s, 4", "b, 4", ("s", "b")),  # implicit: b, c
        ("...ij,...jk", "b, 1, s, 4", "b, 3, 4, 6", ("b", 3, "s", 6)),  # ellipsis broadcast
        ("...ii->...i", "b, 4, 4", None, ("b", 4)),  # a diagonal
    ],
)
def test_einsum(equation: str, a: str, b: str | None, expected: tuple[Any, ...]) -> None:
    inputs = f"float[{a}] x" + (f", float[{b}] w" if b else "")
    args = "x, w" if b else "x"
    shapes = _matches_onnx(
        _HEAD + f'g ({inputs}) => (float y) {{ y = Einsum<equation = "{equation}">({args}) }}',
        ("b", "s"),
    )
    assert shapes["y"] == tuple(SymDim.of(d) if isinstance(d, str) else d for d in expected)


def test_resize_topk_tile_onehot_depth_and_space() -> None:
    shapes = _matches_onnx(
        _HEAD
        + """g (float[b, 8, s, 4] x, int64[b, s] ids) => (float r, float v, int64 i, float t,
                float o, float d, float e)
            <int64[4] sizes = {1, 8, 6, 10}, int64[1] k = {3}, int64[4] reps = {2, 1, 3, 1},
             int64 depth = {5}, float[2] on_off = {0, 1}> {
            r = Resize<mode = "nearest">(x, , , sizes)
            v, i = TopK<axis = 1>(x, k)
            t = Tile(x, reps)
            o = OneHot<axis = 1>(ids, depth, on_off)
            d = DepthToSpace<blocksize = 2>(x)
            e = SpaceToDepth<blocksize = 2>(x)
        }""",
        ("b", "s"),
    )
    assert shapes["r"] == (1, 8, 6, 10)  # the sizes
    assert shapes["v"] == shapes["i"] == (_B, 3, _S, 4)
    assert shapes["t"] == (2 * _B, 8, 3 * _S, 4)
    assert shapes["o"] == (_B, 5, _S)
    assert shapes["d"] == (_B, 2, 2 * _S, 8)  # [b, 8 / 2², 2 s, 2 * 4]
    assert shapes["e"] == (_B, 32, _S // 2, 2)  # [b, 8 * 2², floor(s / 2), 4 / 2]


def test_quantized_matmuls() -> None:
    shapes = _matches_onnx(
        _HEAD
        + """g (uint8[b, s, 8] a) => (int32 y, uint8 z)
            <uint8[8, 4] w = {1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7,
             8, 1, 2, 3, 4, 5, 6, 7, 8}, float sa = {0.5}, uint8 za = {1}, float sw = {0.25},
             uint8 zw = {2}, float sy = {1}, uint8 zy = {0}> {
            y = MatMulInteger(a, w)
            z = QLinearMatMul(a, sa, za, w, sw, zw, sy, zy)
        }""",
        ("b", "s"),
    )
    assert shapes["y"] == shapes["z"] == (_B, _S, 4)


def test_nonzero_and_mvn_are_not_carried_and_resize_by_stored_scales_is() -> None:
    # NonZero's shape depends on the data; ONNX's inference gives MeanVarianceNormalization
    # no shape (a concrete analysis has none: a walk that had one would disagree with it).
    # Resize by stored scales (1, 1, 2, 2) is carried: [b, 3, 2s, 2s].
    proto = onnx.parser.parse_model(
        _HEAD
        + """g (float[b, 3, s, s] x) => (float r, int64 n, float m)
            <float[4] scales = {1, 1, 2, 2}> {
            r = Resize(x, , scales)
            n = NonZero(x)
            m = MeanVarianceNormalization(x)
        }"""
    )
    found = symbolic_shapes(proto)
    assert [(op, why) for _n, op, why in found.uncarried] == [
        ("NonZero", "no symbolic rule for this op"),
        ("MeanVarianceNormalization", "no symbolic rule for this op"),
    ]
    assert found.shapes["r"] == (_B, 3, 2 * _S, 2 * _S)


def test_repeat_interleave_by_a_constant_is_walked() -> None:
    # torch's x.repeat_interleave(k, dim) as the TorchScript exporter writes it (Mixtral's and
    # Qwen2-MoE's top-2 experts, transformers' batched_mm): a Tile whose repeats are a OneHot
    # of constants, here OneHot([2], 4, [1, 2]) = [[1, 1, 2, 1]]. The walk knew the OneHot's
    # shape, not its value: the Tile was not carried and every formula after it sampled.
    proto = onnx.parser.parse_model(
        _HEAD
        + """g (float[b, s, 4] x) => (float[b, s, 2, 3] y)
            <int64[1] hot = {2}, int64 depth = {4}, int64[2] off_on = {1, 2},
             int64[1] flat = {-1}, int64[1] axis = {2}, float[4, 3] w = {1, 2, 3, 4, 5, 6, 7,
             8, 9, 10, 11, 12}> {
            h = Unsqueeze(x, axis)
            ones = OneHot(hot, depth, off_on)
            reps = Reshape(ones, flat)
            t = Tile(h, reps)
            y = MatMul(t, w)
        }"""
    )
    found = symbolic_shapes(proto)
    assert found.uncarried == []
    assert found.values["reps"] == (1, 1, 2, 1)
    assert found.shapes["t"] == (_B, _S, 2, 4)
    a = onnxcost.analyze(proto, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1  # the one walk, not the sampler
    # y [b, s, 2, 3] from t [b, s, 2, 4] and w [4, 3]: 2 x 4 x 3 = 24 MACs a (b, s)
    assert a.at(b=3, s=5).macs == 24 * 3 * 5
    concrete = onnxcost.analyze(proto, dims={"b": 3, "s": 5}).totals
    assert concrete.macs == 360
