"""The walk: control flow, model-local functions, conventions, scopes, the JSON contract."""

from __future__ import annotations

import dataclasses
import json

import onnx
import pytest
from onnx import TensorProto, helper
from onnxcost_testing import analyze_text, parse

import onnxcost
from onnxcost.costs import REGISTRY, Cost, OpContext
from onnxcost.errors import OnnxcostError

LOOP = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,8] x) => (float[1,8] y) <int64 trip = {5}, bool cond = {1}, float[8,8] w = {1.0}> {
  y = Loop (trip, cond, x) <body = step (int64 i, bool c, float[1,8] h) => (bool c2, float[1,8] h2) {
    c2 = Identity (c)
    h2 = MatMul (h, w)
  }>
}"""


def test_loop_multiplies_the_body_by_a_static_trip_count() -> None:
    # body: MatMul [1,8]x[8,8] = 64 MACs; 5 iterations -> 320 MACs
    a = analyze_text(LOOP)
    assert a.totals.macs == 320
    loop = a.nodes[0]
    assert (loop.op_type, loop.macs) == ("Loop", 320)
    body = [n for n in a.nodes if n.graph.endswith("/body")]
    assert [n.op_type for n in body] == ["Identity", "MatMul"]
    assert body[1].macs == 320
    assert "x5" in body[1].note
    # w is read inside the body: 8 x 8 = 64 params, counted once
    assert a.totals.params == 64
    # by op type adds up to the totals without counting the Loop twice
    assert sum(s.macs for s in a.by_op_type) == 320


def test_loop_with_dynamic_trip_count_counts_one_iteration_and_warns() -> None:
    text = LOOP.replace("(float[1,8] x)", "(float[1,8] x, int64 trip)").replace(
        "int64 trip = {5}, ", ""
    )
    a = analyze_text(text)
    assert a.totals.macs == 64
    assert any("one iteration" in w for w in a.warnings)


RNN_LOOP = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[batch,5,4] x, float[batch,4] h0) => (float[batch,4] h_last, float[5,batch,2] z)
  <int64 trip = {5}, bool cond = {1}, float[4,4] r = {1.0}, float[4,2] w = {1.0}> {
  xt = Transpose <perm = [1, 0, 2]> (x)
  h_last, ys = Loop (trip, cond, h0) <body = step (int64 i, bool c, float[unk__9,4] h)
      => (bool c2, float[unk__9,4] h2, float[unk__9,4] y) {
    c2 = Identity (c)
    xi = Gather <axis = 0> (xt, i)
    hr = MatMul (h, r)
    s = Add (hr, xi)
    h2 = Tanh (s)
    y = Identity (h2)
  }>
  z = MatMul (ys, w)
}"""
"""A recurrent layer as tf2onnx writes a Keras GRU or SimpleRNN: a Loop whose state the body
declares in a symbol of its own (unk__9), its steps gathered from the input, a scan output."""


def test_loop_state_keeps_the_shape_of_its_initial_value() -> None:
    # at batch 3: the body's MatMul [3,4]x[4,4] = 48 MACs, 5 iterations -> 240; the scan
    # output is [5, 3, 4], so z = [5,3,4]x[4,2] = 5 x 3 x 4 x 2 = 120 MACs: 360 in all.
    # FLOPs: 2 x 360 + per iteration Add 12 + Tanh 12 (1 each) -> 720 + 5 x 24 = 840.
    # (ONNX's own inference leaves h [unk__9, 4] and ys [?, 3, 4]: both counted 0.)
    a = analyze_text(RNN_LOOP, dims={"batch": 3})
    assert (a.totals.macs, a.totals.flops) == (360, 840)
    statuses = {n.name: n.status for n in a.nodes}
    assert "unknown_shape" not in statuses.values(), a.warnings
    z = next(n for n in a.nodes if n.outputs == ("z",))
    assert z.output_shapes == ((5, 3, 2),)


def test_loop_state_that_grows_is_not_given_its_first_shape() -> None:
    # the state gains a row an iteration (Concat): no shape holds at every iteration, so the
    # state and what reads it stay unknown rather than take the first iteration's shape
    text = RNN_LOOP.replace("hr = MatMul (h, r)", "hr = Concat <axis = 0> (h, xi)").replace(
        "s = Add (hr, xi)", "s = Identity (hr)"
    )
    a = analyze_text(text, dims={"batch": 3})
    (concat,) = [n for n in a.nodes if n.op_type == "Concat"]
    assert concat.output_shapes != ((6, 4),)  # the first iteration's: 3 rows + 3
    assert concat.status == "unknown_shape"


def test_a_sequence_output_is_no_tensor_not_an_unknown_shape() -> None:
    # SequenceConstruct of two [2,3] floats: no arithmetic; its output is a sequence, which has
    # no tensor shape (it was unknown_shape, with a warning). onnxruntime copies both tensors
    # into it (sequence_ops.cc), so it writes 2 x 6 x 4 = 48 bytes.
    a = analyze_text(
        '<ir_version: 8, opset_import: ["" : 17]>'
        "g (float[2,3] x) => (seq(float[2,3]) s, float[2,3] y) {"
        " y = Relu (x) s = SequenceConstruct (x, y) }"
    )
    seq = a.nodes[1]
    assert (seq.op_type, seq.status, seq.bytes_written) == ("SequenceConstruct", "zero", 48)
    assert not a.warnings
    assert [(t.dtype, t.shape) for t in a.outputs] == [("seq(float32)", None), ("float32", (2, 3))]


def test_if_lists_both_branches_and_takes_the_larger() -> None:
    # then: MatMul [1,8]x[8,8] = 64 MACs; else: Relu = 8 FLOPs. Totals take then (128 FLOPs).
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (bool c, float[1,8] x) => (float[1,8] y) <float[8,8] w = {1.0}> {
  y = If (c) <
    then_branch = t () => (float[1,8] a) { a = MatMul (x, w) },
    else_branch = e () => (float[1,8] b) { b = Relu (x) }
  >
}"""
    a = analyze_text(text)
    assert (a.totals.macs, a.totals.flops) == (64, 128)
    assert {n.graph.rsplit("/", 1)[-1] for n in a.nodes if n.graph} == {
        "then_branch",
        "else_branch",
    }
    assert any("larger" in w for w in a.warnings)
    assert sum(s.flops for s in a.by_op_type) == 128


def test_scan_multiplies_by_the_scanned_length() -> None:
    # Scan over 6 rows of x [6,4]: body Add of [4] + [4] = 4 FLOPs per step -> 24.
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "r"], ["s2"]), helper.make_node("Identity", ["s2"], ["o"])],
        "body",
        [
            helper.make_tensor_value_info("s", TensorProto.FLOAT, [4]),
            helper.make_tensor_value_info("r", TensorProto.FLOAT, [4]),
        ],
        [
            helper.make_tensor_value_info("s2", TensorProto.FLOAT, [4]),
            helper.make_tensor_value_info("o", TensorProto.FLOAT, [4]),
        ],
    )
    scan = helper.make_node("Scan", ["init", "x"], ["final", "ys"], body=body, num_scan_inputs=1)
    model = helper.make_model(
        helper.make_graph(
            [scan],
            "g",
            [
                helper.make_tensor_value_info("init", TensorProto.FLOAT, [4]),
                helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 4]),
            ],
            [
                helper.make_tensor_value_info("final", TensorProto.FLOAT, [4]),
                helper.make_tensor_value_info("ys", TensorProto.FLOAT, [6, 4]),
            ],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    assert onnxcost.analyze(model).totals.flops == 24


def test_model_local_functions_are_costed_through_their_bodies() -> None:
    # LinearRelu(x, w) = Relu(MatMul(x, w)): [2,8]x[8,4] = 8 outputs x 8 = 64 MACs, Relu 8 FLOPs
    text = """
<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
g (float[2,8] x) => (float[2,4] y) <float[8,4] w = {1.0}> {
  y = local.LinearRelu (x, w)
}
<domain: "local", opset_import: ["" : 17]>
LinearRelu (a, b) => (c) {
  t = MatMul (a, b)
  c = Relu (t)
}"""
    a = analyze_text(text)
    assert (a.totals.macs, a.totals.flops, a.totals.params) == (64, 2 * 64 + 8, 32)
    assert not a.unsupported


def test_scope_view_aggregates_pytorch_names() -> None:
    m = parse("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,8] x) => (float[1,8] y) <float[8,8] w1 = {1.0}, float[8,8] w2 = {1.0}> {
  a = MatMul (x, w1)
  b = Relu (a)
  y = MatMul (b, w2)
}""")
    for node, name in zip(
        m.graph.node, ["/layer1/fc/MatMul", "/layer1/act/Relu", "/layer2/fc/MatMul"], strict=True
    ):
        node.name = name
    a = onnxcost.analyze(m)
    one = {s.scope: s.macs for s in a.by_scope(1)}
    assert one == {"/layer1": 64, "/layer2": 64}
    two = [s.scope for s in a.by_scope(2)]
    assert two == ["/layer1/fc", "/layer1/act", "/layer2/fc"]


def test_json_contract() -> None:
    a = analyze_text(LOOP)
    d = json.loads(a.to_json())
    assert d["schema"] == "onnxcost.analysis/1"
    assert {
        "schema",
        "model",
        "inputs",
        "outputs",
        "totals",
        "nodes",
        "by_op_type",
        "unsupported",
        "warnings",
    } <= d.keys()
    assert {"path", "ir_version", "opsets", "producer"} <= d["model"].keys()
    assert set(d["totals"]) >= {
        "macs",
        "flops",
        "params",
        "param_bytes",
        "bytes_read",
        "bytes_written",
        "peak_activation_bytes",
    }
    node_keys = {
        "name",
        "op_type",
        "domain",
        "status",
        "macs",
        "flops",
        "params",
        "bytes_read",
        "bytes_written",
        "input_shapes",
        "output_shapes",
    }
    assert all(node_keys <= n.keys() for n in d["nodes"])
    assert {"op_type", "domain", "count", "macs", "flops", "bytes_read", "bytes_written"} <= d[
        "by_op_type"
    ][0].keys()
    assert d["inputs"] == [{"name": "x", "dtype": "float32", "shape": [1, 8]}]


def test_output_is_deterministic() -> None:
    assert analyze_text(LOOP).to_json() == analyze_text(LOOP).to_json()


def test_int4_and_bf16_param_bytes() -> None:
    # int4 weight [16, 16] = 256 elements x 0.5 B = 128 B; bf16 [16] = 32 B; total 160 B
    w4 = helper.make_tensor("w4", TensorProto.INT4, [16, 16], vals=[1] * 256)
    b16 = helper.make_tensor("b16", TensorProto.BFLOAT16, [16], vals=[1.0] * 16)
    model = helper.make_model(
        helper.make_graph(
            [
                helper.make_node("Cast", ["w4"], ["wf"], to=TensorProto.BFLOAT16),
                helper.make_node("MatMul", ["x", "wf"], ["h"]),
                helper.make_node("Add", ["h", "b16"], ["y"]),
            ],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [1, 16])],
            [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [1, 16])],
            [w4, b16],
        ),
        opset_imports=[helper.make_opsetid("", 21)],
    )
    a = onnxcost.analyze(model)
    assert (a.totals.params, a.totals.param_bytes) == (272, 160)
    assert a.model.params_by_dtype == {"int4": 256, "bfloat16": 16}


def test_public_api_is_pinned() -> None:
    assert sorted(onnxcost.__all__) == ["Analysis", "OnnxcostError", "__version__", "analyze"]
    assert isinstance(onnx.__version__, str)


def test_garbage_collector_state_is_restored() -> None:
    # analyze pauses the cyclic collector while it runs, and must hand it back as it was,
    # on success and on error alike.
    import gc

    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) {
  y = Relu (x)
}"""
    assert gc.isenabled()
    analyze_text(text)
    assert gc.isenabled()
    with pytest.raises(OnnxcostError):
        onnxcost.analyze(b"not a model")
    assert gc.isenabled()
    gc.disable()
    try:
        analyze_text(text)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_nodes_of_one_kind_share_one_formula_call_but_count_their_own_weights(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Three MatMuls [2,8] x [8,8] (each 2*8*8 = 128 MACs) and one [2,8] x [8,4]
    # (2*8*4 = 64 MACs). m2 reads w0 again: its 64 weights were counted at m0.
    model = parse("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,8] x) => (float[2,4] y)
  <float[8,8] w0 = {1.0}, float[8,8] w1 = {1.0}, float[8,4] w3 = {1.0}> {
  h1 = MatMul (x, w0)
  h2 = MatMul (h1, w1)
  h3 = MatMul (h2, w0)
  y = MatMul (h3, w3)
}""")
    calls: list[tuple[object, ...]] = []
    lookup = REGISTRY.lookup

    def counting_lookup(domain: str, op_type: str, opset: int) -> object:
        spec = lookup(domain, op_type, opset)
        if spec is None:
            return None
        formula = spec.formula

        def counted(ctx: OpContext) -> Cost:
            calls.append(tuple(t.shape for t in ctx.inputs if t is not None))
            return formula(ctx)

        return dataclasses.replace(spec, formula=counted)

    monkeypatch.setattr(REGISTRY, "lookup", counting_lookup)
    a = onnxcost.analyze(model)
    assert calls == [((2, 8), (8, 8)), ((2, 8), (8, 4))]
    assert [n.macs for n in a.nodes] == [128, 128, 128, 64]
    assert [n.params for n in a.nodes] == [64, 64, 0, 32]
    assert a.totals.params == 64 + 64 + 32
    assert [n.inputs for n in a.nodes][2] == ("h2", "w0")
