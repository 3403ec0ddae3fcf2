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
