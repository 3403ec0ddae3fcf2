"""What `llm` says where a new user trips: a built-in model built without its cache, and a
prompt longer than the model's positions (issue 27)."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from typer.testing import CliRunner

from onnxcost.cli.app import app
from onnxcost.llm.cost import position_limit
from onnxcost.prepare import prepare

runner = CliRunner()
MODELS = Path(__file__).resolve().parent.parent / "models"
TINY = ["-p", "layers=1", "-p", "hidden=32", "-p", "heads=4", "-p", "vocab=64"]
"""A GPT-2 small enough to build in a test (Llama: TINY_LLAMA)."""
TINY_LLAMA = [*TINY, "-p", "kv_heads=4", "-p", "intermediate=64"]


def _tiny(name: str) -> list[str]:
    return TINY_LLAMA if name == "llama" else TINY


def _one_line_error(args: list[str]) -> str:
    r = runner.invoke(app, args)
    assert r.exit_code == 1, r.output
    assert r.output.count("\n") == 1, r.output
    assert "Traceback" not in r.output
    return r.output


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_a_builtin_without_its_cache_names_the_param(name: str) -> None:
    out = _one_line_error(["llm", name, *_tiny(name), "--prompt", "8", "--generate", "4"])
    assert "pass --param kv_cache=true" in out


def test_a_file_without_a_cache_is_told_how_to_export_one() -> None:
    out = _one_line_error(
        ["llm", str(MODELS / "encoder_torch_dynamo.onnx"), "--prompt", "8", "--generate", "4"]
    )
    assert "no KV cache found" in out
    assert "--param" not in out  # not a built-in: no builder parameter helps


@pytest.mark.parametrize(
    ("name", "positions"),
    [("gpt2", "max_positions=32"), ("llama", "max_positions=32")],
)
def test_a_prompt_past_the_positions_names_the_limit(name: str, positions: str) -> None:
    base = ["llm", name, *_tiny(name), "-p", "kv_cache=true", "-p", positions]
    # 30 + 10 = 40 tokens for a model with 32 positions (GPT-2's wpe, Llama's cos/sin rows).
    out = _one_line_error([*base, "--prompt", "30", "--generate", "10"])
    assert "the model has 32 positions; --prompt + --generate must be at most 32" in out
    assert "Incompatible dimensions" not in out
    # A prompt alone past the limit (prefill at seq 40) failed in shape inference before.
    out = _one_line_error([*base, "--prompt", "40", "--generate", "1"])
    assert "the model has 32 positions" in out
    # 30 + 2 = 32: at the limit, the report is made.
    r = runner.invoke(app, [*base, "--prompt", "30", "--generate", "2"])
    assert r.exit_code == 0, r.output


def test_bench_names_the_limit_before_onnxruntime_fails() -> None:
    pytest.importorskip("onnxruntime")
    args = ["llm", "gpt2", *TINY, "-p", "kv_cache=true", "-p", "max_positions=32"]
    out = _one_line_error([*args, "--prompt", "30", "--generate", "10", "--bench"])
    assert "the model has 32 positions" in out
    assert "indices element out of data bounds" not in out  # onnxruntime's Gather, before


@pytest.mark.parametrize("file", ["decoder_kv_torch_dynamo.onnx", "decoder_kv_torch_script.onnx"])
def test_the_shipped_decoders_have_32_positions(file: str) -> None:
    model = onnx.load(str(MODELS / file), load_external_data=False)
    wpe = next(t for t in model.graph.initializer if t.name == "wpe.weight")
    assert list(wpe.dims) == [32, 8]  # the exporter's table: 32 positions of width 8
    assert position_limit(prepare(MODELS / file).proto) == 32


def test_token_tables_and_models_without_positions_give_no_limit() -> None:
    # ResNet has no Gather; the encoder's and decoders' wte is read by input_ids, not positions.
    assert position_limit(prepare(MODELS / "resnet20_torch_dynamo.onnx").proto) is None
    assert position_limit(prepare(MODELS / "encoder_torch_dynamo.onnx").proto) is None


def _fixed_window(window: int) -> onnx.ModelProto:
    """A decoder whose exporter fixed a length, as the TorchScript exporter fixes Gemma2's
    sliding window (its mask sliced to 64, added to one over past + seq): the present key
    [batch, 1, past + seq, 4] sliced to its first ``window`` positions and added to itself,
    which broadcasts only while past + seq <= ``window``."""
    from onnx import TensorProto, helper

    def box(name: str, past: str) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", 1, past, 4])

    ints = [("starts", 0), ("ends", window), ("axes", 2)]
    nodes = [
        *(helper.make_node("Constant", [], [n], value_ints=[v]) for n, v in ints),
        helper.make_node("Constant", [], ["sum_axes"], value_ints=[1, 2]),
        helper.make_node("Gather", ["table", "input_ids"], ["h"]),
        helper.make_node("Unsqueeze", ["h", "one"], ["h4"]),
        helper.make_node("Concat", ["past_key_values.0.key", "h4"], ["present.0.key"], axis=2),
        helper.make_node("Concat", ["past_key_values.0.value", "h4"], ["present.0.value"], axis=2),
        helper.make_node("Slice", ["present.0.key", "starts", "ends", "axes"], ["window"]),
        helper.make_node("Add", ["window", "present.0.key"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "sum_axes"], ["pooled"], keepdims=0),
        helper.make_node("Unsqueeze", ["pooled", "one"], ["pooled3"]),
        helper.make_node("Add", ["h", "pooled3"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        "fixed_window",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
            box("past_key_values.0.key", "past_seq"),
            box("past_key_values.0.value", "past_seq"),
        ],
        [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", 4]),
            box("present.0.key", "total_seq"),
            box("present.0.value", "total_seq"),
        ],
        [
            helper.make_tensor("table", TensorProto.FLOAT, [10, 4], [0.5] * 40),
            helper.make_tensor("one", TensorProto.INT64, [1], [1]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_length_the_exporter_fixed_names_the_prompt_not_dims(tmp_path: Path) -> None:
    path = tmp_path / "window.onnx"
    onnx.save(_fixed_window(64), str(path))
    # past + seq <= 64 runs: a prompt of 60 and 2 tokens (the last step at past 60: 61)
    r = runner.invoke(app, ["llm", str(path), "--prompt", "60", "--generate", "2"])
    assert r.exit_code == 0, r.output
    # past + seq = 70 at the prefill: the message named flags the user never gave ("the
    # shapes from --dim batch=1, --dim seq=70, --dim past_seq=0 ... fix the flags")
    out = _one_line_error(["llm", str(path), "--prompt", "70", "--generate", "2"])
    assert "does not run at batch 1, seq 70, past 0 (--prompt 70 --generate 2)" in out
    assert "(Add): Incompatible dimensions (inputs 1x1x64x4, 1x1x70x4)" in out
    assert "pass a shorter --prompt or --generate" in out
    assert "--dim" not in out
    assert "fix the flags" not in out
    # 60 + 8: the last decode step is at past 60 + 8 - 2 = 66, 67 positions
    out = _one_line_error(["llm", str(path), "--prompt", "60", "--generate", "8"])
    assert "does not run at batch 1, seq 1, past 66 (--prompt 60 --generate 8)" in out


def _offset_positions(rows: int, constant: bool) -> onnx.ModelProto:
    """OPT's learned positions: a table of ``rows`` read at position_ids + 2 (transformers'
    OPTLearnedPositionalEmbedding, offset 2), the 2 an initializer (optimum) or a Constant
    (the TorchScript exporter), beside a KV cache of one layer."""
    from onnx import TensorProto, helper

    def box(name: str, past: str) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", 1, past, 4])

    two = helper.make_tensor("two", TensorProto.INT64, [], [2])
    nodes = [helper.make_node("Constant", [], ["two"], value=two)] if constant else []
    nodes += [
        helper.make_node("Gather", ["tokens", "input_ids"], ["t"]),
        helper.make_node("Add", ["position_ids", "two"], ["shifted"]),
        helper.make_node("Gather", ["embed_positions.weight", "shifted"], ["p"]),
        helper.make_node("Add", ["t", "p"], ["logits"]),
        helper.make_node("Unsqueeze", ["logits", "one"], ["h4"]),
        helper.make_node("Concat", ["past_key_values.0.key", "h4"], ["present.0.key"], axis=2),
        helper.make_node("Concat", ["past_key_values.0.value", "h4"], ["present.0.value"], axis=2),
    ]
    ids = ["batch", "seq"]
    graph = helper.make_graph(
        nodes,
        "opt_positions",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ids),
            helper.make_tensor_value_info("position_ids", TensorProto.INT64, ids),
            box("past_key_values.0.key", "past_seq"),
            box("past_key_values.0.value", "past_seq"),
        ],
        [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", 4]),
            box("present.0.key", "total_seq"),
            box("present.0.value", "total_seq"),
        ],
        [
            helper.make_tensor("tokens", TensorProto.FLOAT, [10, 4], [0.5] * 40),
            helper.make_tensor(
                "embed_positions.weight", TensorProto.FLOAT, [rows, 4], [0.25] * rows * 4
            ),
            helper.make_tensor("one", TensorProto.INT64, [1], [1]),
            *([] if constant else [two]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("constant", [True, False], ids=["torchscript", "optimum"])
def test_positions_read_from_an_offset_are_fewer_than_the_rows(
    tmp_path: Path, constant: bool
) -> None:
    # 34 rows read at position + 2: positions 0 .. 31 (rows 2 .. 33); position 32 reads row 34,
    # past the table (onnxruntime fails there, as on OPT's 130 rows past 128 positions)
    model = _offset_positions(34, constant)
    assert position_limit(prepare(model).proto) == 32  # was 34
    path = tmp_path / "opt.onnx"
    onnx.save(model, str(path))
    out = _one_line_error(["llm", str(path), "--prompt", "30", "--generate", "3"])
    assert "the model has 32 positions; --prompt + --generate must be at most 32" in out
    r = runner.invoke(app, ["llm", str(path), "--prompt", "30", "--generate", "2"])
    assert r.exit_code == 0, r.output
