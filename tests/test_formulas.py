"""Dims may be zero, and costs as exact formulas in the model's symbolic dims (issue 12)."""

from __future__ import annotations

from pathlib import Path

from onnxcost_testing import formula_cost, parse
from typer.testing import CliRunner

import onnxcost
from onnxcost.cli import app
from onnxcost.costs.attention import rotated_elements

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
