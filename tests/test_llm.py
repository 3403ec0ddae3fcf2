"""``onnxcost llm``: KV-cache detection, prefill / decode / generation costs, the loop in onnxruntime."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from onnxcost_testing import parse
from typer.testing import CliRunner

import onnxcost
from onnxcost import units, zoo
from onnxcost.cli.app import app
from onnxcost.llm.cost import DecoderError, detect, llm_report, present_for
from onnxcost.prepare import prepare

runner = CliRunner()

TINY_GPT2 = {"layers": 2, "hidden": 32, "heads": 4, "vocab": 64, "max_positions": 32}
# Per new token, width d = 32, vocab 64: per layer 32*96 (QKV) + 32*32 (proj) + 2*32*128 (MLP)
# = 12,288, two layers 24,576, LM head 32*64 = 2,048: A = 26,624 MACs.
# Attention per key: QK^T and AV, d each, two layers: C = 2 * 2 * 32 = 128 MACs.
A, C = 26_624, 128


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("llm") / "gpt2_kv.onnx"
    return zoo.save("gpt2", path, weights=False, params={**TINY_GPT2, "kv_cache": True})


def test_prefill_decode_generation_by_hand(tiny: Path) -> None:
    b, n, m = 2, 5, 4
    r = llm_report(tiny, prompt=n, generate=m, batch=b)
    # prefill, past 0: A*b*n + C*b*n*n = 26,624*10 + 128*2*25 = 266,240 + 6,400 = 272,640
    assert r.prefill.macs == A * b * n + C * b * n * n == 272_640
    # one decode step at past P: A*b + C*b*(P + 1)
    f = r.decode_formulas["macs"]
    assert f is not None
    assert dict(f.terms) == {(1, 0): A + C, (1, 1): C}
    # steps at P = 5, 6, 7: 53,248 + 256*6, + 256*7, + 256*8 = 54,784 + 55,040 + 55,296
    assert r.decode_first is not None
    assert r.decode_last is not None
    assert r.decode_first.macs == A * b + C * b * (n + 1) == 54_784
    assert r.decode_last.macs == A * b + C * b * (n + m - 1) == 55_296
    assert r.generation.macs == 272_640 + 54_784 + 55_040 + 55_296 == 437_760
    # cache: 2 layers x (K, V) x 4 heads x 8 x 4 bytes = 512 per token; 9 tokens x batch 2
    assert r.kv_cache_bytes_per_token == 2 * 2 * 4 * 8 * 4 == 512
    assert r.kv_cache_bytes == 512 * 9 * 2


def test_generation_is_the_sum_of_concrete_steps(tiny: Path) -> None:
    b, n, m = 3, 4, 5
    r = llm_report(tiny, prompt=n, generate=m, batch=b)
    steps = [onnxcost.analyze(tiny, dims={"batch": b, "seq": n, "past_seq": 0})]
    steps += [
        onnxcost.analyze(tiny, dims={"batch": b, "seq": 1, "past_seq": p})
        for p in range(n, n + m - 1)
    ]
    for key in ("macs", "flops", "bytes_read"):
        assert getattr(r.generation, key) == sum(getattr(s.totals, key) for s in steps), key
    assert r.prefill.bytes_written == steps[0].totals.bytes_written


def test_generate_one_has_no_decode_step(tiny: Path) -> None:
    r = llm_report(tiny, prompt=3, generate=1)
    assert r.decode_first is None
    assert r.generation == r.prefill
    assert r.to_dict()["decode"]["first"] is None


def test_json_schema(tiny: Path) -> None:
    r = runner.invoke(app, ["llm", str(tiny), "--prompt", "8", "--generate", "3", "-f", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    listed = {
        "schema",
        "model",
        "batch",
        "prompt",
        "generate",
        "symbols",
        "weights_bytes",
        "kv_cache_bytes_per_token",
        "kv_cache_bytes",
        "prefill",
        "decode",
        "generation",
    }
    assert listed <= set(d)
    assert d["schema"] == "onnxcost.llm/1"
    assert d["symbols"] == {"batch": "batch", "seq": "seq", "past": "past_seq"}
    assert set(d["prefill"]) == {"macs", "flops", "bytes_read", "bytes_written"}
    assert set(d["decode"]) == {"formulas", "first", "first_read", "last"}
    assert set(d["decode"]["first_read"]) == {"weights", "kv_cache", "activations"}
    assert set(d["decode"]["formulas"]) == {"macs", "flops", "bytes_read"}
    assert set(d["decode"]["last"]) == {"macs", "flops", "bytes_read"}
    assert set(d["generation"]) == {"macs", "flops", "bytes_read"}
    # the decode formula evaluates: A + C + C*P at batch 1, P = 10
    assert eval(d["decode"]["formulas"]["macs"], {}, {"batch": 1, "past_seq": 10}) == (
        A + C + C * 10
    )


def test_roofline_from_flags(tiny: Path) -> None:
    args = ["llm", str(tiny), "--prompt", "16", "--generate", "4"]
    r = runner.invoke(app, [*args, "--peak-tflops", "100", "--bandwidth-gbs", "1000", "-f", "json"])
    assert r.exit_code == 0, r.output
    roof = json.loads(r.stdout)["roofline"]
    # ridge = 100e12 / 1000e9 = 100 FLOP/B; decode of a 2-layer toy is far below it
    assert roof["ceiling"]["ridge_flops_per_byte"] == pytest.approx(100.0)
    assert roof["decode_bound"] == "memory"
    r = runner.invoke(app, [*args, "--peak-tflops", "100"])
    assert r.exit_code == 2
    assert "--bandwidth-gbs" in r.output


def test_table_and_markdown(tiny: Path) -> None:
    args = ["llm", str(tiny), "--prompt", "16", "--generate", "4", "--batch", "2"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "KV cache per token" in r.output
    assert "MACs = 26,752·batch + 128·batch·past_seq" in r.output
    r = runner.invoke(app, [*args, "-f", "markdown"])
    assert r.stdout.startswith("# onnxcost llm:")
    assert "| KV cache at 20 tokens x batch 2 |" in r.stdout


def test_built_in_name_with_params() -> None:
    args = ["llm", "gpt2", "--prompt", "4", "--generate", "2", "-f", "json"]
    params = [f"--param={k}={v}" for k, v in {**TINY_GPT2, "kv_cache": "true"}.items()]
    r = runner.invoke(app, [*args, *params])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["kv_cache_bytes_per_token"] == 2 * 2 * 4 * 8 * 4


# --- detection ---------------------------------------------------------------------------------

OLD_STYLE = """
<ir_version: 8, opset_import: ["" : 17]>
g (int64[b,s] ids, float[2,b,4,p,8] past_0) => (float[b,s,4,8] y, float[2,b,4,t,8] present_0) {
  present_0 = Identity (past_0)
  y = Identity (ids)
}"""


def test_detects_old_style_names() -> None:
    layout = detect(parse(OLD_STYLE))
    assert (layout.batch, layout.seq, layout.past) == ("b", "s", "p")
    assert present_for(layout) == {"past_0": "present_0"}


def test_no_cache_is_one_line() -> None:
    with pytest.raises(DecoderError, match="no KV cache found"):
        detect(
            parse(
                '<ir_version: 8, opset_import: ["" : 17]>\ng (float[n] x) => (float[n] y) {\n y = Relu (x)\n}'
            )
        )


AMBIGUOUS = """
<ir_version: 8, opset_import: ["" : 17]>
g (int64[b,s] ids, int64[b,q] extra, float[b,4,p,8] past_0_key) => (float[b,4,t,8] present_0_key) {
  present_0_key = Identity (past_0_key)
}"""


def test_ambiguous_dims_name_the_flags(tmp_path: Path) -> None:
    with pytest.raises(DecoderError, match="--batch-dim, --seq-dim and --past-dim"):
        detect(parse(AMBIGUOUS))
    layout = detect(parse(AMBIGUOUS), seq_dim="s")
    assert (layout.batch, layout.seq, layout.past) == ("b", "s", "p")
    path = tmp_path / "amb.onnx"
    path.write_bytes(parse(AMBIGUOUS).SerializeToString())
    r = runner.invoke(app, ["llm", str(path), "--prompt", "2", "--generate", "2"])
    assert r.exit_code == 1
    assert "--batch-dim, --seq-dim and --past-dim" in r.output
    assert "Traceback" not in r.output
    r = runner.invoke(app, ["llm", str(path), "--prompt", "2", "--generate", "2", "--seq-dim", "x"])
    assert r.exit_code == 2


def test_not_a_decoder_on_the_command_line(tmp_path: Path) -> None:
    r = runner.invoke(app, ["llm", "mlp", "--prompt", "2", "--generate", "2"])
    assert r.exit_code == 1
    assert "no KV cache found" in r.output


# --- the loop in onnxruntime -------------------------------------------------------------------


@pytest.mark.ort
def test_bench_runs_the_loop_on_a_built_in_decoder() -> None:
    pytest.importorskip("onnxruntime")
    args = ["llm", "gpt2", "--prompt", "6", "--generate", "5", "--batch", "2", "--bench"]
    params = [f"--param={k}={v}" for k, v in {**TINY_GPT2, "kv_cache": "true"}.items()]
    r = runner.invoke(app, [*args, *params, "-f", "json", "--threads", "1"])
    assert r.exit_code == 0, r.output
    bench = json.loads(r.stdout)["bench"]
    assert bench["provider"] == "CPUExecutionProvider"
    assert bench["decode_steps"] == 4
    assert bench["tokens_per_s"] > 0
    assert bench["ttft_ms"] > 0


# --- what torch really writes: the decoders in models/ ------------------------------------------

MODELS_DIR = Path(__file__).resolve().parents[1] / "models"
DECODERS = ["decoder_kv_torch_dynamo.onnx", "decoder_kv_torch_script.onnx"]
# scripts/export_torch.py's decoder: vocab 32, d = 8 (2 heads of 4), 2 layers. Per new token
# per layer 8*24 (QKV) + 8*8 (proj) + 8*32 + 32*8 (MLP) = 768, two layers 1,536, LM head
# 8*32 = 256: A = 1,792 MACs. Attention per key: 2 layers x (QK^T + AV) x 8 = C = 32 MACs.
A_EXPORT, C_EXPORT = 1_792, 32


@pytest.mark.parametrize("file", DECODERS)
def test_exported_decoder_costs_by_hand(file: str) -> None:
    path = MODELS_DIR / file
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    ops = {n.op_type for n in model.graph.node}
    assert {"Where", "Concat"} <= ops  # the causal mask, and past keys joined to the new ones
    concat_inputs = {i for n in model.graph.node if n.op_type == "Concat" for i in n.input}
    assert "past_key_values.0.key" in concat_inputs
    r = llm_report(path, prompt=8, generate=4)
    # prefill at b=1, N=8, past 0: A*8 + C*8*8 = 14,336 + 2,048 = 16,384
    assert r.prefill.macs == A_EXPORT * 8 + C_EXPORT * 64 == 16_384
    f = r.decode_formulas["macs"]
    assert f is not None
    # a step at past P: A*b + C*b*(P + 1) = 1,824*b + 32*b*P
    assert dict(f.terms) == {(1, 0): A_EXPORT + C_EXPORT, (1, 1): C_EXPORT}
    # 2 layers x (K, V) x 2 heads x 4 x 4 bytes = 128 per token
    assert r.kv_cache_bytes_per_token == 2 * 2 * 2 * 4 * 4 == 128
    assert not r.warnings


@pytest.mark.ort
@pytest.mark.parametrize("file", DECODERS)
def test_bench_runs_the_loop_on_the_exported_decoder(file: str) -> None:
    pytest.importorskip("onnxruntime")
    args = ["llm", str(MODELS_DIR / file), "--prompt", "6", "--generate", "8", "--bench"]
    r = runner.invoke(app, [*args, "--threads", "1"])
    assert r.exit_code == 0, r.output
    assert "tokens/s" in r.output
    assert "time to first token" in r.output


def _with_optimum_mask(path: Path, out: Path) -> Path:
    """The decoder with optimum's attention_mask [batch, 'past_seq + seq'], summed into an
    extra output so that a cost depends on it."""
    from onnx import TensorProto, helper

    model = onnx.load(str(path), load_external_data=False)
    model.graph.input.append(
        helper.make_tensor_value_info(
            "attention_mask", TensorProto.INT64, ["batch", "past_seq + seq"]
        )
    )
    model.graph.node.extend(
        [
            helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
            helper.make_node("ReduceSum", ["mask_f"], ["mask_sum"], keepdims=0),
        ]
    )
    model.graph.output.append(helper.make_tensor_value_info("mask_sum", TensorProto.FLOAT, []))
    out.write_bytes(model.SerializeToString())
    return out


def test_derived_mask_dim_follows_past_and_seq(tmp_path: Path) -> None:
    path = _with_optimum_mask(MODELS_DIR / DECODERS[1], tmp_path / "masked.onnx")
    a = onnxcost.analyze(path, symbolic=True)
    assert a.symbols == ("batch", "seq", "past_seq")
    reduce = next(k for k, n in enumerate(a.nodes) if n.op_type == "ReduceSum")
    assert a.symbolic is not None
    f = a.symbolic.nodes[reduce]["flops"]
    assert f is not None
    # ReduceSum of the [b, P + s] mask to a scalar: b*(P + s) - 1 adds, 0 (not -1) when empty
    assert f.python() == "max(0, -1 + batch*seq + batch*past_seq)"
    point = {"batch": 3, "seq": 2, "past_seq": 5}
    concrete = onnxcost.analyze(path, dims={**point, "past_seq + seq": 7})
    assert f.evaluate(point) == concrete.nodes[reduce].flops
    assert concrete.nodes[reduce].input_shapes[0] == (3, 7)
    r = llm_report(path, prompt=4, generate=3)
    assert r.layout.seq == "seq"
    assert r.prefill.macs == A_EXPORT * 4 + C_EXPORT * 16


# --- the built-in decoders at their published sizes ---------------------------------------------


def test_gpt2_small_decode_step_by_hand() -> None:
    r = llm_report("gpt2", prompt=4, generate=3, params={"kv_cache": "true"})
    # Per token, 12 layers of 768*2304 (QKV) + 768*768 (proj) + 2*768*3072 (MLP) = 7,077,888
    # MACs, 84,934,656 for 12 layers, + tied LM head 768*50,257 = 38,597,376: a = 123,532,032.
    # Per cached position: 12 layers x (QK^T + AV) x 768 = c = 18,432.
    # A step at past P: a*b + c*b*(P + 1) = 123,550,464*b + 18,432*b*P.
    f = r.decode_formulas["macs"]
    assert f is not None
    assert dict(f.terms) == {(1, 0): 123_532_032 + 18_432, (1, 1): 18_432}
    # prefill, b=1, N=4: a*4 + c*16 = 494,128,128 + 294,912
    assert r.prefill.macs == 123_532_032 * 4 + 18_432 * 16 == 494_423_040
    # generation: prefill + steps at P = 4 and 5: a*2 + c*(5 + 6)
    assert r.generation.macs == 494_423_040 + 123_532_032 * 2 + 18_432 * 11
    # 12 layers x 2 x 768 x 4 bytes
    assert r.kv_cache_bytes_per_token == 73_728
    # At the LM head of a step every layer's present K and V is live, 73,728 bytes a token
    # over P + 1 tokens, with the logits (50,257 x 4 = 201,028) and the final hidden state
    # (768 x 4 = 3,072): 73,728·b·P + (73,728 + 201,028 + 3,072)·b = 73,728·b·P + 277,828·b.
    peak = r.decode_activations
    assert peak is not None
    assert "277828*batch + 73728*batch*past_seq" in peak.python()
    # the last step, past 5, is the concrete analysis' peak there; the peak memory adds the
    # larger of it and the prefill's to the weights
    at_last = onnxcost.analyze(
        prepare("gpt2", params={"kv_cache": "true"}), dims={"batch": 1, "seq": 1, "past_seq": 5}
    )
    assert r.last_activations_bytes == at_last.totals.peak_activation_bytes
    assert r.peak_memory_bytes == r.weights_bytes + max(
        r.prefill_activations_bytes, at_last.totals.peak_activation_bytes
    )
    memory = r.to_dict()["memory"]
    assert list(memory) == [
        "prefill_activations_bytes",
        "decode_activations_formula",
        "last_activations_bytes",
        "peak_bytes",
    ]
    assert memory["peak_bytes"] == r.peak_memory_bytes


@pytest.mark.slow
def test_llama3_8b_cache_through_llm() -> None:
    params = {
        "kv_cache": "true",
        "kv_heads": 8,
        "intermediate": 14336,
        "vocab": 128256,
        "rope_theta": 500000,
    }
    r = llm_report("llama", prompt=16, generate=4, params=params)
    # fp32 by default: 32 layers x 2 x 8 KV heads x 128 x 4 bytes = 262,144 (131,072 in fp16)
    assert r.kv_cache_bytes_per_token == 32 * 2 * 8 * 128 * 4 == 262_144
    f = r.decode_formulas["macs"]
    assert f is not None
    # attention per cached position: 32 layers x (QK^T + AV) x 32 heads x 128 = 262,144
    assert dict(f.terms)[(1, 1)] == 32 * 2 * 4096 == 262_144


def test_roofline_from_the_cached_calibration(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from onnxcost.bench.roofline import Ceilings, store_ceilings
    from onnxcost.bench.session import SessionConfig

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    # ridge = 1e12 / 1e9 = 1,000 FLOP/B: every phase of the toy is memory-bound
    ceiling = Ceilings(1e12, 1e9, "CPUExecutionProvider", "test cpu", "float32", "", "then")
    assert store_ceilings(SessionConfig(), ceiling) is None
    r = runner.invoke(app, ["llm", str(tiny), "--prompt", "4", "--generate", "2", "-f", "json"])
    assert r.exit_code == 0, r.output
    roof = json.loads(r.stdout)["roofline"]
    assert roof["ceiling"]["source"].startswith("calibration of CPUExecutionProvider")
    assert roof["ceiling"]["ridge_flops_per_byte"] == pytest.approx(1000.0)
    assert (roof["prefill_bound"], roof["decode_bound"]) == ("memory", "memory")


def test_json_goes_through_the_project_serializer(
    tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A name that is not UTF-8 comes from protobuf as bytes; json.dumps refuses bytes, the
    # project's serializer (analysis.records.to_json) writes them escaped as every command does.
    from onnxcost.cli.render import views
    from onnxcost.llm.cost import LlmReport

    r = llm_report(tiny, prompt=3, generate=2)
    monkeypatch.setattr(LlmReport, "to_dict", lambda self: {"model": b"gpt\xff"})
    assert json.loads(views(r).json()) == {"model": "gpt\\xff"}


def test_html_cards_give_the_peak_memory(tiny: Path) -> None:
    from onnxcost.report.html import llm_html

    r = llm_report(tiny, prompt=4, generate=3)
    page = llm_html(r)
    # the card: weights + the larger of the prefill's and the last step's peak activations
    assert r.peak_memory_bytes == r.weights_bytes + max(
        r.prefill_activations_bytes, r.last_activations_bytes or 0
    )
    assert (
        f'<div class="k">peak memory</div><div class="v">{units.nbytes(r.peak_memory_bytes)}'
        in page
    )
