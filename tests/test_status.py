"""Node statuses and what the analysis says about them: Dropout's mask at every opset, Shape and
Size reading no data, why a node has no shape, and formulas that fail (status error)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from onnx import TensorProto, helper
from onnxcost_testing import analyze_text

import onnxcost
from onnxcost.costs import REGISTRY, Cost, OpContext
from onnxcost.costs._registry import OpSpec


@pytest.mark.parametrize(
    ("opset", "written"),
    [
        # Y float [2, 3] = 24 B; the mask: float (T) before opset 10 = 24 B, bool from 10 = 6 B
        (7, 24 + 24),
        (9, 24 + 24),
        (10, 24 + 6),
        (12, 24 + 6),
        (13, 24 + 6),
    ],
)
def test_dropout_with_its_mask_is_sized_at_every_opset(opset: int, written: int) -> None:
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("Dropout", ["x"], ["y", "mask"])],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        ),
        opset_imports=[helper.make_opsetid("", opset)],
    )
    (node,) = onnxcost.analyze(model).nodes
    assert node.status == "zero"
    assert node.output_shapes == ((2, 3), (2, 3))
    assert (node.bytes_read, node.bytes_written) == (24, written)


def test_shape_and_size_read_no_data() -> None:
    # Shape and Size read x's shape, never its 4 x 1024 x 4 B = 16,384 B of data.
    # Shape writes int64[2] = 16 B; Size an int64 scalar = 8 B.
    a = analyze_text("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[4,1024] x) => (int64[2] s, int64 n) {
  s = Shape (x)
  n = Size (x)
}""")
    assert [(r.op_type, r.bytes_read, r.bytes_written) for r in a.nodes] == [
        ("Shape", 0, 16),
        ("Size", 0, 8),
    ]
    assert a.totals.bytes_read == 0


def test_a_failing_formula_is_an_error_not_an_unknown_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(ctx: OpContext) -> Cost:
        raise KeyError("no such attribute")

    lookup = REGISTRY.lookup

    def patched(domain: str, op_type: str, opset: int) -> OpSpec | None:
        spec = lookup(domain, op_type, opset)
        return replace(spec, formula=broken) if spec is not None and op_type == "Relu" else spec

    monkeypatch.setattr(REGISTRY, "lookup", patched)
    a = analyze_text("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,8] x) => (float[2,8] z) {
  y = Relu (x)
  z = Neg (y)
}""")
    relu, neg = a.nodes
    assert relu.status == "error"
    assert relu.note == "cost formula raised KeyError: 'no such attribute'"
    assert (relu.flops, neg.status, neg.flops) == (0, "ok", 16)  # Neg: one per element of 2 x 8
    assert any(
        "1 nodes count as 0 because their cost formula failed" in w and "Relu_0 (Relu)" in w
        for w in a.warnings
    )
    assert not any("unknown_shape" in w for w in a.warnings)


def test_unknown_shape_warning_names_the_op_and_the_input() -> None:
    # MatMulBnb4's formula sizes it from its inputs and attributes, but neither onnx nor onnxcost
    # can shape its output: the Relu after it is unknown_shape; the warning names MatMulBnb4,
    # not the inputs.
    a = analyze_text("""
<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
g (float[2,8] x, uint8[32] b, float[4] s) => (float[2,8] z) {
  y = com.microsoft.MatMulBnb4 <K = 8, N = 8, block_size = 16, quant_type = 1> (x, b, s)
  z = Relu (y)
}""")
    bnb4, relu = a.nodes
    assert (bnb4.status, bnb4.output_shapes, relu.status) == ("ok", (None,), "unknown_shape")
    assert relu.note == "input 0 'y' has no known shape"
    (warning,) = [w for w in a.warnings if "unknown_shape" in w]
    assert warning == (
        "1 nodes have shapes that could not be resolved and count as 0 (status unknown_shape); "
        "they start at MatMulBnb4_0 (com.microsoft::MatMulBnb4): output 0 'y' has no shape: "
        "onnx has no shape inference for com.microsoft::MatMulBnb4 and onnxcost no rule"
    )


def test_a_formula_that_cannot_size_its_node_is_named() -> None:
    # MatMulNBits with K=16 on an A whose last dim is 8: every shape is known, the formula
    # cannot size it; the warning says so rather than blaming the input shapes.
    a = analyze_text("""
<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
g (float[2,8] x, uint8[4,1,8] b, float[4] s) => (float[2,4] y) {
  y = com.microsoft.MatMulNBits <K=16, N=4, bits=4, block_size=16> (x, b, s)
}""")
    (node,) = a.nodes
    assert node.status == "unknown_shape"
    assert node.note == "its formula could not size it: MatMulNBits_0: A's last dim 8 is not K=16"
    assert any("they start at MatMulNBits_0" in w for w in a.warnings)


def test_unsupported_op_is_named_where_unknown_shapes_start() -> None:
    a = analyze_text("""
<ir_version: 8, opset_import: ["" : 17, "com.example" : 1]>
g (float[1,8] x) => (float[1,8] z) <float[8,8] w = {1.0}> {
  y = com.example.Mystery (x)
  z = MatMul (y, w)
}""")
    (warning,) = [w for w in a.warnings if "unknown_shape" in w]
    assert "they start at Mystery_0 (com.example::Mystery)" in warning
