"""Graph checks and the walk: cycles, dangling inputs, unique names, liveness, shared weights."""

from __future__ import annotations

import pytest
from onnx import helper
from onnxcost_testing import analyze_text, parse

import onnxcost
from onnxcost.errors import GraphError
from onnxcost.load import graph


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


def test_out_of_order_view_maps_tensors_to_their_writers_after_sorting() -> None:
    from onnxcost.load.graph import build

    m = helper.make_graph(
        [
            helper.make_node("Relu", ["a"], ["y"], name="second"),
            helper.make_node("Neg", ["x"], ["a"], name="first"),
        ],
        "g",
        [helper.make_tensor_value_info("x", 1, [2])],
        [helper.make_tensor_value_info("y", 1, [2])],
    )
    view = build(m)
    assert view.names == ("first", "second")
    assert view.writer == {"a": 0, "y": 1}
    assert view.producer == {"a": "first", "y": "second"}
    assert view.last_use == {"x": 0, "a": 1}


def test_tensor_written_twice_names_both_nodes() -> None:
    m = helper.make_model(
        helper.make_graph(
            [
                helper.make_node("Relu", ["x"], ["a"], name="one"),
                helper.make_node("Neg", ["x"], ["a"], name="two"),
            ],
            "g",
            [helper.make_tensor_value_info("x", 1, [2])],
            [helper.make_tensor_value_info("a", 1, [2])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    with pytest.raises(GraphError, match=r"'a' is written by both 'one' and 'two'.*SSA"):
        onnxcost.analyze(m)


def test_omitted_outputs_are_not_written_twice() -> None:
    # Two Dropouts without their optional mask output ('') write 'a' and 'y' once each.
    m = helper.make_model(
        helper.make_graph(
            [
                helper.make_node("Dropout", ["x"], ["a", ""], name="d1"),
                helper.make_node("Dropout", ["a"], ["y", ""], name="d2"),
            ],
            "g",
            [helper.make_tensor_value_info("x", 1, [2])],
            [helper.make_tensor_value_info("y", 1, [2])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    assert [n.name for n in onnxcost.analyze(m).nodes] == ["d1", "d2"]


def test_the_first_node_reading_a_missing_tensor_is_named() -> None:
    m = helper.make_model(
        helper.make_graph(
            [
                helper.make_node("Add", ["x", "ghost2"], ["a"], name="add1"),
                helper.make_node("Add", ["a", "ghost1"], ["y"], name="add2"),
            ],
            "g",
            [helper.make_tensor_value_info("x", 1, [2])],
            [helper.make_tensor_value_info("y", 1, [2])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    with pytest.raises(GraphError, match=r"^node 'add1' \(Add\) reads tensor 'ghost2'"):
        onnxcost.analyze(m)


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


def test_duplicate_names_and_subgraph_nodes_are_named_before_indexing() -> None:
    # Two nodes named "n": the second becomes "n_1". The If's body nodes are unnamed:
    # they take <op_type>_<index> names (index within their own graph).
    m = parse("""
<ir_version: 8, opset_import: ["" : 17]>
g (bool c, float[2] x) => (float[2] y) {
  a = Relu (x)
  b = Relu (a)
  y = If (c) <
    then_branch = t () => (float[2] p) { p = Neg (b) },
    else_branch = e () => (float[2] q) { q = Abs (b) }
  >
}""")
    m.graph.node[0].name = m.graph.node[1].name = "n"
    names = [n.name for n in onnxcost.analyze(m).nodes]
    assert names[:2] == ["n", "n_1"]
    assert sorted(names[3:]) == ["Abs_0", "Neg_0"]
    # Main-graph names all set and distinct: the bodies are named all the same.
    m.graph.node[1].name, m.graph.node[2].name = "k", "branch"
    names = [n.name for n in onnxcost.analyze(m).nodes]
    assert names[:3] == ["n", "k", "branch"]
    assert sorted(names[3:]) == ["Abs_0", "Neg_0"]


def test_named_graph_without_subgraphs_skips_the_naming_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    m = parse("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) {
  a = Relu (x)
  y = Relu (a)
}""")
    m.graph.node[0].name, m.graph.node[1].name = "first", "second"

    def forbidden(*a: object, **k: object) -> None:
        raise AssertionError("a graph that needs no names went through name_nodes")

    monkeypatch.setattr(graph, "name_nodes", forbidden)
    view = graph.build(m.graph, name_unnamed=True)
    assert view.names == ("first", "second")
    for other in ("", "first"):  # an unnamed node, a duplicate name
        m.graph.node[1].name = other
        with pytest.raises(AssertionError, match="needs no names"):
            graph.build(m.graph, name_unnamed=True)


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


def test_networkx_view_edges_carry_tensors_and_bytes() -> None:
    # a = Relu(x) [1,1000] f32; y = Add(a, a): one edge Relu -> Add carrying 'a' once,
    # 1,000 x 4 B = 4,000 B. b = Neg(x) feeds Mul with a: edges Relu -> Mul and Neg -> Mul.
    from onnxcost.load.graph import build
    from onnxcost.shapes.infer import infer

    m = parse("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1000] x) => (float[1,1000] y, float[1,1000] z) {
  a = Relu (x)
  y = Add (a, a)
  b = Neg (x)
  z = Mul (a, b)
}""")
    for i, n in enumerate(m.graph.node):
        n.name = f"n{i}"
    shapes = infer(m)
    view = build(shapes.model.graph, shapes.types)
    dag = view.dag
    assert sorted(dag.edges) == [("n0", "n1"), ("n0", "n3"), ("n2", "n3")]
    assert dag.edges["n0", "n1"] == {"tensors": ["a"], "bytes": 4_000}
    assert dag.nodes["n3"]["index"] == 3
    assert view.dag is dag  # built once
    assert view.last_use == {"x": 2, "a": 3, "b": 3}


def test_out_of_order_subgraph_reader_keeps_liveness() -> None:
    # The If reads 'a' from the outer scope through its branches; listed before the node
    # that writes 'a', it must be ordered after it, and 'a' lives until the If.
    then_g = helper.make_graph(
        [helper.make_node("Relu", ["a"], ["t"], name="then_relu")],
        "then",
        [],
        [helper.make_tensor_value_info("t", 1, [4])],
    )
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["a"], ["e"], name="else_neg")],
        "else",
        [],
        [helper.make_tensor_value_info("e", 1, [4])],
    )
    m = helper.make_model(
        helper.make_graph(
            [
                helper.make_node(
                    "If", ["c"], ["y"], name="if", then_branch=then_g, else_branch=else_g
                ),
                helper.make_node("Concat", ["x", "x"], ["a"], name="concat", axis=0),
            ],
            "g",
            [
                helper.make_tensor_value_info("x", 1, [2]),
                helper.make_tensor_value_info("c", 9, []),
            ],
            [helper.make_tensor_value_info("y", 1, [4])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    a = onnxcost.analyze(m)
    assert [n.name for n in a.nodes if n.graph == ""] == ["concat", "if"]
    # x [2] f32 = 8 B, c bool = 1 B, a = t = y = [4] f32 = 16 B. The If's counted branch runs
    # in its place (the larger; both cost 4 FLOPs: then_branch): the If reads c, then_relu
    # reads a and writes t, the If writes y from t.
    # At Concat: x + c + a = 25 B; at the If: c + a = 17 B; at then_relu: a + t = 32 B (a is
    # read by the branch, so it lives until then_relu; were that missed, a would die at the
    # Concat that writes it, then_relu hold t = 16 B and the peak be first at the If's end);
    # at the If's end: t + y = 32 B.
    assert a.totals.peak_activation_bytes == 32
    assert a.peak_activation.node == "then_relu"
    assert sorted(t.tensor for t in a.peak_activation.live) == ["a", "t"]
