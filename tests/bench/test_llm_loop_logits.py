"""``llm --bench`` takes every legal logits shape and refuses the meaningless ones in one line
(issue 27): [batch, seq, vocab], [batch, vocab] at batch 2, a symbolic vocab; a vocab of 0 and
scalar logits are refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxcost.cli.app import app
from onnxcost.errors import BenchError
from onnxcost.llm.loop import _next_tokens

runner = CliRunner()


def _decoder(logits: list[int | str], vocab: int, *, keep_seq: bool = True) -> onnx.ModelProto:
    """input_ids [batch, seq] and a cache past_k [batch, past]; present_k is the cache with the
    ids appended; the logits are ids (as floats) times arange(vocab): [batch, seq, vocab], or
    with the ids summed over seq first, [batch, vocab] (``keep_seq`` False). With
    ``logits`` [] they are the sum of the ids: a scalar."""
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
        helper.make_tensor_value_info("past_k", TensorProto.FLOAT, ["batch", "past"]),
    ]
    nodes = [
        helper.make_node("Cast", ["input_ids"], ["xf"], to=TensorProto.FLOAT),
        helper.make_node("Concat", ["past_k", "xf"], ["present_k"], axis=1),
    ]
    w = numpy_helper.from_array(np.arange(vocab, dtype=np.float32), "w")
    axis = numpy_helper.from_array(np.array([-1 if keep_seq else 1], dtype=np.int64), "axis")
    if not logits:
        nodes.append(helper.make_node("ReduceSum", ["xf"], ["logits"], keepdims=0))
    elif keep_seq:
        nodes += [
            helper.make_node("Unsqueeze", ["xf", "axis"], ["xu"]),
            helper.make_node("Mul", ["xu", "w"], ["logits"]),
        ]
    else:
        nodes += [
            helper.make_node("ReduceSum", ["xf", "axis"], ["xs"], keepdims=1),
            helper.make_node("Mul", ["xs", "w"], ["logits"]),
        ]
    outputs = [
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, logits),
        helper.make_tensor_value_info("present_k", TensorProto.FLOAT, ["batch", "past + seq"]),
    ]
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=[w, axis])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _bench(model: onnx.ModelProto, tmp_path: Path) -> tuple[int, str]:
    path = tmp_path / "decoder.onnx"
    path.write_bytes(model.SerializeToString())
    args = ["llm", str(path), "--prompt", "3", "--generate", "3", "--batch", "2", "--bench"]
    r = runner.invoke(app, [*args, "--threads", "1", "-f", "json"])
    return r.exit_code, r.output


@pytest.mark.ort
@pytest.mark.parametrize(
    ("logits", "keep_seq"),
    [
        (["batch", "seq", 5], True),
        (["batch", "seq", "vocab"], True),  # a symbolic vocab
        (["batch", 5], False),  # no seq axis, at batch 2 (was a reshape error)
    ],
)
def test_legal_logits_run(logits: list[int | str], keep_seq: bool, tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    code, out = _bench(_decoder(logits, 5, keep_seq=keep_seq), tmp_path)
    assert code == 0, out
    assert '"decode_steps": 2' in out


@pytest.mark.ort
@pytest.mark.parametrize(
    ("logits", "vocab", "said"),
    [
        (["batch", "seq", 0], 0, "of shape ['batch', 'seq', 0], a vocabulary of 0"),
        (["batch", "seq", "vocab"], 0, "of shape [2, 3, 0], a vocabulary of 0"),  # at run time
        ([], 5, "are a scalar"),
    ],
)
def test_meaningless_logits_are_one_line(
    logits: list[int | str], vocab: int, said: str, tmp_path: Path
) -> None:
    pytest.importorskip("onnxruntime")
    code, out = _bench(_decoder(logits, vocab), tmp_path)
    assert code == 1, out
    assert "Traceback" not in out
    assert len(out.strip().splitlines()) == 1, out
    assert said in out


def test_next_tokens_of_each_logits_shape() -> None:
    # [batch 2, seq 3, vocab 4]: the last position's argmax per sequence
    logits = np.zeros((2, 3, 4), dtype=np.float32)
    logits[0, 2, 1] = logits[1, 2, 3] = 1.0
    logits[0, 0, 2] = 5.0  # an earlier position does not count
    assert _next_tokens(logits, 2, "l").tolist() == [[1], [3]]
    # [batch 2, vocab 4]: one position
    assert _next_tokens(np.array([[0, 9, 0, 0], [7, 0, 0, 0]]), 2, "l").tolist() == [[1], [0]]
    # [vocab 4], no batch axis: the same token for both sequences
    assert _next_tokens(np.array([0, 0, 3, 1]), 2, "l").tolist() == [[2], [2]]
    with pytest.raises(BenchError, match="a scalar"):
        _next_tokens(np.array(1.0), 2, "l")
    with pytest.raises(BenchError, match="a vocabulary of 0"):
        _next_tokens(np.zeros((2, 3, 0)), 2, "l")
