"""Shapes inside If branches and Loop/Scan bodies (``onnxcost.shapes.bodies``), each body in a
scope of its own over the one around it; which If branch the totals count; the bytes a
control-flow node moves; its peak with the counted body run in its place.

Before, the per-node pass folded and inferred the main graph only: a branch's shapes were
ONNX's whole-graph inference's, which neither knows the values onnxcost folds (a Range over a
length computed outside) nor keeps two branches' like-named tensors apart; a branch's Constant
was a weight in the other branch; and a control-flow node's bytes were those of its own inputs
and outputs, not its body's.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import onnxcost
from onnxcost.analysis.records import NodeRecord


def _if_model(cond_from_shape: bool = False) -> onnx.ModelProto:
    """x [n, 4]; k = n (Shape, Gather); If c:
    then: r = Range(0, k, 1) [n], cast, unsqueezed to [n, 1]; t = x * it [n, 4]; t @ w [4, 4]
    else: t = Concat(x, x) [n, 8] (the same name, another shape); t @ w2 [8, 4].
    ``cond_from_shape``: c = k > 2, else c is an input."""
    then_g = helper.make_graph(
        [
            helper.make_node("Range", ["zero", "k", "one"], ["r"], name="range"),
            helper.make_node("Cast", ["r"], ["rf"], name="cast", to=TensorProto.FLOAT),
            helper.make_node("Unsqueeze", ["rf", "axes"], ["ru"], name="unsqueeze"),
            helper.make_node("Mul", ["x", "ru"], ["t"], name="mul"),
            helper.make_node("MatMul", ["t", "w"], ["y_then"], name="then_matmul"),
        ],
        "then",
        [],
        [helper.make_tensor_value_info("y_then", TensorProto.FLOAT, None)],
    )
    else_g = helper.make_graph(
        [
            helper.make_node("Concat", ["x", "x"], ["t"], name="concat", axis=1),
            helper.make_node("MatMul", ["t", "w2"], ["y_else"], name="else_matmul"),
        ],
        "else",
        [],
        [helper.make_tensor_value_info("y_else", TensorProto.FLOAT, None)],
    )
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "zero"], ["k"], name="gather", axis=0),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])]
    inits = [
        numpy_helper.from_array(np.array(1, np.int64), "one"),
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array([1], np.int64), "axes"),
        numpy_helper.from_array(np.ones((4, 4), np.float32), "w"),
        numpy_helper.from_array(np.ones((8, 4), np.float32), "w2"),
    ]
    if cond_from_shape:
        nodes.append(helper.make_node("Greater", ["k", "two"], ["c"], name="greater"))
        inits.append(numpy_helper.from_array(np.array(2, np.int64), "two"))
    else:
        inputs.append(helper.make_tensor_value_info("c", TensorProto.BOOL, []))
    nodes.append(
        helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g, else_branch=else_g)
    )
    graph = helper.make_graph(
        nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _by_name(a: onnxcost.Analysis) -> dict[str, NodeRecord]:
    return {r.name: r for r in a.nodes}


def test_a_branch_folds_what_it_reads_from_outside_and_keeps_its_own_names() -> None:
    a = onnxcost.analyze(_if_model(), dims={"n": 3})
    nodes = _by_name(a)
    # then: Range(0, 3, 1) -> [3] (was unknown: its length is a value folded outside)
    assert nodes["range"].output_shapes == ((3,),)
    assert nodes["unsqueeze"].output_shapes == ((3, 1),)
    # t is [3, 4] here and [3, 8] in the other branch (the then branch's t was [3, 8])
    assert nodes["mul"].output_shapes == ((3, 4),)
    assert nodes["concat"].output_shapes == ((3, 8),)
    assert nodes["then_matmul"].macs == 3 * 4 * 4  # 48, was 0 (unknown_shape)
    assert nodes["else_matmul"].macs == 3 * 8 * 4  # 96
    assert not [r.name for r in a.nodes if r.status == "unknown_shape"]
    # c is unknown: the larger branch (else: 192 FLOPs against 12 + 96) counts, as before
    assert (a.totals.macs, a.totals.flops) == (96, 192)
    assert a.warnings == (
        "If node 'if': both branches listed; totals take the larger (else_branch)",
    )
    assert nodes["if"].output_shapes == ((3, 4),)  # both branches give [3, 4]


def test_a_condition_known_at_the_shapes_counts_the_branch_that_runs() -> None:
    # c = n > 2: at n = 3 the then branch runs (48 MACs), at n = 2 the else branch (2 x 8 x 4)
    three = onnxcost.analyze(_if_model(cond_from_shape=True), dims={"n": 3})
    two = onnxcost.analyze(_if_model(cond_from_shape=True), dims={"n": 2})
    assert (three.totals.macs, two.totals.macs) == (48, 64)
    assert three.warnings == (
        "If node 'if': its condition 'c' is true at these shapes: the totals count "
        "then_branch; else_branch is listed, not counted",
    )
    assert two.warnings == (
        "If node 'if': its condition 'c' is false at these shapes: the totals count "
        "else_branch; then_branch is listed, not counted",
    )
    counted = {r.name for r, c in zip(three.nodes, three._counted, strict=True) if c}
    assert {"range", "mul", "then_matmul"} <= counted
    assert counted.isdisjoint({"concat", "else_matmul"})
    assert sum(s.macs for s in three.by_op_type) == 48


def test_an_if_moves_the_bytes_of_its_counted_branch() -> None:
    a = onnxcost.analyze(_if_model(), dims={"n": 3})
    # else (counted): Concat reads x twice, 2 x 3 x 4 x 4 B = 96, writes t 3 x 8 x 4 = 96;
    # MatMul reads t 96 + w2 8 x 4 x 4 = 128, writes y 48. The If: read 320, written 144 (it
    # was its condition's 1 byte read, and y's 48 written).
    node = _by_name(a)["if"]
    assert (node.bytes_read, node.bytes_written, node.bytes_read_weights) == (320, 144, 128)
    # Shape reads nothing and writes s [2] int64 = 16; Gather reads one element of s and its
    # index (8 + 8) and writes k = 8: totals read 0 + 16 + 320, written 16 + 8 + 144
    assert (a.totals.bytes_read, a.totals.bytes_written) == (336, 168)


def test_the_peak_runs_the_counted_branch_in_the_ifs_place() -> None:
    a = onnxcost.analyze(_if_model(), dims={"n": 3})
    # x [3, 4] = 48 B, c 1 B, s 16 B, k 8 B; in the else branch t [3, 8] = 96 B, y 48 B.
    # shape: x + c + s = 65; gather: x + c + s + k = 73; the If reads c: x + c = 49 (k is
    # read by the branch that does not run); concat: x + t = 144; matmul: t + y = 144; the
    # If's end: y = 48. The peak is 144 at concat (it was 73: the If one step, x + c + y).
    assert a.totals.peak_activation_bytes == 144
    assert a.peak_activation.node == "concat"


def test_a_branchs_constant_is_no_weight_in_the_other_branch() -> None:
    then_g = helper.make_graph(
        [
            helper.make_node(
                "Constant",
                [],
                ["z"],
                name="const",
                value=numpy_helper.from_array(np.ones((1, 4), np.float32)),
            ),
            helper.make_node("Add", ["x", "z"], ["y_then"], name="then_add"),
        ],
        "then",
        [],
        [helper.make_tensor_value_info("y_then", TensorProto.FLOAT, None)],
    )
    else_g = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["z"], name="relu"),
            helper.make_node("Add", ["z", "x"], ["y_else"], name="else_add"),
        ],
        "else",
        [],
        [helper.make_tensor_value_info("y_else", TensorProto.FLOAT, None)],
    )
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g, else_branch=else_g)],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    a = onnxcost.analyze(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    nodes = _by_name(a)
    assert nodes["const"].output_shapes == ((1, 4),)  # was [3, 4], the other branch's z
    # then: x [3, 4] = 48 B and the constant z [1, 4] = 16 B, a weight
    assert (nodes["then_add"].bytes_read, nodes["then_add"].bytes_read_weights) == (64, 16)
    # else: z is Relu's output, an activation (it was read as a 48-byte weight)
    assert (nodes["else_add"].bytes_read, nodes["else_add"].bytes_read_weights) == (96, 0)


def test_a_scan_moves_its_body_s_bytes_each_iteration() -> None:
    # Scan over x [5, 4] (state h [2]); the body reshapes its row [4] to [1, 4], a shape
    # computed outside (Concat of 1 and x's dim 1), and multiplies it by w [4, 4].
    body = helper.make_graph(
        [
            helper.make_node("Reshape", ["xt", "target"], ["xr"], name="reshape"),
            helper.make_node("MatMul", ["xr", "w"], ["yt"], name="body_matmul"),
            helper.make_node("Identity", ["h"], ["h2"], name="keep"),
        ],
        "body",
        [
            helper.make_tensor_value_info("h", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("xt", TensorProto.FLOAT, None),
        ],
        [
            helper.make_tensor_value_info("h2", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("yt", TensorProto.FLOAT, None),
        ],
    )
    graph = helper.make_graph(
        [
            helper.make_node("Shape", ["x"], ["s"], name="shape"),
            helper.make_node("Slice", ["s", "starts", "ends"], ["d"], name="slice"),
            helper.make_node("Concat", ["one", "d"], ["target"], name="concat", axis=0),
            helper.make_node(
                "Scan", ["h0", "x"], ["h", "y"], name="scan", body=body, num_scan_inputs=1
            ),
        ],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 4]),
            helper.make_tensor_value_info("h0", TensorProto.FLOAT, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [
            numpy_helper.from_array(np.array([1], np.int64), "one"),
            numpy_helper.from_array(np.array([1], np.int64), "starts"),
            numpy_helper.from_array(np.array([2], np.int64), "ends"),
            numpy_helper.from_array(np.ones((4, 4), np.float32), "w"),
        ],
    )
    a = onnxcost.analyze(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    nodes = _by_name(a)
    assert nodes["body_matmul"].macs == 5 * 4 * 4  # [1, 4] x [4, 4] a row, 5 rows
    # a row: Reshape reads xt 16 B + target [2] int64 16 B, writes xr 16; MatMul reads xr
    # 16 + w 64, writes 16; Identity reads and writes h 8: read 32 + 80 + 8 = 120, written
    # 16 + 16 + 8 = 40, 5 times (the Scan was x and h0 read, 88 B, and h and y written)
    assert (nodes["scan"].bytes_read, nodes["scan"].bytes_written) == (600, 200)
    assert nodes["scan"].bytes_read_weights == 5 * 64
