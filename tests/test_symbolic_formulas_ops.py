"""costs/' formulas that compared, clamped or divided a dim, now carried over symbolic shapes
(``symbolic.node_costs``, issue 22): each node gets a formula from the one walk, equal to a
concrete analysis at two random points; the helpers they use (``dim_max``, ``dim_min``,
``numel_over``, the pools' tap sum) by hand and on a grid that takes in 0."""

from __future__ import annotations

import itertools
import random

import onnx
import pytest

import onnxcost
from onnxcost.costs import REGISTRY
from onnxcost.costs._context import OpContext, TensorInfo, dim_max, dim_min, numel_over
from onnxcost.costs.pooling import _axis_taps, _axis_taps_symbolic
from onnxcost.prepare import prepare
from onnxcost.symbolic.dims import model_symbols, with_derived
from onnxcost.symbolic.node_costs import _SymTensor, node_costs
from onnxcost.symdim import Dim, SymDim, as_dim

_F32 = onnx.TensorProto.FLOAT
_U8 = onnx.TensorProto.UINT8


def _model(inputs: str, outputs: str, body: str, opset: int = 21) -> onnx.ModelProto:
    return onnx.parser.parse_model(
        f'<ir_version: 10, opset_import: ["" : {opset}]>\ng ({inputs}) => ({outputs}) {{ {body} }}'
    )


def _at(d: Dim | None, values: dict[str, int]) -> int | None:
    return d if d is None or isinstance(d, int) else d.evaluate(values)


# (id, graph inputs, graph outputs, body, opset): each op's dims that the formula compares or
# divides are symbols (b, s, h), so the node had no formula before ("needs concrete dims").
# Softmax over a symbolic axis: rows = numel / shape[axis] (0 where that is 0); reductions:
# numel(X) - numel(Y) clamped at 0 (an empty reduced axis); pools: the taps the windows read,
# tap by tap over symbolic sizes.
CARRIED = [
    # GridSample (RAFT's lookup): Y [b, 3, s, t] from grid [b, s, t, 2]; FLOPs 9 a bilinear
    # output + 3 a grid coordinate (costs.pooling), over h, s and t
    (
        "GridSample",
        "float[b, 3, h, h] x, float[b, s, t, 2] g",
        "float[b, 3, s, t] y",
        "y = GridSample(x, g)",
        16,
    ),
    ("Softmax", "float[b, 4, s] x", "float[b, 4, s] y", "y = Softmax<axis = -1>(x)", 21),
    ("ReduceMean", "float[b, s, 8] x", "float[b, s, 1] y", "y = ReduceMean<axes = [2]>(x)", 13),
    ("ReduceSum", "float[b, s] x", "float[b] y", "y = ReduceSum<keepdims = 0>(x)", 13),
    (
        "MaxPool",
        "float[b, 3, h, h] x",
        "float[b, 3, p, p] y",
        "y = MaxPool<kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]>(x)",
        13,
    ),
    (
        "MaxPool-ceil-dilated",
        "float[b, 2, h, s] x",
        "float[b, 2, p, q] y",
        "y = MaxPool<kernel_shape = [3, 2], strides = [2, 1], dilations = [2, 1], ceil_mode = 1>(x)",
        13,
    ),
    (
        "AveragePool-same",
        "float[b, 2, h, h] x",
        "float[b, 2, p, p] y",
        'y = AveragePool<kernel_shape = [3, 3], strides = [2, 2], auto_pad = "SAME_UPPER">(x)',
        13,
    ),
    ("GlobalMaxPool", "float[b, 3, h, s] x", "float[b, 3, 1, 1] y", "y = GlobalMaxPool(x)", 13),
]
# The same, for ops whose shapes the symbolic shape pass does not carry yet: the formula is
# called as node_costs calls it, on the shapes the graph declares (``_declared``).
DECLARED = [
    ("LogSoftmax", "float[b, 4, s] x", "float[b, 4, s] y", "y = LogSoftmax<axis = 2>(x)", 21),
    ("Hardmax", "float[b, s] x", "float[b, s] y", "y = Hardmax<axis = 1>(x)", 21),
    ("ReduceMax", "float[b, s] x", "float[b, 1] y", "y = ReduceMax<axes = [1]>(x)", 13),
    ("ReduceL1", "float[b, s] x", "float[b, 1] y", "y = ReduceL1<axes = [1]>(x)", 13),
    ("ReduceL2", "float[b, s] x", "float[b, 1] y", "y = ReduceL2<axes = [1]>(x)", 13),
    ("ArgMax", "float[b, s] x", "int64[b, 1] y", "y = ArgMax<axis = 1>(x)", 13),
    (
        "LpPool",
        "float[b, 2, h, h] x",
        "float[b, 2, h2, h2] y",
        "y = LpPool<kernel_shape = [2, 2], strides = [2, 2]>(x)",
        18,
    ),
    ("LpNormalization", "float[b, s] x", "float[b, s] y", "y = LpNormalization<p = 1>(x)", 13),
    (
        "MeanVarianceNormalization",
        "float[b, 3, h, s] x",
        "float[b, 3, h, s] y",
        "y = MeanVarianceNormalization(x)",
        13,
    ),
    (
        "Einsum",
        "float[b, s, 8] x, float[b, 8, 4] w",
        "float[b, s, 4] y",
        'y = Einsum<equation = "bik,bkj->bij">(x, w)',
        13,
    ),
    ("Einsum-sum", "float[b, s] x", "float[b] y", 'y = Einsum<equation = "ij->i">(x)', 13),
    # Losses: T - 1 adds of the T picked terms, clamped at 0.
    (
        "NegativeLogLikelihoodLoss",
        "float[b, 5, s] x, int64[b, s] t",
        "float y",
        'y = NegativeLogLikelihoodLoss<reduction = "mean">(x, t)',
        13,
    ),
    (
        "SoftmaxCrossEntropyLoss",
        "float[b, 5] x, int64[b] t",
        "float y",
        'y = SoftmaxCrossEntropyLoss<reduction = "sum">(x, t)',
        13,
    ),
    # Det: LU of an s x s matrix, max(0, s - 1) pivot products.
    ("Det", "float[b, s, s] x", "float[b] y", "y = Det(x)", 13),
    # TfIdfVectorizer: n-grams of length up to min(max_gram, L + 1) in a row of L.
    (
        "TfIdfVectorizer",
        "int64[b, s] x",
        "float[b, 4] y",
        'y = TfIdfVectorizer<mode = "TF", min_gram_length = 1, max_gram_length = 2, '
        "max_skip_count = 0, ngram_counts = [0, 2], ngram_indexes = [0, 1, 2, 3], "
        "pool_int64s = [1, 2, 1, 2, 2, 1]>(x)",
        13,
    ),
    # ROI pools: ceil(H / bins) x ceil(W / bins) samples a bin, over symbolic H and W.
    (
        "RoiAlign",
        "float[b, 3, h, s] x, float[r, 4] rois, int64[r] idx",
        "float[r, 3, 2, 2] y",
        "y = RoiAlign<output_height = 2, output_width = 2, sampling_ratio = 0>(x, rois, idx)",
        16,
    ),
    (
        "MaxRoiPool",
        "float[b, 3, h, s] x, float[r, 5] rois",
        "float[r, 3, 2, 2] y",
        "y = MaxRoiPool<pooled_shape = [2, 2]>(x, rois)",
        13,
    ),
]


# An output dim the declared shapes name for what it is over the inputs' symbols.
_DERIVED = {"h2": SymDim.of("h") // 2}  # LpPool k 2, s 2: (h - 2) // 2 + 1


def _declared(proto: onnx.ModelProto) -> tuple[Dim, Dim]:
    """Node 0's registered formula over the graph's declared shapes, dim_params as symbols
    (``_DERIVED`` where one stands for a dim computed from them)."""

    def tensor(vi: onnx.ValueInfoProto) -> _SymTensor:
        dims = tuple(
            _DERIVED.get(d.dim_param, SymDim.of(d.dim_param)) if d.dim_param else d.dim_value
            for d in vi.type.tensor_type.shape.dim
        )
        return _SymTensor(vi.name, vi.type.tensor_type.elem_type, dims)

    node = proto.graph.node[0]
    opset = proto.opset_import[0].version
    spec = REGISTRY.lookup("", node.op_type, opset)
    assert spec is not None
    ins = {vi.name: tensor(vi) for vi in proto.graph.input}
    outs = {vi.name: tensor(vi) for vi in proto.graph.output}
    ctx = OpContext(
        node, opset, tuple(ins[n] for n in node.input), tuple(outs[n] for n in node.output)
    )
    cost = spec.formula(ctx)
    return as_dim(SymDim.of(cost.macs)), as_dim(SymDim.of(cost.flops))


def _equal_to_analysis(proto: onnx.ModelProto, macs: Dim, flops: Dim) -> None:
    """(macs, flops) of node 0 equal a concrete analysis at two random points (symbols 2..9)."""
    assert isinstance(flops, SymDim)  # a formula in the symbols, not a constant
    symbols = model_symbols(proto, {}, {})
    rng = random.Random(22)
    name = proto.graph.node[0].name or f"{proto.graph.node[0].op_type}_0"
    for _ in range(2):
        values = {s: rng.randint(2, 9) for s in symbols}
        analysis = onnxcost.analyze(proto, dims=with_derived(proto, {}, values))
        record = {r.name: r for r in analysis.nodes}[name]
        assert (_at(macs, values), _at(flops, values)) == (record.macs, record.flops), values


@pytest.mark.parametrize(
    ("inputs", "outputs", "body", "opset"), [o[1:] for o in CARRIED], ids=[o[0] for o in CARRIED]
)
def test_node_gets_a_formula_equal_to_a_concrete_analysis(
    inputs: str, outputs: str, body: str, opset: int
) -> None:
    proto = _model(inputs, outputs, body, opset)
    found = node_costs(prepare(proto))
    assert found.reasons == {}, found.reasons
    assert found.macs[0] is not None
    assert found.flops[0] is not None
    _equal_to_analysis(proto, found.macs[0], found.flops[0])


@pytest.mark.parametrize(
    ("inputs", "outputs", "body", "opset"), [o[1:] for o in DECLARED], ids=[o[0] for o in DECLARED]
)
def test_formula_on_declared_shapes_equals_a_concrete_analysis(
    inputs: str, outputs: str, body: str, opset: int
) -> None:
    proto = _model(inputs, outputs, body, opset)
    _equal_to_analysis(proto, *_declared(proto))


def test_softmax_by_hand() -> None:
    # Softmax over s of a [b, 4, s] input: 5 x numel - 2 x rows, rows = b x 4 (x min(s, 1), 0
    # for an empty axis). At b = 3, s = 7: 5 x 84 - 2 x 12 = 396; at s = 0: 0 - 0 = 0.
    proto = _model("float[b, 4, s] x", "float[b, 4, s] y", "y = Softmax<axis = -1>(x)")
    flops = node_costs(prepare(proto)).flops[0]
    assert isinstance(flops, SymDim)
    assert flops.evaluate({"b": 3, "s": 7}) == 396
    assert flops.evaluate({"b": 3, "s": 0}) == 0


def test_max_pool_by_hand() -> None:
    # ResNet's stem pool (k 3, s 2, p 1) on h = 8: 4 outputs a side; along a side the windows
    # start at -1, 1, 3, 5 and read 2, 3, 3, 3 rows = 11 taps, so 11 x 11 = 121 taps a
    # channel; compares = taps - outputs = 121 - 16 = 105 a channel, x 3 channels x b = 2: 630.
    proto = _model(
        "float[b, 3, h, h] x",
        "float[b, 3, p, p] y",
        "y = MaxPool<kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]>(x)",
        13,
    )
    flops = node_costs(prepare(proto)).flops[0]
    assert isinstance(flops, SymDim)
    assert flops.evaluate({"b": 2, "h": 8}) == 630


def test_helpers_by_hand() -> None:
    b, s = SymDim.of("b"), SymDim.of("s")
    # Plain ints: the builtins (same integers as before the rewrite).
    assert (dim_max(0, -3), dim_min(5, 2), dim_max(7, 7)) == (0, 2, 7)
    assert numel_over((2, 3, 4), (1,)) == 8  # 24 / 3
    assert numel_over((2, 0, 4), (1,)) == 0  # an empty axis: no rows
    assert numel_over((2, 3, 4), (0, 2)) == 3  # 24 / 8
    # SymDims: max(s - 1, 0) is 0, not -1, at s = 0; min(b, 4) is 3 at b = 3.
    m = dim_max(s - 1, 0)
    assert isinstance(m, SymDim)
    assert [m.evaluate({"s": v}) for v in (0, 1, 5)] == [0, 0, 4]
    n = dim_min(b, 4)
    assert isinstance(n, SymDim)
    assert [n.evaluate({"b": v}) for v in (3, 4, 9)] == [3, 4, 4]
    # numel over a symbolic axis: b x 4 rows where s >= 1, 0 where s = 0.
    rows = numel_over((b, 4, s), (2,))
    assert isinstance(rows, SymDim)
    assert [rows.evaluate({"b": 3, "s": v}) for v in (0, 1, 6)] == [0, 12, 12]
    # A constant divisor divides a symbolic numel: (b x 4 x 6) / 6 = 4 b.
    assert numel_over((b, 4, 6), (2,)) == 4 * b
    with pytest.raises(ValueError, match="repeat"):
        numel_over((b, 4, s), (2, -1))


def test_symbolic_taps_equal_the_closed_form_at_every_small_size() -> None:
    # The pools' tap count: the tap-by-tap sum over SymDims, evaluated, equals the closed
    # form on ints (kernel, stride, dilation and padding swept; sizes 0 included).
    n_in, n_out, pad = SymDim.of("n"), SymDim.of("m"), SymDim.of("p")
    for k, stride, dilation in itertools.product(range(4), range(1, 4), range(1, 3)):
        taps = _axis_taps_symbolic(n_in, n_out, k, stride, dilation, pad)  # type: ignore[arg-type]
        for n, m, p in itertools.product(range(7), range(5), range(-1, 3)):
            got = SymDim.of(taps).evaluate({"n": n, "m": m, "p": p})
            assert got == _axis_taps(n, m, k, stride, dilation, p), (k, stride, dilation, n, m, p)


def test_hostile_kernel_is_no_symbolic_formula() -> None:
    # 2**30 taps are not summed one by one: the node gets no formula, with the reason.
    proto = _model(
        "float[b, 1, h] x",
        "float[b, 1, 1] y",
        "y = MaxPool<kernel_shape = [1073741824]>(x)",
        13,
    )
    found = node_costs(prepare(proto))
    assert found.flops[0] is None


_MS_FORMULAS = [
    # (op, inputs [(name, elem_type, shape with symbols)], outputs, attributes)
    (
        "QLinearSoftmax",
        [("a", _U8, ("b", 3, "s")), *((n, _F32, ()) for n in ("sa", "za", "sy", "zy"))],
        [("y", _U8, ("b", 3, "s"))],
        {"axis": -1, "opset": 13},
    ),
    # past_present_share_buffer: the past is the buffer's m less the s new tokens, >= 0.
    (
        "DecoderMaskedSelfAttention",
        [
            ("x", _F32, ("b", "s", 32)),
            ("w", _F32, (32, 96)),
            ("bias", _F32, (96,)),
            ("", _F32, ()),
            ("past", _F32, (2, "b", 4, "m", 8)),
            ("", _F32, ()),
            ("plen", onnx.TensorProto.INT32, ()),
        ],
        [("y", _F32, ("b", "s", 32)), ("present", _F32, (2, "b", 4, "m", 8))],
        {"num_heads": 4, "past_present_share_buffer": 1},
    ),
]


@pytest.mark.parametrize(
    ("op", "inputs", "outputs", "attrs"), _MS_FORMULAS, ids=[f[0] for f in _MS_FORMULAS]
)
def test_contrib_formula_over_symbols_equals_it_on_ints(
    op: str,
    inputs: list[tuple[str, int, tuple[int | str, ...]]],
    outputs: list[tuple[str, int, tuple[int | str, ...]]],
    attrs: dict[str, int],
) -> None:
    # com.microsoft ops the shape pass does not carry: the formula over SymDims, evaluated,
    # equals the same formula on ints at every point of b, s, m in 1..6 (m < s: past 0).
    node = onnx.helper.make_node(
        op,
        [n for n, _t, _s in inputs],
        [n for n, _t, _s in outputs],
        domain="com.microsoft",
        **attrs,
    )
    spec = REGISTRY.lookup("com.microsoft", op, 1)
    assert spec is not None

    def cost(dims: dict[str, int] | None) -> tuple[Dim, Dim]:
        def one(name: str, t: int, shape: tuple[int | str, ...]) -> TensorInfo | None:
            if not name:
                return None
            if dims is None:
                return _SymTensor(
                    name, t, tuple(SymDim.of(d) if isinstance(d, str) else d for d in shape)
                )
            return TensorInfo(name, t, tuple(dims[d] if isinstance(d, str) else d for d in shape))

        ctx = OpContext(node, 1, tuple(one(*i) for i in inputs), tuple(one(*o) for o in outputs))
        c = spec.formula(ctx)
        return c.macs, c.flops

    macs, flops = cost(None)
    assert isinstance(flops, SymDim)
    for b, s, m in itertools.product(range(1, 7), repeat=3):
        values = {"b": b, "s": s, "m": m}
        assert (_at(macs, values), _at(flops, values)) == cost(values), values
