"""A decoder's attention mask whose length the exporter wrote as a symbol of its own
(``total_seq`` from the TorchScript exporter's dynamic_axes, ``s53`` from the dynamo
exporter) is the cache length plus the new tokens (``onnxcost.load.kv.link_mask_dims``).

The files are tests/data/exports/tiny_{gpt2,llama}_kv_{script,dynamo}.onnx: transformers'
GPT-2 and LLaMA (1 layer, 16 wide, vocab 32, random weights) with their KV cache as inputs,
from ``scripts/export_holdout_torch.py``. Before, ``llm`` refused them all (two candidates for
the sequence dim), and ``analyze`` and ``bench`` gave the mask a length of 1 beside a cache
of 1 and a new token, which onnxruntime refuses.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

import onnxcost
from onnxcost.cli.app import app
from onnxcost.llm.cost import llm_report
from onnxcost.load.kv import link_mask_dims
from onnxcost.prepare import prepare

EXPORTS = Path(__file__).parent / "data" / "exports"
FILES = {
    "tiny_gpt2_kv_script": "total_seq",
    "tiny_gpt2_kv_dynamo": "s53",
    "tiny_llama_kv_script": "total_seq",
    "tiny_llama_kv_dynamo": "s53",
}
"""Each file and the symbol its exporter gave the mask's length."""

runner = CliRunner()


@pytest.mark.parametrize("name", FILES)
def test_the_mask_length_is_the_cache_length_plus_the_new_tokens(name: str) -> None:
    path = EXPORTS / f"{name}.onnx"
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    a = onnxcost.analyze(path, dims={"batch": 1, "seq": 3, "past_seq": 4})
    shapes = {i.name: i.shape for i in a.inputs}
    assert shapes["attention_mask"] == (1, 7)  # 4 cached + 3 new, was (1, 1)
    assert shapes["past_key_values.0.key"] == (1, 2, 4, 8 if "gpt2" in name else 4)
    length = FILES[name]
    assert any(f"its length {length!r} is taken as past_seq + seq" in w for w in a.warnings)
    # the file, and the source annotate copies, keep the exporter's name
    source = prepare(path, keep_source=True).source
    assert source is not None
    mask = next(vi for vi in source.graph.input if vi.name == "attention_mask")
    assert mask.type.tensor_type.shape.dim[1].dim_param == length
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


@pytest.mark.parametrize("name", FILES)
def test_llm_reads_the_exported_decoders(name: str) -> None:
    r = llm_report(EXPORTS / f"{name}.onnx", prompt=5, generate=3)
    assert (r.layout.batch, r.layout.seq, r.layout.past) == ("batch", "seq", "past_seq")
    macs = r.decode_formulas["macs"]
    assert macs is not None
    if "gpt2" in name:
        # Per token through the weights: QKV 16 x 48 = 768, out 16 x 16 = 256, MLP
        # 2 x 16 x 64 = 2,048, the (tied) LM head 16 x 32 = 512: 3,584. Attention: QK^T and
        # AV, 16 each, per position attended, past + 1 of them: a step is
        # 3,584·b + 32·b·(P + 1) = 3,616·b + 32·b·P.
        per_token, per_position = 3_616, 32
        # K and V of 2 heads x 8, float32, 1 layer
        assert r.kv_cache_bytes_per_token == 2 * 2 * 8 * 4 == 128
        # torch's sum(p.numel()): wte 512, wpe 512, the block 3,280 (LNs 2 x 32, c_attn
        # 816, c_proj 272, c_fc 1,088, mlp c_proj 1,040), ln_f 32: 4,336. Both exporters
        # store the tied LM head again, transposed (16 x 32 = 512), which counts once
        # (analysis.tied), as torch counts it
        params = 4_336
    else:
        # q 16 x 16 = 256, k and v 16 x 8 = 128 each (2 KV heads of 4), o 256, gate and up
        # 16 x 32 = 512 each, down 512, LM head 512: 2,816; attention over 4 heads of 4:
        # (QK^T + AV) 16 + 16 = 32 per position: 2,816·b + 32·b·(P + 1)
        per_token, per_position = 2_848, 32
        assert r.kv_cache_bytes_per_token == 2 * 2 * 4 * 4 == 64  # K, V; 2 heads x 4
        # torch's: embedding 512, block 2,336 (256 + 128 + 128 + 256 + 3 x 512 + norms
        # 2 x 16), final norm 16, LM head 512 (untied): 3,376; and RoPE's inv_freq buffer
        # (head_dim / 2 = 2), which the files store as a constant: the TorchScript export
        # counts it, the dynamo export's graph signature names it a buffer
        params = 3_376 + (2 if "script" in name else 0)
    for b, p in ((1, 0), (2, 5), (3, 11)):
        assert macs.evaluate({"batch": b, "past_seq": p}) == per_token * b + per_position * b * p
    assert r.weights_bytes == 4 * params
    # with three symbols, not four, the peak of a step has its formula too
    assert r.decode_activations is not None


def test_llm_runs_on_the_torchscript_export() -> None:
    path = EXPORTS / "tiny_gpt2_kv_script.onnx"
    r = runner.invoke(app, ["llm", str(path), "--prompt", "5", "--generate", "3"])
    assert r.exit_code == 0, r.output  # was: cannot tell the sequence dim (seq, total_seq)
    assert "3,616·batch + 32·batch·past_seq" in r.output


@pytest.mark.ort
def test_bench_feeds_a_mask_onnxruntime_accepts() -> None:
    path = EXPORTS / "tiny_llama_kv_script.onnx"
    fast = ["--runs", "2", "--warmup", "1", "--min-seconds", "0", "-q"]
    for dims in ([], ["--dim", "past_seq=4", "--dim", "seq=3"]):
        r = runner.invoke(app, ["bench", str(path), *fast, *dims])
        # was: onnxruntime failed ... Gather ... indices element out of data bounds
        assert r.exit_code == 0, r.output


def _decoder(extra: list[str]) -> onnx.ModelProto:
    """A decoder with a cache, a mask [batch, total] and, with ``extra``, an encoder's
    states [batch, source]: then the mask's length may be the encoder's, not the sum."""
    f = TensorProto.FLOAT
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "total"]),
        helper.make_tensor_value_info("past_key_values.0.key", f, ["batch", "past"]),
        *[helper.make_tensor_value_info(n, f, ["batch", "source"]) for n in extra],
    ]
    nodes = [
        helper.make_node("Cast", ["input_ids"], ["x"], to=f),
        helper.make_node("Concat", ["past_key_values.0.key", "x"], ["present.0.key"], axis=1),
    ]
    outputs = [helper.make_tensor_value_info("present.0.key", f, ["batch", "total"])]
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_only_a_length_no_other_input_has_is_linked() -> None:
    model = _decoder([])
    assert link_mask_dims(model) == [
        "input 'attention_mask': its length 'total' is taken as past + seq (an attention mask "
        "covers the cached and the new tokens: the model runs only there); set those, not total"
    ]
    output = model.graph.output[0].type.tensor_type.shape.dim
    dims = [d.dim_param for d in output]
    assert dims == ["batch", "past + seq"]  # the declared output too
    # an encoder-decoder's decoder: two symbols beside the cache's (seq, source), left alone
    model = _decoder(["encoder_hidden_states"])
    assert link_mask_dims(model) == []
    a = onnxcost.analyze(model, dims={"batch": 1, "seq": 3, "past": 4, "source": 5})
    assert {i.name: i.shape for i in a.inputs}["attention_mask"] == (1, 1)  # unset: 1


def test_llm_does_not_warn_that_its_formulas_hold_from_batch_1() -> None:
    # The decode formulas hold for batch >= 1 here (the TorchScript export's Reshapes break
    # at an empty batch, and --symbolic says so); no generation step runs an empty batch, so
    # `llm` repeated a warning about a point it never reaches.
    path = EXPORTS / "tiny_gpt2_kv_script.onnx"
    a = onnxcost.analyze(path, symbolic=True)
    assert any(w.startswith("batch=0 is not a valid point") for w in a.warnings)
    r = llm_report(path, prompt=5, generate=3)
    assert not any("batch=0" in w for w in r.warnings), r.warnings
