"""Attention: ONNX Attention, RotaryEmbedding, LinearAttention and the com.microsoft family
(Attention, QAttention, DecoderMaskedSelfAttention, MultiHeadAttention,
DecoderMaskedMultiHeadAttention, GroupQueryAttention, PackedAttention,
PackedMultiHeadAttention, RotaryEmbedding, LinearAttention).

Scaled dot-product attention over ``scores = B x H_q x S_q x S_kv`` positions:

* MACs = scores x (head_size + v_head_size): Q.K^T and P.V. An op that includes the Q/K/V
  projection (com.microsoft Attention, QAttention, PackedAttention, DecoderMaskedSelfAttention)
  adds its MACs, numel(input) x (D_q + D_k + D_v).
* FLOPs = 2 x MACs + per score: 1 scale multiply, 1 add per mask source (attn_mask /
  mask_index, causal mask, attention_bias), 3 for a softcap (divide, tanh, multiply); the
  softmax, 5 n - 2 per row of n scores (max, subtract, exp, sum, divide, as reduction.py counts
  Softmax); plus 1 add per projected element for a projection bias and 3 per rotated element
  for rotary embeddings. A fused op thus costs what its unfused ONNX subgraph costs.
* S_kv is the whole key length (past + new). Causal and sliding-window masks are not
  subtracted: dense kernels compute the full score matrix and mask it, as torch's
  flop_counter counts SDPA.

Formulas of com.microsoft ops read input shapes only: ONNX shape inference skips those ops.
"""

from __future__ import annotations

from onnxcost.costs._context import OpContext, UnknownShapeError, dim_max
from onnxcost.costs._registry import Cost, Saved, needs_any, register, register_backward
from onnxcost.costs.quantized import DEQUANTIZE_FLOPS, given, softmax_flops

MS = "com.microsoft"

SOFTCAP_FLOPS = 3
"""Per score: divide by the cap, tanh, multiply by the cap."""
ROTARY_FLOPS = 3
"""Per rotated element: a pair (x1, x2) becomes (c x1 - s x2, s x1 + c x2), 6 FLOPs per 2 elements."""
RMS_NORM_FLOPS = 4
"""Per element of a per-head RMS norm: square, sum, multiply by 1/rms, multiply by the weight."""


def sdpa(
    batch: int,
    q_heads: int,
    q_len: int,
    kv_len: int,
    head_size: int,
    v_head_size: int,
    *,
    masks: int = 0,
    softcap: bool = False,
) -> Cost:
    """Cost of softmax(scale x Q.K^T + masks) . V over B x H_q x S_q x S_kv scores."""
    rows = batch * q_heads * q_len
    scores = rows * kv_len
    per_score = 1 + masks + (SOFTCAP_FLOPS if softcap else 0)
    extra = scores * per_score + softmax_flops(scores, rows)
    return Cost.contraction(scores * (head_size + v_head_size), extra)


def _heads_split(hidden: int, heads: int, what: str) -> int:
    if heads <= 0 or hidden % heads:
        raise UnknownShapeError(f"{what}: hidden size {hidden} is not a multiple of {heads} heads")
    return hidden // heads


# --- ONNX ------------------------------------------------------------------------------------


@register("Attention", since=23, meta_inputs=(3, 6))
def onnx_attention(ctx: OpContext) -> Cost:
    """MACs = B x H_q x S_q x (P + S_kv) x (head + v_head); FLOPs = 2 x MACs + (1 + masks + 3 if softcap) per score + softmax.

    NB: causal and window masks are not subtracted; nonpad_kv_seqlen padding is counted.
    """
    q, k, v = ctx.shape(0), ctx.shape(1), ctx.shape(2)
    if len(q) == 4:
        batch, q_heads, q_len, head = q
        kv_len, v_head = k[2], v[3]
    else:
        batch, q_len = q[0], q[1]
        q_heads = ctx.int_attr("q_num_heads", 0)
        kv_heads = ctx.int_attr("kv_num_heads", 0)
        head = _heads_split(q[2], q_heads, ctx.node.name)
        kv_len, v_head = k[1], _heads_split(v[2], kv_heads, ctx.node.name)
    if given(ctx, 4):
        kv_len += ctx.shape(4)[2]
    masks = int(given(ctx, 3)) + int(bool(ctx.attr("is_causal", 0)))
    softcap = float(ctx.attr("softcap", 0.0)) != 0.0
    return sdpa(batch, q_heads, q_len, kv_len, head, v_head, masks=masks, softcap=softcap)


def rotated_elements(numel: int, head_size: int, rotary_dim: int) -> int:
    """Elements a rotary embedding rotates: all of them, or rotary_dim of each head_size."""
    if not rotary_dim or rotary_dim >= head_size or not head_size:
        return numel
    return numel // head_size * rotary_dim


def _rotary_head_size(ctx: OpContext, x: tuple[int, ...], heads: int, cos: int) -> int:
    if len(x) == 4:
        return x[3]
    if heads:
        return _heads_split(x[2], heads, ctx.node.name)
    # 3-D input without num_heads: the cache's last dim is rotary_dim / 2.
    return 2 * ctx.shape(cos)[-1]


@register("RotaryEmbedding", since=23, meta_inputs=(1, 2, 3))
@register("RotaryEmbedding", domain=MS, meta_inputs=(1, 2, 3))
def rotary_embedding(ctx: OpContext) -> Cost:
    """FLOPs = 3 x rotated elements (numel(X) x rotary_dim / head_size): 4 multiplies and 2 adds per pair.

    ONNX inputs are (X, cos, sin, position_ids); com.microsoft's are (X, position_ids, cos, sin).
    """
    x = ctx.shape(0)
    cos = 2 if ctx.node.domain == MS else 1
    head = _rotary_head_size(ctx, x, ctx.int_attr("num_heads", 0), cos)
    rotary_dim = ctx.int_attr("rotary_embedding_dim", 0)
    return Cost(flops=ROTARY_FLOPS * rotated_elements(ctx.numel(0), head, rotary_dim))


_LINEAR_RULES = ("linear", "gated", "delta", "gated_delta")


@register("LinearAttention", since=27, meta_inputs=(3,))
@register("LinearAttention", domain=MS, meta_inputs=(3,))
def linear_attention(ctx: OpContext) -> Cost:
    """MACs = B x T x d_k x d_v x (max(H_q, H_kv) read-out + H_kv update + H_kv if delta rule); FLOPs add decay, delta and scale.

    NB: the token-by-token recurrence; chunk-parallel prefill kernels do a different (larger)
    amount of arithmetic for the same result. Per token and KV head: gated rules multiply the
    state by exp(decay) (d_k x d_v) and take exp of the decay; delta rules subtract and scale
    by beta (2 x d_v); the output is scaled once per element.
    """
    q, k, v = ctx.shape(0), ctx.shape(1), ctx.shape(2)
    q_heads = ctx.int_attr("q_num_heads", 0)
    kv_heads = ctx.int_attr("kv_num_heads", 0)
    rule = str(ctx.attr("update_rule", "gated_delta"))
    if rule not in _LINEAR_RULES:
        raise UnknownShapeError(f"{ctx.node.name}: unknown update_rule {rule!r}")
    d_k = _heads_split(k[2], kv_heads, ctx.node.name)
    d_v = _heads_split(v[2], kv_heads, ctx.node.name)
    _heads_split(q[2], q_heads, ctx.node.name)
    tokens = q[0] * q[1]
    out_heads = max(q_heads, kv_heads)
    state = d_k * d_v
    delta = rule.endswith("delta")
    gated = rule.startswith("gated")
    macs = tokens * state * (out_heads + kv_heads * (2 if delta else 1))
    extra = tokens * out_heads * d_v  # output scale
    if gated:
        decay = ctx.numel(4) if given(ctx, 4) else tokens * kv_heads
        extra += decay + tokens * kv_heads * state  # exp(g), state decay
    if delta:
        extra += tokens * kv_heads * 2 * d_v  # v - S^T k, times beta
    return Cost.contraction(macs, extra)


# --- com.microsoft: ops that include the Q/K/V projection -------------------------------------


def _qkv_sizes(ctx: OpContext, weights: tuple[int, ...]) -> tuple[int, int, int]:
    sizes = [int(s) for s in ctx.attr("qkv_hidden_sizes", None) or ()]
    if len(sizes) == 3:
        return sizes[0], sizes[1], sizes[2]
    third = weights[-1] // 3
    return third, third, third


def _projected_attention(
    ctx: OpContext, *, batch: int, q_len: int, tokens: int, past: int, masks: int
) -> Cost:
    """Projection (tokens x D_in x (D_q + D_k + D_v)) + bias + rotary + SDPA over past + q_len keys."""
    x, w = ctx.shape(0), ctx.shape(1)
    heads = ctx.int_attr("num_heads", 0)
    d_q, d_k, d_v = _qkv_sizes(ctx, w)
    head = _heads_split(d_q, heads, ctx.node.name)
    v_head = _heads_split(d_v, heads, ctx.node.name)
    proj_out = d_q + d_k + d_v
    proj = Cost.contraction(tokens * x[-1] * proj_out, tokens * proj_out if given(ctx, 2) else 0)
    rotary = 0
    if ctx.int_attr("do_rotary", 0):
        rotary_dim = ctx.int_attr("rotary_embedding_dim", 0)
        rotary = ROTARY_FLOPS * rotated_elements(tokens * (d_q + d_k), head, rotary_dim)
    return (
        proj
        + Cost(flops=rotary)
        + sdpa(batch, heads, q_len, past + q_len, head, v_head, masks=masks)
    )


def _unidirectional(ctx: OpContext) -> int:
    return int(bool(ctx.attr("unidirectional", 0)))


@register("Attention", "DecoderMaskedSelfAttention", domain=MS, meta_inputs=(3, 6, 7, 8))
def ms_attention(ctx: OpContext) -> Cost:
    """MACs = B x S x D_in x (D_q + D_k + D_v) + B x N x S x (P + S) x (head + v_head); FLOPs = 2 x MACs + bias, rotary, scale, softmax, masks.

    past is (2, B, N, P, H).
    NB: with past_present_share_buffer, P is the buffer's length less S (the runtime
    past_sequence_length is not known statically). Causal masking is not subtracted.
    """
    x = ctx.shape(0)
    batch, q_len = x[0], x[1]
    past = 0
    if given(ctx, 4):
        past = ctx.shape(4)[3]
        if ctx.int_attr("past_present_share_buffer", 0):
            past = dim_max(0, past - q_len)
    masks = int(given(ctx, 3)) + int(given(ctx, 5)) + _unidirectional(ctx)
    return _projected_attention(
        ctx, batch=batch, q_len=q_len, tokens=batch * q_len, past=past, masks=masks
    )


@register("QAttention", domain=MS, meta_inputs=(5,), quant_inputs=(3, 4, 6, 7))
def qattention(ctx: OpContext) -> Cost:
    """As com.microsoft Attention with an int8 projection, + 2 x B x S x (D_q + D_k + D_v) dequantizing it.

    NB: zero-point corrections are not counted; attention itself runs in float.
    """
    x = ctx.shape(0)
    batch, q_len = x[0], x[1]
    d_q, d_k, d_v = _qkv_sizes(ctx, ctx.shape(1))
    past = ctx.shape(8)[3] if given(ctx, 8) else 0
    masks = int(given(ctx, 5)) + _unidirectional(ctx)
    cost = _projected_attention(
        ctx, batch=batch, q_len=q_len, tokens=batch * q_len, past=past, masks=masks
    )
    return cost + Cost(flops=DEQUANTIZE_FLOPS * batch * q_len * (d_q + d_k + d_v))


@register("PackedAttention", domain=MS, meta_inputs=(3, 4))
def packed_attention(ctx: OpContext) -> Cost:
    """MACs = tokens x D_in x (D_q + D_k + D_v) + B x N x S x S x (head + v_head), (B, S) = shape(token_offset).

    NB: attention is counted over the padded B x S x S; the kernel skips padding per sequence
    (lengths known only at run time).
    """
    batch, seq = ctx.shape(3)
    tokens = ctx.shape(0)[0]
    masks = int(given(ctx, 5))
    return _projected_attention(ctx, batch=batch, q_len=seq, tokens=tokens, past=0, masks=masks)


# --- com.microsoft: attention over projected Q, K, V -----------------------------------------


def _bias_adds(
    ctx: OpContext, i: int, q_tokens: int, kv_tokens: int, q_hidden: int, v_hidden: int
) -> int:
    """A projection bias of (D_q + D_k + D_v) added to the new Q, K and V tokens."""
    if not given(ctx, i):
        return 0
    return q_tokens * q_hidden + kv_tokens * (q_hidden + v_hidden)


@register("MultiHeadAttention", domain=MS, meta_inputs=(4, 8, 9))
def multi_head_attention(ctx: OpContext) -> Cost:
    """MACs = B x N x S x (P + L) x (head + v_head); FLOPs = 2 x MACs + bias adds + (1 + masks) per score + softmax.

    Q is (B, S, D) or packed QKV (B, S, N, 3, H); K is (B, L, D), packed KV (B, L, N, 2, H) or
    BNSH (B, N, L, H).
    NB: causal (unidirectional) masking is not subtracted; with a shared KV buffer the whole
    buffer is attended.
    """
    heads = ctx.int_attr("num_heads", 0)
    q = ctx.shape(0)
    batch, q_len = q[0], q[1]
    new_kv = 0  # key/value tokens that get the projection bias
    if len(q) == 5:  # packed QKV
        head = v_head = q[4]
        kv_len = new_kv = q_len
    else:
        head = _heads_split(q[2], heads, ctx.node.name)
        k = ctx.shape(1)
        if len(k) == 5:  # packed KV
            kv_len = new_kv = k[1]
            v_head = k[4]
        elif len(k) == 4:  # BNSH: already projected (cross-attention cache)
            kv_len, v_head = k[2], ctx.shape(2)[3]
        else:
            kv_len = new_kv = k[1]
            v_head = _heads_split(ctx.shape(2)[2], heads, ctx.node.name)
    past = 0
    if given(ctx, 6):
        past = ctx.shape(6)[2]
        if given(ctx, 8):  # past_sequence_length given: past and present share one buffer
            past -= kv_len
    bias = _bias_adds(ctx, 3, batch * q_len, batch * new_kv, heads * head, heads * v_head)
    masks = int(given(ctx, 4)) + int(given(ctx, 5)) + int(bool(ctx.attr("unidirectional", 0)))
    return Cost(flops=bias) + sdpa(
        batch, heads, q_len, max(0, past) + kv_len, head, v_head, masks=masks
    )


@register("PackedMultiHeadAttention", domain=MS, meta_inputs=(4, 5))
def packed_multi_head_attention(ctx: OpContext) -> Cost:
    """MACs = B x N x S x S x (head + v_head), B x S from token_offset; FLOPs = 2 x MACs + bias adds + (1 + masks) per score + softmax.

    NB: attention is counted over the padded B x S x S; the kernel skips padding per sequence.
    """
    heads = ctx.int_attr("num_heads", 0)
    batch, seq = ctx.shape(4)
    q = ctx.shape(0)
    tokens = q[0]
    if len(q) == 4:  # packed QKV (tokens, N, 3, H)
        head = v_head = q[3]
    else:
        head = _heads_split(q[1], heads, ctx.node.name)
        v_head = _heads_split(ctx.shape(2)[1], heads, ctx.node.name)
    bias = _bias_adds(ctx, 3, tokens, tokens, heads * head, heads * v_head)
    return Cost(flops=bias) + sdpa(batch, heads, seq, seq, head, v_head, masks=int(given(ctx, 6)))


@register("DecoderMaskedMultiHeadAttention", domain=MS, meta_inputs=(3, 7, 8, 9))
def decoder_masked_multi_head_attention(ctx: OpContext) -> Cost:
    """MACs = B x N x 1 x T x (head + v_head); FLOPs = 2 x MACs + bias adds + (1 + masks) per score + softmax.

    T is the cross-attention key length, or past + 1 (the buffer length when shared).
    NB: with past_present_share_buffer the whole buffer is attended; the runtime
    past_sequence_length is not known statically.
    """
    heads = ctx.int_attr("num_heads", 0)
    q = ctx.shape(0)
    batch, q_len = q[0], q[1]
    k = ctx.shape(1) if given(ctx, 1) else None
    if k is not None and len(k) == 4:  # cross attention over a projected (B, N, L, H) key
        head, kv_len, v_head = k[3], k[2], ctx.shape(2)[3]
        new_kv = 0
    else:
        if k is None:  # packed QKV (B, 1, 2 D + D_v), taken as three equal parts
            head = v_head = _heads_split(q[2], 3 * heads, ctx.node.name)
        else:
            head = _heads_split(q[2], heads, ctx.node.name)
            v_head = _heads_split(ctx.shape(2)[2], heads, ctx.node.name)
        new_kv = q_len
        past = ctx.shape(5)[2] if given(ctx, 5) else 0
        shared = ctx.int_attr("past_present_share_buffer", 0) and given(ctx, 5)
        kv_len = past if shared else past + q_len
    bias = _bias_adds(ctx, 10, batch * q_len, batch * new_kv, heads * head, heads * v_head)
    masks = int(given(ctx, 3)) + int(given(ctx, 4))
    return Cost(flops=bias) + sdpa(batch, heads, q_len, kv_len, head, v_head, masks=masks)


@register("GroupQueryAttention", domain=MS, meta_inputs=(5, 6, 7, 8, 9, 12, 13))
def group_query_attention(ctx: OpContext) -> Cost:
    """MACs = B x N_q x S x T x 2 x head (T = past + S); FLOPs = 2 x MACs + (1 + masks + softcap) per score + softmax + rotary + QK norm.

    Q is (B, S, N_q x H) or packed QKV (B, S, (N_q + 2 N_kv) x H); past_key is (B, N_kv, P, H).
    NB: the causal mask (attribute causal, default 1) and local_window_size are not subtracted;
    with a shared KV buffer P is the buffer's length (the runtime total_sequence_length is not
    known statically); quantized KV-cache dequantization is not counted.
    """
    heads = ctx.int_attr("num_heads", 0)
    kv_heads = ctx.int_attr("kv_num_heads", 0)
    q = ctx.shape(0)
    batch, q_len = q[0], q[1]
    packed = not given(ctx, 1)
    head = _heads_split(q[2], heads + 2 * kv_heads if packed else heads, ctx.node.name)
    kv_len = q_len + (ctx.shape(3)[2] if given(ctx, 3) else 0)
    masks = int(bool(ctx.attr("causal", 1))) + int(given(ctx, 10))
    softcap = float(ctx.attr("softcap", 0.0)) != 0.0
    cost = sdpa(batch, heads, q_len, kv_len, head, head, masks=masks, softcap=softcap)
    qk_elements = batch * q_len * (heads + kv_heads) * head
    extra = 0
    if ctx.int_attr("do_rotary", 0):
        extra += ROTARY_FLOPS * qk_elements
    if given(ctx, 14) and given(ctx, 15):
        extra += RMS_NORM_FLOPS * qk_elements
    return cost + Cost(flops=extra)


# --- backward rules ---------------------------------------------------------------------------


def _attention_dims(ctx: OpContext) -> tuple[int, int, int, int]:
    """(scores, rows, head, v_head) of an ONNX Attention: scores = B x H_q x S_q x S_kv."""
    q, k, v = ctx.shape(0), ctx.shape(1), ctx.shape(2)
    if len(q) == 4:
        batch, q_heads, q_len, head = q
        kv_len, v_head = k[2], v[3]
    else:
        batch, q_len = q[0], q[1]
        q_heads = ctx.int_attr("q_num_heads", 0)
        head = _heads_split(q[2], q_heads, ctx.node.name)
        kv_len, v_head = k[1], _heads_split(v[2], ctx.int_attr("kv_num_heads", 0), ctx.node.name)
    if given(ctx, 4):
        kv_len += ctx.shape(4)[2]
    rows = batch * q_heads * q_len
    return rows * kv_len, rows, head, v_head


def _attention_saves(ctx: OpContext, needs: tuple[bool, ...]) -> Saved:
    """Q, K, V, the output and one fp32 logsumexp per score row (a fused kernel's)."""
    _scores, rows, _h, _v = _attention_dims(ctx)
    return Saved(inputs=(0, 1, 2), outputs=(0,), extra_bytes=4 * rows)


@register_backward("Attention", since=23, saves=_attention_saves)
def onnx_attention_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dV = P^T dO (scores x v_head MACs); dP = dO V^T (scores x v_head, for dQ or dK); dQ = dS K, dK = dS^T Q (scores x head each); softmax backward 4 x scores - rows and the scale, scores FLOPs.

    All three needed: 2 x the forward's MACs, what torch's FlopCounterMode counts for SDPA's
    backward. NB: a FlashAttention kernel also recomputes Q.K^T (scores x head MACs more,
    its 2.5x); not counted, as torch does not.
    """
    scores, rows, head, v_head = _attention_dims(ctx)
    dq, dk, dv = needs_any(needs, 0), needs_any(needs, 1), needs_any(needs, 2)
    macs = scores * v_head * int(dv)
    extra = 0
    if dq or dk:
        macs += scores * v_head + scores * head * (int(dq) + int(dk))
        extra = 4 * scores - rows + scores
    return Cost.contraction(macs, extra)
