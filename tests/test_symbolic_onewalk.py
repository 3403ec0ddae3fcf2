"""``--symbolic`` from one symbolic walk (issue 22): the formulas, how they are checked, and
the fallback to sampling where the walk does not carry a node."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxcost_testing import parse

import onnxcost
from onnxcost import zoo
from onnxcost.prepare import prepare
from onnxcost.symbolic import formulas
from onnxcost.symbolic.limits import PositionLimit
from onnxcost.symbolic.onewalk import formula_of, within
from onnxcost.symdim import SymDim, sym_max, sym_min


def _every_formula_holds(a: onnxcost.Analysis, model: Any, point: dict[str, int]) -> Any:
    """Every total's and every node's formula of ``a`` (none None) equals a concrete
    analysis of ``model`` at ``point``; that analysis."""
    assert a.symbolic is not None
    want = onnxcost.analyze(model, dims=point)
    got = a.at(**point)
    for key in ("macs", "flops", "bytes_read", "bytes_written", "params", "param_bytes"):
        assert getattr(got, key) == getattr(want.totals, key), key
    for k, node in enumerate(want.nodes):
        for key, f in a.symbolic.nodes[k].items():
            assert f is not None, (node.name, key)
            assert f.evaluate(point) == getattr(node, key), (node.name, key)
    return want


def _terms(f: formulas.Formula | None) -> dict[tuple[int, ...], int]:
    assert f is not None
    return dict(f.terms)


# --- SymDim -> Formula --------------------------------------------------------------------------


def test_a_polynomial_becomes_a_formula() -> None:
    b, s = SymDim.of("batch"), SymDim.of("seq")
    f = formula_of(5 + 3 * b * s + 2 * b * s * s, ("batch", "seq"))
    assert f is not None
    # 5 + 3*b*s + 2*b*s^2 at b = 2, s = 7: 5 + 42 + 196 = 243
    assert f(batch=2, seq=7) == 243
    assert f.python() == "5 + 3*batch*seq + 2*batch*seq**2"
    assert formula_of(12, ("batch",)) == formulas.Formula(("batch",), (((0,), 12),))
    assert formula_of(0, ("batch",)) == formulas.Formula(("batch",), ())


def test_a_floor_min_or_max_becomes_its_exact_expression() -> None:
    h, seq, past = SymDim.of("h"), SymDim.of("seq"), SymDim.of("past")
    f = formula_of((h + 1) // 2, ("h",))  # floor((h + 1) / 2): no polynomial
    assert f is not None
    assert f.terms == ()
    assert f.degree == 1
    assert (f(h=7), f(h=8), f(h=0)) == (4, 4, 0)  # 8 // 2, 9 // 2, 1 // 2
    assert f.python() == "((1 + h) // 2)"
    assert f.pretty() == "⌊(1 + h)/2⌋"
    # 3*b*floor((h + 1)/2)**2 - min(seq, past) + 5: the terms in a Formula's order
    b = SymDim.of("b")
    g = formula_of(
        5 + 3 * b * ((h + 1) // 2) * ((h + 1) // 2) - SymDim.of(sym_min(seq, past)),
        ("b", "h", "seq", "past"),
    )
    assert g is not None
    assert g.python() == "5 - min(past, seq) + 3*b*((1 + h) // 2)**2"
    assert g.pretty() == "5 - min(past, seq) + 3·b·⌊(1 + h)/2⌋²"
    # at b = 2, h = 6, seq = 4, past = 9: 5 - 4 + 3*2*(7 // 2)**2 = 1 + 6*9 = 55
    point = {"b": 2, "h": 6, "seq": 4, "past": 9}
    assert g.evaluate(point) == 55
    assert eval(g.python(), {"max": max, "min": min}, point) == 55
    assert formula_of(h, ("batch",)) is None  # h is not one of the symbols
    assert formula_of((h + 1) // 2, ("batch",)) is None  # nor inside a floor


# --- min and max decided over the model's domain --------------------------------------------------


def test_min_and_max_with_one_answer_where_the_model_is_valid_are_decided() -> None:
    seq, past, b = SymDim.of("seq"), SymDim.of("past"), SymDim.of("b")
    both = ("seq", "past")
    sixteen = PositionLimit(16, both, 16)  # seq + past <= 16, each >= 1
    # a 16-row mask sliced to the context: seq + past <= 16 everywhere, so min is the context
    assert within(sym_min(16, seq + past), both, sixteen) == seq + past
    # at 15 rows it is not: seq + past = 16 takes the 15
    assert within(sym_min(15, seq + past), both, sixteen) == sym_min(15, seq + past)
    # seq >= 1, so past <= 15 and past - 20 <= -5: max(past - 20, 0) is 0
    assert within(sym_max(past - 20, 0), both, sixteen) == 0
    # no limit: min(1, seq) is 1 for seq >= 1; max(0, 31*b*seq) is 31*b*seq (every
    # coefficient positive: its least, 31, is at b = seq = 1)
    assert within(sym_min(1, seq), ("seq",), None) == 1
    assert within(sym_max(0, 31 * b * seq), ("b", "seq"), None) == 31 * b * seq
    # both signs: min(seq, past) and min(10, seq) stay
    assert within(sym_min(seq, past), both, None) == sym_min(seq, past)
    assert within(sym_min(10, seq), ("seq",), None) == sym_min(10, seq)
    # a product with a decided atom: 8*b*min(1, seq) is 8*b
    assert within(8 * b * SymDim.of(sym_min(1, seq)), ("b", "seq"), None) == 8 * b


# --- the walk's route ------------------------------------------------------------------------------


def _small_gpt2(tmp_path: Path, **more: str) -> Path:
    params = {"layers": 2, "hidden": 64, "heads": 4, "vocab": 100, "max_positions": 64}
    return zoo.save("gpt2", tmp_path / "gpt2_small.onnx", weights=False, params={**params, **more})


def test_gpt2_formulas_come_from_one_walk(tmp_path: Path) -> None:
    a = onnxcost.analyze(_small_gpt2(tmp_path), symbolic=True)
    assert a.symbolic is not None
    # Per token and layer, width d = 64: c_attn d*3d = 12,288, attn c_proj d*d = 4,096, c_fc
    # d*4d = 16,384, mlp c_proj 4d*d = 16,384: 49,152; 2 layers 98,304; the tied LM head d*100
    # = 6,400: 104,704 per token. Attention per layer and token and position attended: QK^T
    # and AV, 2*64 = 128; 2 layers 256, over seq positions for batch*seq tokens.
    assert _terms(a.formulas["macs"]) == {(1, 1): 104_704, (1, 2): 256}
    # One whole analysis (the reported one, every symbol at 1: the formulas are checked there
    # node for node) and one of the reduced model, at the random point; the points at 0 are
    # walks of the reduced model (seq's 0 breaks the model's Reshapes, so seq >= 1).
    assert (a.symbolic.analyses, a.symbolic.reduced_analyses) == (1, 1)
    assert a.symbolic.zero_allowed == {"batch": True, "seq": False}
    # The 2 layers are one: each class has a node of layer 0 and its twin in layer 1
    assert a.symbolic.reduced_nodes < len(a.nodes) * 0.6


@pytest.mark.parametrize("point", [{"batch": 3, "seq": 5}, {"batch": 7, "seq": 2}])
def test_walked_formulas_equal_the_concrete_analysis(tmp_path: Path, point: dict[str, int]) -> None:
    path = _small_gpt2(tmp_path, kv_cache="true")
    a = onnxcost.analyze(path, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1
    point = {**point, "past_seq": 4}
    _every_formula_holds(a, path, point)


def test_an_uncarried_node_falls_back_to_sampling() -> None:
    # Resize by scales computed in the graph (the walk carries stored ones only): the
    # sampler finds its formulas. Relu on [batch, 8] writes 32*batch bytes, Resize by 1s the
    # same: 64*batch.
    text = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[batch,8] x) => (float[batch,8] y) <float[2] ones = {1, 1}> {
      r = Relu (x)
      scales = Mul (ones, ones)
      y = Resize (r, , scales)
    }"""
    a = onnxcost.analyze(parse(text), symbolic=True)
    assert a.symbolic is not None
    # sampled: the lost nodes (Resize_2 and Mul_1, the constant it reads) at more than one
    # point, the whole model only at batch = 1 (the analysis reported)
    assert a.symbolic.analyses == 1
    assert a.symbolic.reduced_analyses > 1
    assert _terms(a.formulas["bytes_written"]) == {(1,): 64}
    # only what the walk does not carry was sampled: Resize_2 (Mul_1's shape is carried, its
    # float value is not); Relu_0's and Mul_1's formulas are the walk's
    said = [w for w in a.warnings if w.startswith("the formulas of 1 of 3 nodes were sampled")]
    assert len(said) == 1, a.warnings
    assert "does not carry node 'Resize_2' (Resize: its shape is not carried" in said[0]


def test_only_the_costs_downstream_of_an_uncarried_node_are_sampled() -> None:
    # A CNN head in (b, h, w): Conv 3x3 stride 2 pad 1 (8 channels: its sizes are floors),
    # global pool, flatten to [b, 8], a Resize the walk does not carry (scales computed in
    # the graph), MatMul to 4. The sampler alone finds no polynomial for the Conv (a floor):
    # the totals were null. Now the Conv's formula is the walk's, the Resize's and the
    # MatMul's are sampled (polynomials in b), and the totals are their exact sum.
    k = ", ".join(["1"] * 216)
    w = ", ".join(["1"] * 32)
    text = f"""<ir_version: 9, opset_import: ["" : 19]>
    g (float[b, 3, h, w] x) => (float[b, 4] y)
    <float[8, 3, 3, 3] k = {{{k}}}, float[8, 4] m = {{{w}}}, float[2] ones = {{1, 1}}> {{
      c = Conv<strides = [2, 2], pads = [1, 1, 1, 1]>(x, k)
      p = GlobalAveragePool(c)
      f = Flatten(p)
      scales = Mul(ones, ones)
      r = Resize(f, , scales)
      y = MatMul(r, m)
    }}"""
    proto = parse(text)
    sampled = formulas.symbolic_costs(
        prepare(proto), onnxcost.analyze(proto, dims={"b": 1, "h": 1, "w": 1}), walk=False
    )
    assert sampled.totals["macs"] is None  # the sampler alone: no polynomial in h
    a = onnxcost.analyze(proto, symbolic=True)
    costs = a.symbolic
    assert costs is not None
    conv = costs.nodes[0]["macs"]
    assert conv is not None
    assert conv.python() == "216*b*((1 + h) // 2)*((1 + w) // 2)"  # 8 x 27 per output
    assert costs.nodes[5]["macs"] is not None  # the MatMul's, sampled: 32*b
    assert costs.nodes[5]["macs"](b=3, h=1, w=1) == 96
    macs = costs.totals["macs"]
    assert macs is not None
    # By hand at b = 2, h = 9, w = 6: the Conv 216 x 2 x 5 x 3 = 6,480, the MatMul 32 x 2 =
    # 64: 6,544; and every total equals a concrete analysis at points with odd sizes.
    assert macs(b=2, h=9, w=6) == 6_544
    for point in ({"b": 2, "h": 9, "w": 6}, {"b": 1, "h": 1, "w": 1}, {"b": 3, "h": 17, "w": 4}):
        concrete = onnxcost.analyze(proto, dims=point).totals
        at = a.at(**point)
        for key in ("macs", "flops", "bytes_read", "bytes_written"):
            assert getattr(at, key) == getattr(concrete, key), (point, key)
    said = [w for w in a.warnings if "nodes were sampled" in w]
    assert len(said) == 1, a.warnings
    assert said[0].startswith("the formulas of 2 of 6 nodes were sampled"), a.warnings
    # every total has its formula but the peak, which only a whole walk gives
    missing = [w for w in a.warnings if w.startswith("no exact formula")]
    assert missing == [
        "no exact formula for peak_activation_bytes: it comes from the one symbolic walk, and "
        "these formulas were sampled"
    ]
    assert a.formulas["peak_activation_bytes"] is None


def _chain_ending_uncarried(layers: int) -> onnx.ModelProto:
    """x [batch, seq, 16] through ``layers`` x (MatMul 16x16, Add, Relu), then a Resize by
    scales computed in the graph (the walk carries stored scales only: not carried), a
    Reshape to the chain's own shape (its target a value the walk carries, from a carried
    Shape) and a MatMul to 4: 3 x layers + 5 nodes."""
    w = numpy_helper.from_array(np.ones((16, 16), np.float32), "w")
    b = numpy_helper.from_array(np.ones(16, np.float32), "b")
    ones = numpy_helper.from_array(np.ones(3, np.float32), "ones")
    head = numpy_helper.from_array(np.ones((16, 4), np.float32), "head")
    nodes = []
    h = "x"
    for i in range(layers):
        nodes += [
            helper.make_node("MatMul", [h, "w"], [f"m{i}"], name=f"mm{i}"),
            helper.make_node("Add", [f"m{i}", "b"], [f"a{i}"], name=f"add{i}"),
            helper.make_node("Relu", [f"a{i}"], [f"h{i}"], name=f"relu{i}"),
        ]
        h = f"h{i}"
    nodes += [
        helper.make_node("Mul", ["ones", "ones"], ["scales"], name="scales"),
        helper.make_node("Resize", [h, "", "scales"], ["r"], name="resize"),
        helper.make_node("Shape", [h], ["shape"], name="shape"),
        helper.make_node("Reshape", ["r", "shape"], ["t"], name="reshape"),
        helper.make_node("MatMul", ["t", "head"], ["y"], name="out"),
    ]
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 4])],
        [w, b, ones, head],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


def test_the_sampler_analyses_only_the_nodes_not_carried(monkeypatch: pytest.MonkeyPatch) -> None:
    # 200 nodes: 65 x (MatMul, Add, Relu), then the scales' Mul, the Resize the walk does not
    # carry, Shape, Reshape and the head's MatMul. The walk carries the chain, the Mul and
    # the Shape (with its value [batch, seq, 16]); the Resize, Reshape and head are sampled,
    # and no concrete analysis past the reported one covers the whole model: the sampler
    # analyses those 3 nodes and the scales' Mul (the constant the Resize reads), and checks
    # them against the walk's reduced model (a node per class, 8 nodes here).
    from onnxcost.analysis import walk

    proto = _chain_ending_uncarried(65)
    assert len(proto.graph.node) == 200
    analysed: list[int] = []
    costs_at = walk.costs_at

    def counted(model: Any, **kwargs: Any) -> Any:
        analysed.append(len(model.view.order))
        return costs_at(model, **kwargs)

    monkeypatch.setattr(walk, "costs_at", counted)
    a = onnxcost.analyze(proto, symbolic=True)
    monkeypatch.undo()
    assert a.symbolic is not None
    assert analysed, "the sampler ran"
    assert max(analysed) < 20, analysed  # never the 200 nodes (on main: 4 whole analyses)
    assert a.symbolic.analyses == 1  # the reported one, at batch = seq = 1
    said = [w for w in a.warnings if "nodes were sampled" in w]
    assert len(said) == 1
    assert said[0].startswith("the formulas of 3 of 200 nodes were sampled"), said
    # By hand at batch = 3, seq = 7: the head's MatMul 3 x 7 x 16 x 4 = 1,344 MACs; the
    # Resize (nearest, scales 1) writes its [3, 7, 16] floats: 336 x 4 = 1,344 bytes, and
    # computes nothing (nearest is index arithmetic: 0 FLOPs).
    nodes = a.symbolic.nodes
    head, resize = nodes[199]["macs"], nodes[196]
    assert head is not None
    assert head(batch=3, seq=7) == 1_344
    assert resize["bytes_written"] is not None
    assert resize["bytes_written"](batch=3, seq=7) == 1_344
    assert resize["flops"] is not None
    assert resize["flops"](batch=3, seq=7) == 0
    for point in ({"batch": 3, "seq": 7}, {"batch": 1, "seq": 12}, {"batch": 5, "seq": 2}):
        _every_formula_holds(a, proto, point)


@pytest.mark.parametrize("layers", [1, 65])
def test_the_nodes_not_carried_have_the_formulas_sampling_the_whole_model_gives(
    monkeypatch: pytest.MonkeyPatch, layers: int
) -> None:
    # The formulas, the symbols' 0s and the warnings (but the one that counts the analyses)
    # are those of sampling the whole model, as before the lost nodes were sampled alone.
    proto = _chain_ending_uncarried(layers)
    base = onnxcost.analyze(proto, dims={"batch": 1, "seq": 1})
    alone = formulas.symbolic_costs(prepare(proto), base)
    monkeypatch.setattr(formulas, "_lost_only", lambda *args: None)
    whole = formulas.symbolic_costs(prepare(proto), base)
    assert alone.reduced_analyses > 1
    assert alone.analyses == 1
    assert whole.analyses > 1
    assert alone.totals == whole.totals
    assert alone.nodes == whole.nodes
    assert alone.zero_allowed == whole.zero_allowed
    counted = "nodes were sampled"
    assert [w for w in alone.warnings if counted not in w] == [
        w for w in whole.warnings if counted not in w
    ]


def test_the_sampler_is_still_there_on_request(tmp_path: Path) -> None:
    prepared = prepare(_small_gpt2(tmp_path))
    base = onnxcost.analyze(prepared, dims={"batch": 1, "seq": 1})
    walked = formulas.symbolic_costs(prepared, base)
    sampled = formulas.symbolic_costs(prepared, base, walk=False)
    assert walked.analyses == 1
    assert sampled.analyses > 1
    peak = "peak_activation_bytes"  # the walk's only: a max over steps is no polynomial
    assert sampled.totals[peak] is None
    assert walked.totals[peak] is not None
    assert {**walked.totals, peak: None} == sampled.totals
    assert walked.nodes == sampled.nodes


def test_with_training_the_forward_formulas_come_from_the_walk(tmp_path: Path) -> None:
    # With training, the forward formulas are still the walk's (the training totals come
    # from a training pass over its shapes: tests/test_symbolic_training_walk.py) and equal
    # a concrete analysis with training at a point.
    path = _small_gpt2(tmp_path)
    a = onnxcost.analyze(path, symbolic=True, training=True)
    assert a.symbolic is not None
    assert a.symbolic.reduced_analyses == 1  # the walk's one check of the reduced model
    point = {"batch": 3, "seq": 6}
    want = onnxcost.analyze(path, dims=point, training=True).totals
    got = a.at(**point)
    for key in ("macs", "flops", "bytes_read", "bytes_written"):
        assert getattr(got, key) == getattr(want, key), key
    assert want.training is not None
    assert got.backward_macs == want.training.backward_macs


def test_a_walk_that_disagrees_with_the_analysis_is_sampled_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A walk whose MACs are one off everywhere (as a wrong shape rule would make them) is
    # found out at the random point: the formulas are the sampler's, and a warning says why.
    from onnxcost.symbolic import node_costs as module

    walk = module.node_costs

    def one_off(*args: object, **kwargs: object) -> module.NodeCosts:
        found = walk(*args, **kwargs)  # type: ignore[arg-type]
        found.macs = [None if m is None else m + 1 for m in found.macs]  # type: ignore[operator]
        return found

    monkeypatch.setattr(module, "node_costs", one_off)
    path = _small_gpt2(tmp_path)
    a = onnxcost.analyze(path, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses > 1
    assert _terms(a.formulas["macs"]) == {(1, 1): 104_704, (1, 2): 256}  # as by hand above
    assert any("is not a concrete analysis's at" in w for w in a.warnings), a.warnings


# --- floors: a CNN over its height and width --------------------------------------------------------


def _conv_model(pads: int, pool: bool = False) -> onnx.ModelProto:
    """x [b, 4, h, w] -> Conv 3x3, stride 2, ``pads`` on every side, 8 filters, bias; with
    ``pool``: then Relu, MaxPool 3x3 stride 2 pad 1, the mean over height and width, and a
    Gemm to 5 outputs (a CNN's head)."""
    rng = np.random.default_rng(0)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    nodes = [
        helper.make_node(
            "Conv", ["x", "wc", "bc"], ["c"], kernel_shape=[3, 3], strides=[2, 2], pads=[pads] * 4
        )
    ]
    inits = [weight("wc", 8, 4, 3, 3), weight("bc", 8)]
    out = "c"
    if pool:
        nodes += [
            helper.make_node("Relu", ["c"], ["r"]),
            helper.make_node(
                "MaxPool", ["r"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4
            ),
            helper.make_node("ReduceMean", ["p"], ["m"], axes=[2, 3], keepdims=0),
            helper.make_node("Gemm", ["m", "wg", "bg"], ["y"], transB=1),
        ]
        inits += [weight("wg", 5, 8), weight("bg", 5)]
        out = "y"
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 4, "h", "w"])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_strided_conv_costs_a_floor_of_its_height_and_width() -> None:
    a = onnxcost.analyze(_conv_model(pads=1), symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1
    # Conv 3x3, stride 2, pad 1 on [b, 4, h, w], 8 filters: the output height is
    # h' = floor((h + 2 - 3) / 2) + 1 = floor((h - 1) / 2) + 1 (= floor((h + 1) / 2)), w' alike,
    # and MACs = b * 8 * h' * w' * 4 * 9 = 288 * b * h' * w'.
    # At b = 2, h = 7, w = 5: h' = floor(6 / 2) + 1 = 4, w' = floor(4 / 2) + 1 = 3:
    #   MACs = 288 * 2 * 4 * 3 = 6,912.
    # At h = 8: h' = floor(7 / 2) + 1 = 4 again: 6,912. At h = 9: h' = 5: 288 * 2 * 5 * 3 = 8,640.
    macs = a.formulas["macs"]
    assert macs is not None
    assert macs(b=2, h=7, w=5) == 6_912
    assert macs(b=2, h=8, w=5) == 6_912
    assert macs(b=2, h=9, w=5) == 8_640
    assert macs.pretty() == "288·b·⌊(1 + h)/2⌋·⌊(1 + w)/2⌋"
    for h in (7, 8):
        want = onnxcost.analyze(_conv_model(pads=1), dims={"b": 2, "h": h, "w": 5})
        assert want.totals.macs == 6_912
    # h = 0: h' is floor(1 / 2) = 0 in the walk, while ONNX's inference rounds (0 + 2 - 3) / 2
    # toward 0 and makes it 1: the formulas hold from h = 1, and a warning says so.
    assert a.symbolic.zero_allowed == {"b": True, "h": False, "w": False}
    said = "h=0 leaves tensor 'c' a size whose numerator, h - 1, is below 0"
    assert any(w.startswith(said) for w in a.warnings), a.warnings


def test_a_conv_whose_size_rounds_toward_0_below_1_has_its_exact_formula() -> None:
    # Without pads, ONNX's h' = trunc((h - 3) / 2) + 1: at h = 2 a floor gives 0, ONNX's
    # inference (toward 0: (2 - 3) / 2 = 0) gives 1 and 288*b*1*w' MACs. The walk writes the
    # truncation exactly (shape_core.trunc_div), so the MACs have a formula that holds there
    # (it had none while the walk wrote a floor; tests/test_symbolic_truncation.py by hand).
    model = _conv_model(pads=0)
    assert onnxcost.analyze(model, dims={"b": 1, "h": 2, "w": 3}).totals.macs == 288  # 1x1 out
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    macs = a.formulas["macs"]
    assert macs is not None
    assert macs(b=1, h=2, w=3) == 288
    assert a.symbolic.zero_allowed == {"b": True, "h": True, "w": True}


@pytest.mark.parametrize(
    "point",
    [
        {"b": 1, "h": 7, "w": 8},
        {"b": 3, "h": 8, "w": 7},
        {"b": 2, "h": 9, "w": 13},
        {"b": 2, "h": 1, "w": 2},
        {"b": 1, "h": 16, "w": 12},
    ],
)
def test_a_cnn_has_every_formula_and_they_equal_the_concrete_analysis(
    point: dict[str, int],
) -> None:
    model = _conv_model(pads=1, pool=True)
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1
    want = _every_formula_holds(a, model, point)
    # the JSON's strings evaluate with the documented globals to the same totals
    for key, text in a.to_dict()["formulas"].items():
        assert eval(text, {"max": max, "min": min}, dict(point)) == getattr(want.totals, key)


def test_a_point_from_floors_takes_microseconds() -> None:
    a = onnxcost.analyze(_conv_model(pads=1, pool=True), symbolic=True)
    times = []
    for h in range(1, 202):
        start = time.perf_counter()
        a.at(b=2, h=h, w=h + 3)
        times.append(time.perf_counter() - start)
    # about 20 µs a point here (CPU, load 1); a concrete analysis takes milliseconds
    assert sorted(times)[len(times) // 2] < 500e-6


@pytest.mark.parametrize(("opset", "written"), [(13, 40), (9, 64)])
def test_a_dropout_mask_is_walked(opset: int, written: int) -> None:
    # x [batch, 8] float: Dropout writes its output, 32 bytes a row, and its mask, bool from
    # opset 10 (8 bytes a row: 40) and x's type before (32: 64). Squeezenet's export has one.
    ratio = "<ratio = 0.5> " if opset < 12 else ""
    text = f"""
    <ir_version: 7, opset_import: ["" : {opset}]>
    g (float[batch,8] x) => (float[batch,8] y, {"bool" if opset >= 10 else "float"}[batch,8] m) {{
      y, m = Dropout {ratio}(x)
    }}"""
    a = onnxcost.analyze(parse(text), symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1  # the walk, not the sampler
    assert _terms(a.formulas["bytes_written"]) == {(1,): written}
    assert onnxcost.analyze(parse(text), dims={"batch": 5}).totals.bytes_written == 5 * written


@pytest.mark.parametrize("name", ["resnet20_cifar", "gpt2-kv"])
def test_the_whole_graph_route_costs_every_node_as_the_per_node_route(
    tmp_path: Path, name: str
) -> None:
    # The walk's check at its random point analyses the reduced model with ONNX's inference
    # of the whole graph (costs_at(whole_graph=True)): its costs must be the per-node
    # route's, node by node.
    from onnxcost.analysis.walk import costs_at

    if name == "gpt2-kv":
        path = zoo.save(
            "gpt2", tmp_path / "m.onnx", weights=False, params={"layers": 2, "kv_cache": "true"}
        )
        dims = {"batch": 3, "seq": 5, "past_seq": 7}
    else:
        path = zoo.save(name, tmp_path / "m.onnx", weights=False)
        dims = {"batch": 3}
    model = prepare(path)
    runs = [
        costs_at(
            model,
            input_shapes=None,
            dims=dims,
            convention="onnxcost",
            allow_reshape=False,
            whole_graph=whole,
        )
        for whole in (False, True)
    ]
    per_node, whole_graph = (
        [(n.name, n.macs, n.flops, n.bytes_read, n.bytes_written, n.params) for n in a.nodes]
        for a in runs
    )
    assert per_node == whole_graph
    assert runs[0].totals.macs > 0
