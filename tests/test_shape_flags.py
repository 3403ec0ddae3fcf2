"""Shapes that contradict the model are errors: fixed dims need --allow-reshape, and shapes
that make a node's input shapes disagree name the node and the flags."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from onnxcost_testing import parse
from typer.testing import CliRunner

import onnxcost
from onnxcost.cli.app import app
from onnxcost.errors import ShapeError
from onnxcost.load.graph import build
from onnxcost.shapes.infer import infer

runner = CliRunner()
MODELS = Path(__file__).parent.parent / "models"

# Every dim fixed: x is 1x3x8x8; Conv 4 filters 3x3 with pads 1 keeps 8x8.
FIXED = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,3,8,8] x) => (float[1,4,8,8] y) <float[4,3,3,3] w = {1.0}> {
  y = Conv <pads=[1,1,1,1]> (x, w)
}"""

# Batch symbolic, spatial dims unknown: both may be set freely.
FREE = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[N,3,?,?] x) => (float[N,4,?,?] y) <float[4,3,3,3] w = {1.0}> {
  y = Conv <pads=[1,1,1,1]> (x, w)
}"""

# x is N x K with K symbolic; the weight fixes K = 8.
MATMUL = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[N,K] x) => (float[N,4] y) <float[8,4] w = {1.0}> {
  y = MatMul (x, w)
}"""


def macs(model: onnx.ModelProto | str | Path, **kwargs: object) -> int:
    return onnxcost.analyze(model, **kwargs).totals.macs  # type: ignore[arg-type]


# --- dims the model fixes ---


def test_changing_a_fixed_dim_is_refused() -> None:
    with pytest.raises(ShapeError) as e:
        onnxcost.analyze(parse(FIXED), input_shapes={"x": (2, 3, 16, 8)})
    assert str(e.value) == (
        "--input-shape x=2x3x16x8 changes dims that the model fixes for input 'x' (1x3x8x8): "
        "dim 0: model 1, yours 2; dim 2: model 8, yours 16; pass --input-shape x=1x3x8x8, "
        "or add --allow-reshape to insist"
    )


def test_allow_reshape_insists() -> None:
    # Conv on 2x3x16x16 with pads 1: output 2x4x16x16 = 2,048 values x (3x3x3 = 27) = 55,296
    got = macs(parse(FIXED), input_shapes={"x": (2, 3, 16, 16)}, allow_reshape=True)
    assert got == 55_296


def test_the_same_fixed_dims_are_accepted() -> None:
    # 1x4x8x8 = 256 outputs x 27 = 6,912 MACs, as without the flag
    assert macs(parse(FIXED), input_shapes={"x": (1, 3, 8, 8)}) == 6_912


def test_symbolic_and_unknown_dims_are_free() -> None:
    # 2x4x10x12 = 960 outputs x 27 = 25,920 MACs
    assert macs(parse(FREE), input_shapes={"x": (2, 3, 10, 12)}) == 25_920


def test_rank_is_still_checked() -> None:
    with pytest.raises(ShapeError, match=r"gives 3 dims but input 'x' has rank 4"):
        onnxcost.analyze(parse(FIXED), input_shapes={"x": (1, 3, 8)}, allow_reshape=True)


# --- shapes that make a node disagree ---


def test_conv_channels_against_weight_after_allow_reshape() -> None:
    with pytest.raises(ShapeError) as e:
        onnxcost.analyze(parse(FIXED), input_shapes={"x": (1, 5, 8, 8)}, allow_reshape=True)
    assert str(e.value) == (
        "the shapes from --input-shape x=1x5x8x8 (the model declares 1x3x8x8), --allow-reshape "
        "do not fit the model: node 'Conv_0' (Conv): input 'x' has 5 channels but weight "
        "4x3x3x3 with group 1 takes 3 (inputs 1x5x8x8, 4x3x3x3); fix the flags to match the "
        "model's inputs"
    )


def test_free_channel_dim_against_weight() -> None:
    model = parse(FREE.replace("float[N,3,?,?] x", "float[N,C,?,?] x"))
    with pytest.raises(ShapeError, match=r"--dim C=5 do not fit .*'x' has 5 channels but"):
        onnxcost.analyze(model, dims={"C": 5})
    # C=3 fits: 1x4x8x8 = 256 outputs x 27 = 6,912 MACs
    assert macs(model, input_shapes={"x": (1, 3, 8, 8)}) == 6_912


def test_inference_failure_names_node_and_flag() -> None:
    with pytest.raises(ShapeError) as e:
        onnxcost.analyze(parse(MATMUL), dims={"K": 5})
    assert str(e.value) == (
        "the shapes from --dim K=5 do not fit the model: node 'MatMul_0' (MatMul): Incompatible "
        "dimensions for matrix multiplication (inputs 1x5, 8x4); fix the flags to match the "
        "model's inputs"
    )
    # K=8 fits: 1 x 8 x 4 = 32 MACs
    assert macs(parse(MATMUL), dims={"K": 8}) == 32


def test_without_flags_a_disagreement_is_a_warning() -> None:
    # K left at 1 against the weight's 8: said, not raised (no flag to blame)
    a = onnxcost.analyze(parse(MATMUL))
    assert any(
        w.startswith("input shapes disagree at node 'MatMul_0' (MatMul): Incompatible dimensions")
        for w in a.warnings
    )


# A torch MultiheadAttention exported by tracing at seq 4 bakes that length into the key's
# Reshape target: [S,1,8] -> [4,2,4] holds S x 8 elements in and 32 out, right only at S=4.
BAKED = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[S,1,8] x) => (float[2,S,S] y) <int64[3] t = {4, 2, 4}> {
  k = Reshape (x, t)
  kt = Transpose <perm=[1,2,0]> (k)
  qt = Transpose <perm=[1,0,2]> (k)
  y = MatMul (qt, kt)
}"""


def test_a_reshape_that_changes_the_element_count_is_named(tmp_path: Path) -> None:
    # No flag: S at 1 puts 1 x 1 x 8 = 8 elements into a 4x2x4 = 32-element shape; a warning.
    a = onnxcost.analyze(parse(BAKED))
    assert any(
        w.startswith(
            "input shapes disagree at node 'Reshape_0' (Reshape): input 'x' has 8 elements but "
            "the new shape 4x2x4 has 32 (inputs 1x1x8, 3)"
        )
        for w in a.warnings
    ), a.warnings
    # --dim S=2: 16 elements in, 32 out; the flag is blamed and the analysis refused.
    with pytest.raises(ShapeError, match=r"--dim S=2 do not fit .*'x' has 16 elements but"):
        onnxcost.analyze(parse(BAKED), dims={"S": 2})
    path = tmp_path / "baked.onnx"
    onnx.save(parse(BAKED), path)
    r = runner.invoke(app, ["analyze", str(path), "--dim", "S=2"])
    assert r.exit_code == 1
    assert "Traceback" not in r.output
    # S=4 fits, as traced: 4 x 8 = 32 elements; the MatMul [2,4,4] x [2,4,4]: 2 x 4 x 4 x 4 = 128
    assert macs(parse(BAKED), dims={"S": 4}) == 128
    assert not [
        w for w in onnxcost.analyze(parse(BAKED), dims={"S": 4}).warnings if "disagree" in w
    ]


def test_a_reshape_of_an_element_count_past_2_64_is_said_so_and_not_multiplied_out() -> None:
    # 2,000 declared dims of 2**62 would make an integer of 124,000 bits (37,000 digits: more
    # than the 4,300 Python writes; thousands more dims take seconds to multiply); the count
    # stops past 2**64. The output's 30 dims of 2 hold 2**30 = 1,073,741,824 elements.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2**62] * 2_000)
    t = helper.make_tensor_value_info("t", TensorProto.INT64, [30])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2] * 30)
    node = helper.make_node("Reshape", ["x", "t"], ["y"], name="R")
    graph = helper.make_graph([node], "g", [x, t], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    a = onnxcost.analyze(model)
    assert any(
        "'x' has more than 2^64 elements but the new shape" in w and "has 1,073,741,824" in w
        for w in a.warnings
    ), a.warnings


def test_a_flag_that_does_not_reach_the_broken_node_is_not_blamed() -> None:
    # mm is broken whatever N is (3x5 against 6x2); the flag only sizes the Relu.
    model = parse("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N,4] x, float[3,5] y) => (float[N,4] r, float[3,2] z) <float[6,2] w = {1.0}> {
      r = Relu (x)
      z = MatMul (y, w)
    }""")
    a = onnxcost.analyze(model, dims={"N": 2})
    assert any("input shapes disagree at node 'MatMul_1' (MatMul)" in w for w in a.warnings)
    # Relu on 2x4: 8 FLOPs
    assert a.nodes[0].flops == 8


def _with_if(inner: str) -> onnx.ModelProto:
    """``inner`` (y from x), then an If whose branches read y from the enclosing graph:
    a model that takes the whole-graph route of shape inference."""
    model = parse(inner)
    branch = {
        b: helper.make_graph(
            [helper.make_node("Identity", ["y"], [f"{b}_out"])],
            b,
            [],
            [helper.make_tensor_value_info(f"{b}_out", TensorProto.FLOAT, None)],
        )
        for b in ("then", "else")
    }
    g = model.graph
    g.input.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, []))
    g.node.append(
        helper.make_node(
            "If", ["cond"], ["out"], then_branch=branch["then"], else_branch=branch["else"]
        )
    )
    g.output.append(helper.make_tensor_value_info("out", TensorProto.FLOAT, None))
    return model


@pytest.mark.parametrize(
    ("text", "kwargs", "match"),
    [
        (MATMUL, {"dims": {"K": 5}}, r"node 'MatMul_0' \(MatMul\): Incompatible dimensions"),
        (
            FIXED,
            {"input_shapes": {"x": (1, 5, 8, 8)}, "allow_reshape": True},
            r"node 'Conv_0' \(Conv\): input 'x' has 5 channels",
        ),
    ],
)
def test_whole_graph_route_too(text: str, kwargs: dict[str, object], match: str) -> None:
    model = _with_if(text)
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    assert infer(probe, view=build(probe.graph, name_unnamed=True)).kinds == ()  # that route
    with pytest.raises(ShapeError, match=match):
        onnxcost.analyze(model, **kwargs)  # type: ignore[arg-type]


# --- the command line ---


@pytest.fixture
def fixed(tmp_path: Path) -> Path:
    p = tmp_path / "fixed.onnx"
    p.write_bytes(parse(FIXED).SerializeToString())
    return p


def test_keras_nhwc_model_refuses_nchw_shape() -> None:
    """The issue's case: a Keras NHWC model (input batchx32x32x3) given an NCHW shape."""
    model = str(MODELS / "resnet20_keras.onnx")
    r = runner.invoke(app, ["analyze", model, "--input-shape", "input=4x3x32x32"])
    assert r.exit_code == 1
    assert r.stderr == (
        "onnxcost: error: --input-shape input=4x3x32x32 changes dims that the model fixes for "
        "input 'input' (batchx32x32x3): dim 1: model 32, yours 3; dim 3: model 3, yours 32; "
        "pass --input-shape input=4x32x32x3, or add --allow-reshape to insist\n"
    )
    r = runner.invoke(
        app, ["analyze", model, "--input-shape", "input=4x3x32x32", "--allow-reshape"]
    )
    assert r.exit_code == 1
    assert "node 'Conv__95' (Conv)" in r.stderr
    assert "has 32 channels but weight 16x3x3x3 with group 1 takes 3" in r.stderr
    assert len(r.stderr.splitlines()) == 1
    # The shape it asks for works, and every cost of this model is per image: 4 x batch 1.
    r = runner.invoke(app, ["analyze", model, "-f", "json", "--input-shape", "input=4x32x32x3"])
    assert r.exit_code == 0, r.output
    import json

    assert json.loads(r.stdout)["totals"]["macs"] == 4 * macs(model)


@pytest.mark.parametrize(
    "args",
    [
        ["analyze", "M"],
        ["compare", "M", "M"],
        ["check", "M", "--max-macs", "1G"],
    ],
)
def test_every_shape_command_refuses_and_allows(fixed: Path, args: list[str]) -> None:
    argv = [str(fixed) if a == "M" else a for a in args] + ["--input-shape", "x=2x3x8x8"]
    r = runner.invoke(app, argv)
    assert r.exit_code == 1
    assert "dim 0: model 1, yours 2" in r.stderr
    r = runner.invoke(app, [*argv, "--allow-reshape"])
    assert r.exit_code == 0, r.output


def test_bench_has_the_flag() -> None:
    r = runner.invoke(app, ["bench", "--help"])
    assert "--allow-reshape" in r.stdout


def test_a_model_that_breaks_without_the_flags_too_is_said_to_maybe_be_malformed() -> None:
    # x [b, s] reshaped to [b, 2, -1] needs an even s: each dim at 1 breaks the Reshape. At
    # s=4 it is [b, 2, 2], and the MatMul by w [3, 4] breaks (2 against 3): the model itself
    # is wrong there, as an exporter's broken Transpose is at the very shapes it was traced
    # at, and "fix the flags" alone sent the user after flags that were right.
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[b,s] x) => (float[b,2,4] y) <int64[3] shape = {0, 2, -1}, float[3,4] w = {1.0}> {
  r = Reshape (x, shape)
  y = MatMul (r, w)
}"""
    with pytest.raises(ShapeError) as e:
        onnxcost.analyze(parse(text), dims={"s": 4})
    message = str(e.value)
    assert message.startswith("the shapes from --dim s=4 do not fit the model: node 'MatMul_1'")
    assert "without them (each symbolic dim at 1) it breaks too, at node 'Reshape_0'" in message
    assert message.endswith("or fix the flags to match its inputs")
