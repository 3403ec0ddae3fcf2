"""Derived dims (dim_param arithmetic such as 'past + seq') that divide by 0, leave a dim's
range or are too long to parse end in one line naming the dim and the fix (issue 27)."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

import onnxcost
from onnxcost.cli.app import app
from onnxcost.errors import ShapeError
from onnxcost.llm.cost import llm_report

runner = CliRunner()


def _decoder(mask_dim: str) -> onnx.ModelProto:
    """A one-cache decoder whose mask input has the derived dim ``mask_dim``."""
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"]),
        helper.make_tensor_value_info("past_k", TensorProto.FLOAT, ["batch", "past"]),
        helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", mask_dim]),
    ]
    nodes = [
        helper.make_node("Concat", ["past_k", "x"], ["present_k"], axis=1),
        helper.make_node("ReduceSum", ["mask"], ["s"], keepdims=0),
    ]
    outputs = [
        helper.make_tensor_value_info("present_k", TensorProto.FLOAT, ["batch", "past + seq"]),
        helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
    ]
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _cli(model: onnx.ModelProto, tmp_path: Path, *args: str) -> tuple[int, str]:
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    r = runner.invoke(app, [args[0], str(path), *args[1:]])
    return r.exit_code, r.output


def _one_line(code: int, output: str) -> str:
    assert code == 1, output
    assert "Traceback" not in output
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    return lines[0]


def test_division_by_zero_at_prefill_is_one_line(tmp_path: Path) -> None:
    model = _decoder("seq // past")
    # llm's prefill is at past = 0: seq // 0 (was ZeroDivisionError)
    with pytest.raises(ShapeError, match=r"'seq // past' divides by 0 at seq=3, past=0"):
        llm_report(model, prompt=3, generate=2)
    line = _one_line(*_cli(model, tmp_path, "llm", "--prompt", "3", "--generate", "2"))
    assert "--dim 'seq // past=N'" in line
    # --symbolic probes past = 0 too: there the model does not analyse, and seq // past is
    # no polynomial, so the mask's costs get no formula; the other costs do.
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert not a.symbolic.zero_allowed["past"]
    # Concat [b, P] and [b, s] -> [b, P + s]: 4 bytes each element read
    concat = a.symbolic.nodes[0]["bytes_read"]
    assert concat is not None
    assert concat.evaluate({"batch": 2, "seq": 3, "past": 5}) == 4 * 16


def test_division_by_a_literal_zero_is_one_line(tmp_path: Path) -> None:
    model = _decoder("seq // 0")
    with pytest.raises(ShapeError, match=r"'seq // 0' divides by 0"):
        onnxcost.analyze(model, symbolic=True)
    line = _one_line(*_cli(model, tmp_path, "analyze", "--symbolic"))
    assert "input 'mask'" in line


def test_a_derived_dim_past_int64_is_one_line(tmp_path: Path) -> None:
    model = _decoder("seq*" + "1" + "0" * 30)
    with pytest.raises(ShapeError, match=r"about 10\*\*30 at seq=1, outside a dim's range"):
        onnxcost.analyze(model, symbolic=True)
    # two --dim values at 2**62 each (the most --dim takes) sum to 2**63, past int64
    big = str(2**62)
    code, out = _cli(_decoder("seq + past"), tmp_path, "analyze", "--symbolic", "--dim",
                     f"seq={big}", "--dim", f"past={big}")  # fmt: skip
    assert f"is {2**63:,} at seq={big}, past={big}" in _one_line(code, out)


def test_a_long_derived_dim_is_refused_not_parsed(tmp_path: Path) -> None:
    model = _decoder("+".join(["seq"] * 3000))  # 11,999 characters (was RecursionError)
    assert model.ByteSize() < 200_000
    with pytest.raises(ShapeError, match=r"11,999 characters, more than onnxcost reads"):
        onnxcost.analyze(model, symbolic=True)
    line = _one_line(*_cli(model, tmp_path, "llm", "--prompt", "3", "--generate", "2"))
    assert "--input-shape mask=DIMS" in line
    # --input-shape fixes the input, so its dim is not read at all; mask=2x5 sets batch to 2,
    # as --dim batch=2 would, so seq and past are the symbols left
    a = onnxcost.analyze(model, symbolic=True, input_shapes={"mask": (2, 5)})
    assert a.symbolic is not None
    assert a.symbolic.symbols == ("seq", "past")
    # at the limit it is still read: 'seq+seq+...' of 64 terms is 64*seq
    at_limit = "+".join(["seq"] * 64)
    assert len(at_limit) == 64 * 4 - 1 == 255  # the limit is 256
    a = onnxcost.analyze(_decoder(at_limit), symbolic=True)
    assert a.symbolic is not None
    mask = a.symbolic.nodes[1]["bytes_read"]  # ReduceSum reads [b, 64*s] floats
    assert mask is not None
    assert mask.evaluate({"batch": 2, "seq": 3, "past": 1}) == 4 * 2 * 192


def test_a_long_name_without_arithmetic_stays_one_name() -> None:
    name = "the length of " * 30  # 420 characters, no operator: a name, as before
    a = onnxcost.analyze(_decoder(name), symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.symbols == ("batch", "seq", "past")
    assert any("is unset; using 1" in w for w in a.warnings), a.warnings


def test_a_derived_dim_takes_its_symbols_values_in_a_plain_analysis(tmp_path: Path) -> None:
    # optimum's attention_mask [batch, 'past_sequence_length + sequence_length'] was left at
    # 1 by analyze and bench (only --symbolic and llm computed it): a mask of 1 beside a
    # cache of 4 and 3 new tokens, which onnxruntime refuses (bench failed in its Gather)
    model = _decoder("past + seq")
    a = onnxcost.analyze(model, dims={"batch": 1, "seq": 3, "past": 4})
    assert [i.shape for i in a.inputs] == [(1, 3), (1, 4), (1, 7)]  # mask: 4 + 3 = 7
    # ReduceSum of the mask's 7 floats: 7 x 4 = 28 bytes read
    assert a.nodes[1].bytes_read == 28
    # unset, seq and past are 1 each and the mask 1 + 1 = 2, with no warning of its own
    code, out = _cli(model, tmp_path, "analyze")
    assert code == 0, out
    assert "mask: float32[1x2]" in out
    assert "'past + seq'" not in out
    assert "--dim seq=N" in out  # its symbols still say they are unset
    # a dim given its own value keeps it
    a = onnxcost.analyze(model, dims={"batch": 1, "seq": 3, "past": 4, "past + seq": 5})
    assert a.inputs[2].shape == (1, 5)
