"""Dims may be zero, and costs as exact formulas in the model's symbolic dims (issue 12)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from onnxcost_testing import formula_cost, parse
from typer.testing import CliRunner

import onnxcost
from onnxcost import zoo
from onnxcost.analysis.walk import costs_at
from onnxcost.cli.app import app
from onnxcost.costs.attention import rotated_elements
from onnxcost.errors import ShapeError, UsageError
from onnxcost.prepare import prepare
from onnxcost.symbolic import formulas, reduced, search
from onnxcost.symbolic.formulas import Formula
from onnxcost.symbolic.training import TRAINING_KEYS, training_vector

runner = CliRunner()

# One attention head of width 8 over a KV cache: the new keys are concatenated to the past.
KV_ATTENTION = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[batch,seq,8] x, float[batch,past_seq,8] past_k) => (float[batch,seq,8] y, float[batch,total,8] present_k) <float[8,8] wq = {1.0}> {
  q = MatMul (x, wq)
  present_k = Concat <axis=1> (past_k, x)
  kt = Transpose <perm=[0,2,1]> (present_k)
  s = MatMul (q, kt)
  p = Softmax <axis=-1> (s)
  y = MatMul (p, present_k)
}"""


# --- dims may be zero -------------------------------------------------------------------------


def test_an_empty_kv_cache_analyses_exactly() -> None:
    a = onnxcost.analyze(parse(KV_ATTENTION), dims={"batch": 2, "seq": 3, "past_seq": 0})
    assert not [n.name for n in a.nodes if n.status == "unknown_shape"]
    # q: b*s*8*8 = 2*3*64 = 384; scores and context: b*s*(P+s)*8 each = 2*3*3*8 = 144
    # total 384 + 2*144 = 672
    assert a.totals.macs == 672
    concat = next(n for n in a.nodes if n.op_type == "Concat")
    # past_k [2, 0, 8] is 0 bytes; x [2, 3, 8] fp32 = 48 * 4 = 192; output the same 192
    assert (concat.bytes_read, concat.bytes_written) == (192, 192)
    assert concat.input_shapes[0] == (2, 0, 8)


def test_dim_zero_on_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "kv.onnx"
    path.write_bytes(parse(KV_ATTENTION).SerializeToString())
    args = ["analyze", str(path), "-f", "json", "-d", "batch=2", "-d", "seq=3"]
    r = runner.invoke(app, [*args, "-d", "past_seq=0"])
    assert r.exit_code == 0, r.output
    assert '"macs": 672' in r.stdout
    r = runner.invoke(app, ["analyze", str(path), "-s", "past_k=2x0x8", "-s", "x=2x3x8"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, [*args, "-d", "past_seq=-1"])
    assert r.exit_code == 2
    assert "integer >= 0" in r.output


def test_formulas_take_empty_tensors() -> None:
    f = 1  # TensorProto.FLOAT
    # MaxRoiPool to a 0x0 output and Resize to an empty axis: nothing computed, no division by 0.
    assert formula_cost("MaxRoiPool", [(f, (1, 3, 8, 8)), (f, (2, 5))], [(f, (2, 3, 0, 0))]) == (
        onnxcost.costs.Cost()
    )
    assert (
        formula_cost(
            "RoiAlign", [(f, (1, 3, 8, 8)), (f, (2, 4)), (7, (2,))], [(f, (2, 3, 0, 4))]
        ).flops
        == 0
    )
    assert formula_cost("Resize", [(f, (1, 3, 8, 8))], [(f, (1, 3, 0, 16))]).flops == 0
    # rotary over heads of size 0: nothing to rotate
    assert rotated_elements(0, 0, 32) == 0


# --- exact formulas ---------------------------------------------------------------------------


def _terms(f: Formula | None) -> dict[tuple[int, ...], int]:
    assert f is not None
    return dict(f.terms)


def test_kv_attention_formula_by_hand() -> None:
    a = onnxcost.analyze(parse(KV_ATTENTION), symbolic=True)
    assert a.symbols == ("batch", "seq", "past_seq")
    # q: b*s*8*8 = 64*b*s; scores and context: b*s*(P+s)*8 each, so 16*b*s*P + 16*b*s^2
    assert _terms(a.formulas["macs"]) == {(1, 1, 0): 64, (1, 1, 1): 16, (1, 2, 0): 16}
    assert a.formulas["macs"].python() == "64*batch*seq + 16*batch*seq**2 + 16*batch*seq*past_seq"
    # the weight wq, 8*8 fp32
    assert str(a.formulas["params"]) == "64"
    assert str(a.formulas["param_bytes"]) == "256"
    assert a.symbolic is not None
    assert a.symbolic.zero_allowed["past_seq"]
    # at b=2, s=3, P=0: 64*6 + 16*18 = 672, as analysed concretely above
    assert a.at(batch=2, seq=3, past_seq=0).macs == 672


def test_a_dim_named_like_a_difference_is_one_name() -> None:
    # 'batch-size' parses as batch minus size, but neither batch nor size is an input's dim
    # of its own: it is one dim's name, not a derived dim; no Python name, so the formulas
    # call it batch_size. Only 'past + seq', whose names are dims of their own, is derived.
    model = parse("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[bs,4] x, float[seq,4] s, float[past,4] p, float[total,4] m)
        => (float[bs,4] y, float[total,4] z) {
      y = Relu (x)
      z = Concat <axis=0> (p, s)
    }""")
    named = {"bs": "batch-size", "total": "past + seq"}  # names the text format cannot write
    for vi in [*model.graph.input, *model.graph.output]:
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param in named:
                d.dim_param = named[d.dim_param]
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.symbols == ("batch_size", "seq", "past")
    assert any("'batch-size'" in w and "call it batch_size" in w for w in a.warnings), a.warnings
    # Relu on [batch-size, 4]: 16 bytes read a row; Concat [past + seq, 4] 16 * (past + seq)
    assert a.symbolic.nodes[0]["bytes_read"] is not None
    assert a.symbolic.nodes[0]["bytes_read"].python() == "16*batch_size"
    assert a.symbolic.nodes[1]["bytes_read"] is not None
    at = {"batch_size": 2, "seq": 3, "past": 5}
    assert a.symbolic.nodes[1]["bytes_read"].evaluate(at) == 16 * 8


PADDLE_MLP = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[N,16] x) => (float[N,4] y) <float[16,4] w = {1.0}> {
  y = MatMul (x, w)
}"""


def _paddle_named(text: str) -> Any:
    """``text`` with its dims N and T named as paddle2onnx names them (``DynamicDimension.0``
    and ``.1``: no Python names), which the text format cannot write."""
    model = parse(text)
    named = {"N": "DynamicDimension.0", "T": "DynamicDimension.1"}
    for vi in [*model.graph.input, *model.graph.output]:
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param in named:
                d.dim_param = named[d.dim_param]
    return model


def test_a_dim_that_is_no_python_name_is_a_symbol_of_the_formulas() -> None:
    # paddle2onnx names every dynamic dim DynamicDimension.N: they were taken as 1 and
    # --symbolic said "the model has no free symbolic dim; every cost is a constant".
    # MatMul [N, 16] x [16, 4]: 16 * 4 = 64 MACs a row.
    model = _paddle_named(PADDLE_MLP)
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbols == ("DynamicDimension_0",)
    assert a.formulas["macs"].python() == "64*DynamicDimension_0"
    assert any(
        "dim 'DynamicDimension.0' of input 'x' is no Python name: the formulas call it "
        "DynamicDimension_0 (set it with --dim DynamicDimension.0=N)" in w
        for w in a.warnings
    ), a.warnings
    assert a.at(DynamicDimension_0=3).macs == 192  # 64 * 3
    # the JSON's strings evaluate as docs/symbolic.md says, with the symbols bound
    assert eval(a.formulas["macs"].python(), {}, {"DynamicDimension_0": 3}) == 192
    # a concrete analysis takes the dim by either name: 64 * 3
    assert onnxcost.analyze(model, dims={"DynamicDimension.0": 3}).totals.macs == 192
    assert onnxcost.analyze(model, dims={"DynamicDimension_0": 3}).totals.macs == 192
    # set, it is no symbol (and not renamed)
    fixed = onnxcost.analyze(model, symbolic=True, dims={"DynamicDimension.0": 3})
    assert fixed.symbols == ()
    assert fixed.totals.macs == 192


def test_cli_symbolic_on_a_paddle_named_dim(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(_paddle_named(PADDLE_MLP).SerializeToString())
    r = CliRunner().invoke(app, ["analyze", str(path), "--symbolic", "--format", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["symbols"] == ["DynamicDimension_0"]
    assert out["formulas"]["macs"] == "64*DynamicDimension_0"
    # its least value by either name: N >= 2, 64 * 2 = 128 MACs at it
    for name in ("DynamicDimension.0", "DynamicDimension_0"):
        r = CliRunner().invoke(
            app, ["analyze", str(path), "--symbolic", "--dim", f"{name}>=2", "-f", "json"]
        )
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["totals"]["macs"] == 128


def test_paddle_lstm_export_macs_by_hand() -> None:
    # paddle.nn.LSTM(4, 8) through paddle2onnx 2.1 at opset 11 (scripts/export_holdout_paddle.py),
    # over (DynamicDimension.0, DynamicDimension.1, 4): 4 gates * H * (I + H) = 4 * 8 * (4 + 8)
    # = 384 MACs a step and row; params W 4*8*4 = 128 + R 4*8*8 = 256 + B 2*4*8 = 64 = 448
    # (Paddle's sum(p.numel()): weight_ih 128 + weight_hh 256 + bias_ih 32 + bias_hh 32)
    a = onnxcost.analyze(
        Path(__file__).parent / "data/exports/paddle_lstm_op11.onnx", symbolic=True
    )
    assert a.symbols == ("DynamicDimension_0", "DynamicDimension_1")
    assert a.formulas["macs"].python() == "384*DynamicDimension_0*DynamicDimension_1"
    assert a.formulas["params"].python() == "448"
    assert a.at(DynamicDimension_0=2, DynamicDimension_1=7).macs == 384 * 2 * 7


def _small_gpt2(tmp_path: Path) -> Path:
    return zoo.save(
        "gpt2",
        tmp_path / "gpt2_small.onnx",
        weights=False,
        params={"layers": 1, "hidden": 64, "heads": 4, "vocab": 100, "max_positions": 64},
    )


def test_gpt2_block_macs_by_hand(tmp_path: Path) -> None:
    a = onnxcost.analyze(_small_gpt2(tmp_path), symbolic=True)
    # Per token, width d = 64 (4 heads of 16), vocab 100:
    #   c_attn d*3d = 12,288; attn c_proj d*d = 4,096; c_fc d*4d = 16,384; mlp c_proj 4d*d =
    #   16,384; layer 49,152; LM head d*vocab = 6,400: a = 55,552 MACs per token (b*s tokens).
    # Attention per token per unit of context: QK^T and AV, heads*head_dim = d each: c = 2*64
    # = 128, over s positions for each of b*s tokens: c*b*s^2.
    assert _terms(a.formulas["macs"]) == {(1, 1): 55_552, (1, 2): 128}
    f = a.formulas["macs"]
    assert f is not None
    assert f.pretty() == "55,552·batch·seq + 128·batch·seq²"


def test_analyses_counted_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The sampler's count (the one walk's: tests/test_symbolic_onewalk.py)
    monkeypatch.setattr(formulas, "one_walk_costs", lambda *args, **kwargs: None)
    a = onnxcost.analyze(_small_gpt2(tmp_path), symbolic=True)
    assert a.symbolic is not None
    # The whole model is analysed where the formulas are checked: the reported point (1, 1)
    # and the random point, which also sort the nodes into classes, and the points at 0,
    # (0, 3) and (2, 0) = 4. Its 182 nodes make 88 classes, so the reduced model (88 nodes)
    # pays. It is run at (1, 1), once, to check how it is wired; at the base point (2, 3) and
    # along batch at 3, then (0, 3), on the line through 2 and 3, confirms degree 1 in place
    # of batch 4 (every node has its class's kind there: the reduced model need not run);
    # along seq at 4, 5, 6 (seq 0 breaks the model, so 6 confirms degree 2: the third
    # difference is 0; at (2, 0) the shapes break, the kinds prove nothing, and it is run
    # there to compare); the grid 2..3 x 3..5 adds (3, 4) and (3, 5): 1 + 2 + 3 + 1 + 2 = 9.
    assert (a.symbolic.analyses, a.symbolic.reduced_analyses) == (4, 9)
    assert a.symbolic.reduced_nodes == 88


def _small_kv_decoder(tmp_path: Path, layers: int = 3) -> Path:
    return zoo.save(
        "gpt2",
        tmp_path / "gpt2_kv.onnx",
        weights=False,
        params={
            "layers": layers,
            "hidden": 32,
            "heads": 4,
            "vocab": 64,
            "max_positions": 64,
            "kv_cache": "true",
        },
    )


def _searched(path: str | Path, **options: Any) -> formulas.SymbolicCosts:
    """The sampler's formulas (``walk=False``: not the one walk's)."""
    prepared = prepare(path)
    symbols = formulas.model_symbols(prepared.proto, {}, {})
    base = onnxcost.analyze(prepared, dims=dict.fromkeys(symbols, 1))
    return formulas.symbolic_costs(prepared, base, walk=False, **options)


@pytest.mark.parametrize("which", ["built-in", "torch export"])
def test_the_reduced_model_finds_the_same_formulas(which: str, tmp_path: Path) -> None:
    # The formulas found on the model reduced to one node per class are the ones found on
    # the whole model alone, for every total and every node.
    path = (
        _small_kv_decoder(tmp_path)
        if which == "built-in"
        else MODELS_DIR / "decoder_kv_torch_script.onnx"
    )
    reduced, whole = _searched(path), _searched(path, reduce=False)
    assert reduced.reduced_analyses > 0
    assert whole.reduced_analyses == 0
    assert reduced.analyses < whole.analyses
    assert (reduced.totals, reduced.nodes) == (whole.totals, whole.nodes)
    assert reduced.warnings == whole.warnings


def test_a_reduced_model_that_misses_is_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reduced model whose costs differ from the whole model's where both run (here: one
    # more MAC on its first node, as a wrong merge would give) is found out by the checks at
    # the reported point, and the search is made on the whole model alone.
    path = _small_kv_decoder(tmp_path)
    sample = reduced._Reduced.sample

    def off_by_one(self: reduced._Reduced, a: onnxcost.Analysis) -> reduced._Sample:
        found = sample(self, a)
        values = list(found.values)
        values[len(formulas.TOTAL_KEYS)] += 1
        return reduced._Sample(values, found.unknown)

    monkeypatch.setattr(reduced._Reduced, "sample", off_by_one)
    dropped = _searched(path)
    monkeypatch.undo()
    whole = _searched(path, reduce=False)
    assert dropped.reduced_analyses == 0
    assert (dropped.totals, dropped.nodes, dropped.analyses) == (
        whole.totals,
        whole.nodes,
        whole.analyses,
    )


def test_a_reduced_model_that_misses_only_at_zero_is_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nodes alike at every point but 0 (a clamp such as max(0, n - 1) in one of them): at a
    # point where the kinds do not prove the classes, the reduced model is run beside the
    # whole one, and must give the same costs. Here the kinds never prove them, and the
    # reduced model is off by one at the points with a 0.
    path = _small_kv_decoder(tmp_path)
    reduced_at = reduced._Sampler._reduced_at

    def wrong_at_zero(self: reduced._Sampler, point: tuple[int, ...]) -> reduced._Sample | None:
        found = reduced_at(self, point)
        if found is None or 0 not in point:
            return found
        return reduced._Sample([v + 1 for v in found.values], found.unknown)

    monkeypatch.setattr(reduced._Reduced, "agrees", lambda self, kinds: False)
    monkeypatch.setattr(reduced._Sampler, "_reduced_at", wrong_at_zero)
    dropped = _searched(path)
    monkeypatch.undo()
    whole = _searched(path, reduce=False)
    assert dropped.reduced_analyses == 0
    assert (dropped.totals, dropped.nodes) == (whole.totals, whole.nodes)


def test_a_point_the_reduced_model_cannot_analyse_runs_on_the_whole_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A point the reduced model cannot analyse (here: (3, 3, 4), the first point along
    # batch) is analysed on the whole model instead: one whole analysis more, the same
    # formulas. (Had the nodes' kinds not proven the classes there, the whole model's
    # analysing would have been a miss, and the search made on the whole model.)
    path = _small_kv_decoder(tmp_path)
    usual = _searched(path)
    reduced_at = reduced._Sampler._reduced_at

    def fails_there(self: reduced._Sampler, point: tuple[int, ...]) -> reduced._Sample | None:
        return None if point == (3, 3, 4) else reduced_at(self, point)

    monkeypatch.setattr(reduced._Sampler, "_reduced_at", fails_there)
    found = _searched(path)
    assert found.analyses == usual.analyses + 1
    assert (found.totals, found.nodes) == (usual.totals, usual.nodes)
    monkeypatch.setattr(reduced._Reduced, "agrees", lambda self, kinds: False)
    dropped = _searched(path)
    assert dropped.reduced_analyses == 0
    assert (dropped.totals, dropped.nodes) == (usual.totals, usual.nodes)


def test_nodes_of_one_class_that_cost_differently_are_found() -> None:
    # The whole model's costs are read per class only where every node of a class costs
    # the same: here nodes 0 and 1 (q and present_k) are put in one class, and do not.
    a = onnxcost.analyze(parse(KV_ATTENTION), dims={"batch": 2, "seq": 3, "past_seq": 5})
    one_class = reduced._Units((0, 0, 1, 2, 3, 4), (0, 2, 3, 4, 5), (2, 1, 1, 1, 1))
    with pytest.raises(reduced._ReducedMissError):
        reduced._vector(a, one_class)
    every_node = reduced._vector(a, reduced._Units.nodes(6))
    # q = MatMul [2,3,8] x [8,8]: 2*3*8*8 = 384 MACs, node 0's first cost after the totals
    assert every_node.values[len(formulas.TOTAL_KEYS)] == 384


def test_the_check_point_gives_each_symbol_its_own_value() -> None:
    # Symbols at one value there (batch = past) could put nodes alike only there in one
    # class. Each symbol lies past the grid, base + max_degree + 1 at least: with bases
    # 2, 3, 4 and degree 3, at least 6, 7, 8.
    for seed in range(200):
        point = search._check_point(random.Random(seed), (2, 3, 4), 3)
        assert len(set(point)) == 3, (seed, point)
        assert all(v >= b + 3 + 2 for v, b in zip(point, (2, 3, 4), strict=True)), point


def test_a_symbol_the_exporter_baked_in_is_named_with_the_node_it_breaks() -> None:
    # The Reshape's target is [5, batch, 4]: the exporter fixed seq at 5, but the input still
    # names it. At the base point (batch 2, seq 3) x has 2*3*4 = 24 elements, the target
    # 5*2*4 = 40: one line naming that node, exit 1; with --dim seq=5 the formulas are in
    # batch alone.
    model = parse("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[batch,seq,4] x) => (float[5,batch,4] y) {
      s = Shape <start=0, end=1> (x)
      five = Constant <value = int64[1] {5}> ()
      four = Constant <value = int64[1] {4}> ()
      t = Concat <axis=0> (five, s, four)
      y = Reshape (x, t)
    }""")
    with pytest.raises(ShapeError) as raised:
        onnxcost.analyze(model, symbolic=True)
    message = str(raised.value)
    assert (
        "does not analyse at batch=2, seq=3 (node 'Reshape_4' (Reshape): input 'x' has 24"
        in message
    )
    assert "the new shape 5x2x4 has 40" in message
    assert "--dim SYMBOL=N" in message
    a = onnxcost.analyze(model, symbolic=True, dims={"seq": 5})
    assert a.symbolic is not None
    assert a.symbolic.symbols == ("batch",)


def test_no_reduced_model_where_few_nodes_are_alike() -> None:
    # KV_ATTENTION's six nodes are all different: a reduced model would not pay.
    found = _searched(parse(KV_ATTENTION))
    assert (found.reduced_analyses, found.reduced_nodes) == (0, 0)


def test_the_lean_analysis_costs_as_the_full_one() -> None:
    # what the formulas sample (analyze.costs_at) is the full analysis' totals and records
    prepared = prepare(parse(KV_ATTENTION))
    point = {"batch": 2, "seq": 3, "past_seq": 5}
    full = onnxcost.analyze(prepared, dims=point)
    lean = costs_at(
        prepared, input_shapes=None, dims=point, convention="onnxcost", allow_reshape=False
    )
    keys = ("macs", "flops", "bytes_read", "bytes_written", "params", "param_bytes")
    assert [getattr(lean.totals, k) for k in keys] == [getattr(full.totals, k) for k in keys]
    assert lean.nodes == full.nodes
    # q: 2*3*8*8 = 384; scores and context: b*s*(P+s)*8 each = 2*3*8*8 = 384; 384 + 2*384
    # = 1,152
    assert lean.totals.macs == 1_152


def test_python_syntax_evaluates(tmp_path: Path) -> None:
    path = _small_gpt2(tmp_path)
    a = onnxcost.analyze(path, symbolic=True)
    data = a.to_dict()
    assert data["symbols"] == ["batch", "seq"]
    assert set(data["formulas"]) == {
        "macs",
        "flops",
        "bytes_read",
        "bytes_written",
        "params",
        "param_bytes",
        "peak_activation_bytes",
    }
    point = {"batch": 3, "seq": 11}
    concrete = onnxcost.analyze(path, dims=point)
    for key, text in data["formulas"].items():
        assert eval(text, {"max": max, "min": min}, dict(point)) == getattr(concrete.totals, key)
    for node, want in zip(data["nodes"], concrete.nodes, strict=True):
        for key, text in node["formulas"].items():
            assert eval(text, {}, dict(point)) == getattr(want, key), (node["name"], key)


_CLAMPED_SLICE = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[batch,seq,8] x) => (float[batch,ss,8] y) {
      st = Constant <value = int64[1] {0}> ()
      en = Constant <value = int64[1] {5}> ()
      ax = Constant <value = int64[1] {1}> ()
      s = Slice (x, st, en, ax)
      y = Relu (s)
    }"""


def test_a_clamped_slice_is_an_exact_min() -> None:
    # Slice keeps seq's first 5 rows: Relu's FLOPs are b*min(seq, 5)*8 (one per element),
    # which the walk carries exactly: 8*3*5 = 120 at batch 3, seq 9; 8*3*2 = 48 at seq 2.
    a = onnxcost.analyze(parse(_CLAMPED_SLICE), symbolic=True)
    relu = next(k for k, n in enumerate(a.nodes) if n.op_type == "Relu")
    assert a.symbolic is not None
    f = a.symbolic.nodes[relu]["flops"]
    assert f is not None
    assert (f(batch=3, seq=9), f(batch=3, seq=2)) == (120, 48)
    assert eval(f.python(), {"min": min, "max": max}, {"batch": 3, "seq": 9}) == 120


def test_piecewise_cost_is_null_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    # The sampler fits polynomials: b*min(seq, 5)*8 is none, so it is null with a warning.
    monkeypatch.setattr(formulas, "one_walk_costs", lambda *args, **kwargs: None)
    a = onnxcost.analyze(parse(_CLAMPED_SLICE), symbolic=True)
    relu = next(k for k, n in enumerate(a.nodes) if n.op_type == "Relu")
    assert a.symbolic is not None
    assert a.symbolic.nodes[relu]["flops"] is None
    assert a.formulas["flops"] is None
    assert any("Relu" in w and "null" in w for w in a.warnings)
    data = a.to_dict()
    assert data["formulas"]["flops"] is None


def test_a_formula_that_misses_at_one_is_null_with_a_warning() -> None:
    # Squeeze without axes drops every dim of size 1: x [batch, 8] is [8] at batch = 1 and
    # stays [batch, 8] from 2 on. ReduceSum over axis 0 then adds the 8 values of [8] into a
    # scalar at batch = 1 (7 adds, 4 bytes written), and each column of [batch, 8] from 2 on
    # (8*(batch - 1) adds, 8 floats = 32 bytes written). The grid (batch = 2, 3, ...) fits
    # 8*batch - 8 adds and 32 bytes, which give 0 and 32 at batch = 1, not 7 and 4.
    text = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[batch,8] x) => (float[m] y) {
      zero = Constant <value = int64[1] {0}> ()
      s = Squeeze (x)
      y = ReduceSum <keepdims=0> (s, zero)
    }"""
    a = onnxcost.analyze(parse(text), symbolic=True)
    reduce = next(k for k, n in enumerate(a.nodes) if n.op_type == "ReduceSum")
    assert (a.nodes[reduce].flops, a.nodes[reduce].bytes_written) == (7, 4)  # at batch = 1
    assert a.symbolic is not None
    formulas = a.symbolic.nodes[reduce]
    assert formulas["flops"] is None
    assert formulas["bytes_written"] is None
    # what it reads is a polynomial: the axes (int64[1], 8 bytes) and x (8*batch floats)
    assert str(formulas["bytes_read"]) == "8 + 32*batch"
    assert a.formulas["flops"] is None
    assert a.formulas["bytes_written"] is None
    assert any("ReduceSum" in w and "at batch=1" in w and "null" in w for w in a.warnings)


def test_a_count_that_stops_at_zero_is_clamped() -> None:
    # ReduceSum of [batch, 8] to a scalar: 8*batch - 1 adds for batch >= 1, none at batch 0.
    text = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[batch,8] x) => (float y) {
      y = ReduceSum <keepdims=0> (x)
    }"""
    a = onnxcost.analyze(parse(text), symbolic=True)
    f = a.formulas["flops"]
    assert f is not None
    assert f.python() == "max(0, -1 + 8*batch)"
    assert f.pretty() == "max(0, -1 + 8·batch)"
    assert (f(batch=0), f(batch=3)) == (0, 23)
    assert eval(f.python(), {"max": max}, {"batch": 0}) == 0
    assert not a.warnings


def test_at_needs_symbolic() -> None:
    with pytest.raises(UsageError, match="symbolic=True"):
        onnxcost.analyze(parse(KV_ATTENTION)).at(batch=1)


def test_dim_fixes_a_symbol(tmp_path: Path) -> None:
    a = onnxcost.analyze(_small_gpt2(tmp_path), dims={"batch": 2}, symbolic=True)
    assert a.symbols == ("seq",)
    # 2 * (55,552*s + 128*s^2)
    assert _terms(a.formulas["macs"]) == {(1,): 111_104, (2,): 256}


def test_symbolic_on_the_command_line(tmp_path: Path) -> None:
    path = _small_gpt2(tmp_path)
    r = runner.invoke(app, ["analyze", str(path), "--symbolic", "--top", "3"])
    assert r.exit_code == 0, r.output
    assert "MACs = 55,552·batch·seq + 128·batch·seq²" in r.output
    r = runner.invoke(app, ["analyze", str(path), "--symbolic", "-f", "json"])
    data = json.loads(r.stdout)
    assert data["formulas"]["macs"] == "55552*batch*seq + 128*batch*seq**2"
    assert all("formulas" in n for n in data["nodes"])
    r = runner.invoke(app, ["analyze", str(path), "--symbolic", "-f", "markdown"])
    assert "`MACs = 55,552·batch·seq + 128·batch·seq²`" in r.stdout


# --- the contract on every shipped and built-in model ------------------------------------------


def _check_everywhere(source: str | Path, points: int = 3) -> None:
    """Every formula equals the concrete analysis at random points, and at 0 where allowed."""
    a = onnxcost.analyze(source, symbolic=True)
    costs = a.symbolic
    assert costs is not None
    rng = random.Random(12)
    todo = [{s: rng.randint(1, 20) for s in costs.symbols} for _ in range(points)]
    for s in costs.symbols:
        if costs.zero_allowed[s]:
            todo.append({**todo[0], s: 0})
    for point in todo:
        concrete = onnxcost.analyze(source, dims=point)
        for key, f in costs.totals.items():
            assert f is not None, (key, a.warnings)
            assert f.evaluate(point) == getattr(concrete.totals, key), (point, key)
        for node, found in zip(concrete.nodes, costs.nodes, strict=True):
            for key, f in found.items():
                assert f is not None, (node.name, key, a.warnings)
                assert f.evaluate(point) == getattr(node, key), (point, node.name, key)


def _check_training(source: str | Path, points: int = 2) -> None:
    """With training: every training total's formula equals the concrete analysis at random
    points (the formulas are checked at every symbol = 1 and one point past the grid)."""
    a = onnxcost.analyze(source, symbolic=True, training=True)
    costs = a.symbolic
    assert costs is not None
    rng = random.Random(7)
    for point in [{s: rng.randint(1, 20) for s in costs.symbols} for _ in range(points)]:
        concrete = training_vector(
            onnxcost.analyze(source, dims=point, training=True).totals.training
        )
        assert concrete is not None
        for key, want in zip(TRAINING_KEYS, concrete, strict=True):
            f = costs.totals[key]
            if f is None and key == "peak_bytes":
                # A maximum over the steps: on a decoder the backward's peak overtakes the
                # forward's as seq grows, so no one polynomial holds at seq = 1 and past it.
                assert any("no exact formula for peak_bytes" in w for w in a.warnings)
                continue
            assert f is not None, (key, a.warnings)
            assert f.evaluate(point) == want, (point, key)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("mlp", {}),
        ("resnet20_cifar", {}),
        ("gpt2", {"layers": 2, "hidden": 64, "heads": 4, "vocab": 50, "max_positions": 64}),
        (
            "llama",
            {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "intermediate": 96, "vocab": 50},
        ),
    ],
)
def test_training_formulas_hold(tmp_path: Path, name: str, params: dict[str, int]) -> None:
    _check_training(zoo.save(name, tmp_path / f"{name}.onnx", weights=False, params=params))


MODELS_DIR = Path(__file__).resolve().parents[1] / "models"


@pytest.mark.parametrize("file", sorted(p.name for p in MODELS_DIR.glob("*.onnx")))
def test_formulas_hold_on_shipped_models(file: str) -> None:
    _check_everywhere(MODELS_DIR / file)


@pytest.mark.parametrize("name", ["mlp", "resnet20_cifar", "mobilenet_v2"])
def test_formulas_hold_on_built_in_models(name: str) -> None:
    _check_everywhere(name)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("bert_base", {"layers": 2, "hidden": 64, "heads": 4, "intermediate": 128, "vocab": 50}),
        ("gpt2", {"layers": 2, "hidden": 64, "heads": 4, "vocab": 50, "max_positions": 64}),
        (
            "llama",
            {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "intermediate": 96, "vocab": 50},
        ),
        (
            "gpt2",
            {
                "layers": 2,
                "hidden": 32,
                "heads": 4,
                "vocab": 50,
                "max_positions": 64,
                "kv_cache": 1,
            },
        ),
        (
            "llama",
            {"layers": 2, "hidden": 32, "heads": 4, "kv_heads": 2, "intermediate": 48, "vocab": 50}
            | {"kv_cache": 1},
        ),
    ],
)
def test_formulas_hold_on_built_in_transformers(
    tmp_path: Path, name: str, params: dict[str, int]
) -> None:
    _check_everywhere(zoo.save(name, tmp_path / f"{name}.onnx", weights=False, params=params))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet18", "resnet50", "vit_b_16", "bert_base", "gpt2", "llama"])
def test_formulas_hold_on_full_size_built_in_models(name: str) -> None:
    _check_everywhere(name, points=2)
