"""A mixture-of-experts decoder as users export it: transformers' Mixtral (1 layer, 16 wide,
4 heads of 4, 2 KV heads, 4 experts of 32, top-2, vocab 32, random weights) with its KV cache
as inputs, by torch's TorchScript exporter: tests/data/exports/tiny_mixtral_kv_script.onnx,
``python scripts/export_holdout_llm_families.py --out DIR --exporter script tiny_mixtral``.

transformers 5's 'batched_mm' experts gather each token's two experts' weights (a Gather on
the stacked [4, 64, 16] and [4, 16, 32] tables) and run one batched matmul: the experts a
token does not route to are not computed and their weights are not read; they are in the
params. The top-k's repeat_interleave is a Tile whose repeats are a OneHot of constants,
which the symbolic walk did not carry (the formulas were sampled, 6 analyses, and a decode
step's peak had no formula)."""

from __future__ import annotations

from pathlib import Path

import onnxcost
from onnxcost.llm.cost import llm_report

FILE = Path(__file__).parent / "data" / "exports" / "tiny_mixtral_kv_script.onnx"


def test_params_count_every_expert_once() -> None:
    a = onnxcost.analyze(FILE, dims={"batch": 1, "seq": 1, "past_seq": 1})
    # torch's sum(p.numel()) = 8,048: embedding 32 x 16 = 512, q and o 2 x 16 x 16 = 512,
    # k and v 2 x 16 x 8 = 256, the router 16 x 4 = 64, the experts 4 x (16 x 64 + 32 x 16)
    # = 6,144, 3 RMSNorm scales of 16 = 48, the LM head 16 x 32 = 512; the file stores
    # RoPE's inv_freq (head_dim 4 / 2 = 2) beside them: 8,050
    assert a.totals.params == 8_050
    assert a.totals.param_bytes == 8_050 * 4


def test_a_decode_step_counts_the_two_experts_that_run() -> None:
    r = llm_report(FILE, prompt=8, generate=4)
    # per token: q, k, v, o 256 + 128 + 128 + 256 = 768, the router 64, two experts of
    # (16 x 64 + 32 x 16) = 2 x 1,536 = 3,072, the LM head 512: 4,416; attention over P + 1
    # positions, QK^T and AV of 4 heads x 4: 32 a position. 4,416 + 32 = 4,448.
    assert r.decode_formula_text("macs") == "4448*batch + 32*batch*past_seq"
    # 1 layer x K, V x 2 KV heads x 4 x 4 bytes
    assert r.kv_cache_bytes_per_token == 64
    # the prefill at 8 tokens: 4,416 x 8 + 32 x 8 x 8 = 35,328 + 2,048
    assert r.prefill.macs == 37_376
    # the first step (past 8) reads two experts' rows of each table, not all four
    a = onnxcost.analyze(FILE, dims={"batch": 1, "seq": 1, "past_seq": 8})
    gathered = {
        n.input_shapes[0]: n.bytes_read_weights
        for n in a.nodes
        if n.op_type == "Gather" and len(n.input_shapes[0]) == 3
    }
    assert gathered == {(4, 64, 16): 2 * 64 * 16 * 4, (4, 16, 32): 2 * 16 * 32 * 4}


def test_the_decode_formulas_are_one_walk() -> None:
    a = onnxcost.analyze(FILE, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1, a.warnings  # 6 before: the Tile not carried
    r = llm_report(FILE, prompt=8, generate=4)
    assert r.decode_activations is not None  # a step's peak as a formula (none before)
