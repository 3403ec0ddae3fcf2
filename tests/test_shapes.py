"""Shape resolution: overrides, symbolic defaults, data propagation and folding, bad flags."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnxcost_testing import analyze_text, parse

import onnxcost
from onnxcost.errors import ShapeError, UsageError
from onnxcost.shapes.flags import parse_dim, parse_input_shape
from onnxcost.shapes.folding import _fold_node, _known_values

MLP = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[batch,16] x) => (float[batch,4] y) <float[16,4] w = {1.0}> {
  y = MatMul (x, w)
}"""


def test_parse_flags() -> None:
    assert parse_input_shape("input=1x3x224x224") == ("input", (1, 3, 224, 224))
    assert parse_input_shape("a:2,3") == ("a", (2, 3))
    assert parse_input_shape("scalar=") == ("scalar", ())
    assert parse_dim("batch=8") == ("batch", 8)
    # A dim may be 0 (an empty KV cache at prefill is valid ONNX).
    assert parse_dim("past_seq=0") == ("past_seq", 0)
    assert parse_input_shape("past=1x4x0x16") == ("past", (1, 4, 0, 16))


@pytest.mark.parametrize("bad", ["input", "input=1xax3", "=1x2", "x=-1x3"])
def test_bad_input_shape_flag(bad: str) -> None:
    with pytest.raises(UsageError, match="input-shape"):
        parse_input_shape(bad)


@pytest.mark.parametrize("bad", ["batch", "batch=-1", "batch=two", "=3"])
def test_bad_dim_flag(bad: str) -> None:
    with pytest.raises(UsageError, match="--dim"):
        parse_dim(bad)


def test_unset_symbolic_dim_becomes_one_with_a_warning() -> None:
    a = analyze_text(MLP)
    # batch -> 1: MACs = 1 x 4 x 16 = 64
    assert a.totals.macs == 64
    assert any("'batch'" in w and "--dim batch=N" in w for w in a.warnings)
    assert a.inputs[0].shape == (1, 16)


UNNAMED = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[?,16] x) => (float[?,4] y) <float[16,4] w = {1.0}> { y = MatMul (x, w) }"""
"""skl2onnx's batch: a dim with neither a value nor a name."""


def test_a_dim_with_no_name_is_set_by_its_input_and_axis() -> None:
    # --dim x_0=8 sets it, as --input-shape x=8x16 does: 8 x 16 x 4 = 512 MACs
    assert analyze_text(UNNAMED, dims={"x_0": 8}).totals.macs == 512
    assert analyze_text(UNNAMED, input_shapes={"x": (8, 16)}).totals.macs == 512
    a = analyze_text(UNNAMED)  # unset: 1 x 16 x 4 = 64, and the warning names both flags
    assert a.totals.macs == 64
    assert any("--input-shape x=..." in w and "--dim x_0=N" in w for w in a.warnings), a.warnings


def test_dim_flag_sets_a_symbol() -> None:
    # batch 8: 8 x 4 x 16 = 512 MACs
    a = analyze_text(MLP, dims={"batch": 8})
    assert a.totals.macs == 512
    assert not a.warnings


def test_input_shape_flag() -> None:
    a = analyze_text(MLP, input_shapes={"x": (3, 16)})
    assert a.totals.macs == 3 * 4 * 16


def test_input_shape_wrong_rank() -> None:
    with pytest.raises(ShapeError, match="rank 2"):
        analyze_text(MLP, input_shapes={"x": (1, 3, 16)})


def test_input_shape_unknown_name_lists_inputs() -> None:
    with pytest.raises(ShapeError, match="inputs are: x"):
        analyze_text(MLP, input_shapes={"images": (1, 16)})


def test_dim_unknown_symbol_lists_symbols() -> None:
    with pytest.raises(ShapeError, match="symbols are: batch"):
        analyze_text(MLP, dims={"seq": 4})


def test_folding_recovers_an_expand_target_built_with_where() -> None:
    # PyTorch writes expand(-1, ...) as Where(Equal(shape, -1), 1, shape): ONNX's data
    # propagation stops at Where; onnxcost evaluates it, so Expand and Add keep their shapes.
    # Add: 2 x 12 x 16 = 384 FLOPs.
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[batch,seq,16] x, float[1,1,16] z) => (float[batch,seq,16] y) <int64[3] neg1 = {-1,-1,-1}> {
  s = Shape (x)
  ss = Shape (s)
  ones = ConstantOfShape <value = int64[1] {1}> (ss)
  eq = Equal (s, neg1)
  t = Where (eq, ones, s)
  e = Expand (z, t)
  y = Add (e, x)
}"""
    a = analyze_text(text, dims={"batch": 2, "seq": 12})
    assert [n.status for n in a.nodes if n.op_type in ("Expand", "Add")] == ["zero", "ok"]
    assert a.nodes[-1].flops == 384
    assert a.nodes[-2].output_shapes == ((2, 12, 16),)


def _split_shape_model() -> onnx.ModelProto:
    """x [batch, 3, 4] -> Reshape(x, Concat(batch, 3*4)): the target built from Shape(x) split
    in three (Split(1, 1, 1)), as onnxruntime's opt_level 2 writes a Llama's attention."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Split", ["s", "sizes"], ["a", "b", "c"], axis=0),
        helper.make_node("Squeeze", ["a", "axis0"], ["a0"]),
        helper.make_node("Squeeze", ["b", "axis0"], ["b0"]),
        helper.make_node("Squeeze", ["c", "axis0"], ["c0"]),
        helper.make_node("Mul", ["b0", "c0"], ["bc"]),
        helper.make_node("Unsqueeze", ["a0", "axis0"], ["a1"]),
        helper.make_node("Unsqueeze", ["bc", "axis0"], ["bc1"]),
        helper.make_node("Concat", ["a1", "bc1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [
            helper.make_tensor("sizes", TensorProto.INT64, [3], [1, 1, 1]),
            helper.make_tensor("axis0", TensorProto.INT64, [1], [0]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_a_multi_output_split_in_a_shape_subgraph_folds_every_output() -> None:
    # Shape(x) = [2, 3, 4] at batch 2; Split(1, 1, 1) gives [2], [3], [4]; the target is
    # [2, 3 x 4] = [2, 12], as onnx's reference evaluator reshapes x. Only the first output
    # was folded: b0 and c0 stayed unknown, and so did the Reshape.
    a = onnxcost.analyze(_split_shape_model(), dims={"batch": 2})
    shapes = {n.op_type: n.output_shapes for n in a.nodes}
    assert shapes["Split"] == ((1,), (1,), (1,))
    assert shapes["Reshape"] == ((2, 12),)
    assert [n.status for n in a.nodes if n.op_type == "Reshape"] == ["zero"]
    # The fold itself (also the whole-graph route's): every output gets its value.
    model = _split_shape_model()
    values = _known_values(model.graph)
    values["s"] = np.array([2, 3, 4], dtype=np.int64)
    _fold_node(model.graph.node[1], {}, values, 18)
    assert [values["a"].tolist(), values["b"].tolist(), values["c"].tolist()] == [[2], [3], [4]]


def test_causal_mask_keeps_attention_shapes() -> None:
    # A GPT-2 style mask: a constant [1,1,64,64] buffer sliced to [1,1,seq,seq] with ends from
    # Shape; scores = q.k^T [b,h,s,s]; Where keeps it; P.V [b,h,s,d].
    # b=2, h=4, s=10, d=8: QK^T = 2x4x10x10 outputs x 8 = 6,400 MACs; PV = 2x4x10x8 x 10 = 6,400.
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[batch,4,seq,8] q, float[batch,4,seq,8] k, float[batch,4,seq,8] v) => (float[batch,4,seq,8] o)
  <bool[1,1,64,64] bias = {1}, int64[1] two = {2}, int64[1] zero = {0}, int64[1] ax = {3}> {
  s = Shape (q)
  n = Gather <axis=0> (s, two)
  nu = Unsqueeze (n, zero)
  b1 = Slice (bias, zero, nu, two)
  b2 = Slice (b1, zero, nu, ax)
  kt = Transpose <perm=[0,1,3,2]> (k)
  sc = MatMul (q, kt)
  mn = Constant <value = float {-3.4e38}> ()
  msk = Where (b2, sc, mn)
  p = Softmax <axis=-1> (msk)
  o = MatMul (p, v)
}"""
    a = analyze_text(text, dims={"batch": 2, "seq": 10})
    matmuls = [n for n in a.nodes if n.op_type == "MatMul"]
    assert [n.macs for n in matmuls] == [6_400, 6_400]
    assert all(n.status != "unknown_shape" for n in a.nodes)
    # the bool mask buffer is not a parameter
    assert a.totals.params == 0


def test_declared_value_info_is_used_where_onnx_cannot_infer() -> None:
    # com.microsoft ops have no ONNX schema: inference gives "g" no shape. The model declares
    # g as [batch, 16]; with --dim batch=4 the MatMul after it resolves:
    # [4,16] x [16,8] = 32 outputs x 16 = 512 MACs.
    text = """
<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
g (float[batch,16] x) => (float[batch,8] y) <float[16,8] w = {1.0}, float[batch,16] g> {
  g = com.microsoft.FastGelu (x)
  y = MatMul (g, w)
}"""
    a = analyze_text(text, dims={"batch": 4})
    assert [n.status for n in a.nodes] == ["ok", "ok"]
    assert a.nodes[1].macs == 512


@pytest.mark.parametrize(
    ("dtype", "elem"),
    [
        (np.int64, TensorProto.INT64),
        (np.int32, TensorProto.INT32),
        (np.bool_, TensorProto.BOOL),
        (np.float32, TensorProto.FLOAT),
    ],
)
def test_constant_values_read_like_numpy_helper(dtype: type, elem: int) -> None:
    # The fast reader must agree with onnx's own, for raw bytes and for typed fields.
    from onnx import numpy_helper

    from onnxcost.shapes.folding import _tensor_to_array

    data = np.array([[3, 0, 1], [2, 5, 4]]).astype(dtype)
    raw = numpy_helper.from_array(data, "raw")
    typed = helper.make_tensor("typed", elem, [2, 3], data.reshape(-1).tolist())
    assert typed.HasField("raw_data") is False
    for t in (raw, typed):
        got = _tensor_to_array(t)
        assert got is not None
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, numpy_helper.to_array(t))


def test_constant_whose_data_does_not_fill_its_dims_is_unknown() -> None:
    from onnxcost.shapes.folding import _tensor_to_array

    short = TensorProto(name="short", data_type=TensorProto.INT64, dims=[4])
    short.int64_data.extend([1, 2, 3])  # 3 values for 4 elements
    assert _tensor_to_array(short) is None


def test_repeated_constants_share_one_read_only_array() -> None:
    from onnxcost.shapes.folding import _known_values

    m = parse("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) {
  a = Constant <value = int64[1] {0}> ()
  b = Constant <value = int64[1] {0}> ()
  y = Identity (x)
}""")
    values = _known_values(m.graph)
    a, b = values.get("a"), values.get("b")
    assert a is not None
    assert a is b
    assert not a.flags.writeable
    assert a.tolist() == [0]
