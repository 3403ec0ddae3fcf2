"""Data movement: status zero with bytes counted; meta inputs are never params."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import onnx
import pytest
from onnxcost_testing import formula_cost, parse

import onnxcost
from onnxcost.analysis.records import NodeRecord
from onnxcost.costs import REGISTRY, Cost

NodeOf = Callable[..., NodeRecord]
AnalysisOf = Callable[..., onnxcost.Analysis]


def model(signature: str, body: str, opset: int = 21) -> str:
    return f'<ir_version: 10, opset_import: ["" : {opset}]>\ng {signature} {{ {body} }}'


# X is float 2x3x4: 24 elements, 96 bytes. Each case: initializers, call, elements of Y.
@pytest.mark.parametrize(
    ("inits", "call", "y_numel"),
    [
        ("<int64[2] s = {6, 4}>", "Reshape(x, s)", 24),
        ("", "Transpose<perm=[2,0,1]>(x)", 24),
        ("", "Flatten<axis=1>(x)", 24),
        ("<int64[1] a = {0}>", "Unsqueeze(x, a)", 24),
        ("", "Identity(x)", 24),
        ("", "Concat<axis=0>(x, x)", 48),  # 4x3x4
        ("<int64[3] st = {0, 0, 0}, int64[3] en = {1, 3, 4}>", "Slice(x, st, en)", 12),  # 1x3x4
        ("<int64[4] sh = {2, 2, 3, 4}>", "Expand(x, sh)", 48),  # 2x2x3x4
        ("<int64[3] r = {1, 2, 1}>", "Tile(x, r)", 48),  # 2x6x4
        ("<int64[6] p = {0, 0, 1, 0, 0, 1}>", "Pad(x, p)", 36),  # last axis 1 + 4 + 1: 2x3x6
        ("<float c = {1.0}, int64[6] p = {0, 0, 1, 0, 0, 1}>", "Pad(x, p, c)", 36),  # 2x3x6
        ("", "Dropout(x)", 24),
        ("<int64 k = {1}>", "Trilu(x, k)", 24),
    ],
)
def test_zero_ops(node_of: NodeOf, inits: str, call: str, y_numel: int) -> None:
    rec = node_of(model(f"(float[2,3,4] x) => (float y) {inits}", f"y = {call}"))
    assert rec.status == "zero"
    assert rec.flops == 0
    assert rec.params == 0  # shapes, axes, pads, repeats: meta, never params
    assert rec.bytes_written == y_numel * 4  # float32


@pytest.mark.parametrize(
    ("sig", "call"),
    [
        ("(float[1,4,2,2] x) => (float y)", "y = DepthToSpace<blocksize=2>(x)"),
        ("(float[1,1,4,4] x) => (float y)", "y = SpaceToDepth<blocksize=2>(x)"),
        ("(float[2,3,4] x) => (int64 y)", "y = Shape(x)"),
        ("(float[2,3,4] x) => (int64 y)", "y = Size(x)"),
        ("(float[3,4] x) => (float y)", "y = EyeLike(x)"),
        ("() => (float y) <int64[2] s = {2, 3}>", "y = ConstantOfShape(s)"),
        (
            "(int64[2,3] i) => (float y) <int64 d = {5}, float[2] v = {0.0, 1.0}>",
            "y = OneHot(i, d, v)",
        ),
        ("(float[4,2] x, int64[2] n) => (float y)", "y = ReverseSequence(x, n)"),
        ("(string[2,3] a, string[2,3] b) => (string y)", "y = StringConcat(a, b)"),
        ("(string[2,3] a) => (bool y)", 'y = RegexFullMatch<pattern="a+">(a)'),
    ],
)
def test_more_zero_ops(node_of: NodeOf, sig: str, call: str) -> None:
    rec = node_of(model(sig, call))
    assert rec.status == "zero"
    assert rec.flops == 0
    assert rec.params == 0


def test_zero_op_fp16_bytes(node_of: NodeOf) -> None:
    rec = node_of(model("(float16[2,3,4] x) => (float16 y)", "y = Transpose<perm=[2,0,1]>(x)"))
    assert rec.bytes_read == 48  # 24 halfs
    assert rec.bytes_written == 48


def test_cast_bytes(node_of: NodeOf) -> None:
    rec = node_of(model("(float[2,3,4] x) => (float16 y)", "y = Cast<to=10>(x)"))
    assert rec.status == "zero"
    assert rec.bytes_read == 96  # 24 floats
    assert rec.bytes_written == 48  # 24 halfs


def test_tensor_scatter(node_of: NodeOf) -> None:
    text = model(
        "(float[2,8,16] cache, float[2,1,16] update, int64[2] pos) => (float y)",
        "y = TensorScatter(cache, update, pos)",
        24,
    )
    rec = node_of(text)
    assert rec.status == "zero"
    assert rec.bytes_written == 2 * 8 * 16 * 4  # the whole cache, float32


def test_gather_embedding_table_is_params(node_of: NodeOf) -> None:
    table = ", ".join(["0.5"] * 64000)
    text = model(
        f"(int64[2,5] ids) => (float y) <float[1000,64] emb = {{{table}}}>",
        "y = Gather(emb, ids)",
    )
    rec = node_of(text)
    assert rec.status == "zero"
    assert rec.params == 64000  # the 1000 x 64 table is a weight
    assert rec.bytes_written == 2 * 5 * 64 * 4  # 640 floats gathered


def test_gather_constant_indices_are_not_params(node_of: NodeOf) -> None:
    text = model(
        "(float[10,4] x) => (float y) <int32[5] idx = {0, 2, 4, 6, 8}>",
        "y = Gather(x, idx)",
    )
    assert node_of(text).params == 0  # int32 indices at a meta position


def test_reshape_constant_shape_is_not_params(analysis_of: AnalysisOf) -> None:
    text = model("(float[2,3,4] x) => (float y) <int64[2] s = {6, 4}>", "y = Reshape(x, s)")
    a = analysis_of(text)
    assert a.nodes[0].params == 0
    assert a.totals.params == 0


def test_slice_int32_indices_are_not_params(node_of: NodeOf) -> None:
    # int32 is a possible weight type: only the meta position keeps these out of params.
    text = model(
        "(float[2,3,4] x) => (float y) <int32[3] st = {0, 0, 0}, int32[3] en = {1, 3, 4}>",
        "y = Slice(x, st, en)",
    )
    assert node_of(text).params == 0


@pytest.mark.parametrize(
    ("op", "opset", "attrs", "flops"),
    [
        ("ScatterElements", 18, '<reduction="add">', 6),  # one add per update: 2x3
        ("ScatterElements", 18, '<reduction="max">', 6),  # one max per update
        ("ScatterElements", 18, "", 0),  # reduction none: a copy
        ("ScatterElements", 13, "", 0),  # before 16 there is no reduction
    ],
)
def test_scatter_elements(node_of: NodeOf, op: str, opset: int, attrs: str, flops: int) -> None:
    text = model(
        "(float[3,3] data, int64[2,3] idx, float[2,3] upd) => (float y)",
        f"y = {op}{attrs}(data, idx, upd)",
        opset,
    )
    rec = node_of(text)
    assert rec.flops == flops
    assert rec.status == ("zero" if flops == 0 else "ok")


@pytest.mark.parametrize(("attrs", "flops"), [('<reduction="mul">', 8), ("", 0)])
def test_scatter_nd(node_of: NodeOf, attrs: str, flops: int) -> None:
    text = model(
        "(float[4,4] data, int64[2,1] idx, float[2,4] upd) => (float y)",
        f"y = ScatterND{attrs}(data, idx, upd)",
        18,
    )
    assert node_of(text).flops == flops  # 2 rows of 4 updates = 8 multiplies


def test_col2im(node_of: NodeOf) -> None:
    text = model(
        "(float[1,4,9] cols) => (float y) <int64[2] img = {4, 4}, int64[2] blk = {2, 2}>",
        "y = Col2Im(cols, img, blk)",
        18,
    )
    rec = node_of(text)
    assert rec.output_shapes == ((1, 1, 4, 4),)
    assert rec.flops == 36  # 1 x 4 x 9 column elements, one add each


def test_non_zero() -> None:
    # The output's length is data-dependent: the formula is called directly.
    f32, i64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
    assert formula_cost("NonZero", [(f32, (2, 3))], [(i64, (2, 4))]) == Cost(flops=6)  # 6 compares


@pytest.mark.parametrize(("shape", "flops"), [((2, 3), 23), ((1,), 0), ((8,), 31)])
def test_unique(shape: tuple[int, ...], flops: int) -> None:
    # n = 6: sort 6 x ceil(log2 6) = 18 + 5 neighbour compares; n = 8: 8 x 3 + 7
    f32 = onnx.TensorProto.FLOAT
    assert formula_cost("Unique", [(f32, shape)], [(f32, (2,))]) == Cost(flops=flops)


@pytest.mark.parametrize(
    "op", ["Compress", "SequenceAt", "SplitToSequence", "Optional", "StringSplit"]
)
def test_declared_zero(op: str) -> None:
    spec = REGISTRY.lookup("", op, 21)
    assert spec is not None
    assert spec.zero


IDENTITY_BETWEEN = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[N,3,4] x) => (float[N,3,4] y, float[N,3,4] z) {
  r = Relu (x)
  i = Identity (r)
  y = Relu (i)
  z = Identity (y)
}"""


def test_an_identity_moves_nothing_at_runtime_unless_it_writes_a_graph_output() -> None:
    # paddle2onnx passes results through Identity nodes (82 in mobilenet_v2), which
    # onnxruntime takes out at load (test below): they were counted as copies, a third of
    # the bytes read (137.40 MiB where the built-in mobilenet_v2 reads 89.98 MiB).
    # At N = 2, each tensor is 2*3*4 floats = 96 B. runtime: Relu 96 + 96, the first Identity
    # 0; the second writes graph output z, which onnxruntime keeps: 96 read, 96 written.
    a = onnxcost.analyze(parse(IDENTITY_BETWEEN), dims={"N": 2})
    moved = {n.name: (n.bytes_read, n.bytes_written) for n in a.nodes}
    assert moved == {
        "Relu_0": (96, 96),
        "Identity_1": (0, 0),
        "Relu_2": (96, 96),
        "Identity_3": (96, 96),
    }
    assert (a.totals.bytes_read, a.totals.bytes_written) == (96 * 3, 96 * 3)
    # every input and output whole: the first Identity too, 4 * 96 each
    whole = onnxcost.analyze(parse(IDENTITY_BETWEEN), dims={"N": 2}, traffic="all-inputs")
    assert (whole.totals.bytes_read, whole.totals.bytes_written) == (96 * 4, 96 * 4)
    # the formulas of the one walk say the same: 48 B a row of N, per tensor moved
    sym = onnxcost.analyze(parse(IDENTITY_BETWEEN), symbolic=True)
    assert sym.symbolic is not None
    assert sym.symbolic.analyses == 1
    assert sym.formulas["bytes_read"].python() == "144*N"  # 3 * 48
    assert [str(f["bytes_read"]) for f in sym.symbolic.nodes] == ["48*N", "0", "48*N", "48*N"]


@pytest.mark.ort
def test_onnxruntime_takes_an_identity_out_at_its_basic_level(tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    path = tmp_path / "m.onnx"
    onnx.save(parse(IDENTITY_BETWEEN), path)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    optimized = onnx.load(options.optimized_model_filepath)
    kept = [n.output[0] for n in optimized.graph.node if n.op_type == "Identity"]
    assert kept == ["z"]  # the one that writes a graph output
