"""``onnxcost llm``: one decode step reads the weights once, plus the KV cache and its copies,
plus the activations (issue 25's target: within 2% of that sum). Worked by hand on the
built-in GPT-2 and LLaMA (GQA) with a KV cache, in a tiny configuration; fp32 throughout."""

from __future__ import annotations

import math

import onnx
import pytest

from onnxcost.llm.cost import llm_report
from onnxcost.prepare import prepare

L, H, HEADS, V, MAX_POS, P = 2, 64, 4, 100, 64, 8
HD = H // HEADS  # 16
T = P + 1  # keys attended at the first decode step
H4 = 4 * H  # bytes of one hidden vector
HD4 = 4 * HD  # bytes of one head's vector
S = 4 * HEADS * T  # bytes of one row of scores per head, all heads

GPT2 = {"kv_cache": "true", "layers": L, "hidden": H, "heads": HEADS, "vocab": V}
GPT2 |= {"max_positions": MAX_POS}
KV_HEADS, INTER = 2, 128
LLAMA = {**GPT2, "kv_heads": KV_HEADS, "intermediate": INTER}


def float_weight_bytes(model: onnx.ModelProto) -> int:
    """Bytes of every float initializer (4 per element): the weights as the model declares them."""
    return sum(
        4 * math.prod(t.dims)
        for t in model.graph.initializer
        if t.data_type == onnx.TensorProto.FLOAT
    )


def gpt2_by_hand(
    weights: int,
    layers: int = L,
    hidden: int = H,
    heads: int = HEADS,
    max_pos: int = MAX_POS,
    past: int = P,
) -> tuple[int, int, int]:
    """(weights read, KV cache read, activations read) of one decode step at ``past``."""
    h4, hd4, t = 4 * hidden, 4 * hidden // heads, past + 1
    # Weights: each once; the tied wte whole by the LM head (its Transpose folded at load) and
    # one row by the embedding Gather; of wpe one row; of the causal mask buffer (bool, not a
    # weight by count) one row of max_pos bytes per layer.
    w = weights - max_pos * h4 + h4 + h4 + layers * max_pos
    # KV per layer: Concat reads past K and V, 2 x heads x P x head_dim x 4; the Transpose of
    # the present K reads heads x T x head_dim x 4; the two MatMuls read K^T and V, 2 x that.
    kv = layers * (2 * heads * past * hd4 + 3 * heads * t * hd4)
    # Activations per layer, in hidden vectors (h4): ln_1 1; c_attn Reshape, Gemm 2, its
    # Reshape of the 3H output 3; Split 3; q, k, v Reshape + Transpose 6; the new k, v into
    # the Concats 2; Q.K^T 1; the context Transpose, Reshape 2; c_proj Reshape, Gemm, Reshape
    # 3; residual Add 2; ln_2 1; c_fc Reshape, Gemm 2; c_proj's Reshape of the output 1;
    # residual Add 2 = 31. In MLP vectors (4 x h4): c_fc's Reshape 1; gelu Mul, Pow, Mul,
    # Add (2), Mul, Tanh, Add, Mul (2) 10; c_proj Reshape, Gemm 2 = 13. Scores (4 x heads x T
    # B): Div, Where, Softmax, P.V 4, plus the mask row (T bools) into the Where.
    layer = 31 * h4 + 13 * 4 * h4 + 4 * 4 * heads * t + t
    # Outside the layers: the two Gathers' indices (int64) 16, wte + wpe Add 2 h4, ln_f 1,
    # LM head 1.
    act = layers * layer + 16 + 4 * h4
    return w, kv, act


def llama_by_hand(weights: int) -> tuple[int, int, int]:
    """(weights read, KV cache read, activations read) of one decode step at past P."""
    kv4, i4 = 4 * KV_HEADS * HD, 4 * INTER  # bytes of one k (or v) vector, one MLP vector
    # Weights: each once, but of the embedding one row and of the rotary cos and sin tables
    # [MAX_POS, HD] the T rows each layer slices.
    w = weights - V * H4 + H4 - 2 * MAX_POS * HD4 + L * 2 * T * HD4
    # KV per layer: Concat reads past K and V (2 x KV_HEADS x P x HD x 4); repeat_kv, for K
    # and for V, copies the cache five times (Slice, Slice, Unsqueeze, Slice, Slice), Expand
    # reads it and Reshape reads the expanded HEADS x T x HD; the K Transpose and the two
    # MatMuls read the expanded cache, 3 x HEADS x T x HD x 4.
    kvt, full = KV_HEADS * T * HD4, HEADS * T * HD4
    kv = L * (2 * KV_HEADS * P * HD4 + 2 * (6 * kvt + full) + 3 * full)
    # Activations per layer. Hidden vectors (H4): two RMSNorms (Pow, ReduceMean, Mul, Mul)
    # 8; q, k, v, gate, up projections 5, o_proj 1; q Reshape, Transpose 2; rotary on q: Mul,
    # Slice x 2 (half each), Neg (half), Concat, Mul, Add (2) 6.5; Q.K^T, context Transpose,
    # Reshape 3; residual Adds 4 = 29.5; the norms' Mul of the 4-byte rms 2 x 4.
    # k and v vectors: Reshape, Transpose 4; rotary on k 6.5; into the Concats 2 = 12.5.
    # Head vectors (HD4): the cos and sin rows sliced, squeezed twice: 4 x T; gathered at the
    # position (a row + an int64 index) 2 + 16 B; unsqueezed 2; rotary Muls by cos and sin,
    # on q and k, 4.
    # Scores: Div, mask Add (+ the T float mask), Softmax, P.V: 4 S + 4 T.
    # MLP vectors (i4): Sigmoid 1, SiLU Mul 2, gate x up Mul 2, down 1 = 6.
    layer = (
        int(29.5 * H4)
        + 8
        + int(12.5 * kv4)
        + (4 * T + 2 + 2 + 4) * HD4
        + 16
        + 4 * S
        + 4 * T
        + 6 * i4
    )
    # Outside: the input ids 8; the final RMSNorm 4 H4 + 4; the LM head 1 H4.
    act = L * layer + 8 + 5 * H4 + 4
    return w, kv, act


@pytest.mark.parametrize(
    ("name", "params", "by_hand"),
    [("gpt2", GPT2, gpt2_by_hand), ("llama", LLAMA, llama_by_hand)],
)
def test_a_decode_step_reads_weights_once_plus_cache_plus_activations(
    name: str, params: dict[str, object], by_hand: object
) -> None:
    prepared = prepare(name, params=params)  # type: ignore[arg-type]
    w, kv, act = by_hand(float_weight_bytes(prepared.proto))  # type: ignore[operator]
    r = llm_report(prepared, prompt=P, generate=2)
    assert r.decode_first is not None
    assert r.decode_first_read is not None
    by_role = r.decode_first_read
    assert by_role.kv_cache == kv  # exact: every byte of the cache traffic is by hand
    # The shape arithmetic's int64 constants and scalars (a few hundred bytes a layer) are
    # not in the hand count: within 1% for weights, 2% in all.
    assert abs(by_role.weights - w) <= 0.01 * w, (by_role.weights, w)
    total = w + kv + act
    assert abs(r.decode_first.bytes_read - total) <= 0.02 * total, (r.decode_first, total)
    # Every input whole (the old rule) is far off: whole tables, the Transpose of the tied
    # head, the whole mask buffer.
    old = llm_report(prepared, prompt=P, generate=2, traffic="all-inputs").decode_first
    assert old is not None
    assert old.bytes_read > 1.05 * total


def test_gpt2_small_decode_step_is_weights_plus_cache_plus_activations() -> None:
    # Issue 25: `onnxcost llm gpt2 -p kv_cache=true --prompt 128 --generate 32` read 831 MiB a
    # step (the whole wte and wpe tables gathered, the tied head's Transpose of wte each step,
    # the whole 1024 x 1024 mask buffer sliced). GPT-2 small: 12 layers, 768 wide, 12 heads.
    prepared = prepare("gpt2", params={"kv_cache": "true"})
    weights = float_weight_bytes(prepared.proto)
    assert weights == 497_759_232  # 124,439,808 fp32 params: 474.70 MiB
    r = llm_report(prepared, prompt=128, generate=32)
    assert r.decode_first is not None
    assert r.decode_first_read is not None
    w, kv, act = gpt2_by_hand(weights, 12, 768, 12, max_pos=1024, past=128)
    # at P = 128: 12 x (2 x 12 x 128 x 256 + 3 x 12 x 129 x 256) = 23,703,552 B of KV cache
    assert r.decode_first_read.kv_cache == kv == 23_703_552
    total = w + kv + act
    assert abs(r.decode_first.bytes_read - total) <= 0.02 * total
    assert r.decode_first.bytes_read < 500 * 2**20  # 497.6 MiB, was 831
