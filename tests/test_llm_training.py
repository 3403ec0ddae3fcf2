"""``onnxcost llm --training --tokens D``: the cost of training on D tokens in sequences of the
prompt's length, beside 6·N·D with N the non-embedding params, worked by hand on the tiny
built-in GPT-2 and LLaMA."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from onnxcost.cli.app import app
from onnxcost.llm.cost import llm_report
from onnxcost.prepare import prepare

runner = CliRunner()

TINY_GPT2 = {"layers": 2, "hidden": 32, "heads": 4, "vocab": 64, "max_positions": 32}
TINY_LLAMA = {**TINY_GPT2, "layers": 1, "kv_heads": 2, "intermediate": 64}
B, N, D = 2, 5, 1_000  # batch 2 sequences of 5 tokens a step: 1,000 tokens are 100 steps

# GPT-2, d = 32, vocab 64, 32 positions, 2 layers, tied LM head.
# Params: wte 64 x 32 = 2,048 and wpe 32 x 32 = 1,024 (embedding tables, read by Gather);
# per layer LN 64, QKV 32 x 96 + 96 = 3,168, proj 1,024 + 32, LN 64, fc 32 x 128 + 128 =
# 4,224, proj 128 x 32 + 32 = 4,128: 12,704; two 25,408; ln_f 64: 28,544 in all, and
# N = 28,544 - 3,072 = 25,472 non-embedding (24,576 in matrices, 896 in biases and norms).
# Torch convention (2 x MACs of the contractions). Forward MACs per token at seq 5: the
# matrices 24,576, the tied LM head 32 x 64 = 2,048, attention QK^T and P.V over 5 keys,
# 2 layers x 2 x 32 x 5 = 640: 27,264. Every contraction computes both gradients (an
# embedding's output needs one: the tables train), so backward = 2 x forward and training =
# 3 x 2 x 27,264 = 163,584 FLOPs per token; 1,000 tokens: 163,584,000.
# 6·N·D = 6 x 25,472 x 1,000 = 152,832,000; ratio 27,264 / 25,472 = 1.07035: the LM head
# and attention carry MACs N leaves out, the biases and norms are in N without MACs.
GPT2 = {"flops": 163_584_000, "params": 25_472, "embedding": 3_072, "flops_6nd": 152_832_000}

# LLaMA, d = 32, 4 heads of 8, 2 KV heads, MLP 64, 1 layer, untied LM head, vocab 64.
# Params: embed 64 x 32 = 2,048 (Gather); q 32 x 32 = 1,024, k and v 32 x 16 = 512 each, o
# 1,024, gate, up, down 32 x 64 = 2,048 each: 9,216; two RMSNorms 64, the final one 32; the LM
# head 2,048: 13,408 (the rotary cos and sin tables, [32 positions, 8] each, are buffers the
# built-in names as such: no params), N = 13,408 - 2,048 = 11,360.
# Forward MACs per token: 9,216 + LM head 2,048 + attention 2 x (4 heads x 8) x 5 keys =
# 320: 11,584; training 6 x 11,584 = 69,504 per token, 69,504,000 for 1,000 tokens.
# 6·N·D = 6 x 11,360 x 1,000 = 68,160,000; ratio 11,584 / 11,360 = 1.01972.
LLAMA = {"flops": 69_504_000, "params": 11_360, "embedding": 2_048, "flops_6nd": 68_160_000}


def _params(name: str) -> dict[str, str | int]:
    return {**(TINY_LLAMA if name == "llama" else TINY_GPT2), "kv_cache": "true"}


@pytest.mark.parametrize(("name", "expected"), [("gpt2", GPT2), ("llama", LLAMA)])
def test_training_on_d_tokens_by_hand(name: str, expected: dict[str, int]) -> None:
    r = llm_report(
        prepare(name, params=_params(name)),
        prompt=N,
        generate=2,
        batch=B,
        convention="torch",
        training_tokens=D,
    )
    t = r.training
    assert t is not None
    assert (t.flops, t.params, t.embedding_params, t.flops_6nd) == (
        expected["flops"],
        expected["params"],
        expected["embedding"],
        expected["flops_6nd"],
    )
    assert t.steps == 100
    assert t.step_flops == expected["flops"] // 100
    assert t.ratio == pytest.approx(expected["flops"] / expected["flops_6nd"])


def test_a_partial_step_counts_its_share() -> None:
    # 1,001 tokens: 100.1 steps, 163,584 x 1,001 = 163,747,584 FLOPs (per token exact here).
    r = llm_report(
        prepare("gpt2", params=_params("gpt2")),
        prompt=N,
        generate=2,
        batch=B,
        convention="torch",
        training_tokens=1_001,
    )
    assert r.training is not None
    assert r.training.flops == 163_747_584
    assert r.training.steps == pytest.approx(100.1)


def _cli(*extra: str) -> list[str]:
    params = [f"--param={k}={v}" for k, v in _params("gpt2").items()]
    return ["llm", "gpt2", *params, "--prompt", str(N), "--generate", "2", "--batch", str(B)]


def test_json_training_object_and_nothing_else_changes() -> None:
    plain = runner.invoke(app, [*_cli(), "--convention", "torch", "-f", "json"])
    assert plain.exit_code == 0, plain.output
    r = runner.invoke(
        app,
        [*_cli(), "--convention", "torch", "--training", "--tokens", str(D), "-f", "json"],
    )
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    training = data.pop("training")
    # Only the new key: the prefill, decode and generation figures are those without it.
    assert data == json.loads(plain.stdout)
    assert "training" not in json.loads(plain.stdout)
    assert training == {
        "tokens": 1_000,
        "seq": 5,
        "batch": 2,
        "step_flops": 1_635_840,  # 163,584 x 10 tokens
        "flops": 163_584_000,
        "params": 25_472,
        "embedding_params": 3_072,
        "steps": 100.0,
        "flops_per_token": 163_584.0,
        "flops_6nd": 152_832_000,
        "ratio": pytest.approx(163_584_000 / 152_832_000),
    }


def test_table_markdown_and_html_lines() -> None:
    args = [*_cli(), "--convention", "torch", "--training", "--tokens", str(D)]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "training on 1,000 tokens" in r.output
    assert "(163,584,000): 100 steps of batch 2 x seq 5" in r.output
    assert "(152,832,000), N = 25,472 non-embedding params" in r.output
    assert "1.0704" in r.output  # 163,584,000 / 152,832,000
    md = runner.invoke(app, [*args, "-f", "markdown"])
    assert "| graph / 6·N·D | 1.0704 |" in md.stdout
    html = runner.invoke(app, [*args, "-f", "html"])
    assert html.exit_code == 0, html.output
    assert "training FLOPs, 1,000 tokens" in html.stdout
    assert "1.070 x 6·N·D" in html.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--training"], "--training needs --tokens D"),
        (["--tokens", "1000"], "--tokens needs --training"),
        (["--training", "--tokens", str(2**62 + 1)], "--tokens 4611686018427387905 is out of"),
    ],
)
def test_bad_training_flags_are_one_line(extra: list[str], message: str) -> None:
    # A usage error: one line, exit code 2 (as analyze's training flags without --training).
    r = runner.invoke(app, [*_cli(), *extra])
    assert r.exit_code == 2, r.output
    assert r.output.count("\n") == 1, r.output
    assert message in r.output
    assert "Traceback" not in r.output
