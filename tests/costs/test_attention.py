"""Attention ops by hand: ONNX Attention, RotaryEmbedding, LinearAttention and the com.microsoft family.

scores = B x H_q x S_q x S_kv; MACs = scores x (head + v_head) (+ the QKV projection where an op
includes it); FLOPs = 2 x MACs + per score 1 scale + 1 per mask source (+ 3 for a softcap)
+ softmax 5 n - 2 per row of n scores (rows = B x H_q x S_q), + 1 per projected element for a
bias, + 3 per rotated element.
"""

from __future__ import annotations

import pytest
from onnxcost_testing import analyze_text, only_node
from test_contrib import ms_node

MS = '["" : 17, "com.microsoft" : 1]'


def onnx_attention(
    q: str, k: str, v: str, attrs: str = "", extra_inputs: str = "", extra_args: str = ""
) -> str:
    attrs = f"<{attrs}>" if attrs else ""
    return f"""
<ir_version: 10, opset_import: ["" : 23]>
g (float[{q}] q, float[{k}] k, float[{v}] v{extra_inputs}) => (float[] y) {{
  y = Attention {attrs} (q, k, v{extra_args})
}}"""


@pytest.mark.parametrize(
    ("q", "kv", "attrs", "macs", "flops"),
    [
        # MHA 4-D: B 2, 4 heads, S 8, head 16: scores 2x4x8x8 = 512 in 64 rows; MACs 512 x 32 = 16,384
        # FLOPs = 32,768 + scale 512 + softmax 5 x 512 - 2 x 64 = 2,432 -> 35,712
        ("2,4,8,16", "2,4,8,16", "", 16_384, 35_712),
        # causal: the mask costs 1 per score (512); the full score matrix is still counted
        ("2,4,8,16", "2,4,8,16", "is_causal=1", 16_384, 36_224),
        # softcap: divide, tanh, multiply per score: + 3 x 512 = 1,536
        ("2,4,8,16", "2,4,8,16", "softcap=30.0", 16_384, 37_248),
        # GQA: 8 query heads over 2 KV heads: scores 2x8x8x8 = 1,024 in 128 rows; MACs 32,768
        # FLOPs = 65,536 + 1,024 + 5 x 1,024 - 2 x 128 = 71,424
        ("2,8,8,16", "2,2,8,16", "", 32_768, 71_424),
        # the same GQA with 3-D inputs: Q [2, 8, 8 x 16], K/V [2, 8, 2 x 16]
        ("2,8,128", "2,8,32", "q_num_heads=8, kv_num_heads=2", 32_768, 71_424),
    ],
)
def test_onnx_attention(q: str, kv: str, attrs: str, macs: int, flops: int) -> None:
    n = only_node(onnx_attention(q, kv, kv, attrs))
    assert (n.macs, n.flops, n.status) == (macs, flops, "ok")


def test_onnx_attention_cross_with_v_head() -> None:
    # Q [2, 4, 8, 16], K [2, 4, 12, 16], V [2, 4, 12, 32]: scores 2x4x8x12 = 768
    # MACs = 768 x (16 + 32) = 36,864; FLOPs = 73,728 + 768 x 6 - 2 x 64 rows = 78,208
    n = only_node(onnx_attention("2,4,8,16", "2,4,12,16", "2,4,12,32"))
    assert (n.macs, n.flops) == (36_864, 78_208)


def test_onnx_attention_mask_and_past() -> None:
    # decode step: Q, K, V [2, 4, 1, 16] + past [2, 4, 7, 16]: 8 keys; scores 2x4x1x8 = 64
    # MACs = 64 x 32 = 2,048; FLOPs = 4,096 + 64 x (6 + 1 mask) - 2 x 8 rows = 4,528
    inputs = ", float[1,8] mask, float[2,4,7,16] pk, float[2,4,7,16] pv"
    text = f"""
<ir_version: 10, opset_import: ["" : 23]>
g (float[2,4,1,16] q, float[2,4,1,16] k, float[2,4,1,16] v{inputs}) => (float[] y, float[] pk_out, float[] pv_out) {{
  y, pk_out, pv_out = Attention (q, k, v, mask, pk, pv)
}}"""
    n = only_node(text)
    assert (n.macs, n.flops, n.status) == (2_048, 4_528, "ok")


@pytest.mark.parametrize(
    ("x", "cache", "attrs", "flops"),
    [
        # 4-D [2, 4, 8, 16], full rotation: 3 FLOPs per element: 3 x 1,024 = 3,072
        ("2,4,8,16", "2,8,8", "", 3_072),
        # partial rotation of 8 of each 16: 3 x 512 = 1,536
        ("2,4,8,16", "2,8,4", "rotary_embedding_dim=8", 1_536),
        # 3-D [2, 8, 64] with 4 heads of 16: 3 x 1,024 = 3,072
        ("2,8,64", "2,8,8", "num_heads=4", 3_072),
    ],
)
def test_onnx_rotary_embedding(x: str, cache: str, attrs: str, flops: int) -> None:
    attrs = f"<{attrs}>" if attrs else ""
    text = f"""
<ir_version: 10, opset_import: ["" : 23]>
g (float[{x}] x, float[{cache}] cos, float[{cache}] sin) => (float[{x}] y) {{
  y = RotaryEmbedding {attrs} (x, cos, sin)
}}"""
    n = only_node(text)
    assert (n.macs, n.flops) == (0, flops)


def test_rotary_caches_are_not_params() -> None:
    # cos/sin caches [16, 8] as initializers with position ids: tables, not weights
    text = """
<ir_version: 10, opset_import: ["" : 23]>
g (float[2,4,8,16] x, int64[2,8] pos) => (float[2,4,8,16] y) <float[16,8] cos = {1.0}, float[16,8] sin = {0.0}> {
  y = RotaryEmbedding (x, cos, sin, pos)
}"""
    n = only_node(text)
    assert (n.flops, n.params) == (3_072, 0)


@pytest.mark.parametrize(
    ("rule", "q", "extra", "macs", "flops"),
    [
        # B 2, T 4 (8 tokens), 2 heads, d_k = d_v = 8 (state 64)
        # linear: read-out 2 heads + update 2 heads: 8 x 64 x 4 = 2,048; scale 8 x 2 x 8 = 128
        ("linear", "2,4,16", "", 2_048, 4_224),
        # gated (per-head decay [2, 4, 2]): + exp 16 + state decay 8 x 2 x 64 = 1,024
        ("gated", "2,4,16", "decay", 2_048, 5_264),
        # delta: + S^T k, 8 x 2 x 64 = 1,024 MACs -> 3,072; + (subtract, beta) 8 x 2 x 2 x 8 = 256
        ("delta", "2,4,16", "beta", 3_072, 6_528),
        # gated delta: both
        ("gated_delta", "2,4,16", "both", 3_072, 7_568),
        # GQA linear, 4 query heads over 2 KV heads: 8 x 64 x (4 + 2) = 3,072; scale 8 x 4 x 8 = 256
        ("linear", "2,4,32", "", 3_072, 6_400),
    ],
)
def test_linear_attention(rule: str, q: str, extra: str, macs: int, flops: int) -> None:
    q_heads = int(q.split(",")[2]) // 8
    args = {"": "", "decay": ", , decay", "beta": ", , , beta", "both": ", , decay, beta"}[extra]
    text = f"""
<ir_version: 13, opset_import: ["" : 27]>
g (float[{q}] q, float[2,4,16] k, float[2,4,16] v, float[2,4,2] decay, float[2,4,2] beta) => (float[] y, float[] s) {{
  y, s = LinearAttention <q_num_heads={q_heads}, kv_num_heads=2, update_rule="{rule}"> (q, k, v{args})
}}"""
    n = only_node(text)
    assert (n.macs, n.flops) == (macs, flops)


ATT_INITS = "float[32,96] w = {0.0}, float[96] bias = {0.0}"


@pytest.mark.parametrize(
    ("node", "inputs", "macs", "flops"),
    [
        # BERT: input [2, 8, 32], 4 heads of 8, mask_index [2]
        # QKV 16 x 32 x 96 = 49,152 + scores 2x4x8x8 = 512 x 16 = 8,192 -> 57,344
        # FLOPs 114,688 + bias 1,536 + 512 x 7 (scale, softmax, mask) - 2 x 64 rows = 3,456 -> 119,680
        ("y = com.microsoft.Attention <num_heads=4> (x, w, bias, mask)", "", 57_344, 119_680),
        # GPT-2 step: unidirectional, past (2, 2, 4, 5, 8): 13 keys: scores 832 x 16 = 13,312
        # MACs 62,464; FLOPs 124,928 + 1,536 + 832 x 7 (scale, softmax, causal) - 2 x 64 -> 132,160
        (
            "y, present = com.microsoft.Attention <num_heads=4, unidirectional=1> (x, w, bias, , past)",
            "",
            62_464,
            132_160,
        ),
        # rotary on Q and K: 3 x 16 tokens x 64 = 3,072; no mask: 114,688 + 1,536 + 3,072 + 2,944
        (
            "y = com.microsoft.Attention <num_heads=4, do_rotary=1> (x, w, bias)",
            "",
            57_344,
            122_240,
        ),
    ],
)
def test_ms_attention(node: str, inputs: str, macs: int, flops: int) -> None:
    text = f"""
<ir_version: 8, opset_import: {MS}>
g (float[2,8,32] x, int32[2] mask, float[2,2,4,5,8] past) => (float[] out) <{ATT_INITS}> {{
  {node}
  out = Identity (y)
}}"""
    n = ms_node(text, "Attention")
    assert (n.macs, n.flops, n.params, n.status) == (macs, flops, 3_168, "ok")


def test_ms_attention_qkv_hidden_sizes() -> None:
    # weights [32, 128] for Q 32, K 32, V 64: QKV 16 x 32 x 128 = 65,536; head 8, v_head 16
    # scores 512 x 24 = 12,288 -> 77,824 MACs; FLOPs 155,648 + bias 2,048 + 512 x 6 - 128 = 160,640
    text = f"""
<ir_version: 8, opset_import: {MS}>
g (float[2,8,32] x) => (float[] out) <float[32,128] w = {{0.0}}, float[128] bias = {{0.0}}> {{
  y = com.microsoft.Attention <num_heads=4, qkv_hidden_sizes=[32,32,64]> (x, w, bias)
  out = Identity (y)
}}"""
    n = ms_node(text, "Attention")
    assert (n.macs, n.flops) == (77_824, 160_640)


def test_qattention() -> None:
    # int8 BERT attention: as com.microsoft Attention without a mask (57,344 MACs;
    # 114,688 + 1,536 + 512 x 6 - 2 x 64 = 119,168) + dequantize 2 x 16 x 96 = 3,072 -> 122,240
    text = f"""
<ir_version: 8, opset_import: {MS}>
g (uint8[2,8,32] x) => (float[] out) <int8[32,96] w = {{0}}, float[96] bias = {{0.0}}, float xs = {{0.1}},
    float ws = {{0.1}}, uint8 xz = {{128}}, int8 wz = {{0}}> {{
  y = com.microsoft.QAttention <num_heads=4> (x, w, bias, xs, ws, , xz, wz)
  out = Identity (y)
}}"""
    n = ms_node(text, "QAttention")
    assert (n.macs, n.flops, n.params) == (57_344, 122_240, 3_168)


def test_decoder_masked_self_attention() -> None:
    # one token, input [2, 1, 32]; shared past buffer (2, 2, 4, 16, 8): 16 keys in all
    # QKV 2 x 32 x 96 = 6,144 + scores 2x4x1x16 = 128 x 16 = 2,048 -> 8,192 MACs
    # FLOPs 16,384 + bias 192 + 128 x 6 - 2 x 8 rows = 752 -> 17,328
    text = f"""
<ir_version: 8, opset_import: {MS}>
g (float[2,1,32] x, float[2,2,4,16,8] past, int32 plen) => (float[] out) <{ATT_INITS}> {{
  y, present = com.microsoft.DecoderMaskedSelfAttention <num_heads=4, past_present_share_buffer=1> (x, w, bias, , past, , plen)
  out = Identity (y)
}}"""
    n = ms_node(text, "DecoderMaskedSelfAttention")
    assert (n.macs, n.flops) == (8_192, 17_328)


@pytest.mark.parametrize(
    ("node", "macs", "flops"),
    [
        # Q, K, V [2, 8, 32], 4 heads of 8, bias [96]: scores 512 x 16 = 8,192 MACs
        # (64 rows of scores throughout: - 2 x 64 = 128 of the softmax)
        # FLOPs 16,384 + bias (16 x 32 on Q + 16 x 64 on K, V) 1,536 + 512 x 6 - 128 = 20,864
        ("y = com.microsoft.MultiHeadAttention <num_heads=4> (q, k, v, bias)", 8_192, 20_864),
        # packed QKV [2, 8, 4, 3, 8], no bias: 16,384 + 3,072 - 128 = 19,328
        ("y = com.microsoft.MultiHeadAttention <num_heads=4> (qkv)", 8_192, 19_328),
        # cross attention over a projected BNSH key / value [2, 4, 12, 8]: scores 768 x 16 = 12,288
        # FLOPs 24,576 + 768 x 6 - 128 = 29,056
        ("y = com.microsoft.MultiHeadAttention <num_heads=4> (q, kc, vc)", 12_288, 29_056),
        # past [2, 4, 5, 8] + unidirectional: 13 keys, scores 832 x 16 = 13,312
        # FLOPs 26,624 + 832 x 7 - 128 = 5,696 -> 32,320
        (
            "y, pk_out, pv_out = com.microsoft.MultiHeadAttention <num_heads=4, unidirectional=1> (q, k, v, , , , pk, pv)",
            13_312,
            32_320,
        ),
    ],
)
def test_multi_head_attention(node: str, macs: int, flops: int) -> None:
    text = f"""
<ir_version: 8, opset_import: {MS}>
g (float[2,8,32] q, float[2,8,32] k, float[2,8,32] v, float[2,8,4,3,8] qkv, float[2,4,12,8] kc,
   float[2,4,12,8] vc, float[2,4,5,8] pk, float[2,4,5,8] pv) => (float[] out) <float[96] bias = {{0.0}}> {{
  {node}
  out = Identity (y)
}}"""
    n = ms_node(text, "MultiHeadAttention")
    assert (n.macs, n.flops, n.status) == (macs, flops, "ok")


GQA = """
<ir_version: 8, opset_import: {ms}>
g (float[2,8,64] q, float[2,8,16] k, float[2,8,16] v, float[2,8,96] qkv, float[2,2,4,8] pk, float[2,2,4,8] pv,
   int32[2] seqlens, int32 total, float[16,4] cos, float[16,4] sin) => (float[] out) {{
  y, pk_out, pv_out = com.microsoft.GroupQueryAttention <num_heads=8, kv_num_heads=2{attrs}> ({args})
  out = Identity (y)
}}"""


@pytest.mark.parametrize(
    ("args", "attrs", "macs", "flops"),
    [
        # Q [2, 8, 8 x 8], K/V [2, 8, 2 x 8]: scores 2x8x8x8 = 1,024 in 128 rows x 16 = 16,384 MACs
        # FLOPs 32,768 + 1,024 x (6 + causal 1) - 2 x 128 = 6,912 -> 39,680
        ("q, k, v, , , seqlens, total", "", 16_384, 39_680),
        # packed QKV [2, 8, (8 + 2 x 2) x 8]: the same
        ("qkv, , , , , seqlens, total", "", 16_384, 39_680),
        # past [2, 2, 4, 8]: 12 keys: scores 1,536 x 16 = 24,576
        # FLOPs 49,152 + 1,536 x 7 - 256 = 59,648
        ("q, k, v, pk, pv, seqlens, total", "", 24_576, 59_648),
        # rotary on Q and K: 3 x 16 tokens x (8 + 2) heads x 8 = 3,840 -> 43,520
        ("q, k, v, , , seqlens, total, cos, sin", ", do_rotary=1", 16_384, 43_520),
        # softcap: 3 per score, + 3,072 -> 42,752
        ("q, k, v, , , seqlens, total", ", softcap=50.0", 16_384, 42_752),
        # causal=0: no causal mask, - 1,024 -> 38,656
        ("q, k, v, , , seqlens, total", ", causal=0", 16_384, 38_656),
    ],
)
def test_group_query_attention(args: str, attrs: str, macs: int, flops: int) -> None:
    n = ms_node(GQA.format(ms=MS, attrs=attrs, args=args), "GroupQueryAttention")
    assert (n.macs, n.flops, n.status) == (macs, flops, "ok")


@pytest.mark.parametrize(
    ("shared", "macs", "flops"),
    [
        # shared buffer [2, 4, 16, 8]: 16 keys: scores 2x4x1x16 = 128 (8 rows) x 16 = 2,048
        # FLOPs 4,096 + 128 x 6 - 2 x 8 = 4,848
        (1, 2_048, 4_848),
        # separate past of 16 + the new token: 17 keys: 136 x 16 = 2,176; FLOPs 4,352 + 816 - 16
        (0, 2_176, 5_152),
    ],
)
def test_decoder_masked_multi_head_attention(shared: int, macs: int, flops: int) -> None:
    text = f"""
<ir_version: 8, opset_import: {MS}>
g (float[2,1,32] q, float[2,1,32] k, float[2,1,32] v, float[2,4,16,8] pk, float[2,4,16,8] pv, int32 plen) => (float[] out) {{
  y, pk_out, pv_out = com.microsoft.DecoderMaskedMultiHeadAttention <num_heads=4, past_present_share_buffer={shared}> (q, k, v, , , pk, pv, plen)
  out = Identity (y)
}}"""
    n = ms_node(text, "DecoderMaskedMultiHeadAttention")
    assert (n.macs, n.flops) == (macs, flops)


def test_packed_attention() -> None:
    # 10 real tokens of 2 sequences padded to 8: QKV 10 x 32 x 96 = 30,720; attention over the
    # padded 2x4x8x8 = 512 scores x 16 = 8,192 -> 38,912 MACs
    # FLOPs 77,824 + bias 10 x 96 = 960 + 512 x 6 - 2 x 64 rows = 2,944 -> 81,728
    text = f"""
<ir_version: 8, opset_import: {MS}>
g (float[10,32] x, int32[2,8] offsets, int32[3] cu) => (float[] out) <{ATT_INITS}> {{
  y = com.microsoft.PackedAttention <num_heads=4> (x, w, bias, offsets, cu)
  out = Identity (y)
}}"""
    n = ms_node(text, "PackedAttention")
    assert (n.macs, n.flops, n.params) == (38_912, 81_728, 3_168)


def test_packed_multi_head_attention() -> None:
    # projected Q, K, V [10, 32]; padded 2 x 8: 512 scores x 16 = 8,192; FLOPs 16,384 + 3,072 - 128
    text = f"""
<ir_version: 8, opset_import: {MS}>
g (float[10,32] q, float[10,32] k, float[10,32] v, int32[2,8] offsets, int32[3] cu) => (float[] out) {{
  y = com.microsoft.PackedMultiHeadAttention <num_heads=4> (q, k, v, , offsets, cu)
  out = Identity (y)
}}"""
    n = ms_node(text, "PackedMultiHeadAttention")
    assert (n.macs, n.flops) == (8_192, 19_328)


@pytest.mark.parametrize(
    ("attrs", "cache", "flops"),
    [
        # input [2, 8, 32], full rotation: 3 x 512 = 1,536
        ("", "16,16", 1_536),
        # 4 heads of 8, rotate 4 of each 8: 3 x 256 = 768
        ("<num_heads=4, rotary_embedding_dim=4>", "16,2", 768),
    ],
)
def test_ms_rotary_embedding(attrs: str, cache: str, flops: int) -> None:
    text = f"""
<ir_version: 8, opset_import: {MS}>
g (float[2,8,32] x, int64[2,8] pos) => (float[] out) <float[{cache}] cos = {{1.0}}, float[{cache}] sin = {{0.0}}> {{
  y = com.microsoft.RotaryEmbedding {attrs} (x, pos, cos, sin)
  out = Identity (y)
}}"""
    n = ms_node(text, "RotaryEmbedding")
    assert (n.flops, n.params) == (flops, 0)


def test_ms_linear_attention_inverse_gqa() -> None:
    # com.microsoft LinearAttention, 2 query heads over 4 KV heads (inverse GQA: one output per KV
    # head), d 8, 8 tokens, linear rule: 8 x 64 x (4 read-out + 4 update) = 4,096 MACs;
    # scale 8 x 4 x 8 = 256 -> FLOPs 8,448
    text = f"""
<ir_version: 8, opset_import: {MS}>
g (float[2,4,16] q, float[2,4,32] k, float[2,4,32] v) => (float[] out) {{
  y, s = com.microsoft.LinearAttention <q_num_heads=2, kv_num_heads=4, update_rule="linear"> (q, k, v)
  out = Identity (y)
}}"""
    n = ms_node(text, "LinearAttention")
    assert (n.macs, n.flops) == (4_096, 8_448)


def test_fused_attention_costs_what_its_unfused_subgraph_costs() -> None:
    # BERT self-attention on [2, 8, 32], 4 heads of 8, as torch exports it (Q/K/V MatMul + Add,
    # Reshape/Transpose, MatMul, Div, mask Add, Softmax, MatMul), summed node by node, equals
    # com.microsoft Attention's 57,344 MACs and 119,680 FLOPs
    unfused = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,8,32] x, float[2,1,1,8] mask) => (float[2,4,8,8] y) <float[32,32] wq = {0.0}, float[32,32] wk = {0.0},
    float[32,32] wv = {0.0}, float[32] bq = {0.0}, float[32] bk = {0.0}, float[32] bv = {0.0},
    int64[4] heads = {0, 0, 4, 8}, float scale = {2.828427}> {
  q0 = MatMul (x, wq)
  q1 = Add (q0, bq)
  q2 = Reshape (q1, heads)
  q = Transpose <perm=[0,2,1,3]> (q2)
  k0 = MatMul (x, wk)
  k1 = Add (k0, bk)
  k2 = Reshape (k1, heads)
  k = Transpose <perm=[0,2,3,1]> (k2)
  v0 = MatMul (x, wv)
  v1 = Add (v0, bv)
  v2 = Reshape (v1, heads)
  v = Transpose <perm=[0,2,1,3]> (v2)
  s0 = MatMul (q, k)
  s1 = Div (s0, scale)
  s2 = Add (s1, mask)
  p = Softmax <axis=3> (s2)
  y = MatMul (p, v)
}"""
    a = analyze_text(unfused)
    assert {n.status for n in a.nodes} <= {"ok", "zero"}
    fused = f"""
<ir_version: 8, opset_import: {MS}>
g (float[2,8,32] x, int32[2] mask) => (float[] out) <{ATT_INITS}> {{
  y = com.microsoft.Attention <num_heads=4> (x, w, bias, mask)
  out = Identity (y)
}}"""
    n = ms_node(fused, "Attention")
    assert (a.totals.macs, a.totals.flops) == (n.macs, n.flops) == (57_344, 119_680)
