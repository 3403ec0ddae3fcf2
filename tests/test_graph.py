"""Graph checks and the walk: cycles, dangling inputs, unique names, liveness, shared weights."""

from __future__ import annotations

import pytest
from onnx import helper
from onnxcost_testing import analyze_text, parse

import onnxcost
from onnxcost.errors import GraphError


def test_cycle_is_reported_with_its_nodes() -> None:
    m = helper.make_model(
        helper.make_graph(
            [
                helper.make_node("Add", ["x", "c"], ["a"], name="A"),
                helper.make_node("Relu", ["a"], ["c"], name="B"),
            ],
            "g",
            [helper.make_tensor_value_info("x", 1, [2])],
            [helper.make_tensor_value_info("a", 1, [2])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    with pytest.raises(GraphError, match="cycle"):
        onnxcost.analyze(m)


def test_dangling_input_names_the_node_and_tensor() -> None:
    m = helper.make_model(
        helper.make_graph(
            [helper.make_node("Add", ["x", "ghost"], ["y"], name="add1")],
            "g",
            [helper.make_tensor_value_info("x", 1, [2])],
            [helper.make_tensor_value_info("y", 1, [2])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    with pytest.raises(GraphError, match=r"'add1'.*'ghost'"):
        onnxcost.analyze(m)


def test_undeclared_domain_is_an_error() -> None:
    m = helper.make_model(
        helper.make_graph(
            [helper.make_node("Foo", ["x"], ["y"], domain="com.example")],
            "g",
            [helper.make_tensor_value_info("x", 1, [2])],
            [helper.make_tensor_value_info("y", 1, [2])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    with pytest.raises(GraphError, match=r"com\.example"):
        onnxcost.analyze(m)


def test_unknown_op_is_unsupported_not_a_crash() -> None:
    text = """
<ir_version: 8, opset_import: ["" : 17, "com.example" : 1]>
g (float[1,8] x) => (float[1,8] z) <float[8,8] w = {1.0}> {
  y = com.example.Mystery (x)
  z = MatMul (y, w)
}"""
    a = analyze_text(text)
    assert [n.status for n in a.nodes] == ["unsupported", "unknown_shape"]
    assert a.unsupported == ("com.example::Mystery",)
    assert any("no cost formula" in w for w in a.warnings)


def test_nodes_out_of_order_are_sorted() -> None:
    m = helper.make_model(
        helper.make_graph(
            [
                helper.make_node("Relu", ["a"], ["y"], name="second"),
                helper.make_node("Neg", ["x"], ["a"], name="first"),
            ],
            "g",
            [helper.make_tensor_value_info("x", 1, [2])],
            [helper.make_tensor_value_info("y", 1, [2])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    assert [n.name for n in onnxcost.analyze(m).nodes] == ["first", "second"]


def test_unnamed_nodes_get_unique_stable_names() -> None:
    m = parse("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) {
  a = Relu (x)
  y = Relu (a)
}""")
    for n in m.graph.node:
        n.name = ""
    assert [n.name for n in onnxcost.analyze(m).nodes] == ["Relu_0", "Relu_1"]


def test_shared_weight_counted_once() -> None:
    # A tied embedding: the same [100, 8] table feeds Gather and the output MatMul.
    # params = 100 x 8 = 800 once, not 1,600.
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (int64[1,5] ids) => (float[1,5,100] logits) <float[100,8] emb = {1.0}> {
  h = Gather (emb, ids)
  t = Transpose <perm=[1,0]> (emb)
  logits = MatMul (h, t)
}"""
    a = analyze_text(text)
    assert a.totals.params == 800
    assert [n.params for n in a.nodes] == [800, 0, 0]
    # MatMul [1,5,8] x [8,100] = 500 outputs x 8 = 4,000 MACs
    assert a.totals.macs == 4_000


def test_peak_activation_by_liveness() -> None:
    # x [1,1000] f32 = 4,000 B. a = Relu(x), b = Relu(a), y = Add(a, b).
    # step 0 (a): x, a live = 8,000; step 1 (b): x?, x's last use is step 0 -> a, b = 8,000;
    # step 2 (y): a, b, y = 12,000 -> peak 12,000 B.
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1000] x) => (float[1,1000] y) {
  a = Relu (x)
  b = Relu (a)
  y = Add (a, b)
}"""
    assert analyze_text(text).totals.peak_activation_bytes == 12_000


def test_weights_are_not_activations() -> None:
    # x [1,64] = 256 B, y [1,64] = 256 B; W [64,64] (16 KiB) is a weight: peak = 512 B.
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,64] x) => (float[1,64] y) <float[64,64] w = {1.0}> {
  y = MatMul (x, w)
}"""
    assert analyze_text(text).totals.peak_activation_bytes == 512
