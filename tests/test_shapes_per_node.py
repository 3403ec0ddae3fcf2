"""Per-node inference (graphs without subgraphs) against ONNX's whole-graph inference.

``shapes.infer`` given the graph view infers a flat graph node by node, once per distinct
node; without the view it runs ``onnx.shape_inference.infer_shapes`` on the whole model,
then the same per-node pass where that left shapes unknown. The two must give every
tensor a node reads or writes the same element type and shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import onnx
import onnx.shape_inference
import pytest
from onnxcost_testing import parse

from onnxcost import zoo
from onnxcost.load.graph import build, name_nodes
from onnxcost.shapes.infer import infer

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted([*ROOT.glob("models/*.onnx"), *ROOT.glob("tests/data/optimized/*.onnx")])

Types = dict[str, tuple[int, object]]


def _both(
    model: onnx.ModelProto,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dims: Mapping[str, int] | None = None,
) -> tuple[Types, Types]:
    """(per-node types, whole-graph types) of every tensor a node reads or writes."""
    flat, whole = onnx.ModelProto(), onnx.ModelProto()
    flat.CopyFrom(model)
    whole.CopyFrom(model)
    name_nodes(flat.graph)
    view = build(flat.graph)
    assert not view.outer_reads, "the per-node path is for graphs without subgraphs"
    per_node = infer(flat, input_shapes, dims, view)
    assert per_node.model is flat  # inferred in place: no whole-graph copy was made
    whole_graph = infer(whole, input_shapes, dims)
    assert whole_graph.model is not whole
    touched = {t for n in model.graph.node for t in (*n.input, *n.output) if t}
    touched |= {vi.name for vi in (*model.graph.input, *model.graph.output)}

    def pick(types: Mapping[str, object]) -> Types:
        return {
            n: (t.elem_type, t.shape)  # type: ignore[attr-defined]
            for n, t in types.items()
            if n in touched
        }

    return pick(per_node.types), pick(whole_graph.types)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_shipped_and_optimized_files(path: Path) -> None:
    per_node, whole_graph = _both(onnx.load(path, load_external_data=False))
    assert per_node == whole_graph
    assert per_node  # something was typed


@pytest.mark.parametrize("name", zoo.names())
def test_builtin_models(name: str) -> None:
    per_node, whole_graph = _both(zoo.build(name, weights=False))
    assert per_node == whole_graph


def test_symbolic_dims_set_by_flags() -> None:
    model = parse("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[batch, seq, 8] x) => (float[batch, seq, 4] y) <float[8,4] w = {1.0}> {
  s = Shape (x)
  h = Reshape (x, s)
  y = MatMul (h, w)
}""")
    per_node, whole_graph = _both(model, dims={"batch": 3}, input_shapes=None)
    assert per_node == whole_graph
    assert per_node["y"] == (onnx.TensorProto.FLOAT, (3, 1, 4))  # seq defaulted to 1


def test_contrib_op_takes_its_declared_shape_downstream() -> None:
    # onnx has no schema for com.microsoft::FusedMatMul: its output comes from value_info,
    # and the Relu after it is inferred from that.
    model = parse("""
<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
g (float[2,8] x, float[8,4] w) => (float[2,4] y) <float[2,4] f> {
  f = com.microsoft.FusedMatMul <alpha = 1.0> (x, w)
  y = Relu (f)
}""")
    per_node, whole_graph = _both(model)
    assert per_node == whole_graph
    assert per_node["y"] == (onnx.TensorProto.FLOAT, (2, 4))


def test_nodes_that_differ_only_in_optional_outputs_are_inferred_apart() -> None:
    # Both LayerNormalizations read the same tensors with the same attributes; the second
    # also writes Mean and InvStdDev, each [2, 1] (reduced over axis -1, kept). Reusing the
    # first node's inference would leave those two untyped.
    model = parse("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,8] x, float[8] s, float[8] b) => (float[2,8] y1, float[2,8] y2, mean, inv) {
  y1 = LayerNormalization (x, s, b)
  y2, mean, inv = LayerNormalization (x, s, b)
}""")
    per_node, whole_graph = _both(model)
    assert per_node == whole_graph
    assert per_node["mean"] == per_node["inv"] == (onnx.TensorProto.FLOAT, (2, 1))


def test_repeated_layers_are_inferred_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Eight identical Relu -> Add layers: the first layer's two nodes are inferred by ONNX,
    # the other seven layers reuse them; the whole-graph pass is never called.
    layers = "\n".join(f"  r{i} = Relu (a{i})\n  a{i + 1} = Add (r{i}, b)" for i in range(8))
    model = parse(f"""
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,16] a0, float[16] b) => (float[2,16] a8) {{
{layers}
}}""")
    calls: list[str] = []
    original = onnx.shape_inference.infer_node_outputs

    def counting(
        schema: onnx.defs.OpSchema, node: onnx.NodeProto, *a: object, **k: object
    ) -> object:
        calls.append(node.op_type)
        return original(schema, node, *a, **k)  # type: ignore[arg-type]

    def forbidden(*a: object, **k: object) -> None:
        raise AssertionError("whole-graph inference ran on a graph without subgraphs")

    monkeypatch.setattr(onnx.shape_inference, "infer_node_outputs", counting)
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", forbidden)
    name_nodes(model.graph)
    view = build(model.graph)
    result = infer(model, None, None, view)
    assert sorted(calls) == ["Add", "Relu"]
    assert all(result.types[f"a{i}"].shape == (2, 16) for i in range(9))
    # Every Relu is one kind, every Add another: the analyzer costs each kind once.
    relu, add = result.kinds[0], result.kinds[1]
    assert result.kinds == (relu, add) * 8
    assert relu != add
    assert -1 not in (relu, add)


def test_large_float_weights_are_not_values_so_layers_that_differ_only_in_them_are_one_kind() -> (
    None
):
    # Two Adds of a [2,80] input and a bias, as two layers of an export: biases of 80 floats
    # (over the 64-element limit) with different values leave both Adds one kind; scales of
    # 4 floats are read as values, so two Muls with different scales are two kinds.
    model = parse("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,80] x, float[2,4] z) => (float[2,80] a2, float[2,4] m2)
  <float[80] b1 = {1.0}, float[80] b2 = {2.0}, float[4] s1 = {1.0}, float[4] s2 = {2.0}> {
  a1 = Add (x, b1)
  a2 = Add (a1, b2)
  m1 = Mul (z, s1)
  m2 = Mul (m1, s2)
}""")
    for t in model.graph.initializer:  # the parser fills one value: give every element one
        value = t.float_data[0]
        del t.float_data[:]
        t.float_data.extend([value] * t.dims[0])
    name_nodes(model.graph)
    result = infer(model, None, None, build(model.graph))
    assert result.kinds[0] == result.kinds[1] != -1
    assert result.kinds[2] != result.kinds[3]


def test_a_declared_type_that_replaces_an_inferred_one_makes_a_node_its_own_kind() -> None:
    # Both Reshapes infer [N] with N unknown (the target shape is an input); value_info
    # declares r2 as [6], so r2's node no longer has r1's node's output type.
    model = parse("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x, int64[1] s) => (float[6] r2) <float[6] r2> {
  r1 = Reshape (x, s)
  r2 = Reshape (x, s)
}""")
    name_nodes(model.graph)
    result = infer(model, None, None, build(model.graph))
    assert result.types["r2"].shape == (6,)
    assert result.kinds[0] != -1
    assert result.kinds[1] == -1


def test_a_declared_type_reaches_the_nodes_that_read_it() -> None:
    # r1 and r2 are one signature (Reshape to an unknown [N]); value_info declares r2 as [6].
    # Relu (r1) is inferred first, as [N]; Relu (r2) reads a tensor of another type now, so
    # it must be inferred again ([6]), not take Relu (r1)'s [N] as a node of the same inputs.
    model = parse("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x, int64[1] s) => (y1, y2) <float[6] r2> {
  r1 = Reshape (x, s)
  r2 = Reshape (x, s)
  y1 = Relu (r1)
  y2 = Relu (r2)
}""")
    name_nodes(model.graph)
    result = infer(model, None, None, build(model.graph))
    assert result.types["y2"].shape == (6,)
    assert result.types["y1"].shape != (6,)
    assert result.kinds[2] != result.kinds[3]


def test_subgraphs_go_through_whole_graph_inference(monkeypatch: pytest.MonkeyPatch) -> None:
    model = parse("""
<ir_version: 8, opset_import: ["" : 17]>
g (bool c, float[4] x) => (float[4] y) {
  y = If (c) <
    then_branch = t () => (float[4] a) { a = Relu (x) },
    else_branch = e () => (float[4] b) { b = Neg (x) }
  >
}""")
    ran: list[bool] = []
    original = onnx.shape_inference.infer_shapes

    def whole(*a: object, **k: object) -> onnx.ModelProto:
        ran.append(True)
        return original(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", whole)
    name_nodes(model.graph)
    view = build(model.graph)
    result = infer(model, None, None, view)
    assert ran == [True]
    assert result.types["a"].shape == (4,)


def _nonzero_of_a_constant() -> onnx.ModelProto:
    """x [2, 8] -> Gather(axis 1) at Squeeze(NonZero(ConstantOfShape([8], 1))) -> MatMul by
    W [8, 4]: torch's ``as_strided`` as the TorchScript exporter writes it (Longformer)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Constant", [], ["n"], value=numpy_helper.from_array(np.array([8]))),
        helper.make_node(
            "ConstantOfShape",
            ["n"],
            ["ones"],
            value=helper.make_tensor("v", TensorProto.INT64, [1], [1]),
        ),
        helper.make_node("NonZero", ["ones"], ["nz"]),
        helper.make_node("Constant", [], ["ax"], value=numpy_helper.from_array(np.array([0]))),
        helper.make_node("Squeeze", ["nz", "ax"], ["idx"]),
        helper.make_node("Gather", ["x", "idx"], ["g"], axis=1),
        helper.make_node("MatMul", ["g", "W"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "nonzero",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones((8, 4), np.float32), "W")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_folded_value_gives_its_tensor_the_shape_inference_left_unknown() -> None:
    # ONNX's inference gives NonZero's output [1, ?]; its folded value, the indices 0..7 of
    # the 8 ones, is [1, 8], and so the Gather is [2, 8] and the MatMul 2 x 8 x 4 = 64 MACs
    # (before, 4 nodes were unknown_shape and it counted 0). Both inference routes agree.
    import numpy as np
    import onnxruntime as ort

    import onnxcost

    model = _nonzero_of_a_constant()
    per_node, whole_graph = _both(model)
    assert per_node == whole_graph
    assert per_node["nz"] == (onnx.TensorProto.INT64, (1, 8))
    a = onnxcost.analyze(model)
    assert a.totals.macs == 64
    assert all(n.status != "unknown_shape" for n in a.nodes)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"x": np.zeros((2, 8), np.float32)})
    assert a.nodes[-1].output_shapes == (y.shape,)
