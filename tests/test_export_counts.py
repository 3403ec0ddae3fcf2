"""Counts on real exports (issue 27): shape sub-graphs folded through every op an exporter
puts in them, quantisation scales, BatchNorm through the exporter's shared Identity, and
shape flags that must agree. Each expected figure is worked out by hand in a comment."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxcost_testing import analyze_text, parse

import onnxcost
from onnxcost.load.wire import FOLD_MAX_ELEMENTS
from onnxcost.shapes.folding import KnownValues, _fold_values

# --- Pad through Transpose ------------------------------------------------------------------

TIME_SHIFT = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[batch,seq,96] x) => (float[batch,seq,96] y) <float[96,96] w = {1.0}> {
  p = Constant <value = int64[6] {0, 0, 1, -1, 0, 0}> ()
  two = Constant <value = int64[2] {-1, 2}> ()
  r = Reshape (p, two)
  st = Constant <value = int64[1] {-1}> ()
  en = Constant <value = int64[1] {-9223372036854775807}> ()
  ax = Constant <value = int64[1] {0}> ()
  sp = Constant <value = int64[1] {-1}> ()
  s = Slice (r, st, en, ax, sp)
  t = Transpose <perm = [1, 0]> (s)
  flat = Constant <value = int64[1] {-1}> ()
  f = Reshape (t, flat)
  pads = Cast <to = 7> (f)
  zero = Constant <value = float {0.0}> ()
  shifted = Pad (x, pads, zero)
  y = MatMul (shifted, w)
}"""
"""What the TorchScript exporter writes for nn.ZeroPad2d((0, 0, 1, -1)) on [B, T, C] then a
Linear(C, C): torch's pads [0, 0, 1, -1] (last dim first) padded with zeros to 2 x rank,
reshaped to pairs, reversed, and transposed to ONNX's [begins..., ends...]."""


def test_pads_built_through_transpose_fold() -> None:
    # pairs [[0,0],[1,-1],[0,0]] reversed: [[0,0],[1,-1],[0,0]]; transposed and flattened:
    # pads [0, 1, 0, 0, -1, 0]: seq + 1 - 1 = 16, so Pad gives [1, 16, 96] and the MatMul
    # has 1 x 16 x 96 x 96 = 147,456 MACs (unknown_shape and 0 without Transpose folded).
    a = analyze_text(TIME_SHIFT, dims={"batch": 1, "seq": 16})
    pad, matmul = (n for n in a.nodes if n.op_type in ("Pad", "MatMul"))
    assert pad.output_shapes == ((1, 16, 96),)
    assert matmul.status == "ok"
    assert a.totals.macs == 147_456


def test_ops_without_a_fast_path_fold_by_onnx_reference() -> None:
    # pads = Tile([0, 1, 0], [2]) = [0, 1, 0, 0, 1, 0]: Pad makes [2, 5 + 2, 16];
    # MatMul by [16, 4]: 2 x 7 x 16 x 4 = 896 MACs.
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[batch,seq,16] x) => (float[batch,?,4] y) <float[16,4] w = {1.0}> {
  half = Constant <value = int64[3] {0, 1, 0}> ()
  reps = Constant <value = int64[1] {2}> ()
  pads = Tile (half, reps)
  padded = Pad (x, pads)
  y = MatMul (padded, w)
}"""
    a = analyze_text(text, dims={"batch": 2, "seq": 5})
    assert a.totals.macs == 896


def test_reference_folds_keep_the_size_limit() -> None:
    # Tile of one int64 by 2**40 would be 8 TiB: its size is known before it runs, and it
    # stays unknown at once; a Tile within the limit folds.
    model = parse("""
<ir_version: 8, opset_import: ["" : 17]>
g (int64[1] a, int64[1] r) => (int64[?] y) {
  y = Tile (a, r)
}""")
    node = model.graph.node[0]
    for reps, expected in ((1 << 40, None), (3, [7, 7, 7])):
        values = KnownValues()
        values["a"] = np.array([7], dtype=np.int64)
        values["r"] = np.array([reps], dtype=np.int64)
        start = time.perf_counter()
        results = _fold_values(node, {}, values, 17)
        assert time.perf_counter() - start < 1.0
        result = results[0] if results else None
        assert (None if result is None else result.tolist()) == expected
    assert 3 <= FOLD_MAX_ELEMENTS < 1 << 40


def test_fresh_torch_time_shift_export(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")

    class TimeShift(torch.nn.Module):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.shift = torch.nn.ZeroPad2d((0, 0, 1, -1))
            self.linear = torch.nn.Linear(96, 96, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[name-defined]
            return self.linear(self.shift(x))  # type: ignore[no-any-return]

    path = tmp_path / "shift.onnx"
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation notices
        warnings.simplefilter("ignore")
        torch.onnx.export(
            TimeShift(),
            (torch.zeros(1, 16, 96),),
            str(path),
            dynamo=False,
            input_names=["x"],
            dynamic_axes={"x": {0: "batch", 1: "seq"}},
        )
    a = onnxcost.analyze(path, dims={"batch": 1, "seq": 16})
    assert "Transpose" in {n.op_type for n in a.nodes}  # the exporter's form, as in TIME_SHIFT
    # Linear(96, 96) on [1, 16, 96]: 1 x 16 x 96 x 96 = 147,456 MACs
    assert a.totals.macs == 147_456
    assert not [n for n in a.nodes if n.status == "unknown_shape"]


# --- quantize_dynamic's weight scales -------------------------------------------------------


def _linear_model() -> onnx.ModelProto:
    """x [2, 16] @ w [16, 8] + b [8], float32."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["m"]),
            helper.make_node("Add", ["m", "b"], ["y"]),
        ],
        "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        [w, b],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.ort
@pytest.mark.parametrize(
    ("per_channel", "quant", "param_bytes"),
    [
        # per tensor: scale [] fp32 + zero point [] int8 = 2 quant params;
        # bytes: w 128 x 1 + b 8 x 4 + scale 4 + zero point 1 = 165
        (False, 2, 165),
        # per channel: scale [8] fp32 + zero point [8] int8 = 16 quant params;
        # bytes: 128 + 32 + 8 x 4 + 8 x 1 = 200
        (True, 16, 200),
    ],
)
def test_quantize_dynamic_weight_scales_are_quant_params(
    tmp_path: Path, per_channel: bool, quant: int, param_bytes: int
) -> None:
    quantization = pytest.importorskip("onnxruntime.quantization")
    src, out = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(_linear_model(), src)
    quantization.quantize_dynamic(
        src, out, per_channel=per_channel, weight_type=quantization.QuantType.QInt8
    )
    q = onnx.load(out)
    # The quantizer's form: the weight's scale meets the input's in a Mul, whose product
    # scales MatMulInteger's output cast to float in a second Mul.
    assert [n.op_type for n in q.graph.node if n.op_type in ("MatMulInteger", "Mul")] == [
        "Mul",
        "MatMulInteger",
        "Mul",
    ]
    a = onnxcost.analyze(q)
    # params: w 16 x 8 = 128 (int8) + b 8 = 136, with or without per-channel scales
    assert a.totals.params == 136
    assert a.totals.quant_params == quant
    assert a.totals.param_bytes == param_bytes


def test_a_scale_on_a_dequantised_product_is_quant_wherever_it_sits() -> None:
    # The scale [4] multiplies the cast product directly (no x_scale Mul): 4 quant params,
    # 0 params besides the int8 weight [8, 4] = 32; a Mul by a [4] constant on a plain
    # activation stays a param (4), so params = 32 + 4 = 36.
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (uint8[2,8] x) => (float[2,4] y) <int8[8,4] w = {1}, float[4] s = {0.5, 0.5, 0.5, 0.5}, float[4] k = {2.0, 2.0, 2.0, 2.0}> {
  p = MatMulInteger (x, w)
  c = Cast <to = 1> (p)
  d = Mul (c, s)
  y = Mul (d, k)
}"""
    a = analyze_text(text)
    assert (a.totals.params, a.totals.quant_params) == (36, 4)


# --- BatchNorm through the exporter's shared Identity ---------------------------------------


def test_deduplicating_identities_count_as_their_own_weights() -> None:
    # Two BatchNorms over 4 channels. The first reads stored `ones` [4] and `zeros` [4] directly
    # as scale/var and bias/mean; the second reads them through Identities named as torch's
    # parameters. params: conv W 4x4x1x1 = 16 + bn1 scale 4 + bias 4 + bn2 scale 4 + bias 4 = 32;
    # statistics: bn1 mean 4 + var 4 + bn2 mean 4 + var 4 = 16. Before: the Identity outputs
    # were `ones`/`zeros` again, so params 24, statistics 0 (ones and zeros counted as params).
    # An Identity with an exporter's name (`/x/Identity_output_0`) reading `w` is an alias:
    # `w` still counts once (counted again, params would be 48).
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4,2,2] x) => (float[1,4,2,2] y) <float[4] ones = {1.0, 1.0, 1.0, 1.0}, float[4] zeros = {0.0, 0.0, 0.0, 0.0}, float[4,4,1,1] w = {0.5}> {
  a = BatchNormalization (x, ones, zeros, mean1, var1)
  c = Conv (a, wa)
  y = BatchNormalization (c, scale2, bias2, mean2, var2)
}"""
    model = parse(text)
    made = [
        ("zeros", "bn1.running_mean"),
        ("ones", "bn1.running_var"),
        ("w", "/conv/Identity_output_0"),  # an exporter's name: an alias of w
        ("ones", "bn2.weight"),
        ("zeros", "bn2.bias"),
        ("zeros", "bn2.running_mean"),
        ("ones", "bn2.running_var"),
    ]
    renames = dict(
        zip(["mean1", "var1", "wa", "scale2", "bias2", "mean2", "var2"], made, strict=True)
    )
    for node in model.graph.node:
        node.input[:] = [renames[i][1] if i in renames else i for i in node.input]
    nodes = [*(helper.make_node("Identity", [src], [out]) for src, out in made), *model.graph.node]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    a = onnxcost.analyze(model)
    assert (a.totals.params, a.totals.stat_params) == (32, 16)


def test_tied_head_through_transpose_counts_once() -> None:
    # Gather reads the table [10, 4] directly; the head reads it through Transpose: 40 params.
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (int64[1,3] ids) => (float[1,3,10] y) <float[10,4] table = {1.0}> {
  e = Gather (table, ids)
  t = Transpose <perm = [1, 0]> (table)
  y = MatMul (e, t)
}"""
    assert analyze_text(text).totals.params == 40


def test_fresh_torch_export_of_an_untrained_resnet(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class Block(nn.Module):  # type: ignore[misc, name-defined]
        def __init__(self, c: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(c)

        def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[name-defined]
            y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
            return torch.relu(x + y)  # type: ignore[no-any-return]

    class Net(nn.Module):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(8)
            self.layer1 = nn.Sequential(Block(8), Block(8))
            self.fc = nn.Linear(8, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[name-defined]
            x = self.layer1(torch.relu(self.bn(self.stem(x))))
            return self.fc(x.mean((2, 3)))  # type: ignore[no-any-return]

    net = Net().eval()
    path = tmp_path / "resnet.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(  # unfolded, so that BatchNorm stays (folded, it joins the Conv)
            net,
            (torch.zeros(1, 3, 16, 16),),
            str(path),
            dynamo=False,
            input_names=["x"],
            do_constant_folding=False,
        )
    stored = {t.name for t in onnx.load(path).graph.initializer}
    shared = [
        n for n in onnx.load(path).graph.node if n.op_type == "Identity" and n.input[0] in stored
    ]
    assert len(shared) >= 8  # the exporter de-duplicated the BatchNorms' ones and zeros
    # torch's own counts: params 216 + 16 + 4 x 576 + 4 x 16 + 90 = 2,690; BN buffers
    # (running mean and var) 5 x 16 = 80
    params = sum(p.numel() for p in net.parameters())
    stats = sum(b.numel() for n, b in net.named_buffers() if n.endswith(("_mean", "_var")))
    assert (params, stats) == (2_690, 80)
    a = onnxcost.analyze(path)
    assert (a.totals.params, a.totals.stat_params) == (params, stats)


# --- shape flags that must agree, and the checker's verdict ---------------------------------

DECLARED = """
<ir_version: 8, opset_import: ["" : 17, "com.foo" : 1]>
g (int64[batch,seq] ids) => (float[batch,seq,8] y) <float[10,8] table = {0.0}, float[8,8] w = {0.0}> {
  e = Gather (table, ids)
  t = com.foo.Thing (e)
  y = MatMul (t, w)
}"""
"""An op no one can shape (as a converter's output that onnx's inference gives up on): the
MatMul after it has its input's shape only from the model's declared [batch, seq, 8]."""


def test_input_shape_and_dim_give_the_same_analysis() -> None:
    # ids = 2 x 16 either way: the declared t [batch, seq, 8] = [2, 16, 8], and MatMul by
    # [8, 8]: 2 x 16 x 8 x 8 = 2,048 MACs. --input-shape left batch and seq unknown to the
    # declared shapes: MatMul was unknown_shape, 0 MACs.
    model = parse(DECLARED)
    model.graph.value_info.append(
        helper.make_tensor_value_info("t", TensorProto.FLOAT, ["batch", "seq", 8])
    )
    by_shape = onnxcost.analyze(model, input_shapes={"ids": (2, 16)})
    by_dims = onnxcost.analyze(model, dims={"batch": 2, "seq": 16})
    assert by_shape.totals.macs == by_dims.totals.macs == 2_048
    assert [n.status for n in by_shape.nodes] == [n.status for n in by_dims.nodes]
    assert [n.output_shapes for n in by_shape.nodes] == [n.output_shapes for n in by_dims.nodes]


CAST_CHAIN = """
<ir_version: 8, opset_import: ["" : 17]>
g (float16[batch,16] x) => (float[batch,4] y) <float[16,4] w = {1.0}> {
  c = Cast <to = 1> (x)
  h = Cast <to = 10> (c)
  y = MatMul (h, w)
}"""
"""A broken fp16 conversion: the Cast chain ends in float16 but the weight stayed float, so
onnx's checker (and onnxruntime) reject the MatMul; onnxcost's lenient inference still counts
it: 2 x 16 x 4 = 128 MACs at batch 2."""


def test_a_model_the_checker_rejects_gets_a_warning_naming_the_node() -> None:
    model = parse(CAST_CHAIN)
    model.graph.node[2].name = "/layer/MatMul"
    a = onnxcost.analyze(model, dims={"batch": 2})
    assert a.totals.macs == 128
    (warning,) = [w for w in a.warnings if "checker" in w]
    assert "'/layer/MatMul' (MatMul)" in warning
    # A model the checker accepts gets none (its initializer holding one value for 64 is the
    # test's shorthand, and no concern of the check, which reads no weights).
    assert not analyze_text(
        CAST_CHAIN.replace("float16[batch,16] x", "float[batch,16] x").replace(
            "<to = 10>", "<to = 1>"
        ),
        dims={"batch": 2},
    ).warnings


def test_the_checker_is_bounded_by_node_count(monkeypatch: pytest.MonkeyPatch) -> None:
    import onnxcost.prepare as prepare_module

    monkeypatch.setattr(prepare_module, "CHECK_MAX_NODES", 2)  # the model has 3 nodes
    assert not onnxcost.analyze(parse(CAST_CHAIN), dims={"batch": 2}).warnings


def _two_inputs_in_batch_and_seq() -> onnx.ModelProto:
    """Two float16 inputs in [batch, seq, 8], as a tokenizer's input_ids and attention_mask
    share batch and seq; the float weight of a half-done fp16 conversion makes onnx's strict
    inference reject the MatMul (float16 by float), which onnxcost's lenient inference counts."""
    half, full = TensorProto.FLOAT16, TensorProto.FLOAT
    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "m"], ["s"], name="/Mul"),
            helper.make_node("MatMul", ["s", "w"], ["y"], name="/MatMul"),
            helper.make_node("Relu", ["m"], ["r"], name="/Relu"),
        ],
        "g",
        [
            helper.make_tensor_value_info("x", half, ["batch", "seq", 8]),
            helper.make_tensor_value_info("m", half, ["batch", "seq", 8]),
        ],
        [
            helper.make_tensor_value_info("y", full, ["batch", "seq", 4]),
            helper.make_tensor_value_info("r", half, ["batch", "seq", 8]),
        ],
        [numpy_helper.from_array(np.ones((8, 4), np.float32), "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_input_shape_and_dim_give_the_same_json_warnings_included(tmp_path: Path) -> None:
    # x = 2 x 16 x 8 either way, and m shares batch and seq: m is 2 x 16 x 8 too. MatMul
    # 2 x 16 x 8 x 4 = 1,024 MACs; Relu of m 2 x 16 x 8 = 256 elements. --input-shape x=...
    # left m at 1 x 1 x 8 (Relu 8) with a warning that batch and seq were unset.
    import json

    from typer.testing import CliRunner

    from onnxcost.cli.app import app

    path = tmp_path / "two.onnx"
    onnx.save(_two_inputs_in_batch_and_seq(), path)
    runs = [
        CliRunner().invoke(app, ["analyze", str(path), *flags, "-f", "json"])
        for flags in (["--input-shape", "x=2x16x8"], ["--dim", "batch=2", "--dim", "seq=16"])
    ]
    assert [r.exit_code for r in runs] == [0, 0]
    by_shape, by_dims = (json.loads(r.stdout) for r in runs)
    assert by_shape["warnings"] == by_dims["warnings"]
    (checked,) = by_dims["warnings"]
    assert "onnx's full checker rejects the model at node '/MatMul' (MatMul)" in checked
    assert by_shape["totals"]["macs"] == 1_024
    assert [n["flops"] for n in by_shape["nodes"] if n["op_type"] == "Relu"] == [256]
    assert by_shape == by_dims


def test_input_shape_binds_the_symbols_of_the_formulas_as_dim_does() -> None:
    # --symbolic with x=2x16x8: batch and seq are bound on m too, so no symbol is left and the
    # formulas are the counts; m was probed at other batch and seq values against x's 2 x 16,
    # and Mul's shapes disagreed (ShapeError).
    model = _two_inputs_in_batch_and_seq()
    by_shape = onnxcost.analyze(model, input_shapes={"x": (2, 16, 8)}, symbolic=True)
    by_dims = onnxcost.analyze(model, dims={"batch": 2, "seq": 16}, symbolic=True)
    assert by_shape.formulas == by_dims.formulas
    assert str(by_shape.formulas["macs"]) == "1024"
    assert by_shape.warnings == by_dims.warnings
