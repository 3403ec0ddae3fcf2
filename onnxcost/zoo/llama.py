"""A LLaMA-style decoder as the TorchScript exporter writes Hugging Face ``LlamaForCausalLM``.

RMSNorm is spelled out in primitives (Pow, ReduceMean, Add, Sqrt, Div, Mul, with
casts to float32 around it for half types); rotary embeddings gather rows of
cos/sin tables by position id and rotate halves with Slice/Neg/Concat; grouped
query attention repeats K/V heads with Unsqueeze/Expand/Reshape; the MLP is
SwiGLU. Every reshape target is computed from Shape/Gather/Unsqueeze/Concat,
which gives a realistic node count (about 300 per layer).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto

from onnxcost.zoo._builder import (
    INT64_MAX,
    Dim,
    GraphBuilder,
    Options,
    check_dim,
    check_heads,
    normal,
    require,
    uniform,
)
from onnxcost.zoo._layers import linear


def _rms_norm(b: GraphBuilder, x: str, dim: int, *, name: str, eps: float) -> str:
    """``LlamaRMSNorm``: weight * (x / sqrt(mean(x^2) + eps)), computed in float32."""
    with b.scope(name):
        weight = b.param("weight", [dim], uniform(0.8, 1.2))
        half = b.ftype != TensorProto.FLOAT
        h = b.op("Cast", [x], to=TensorProto.FLOAT) if half else x
        variance = b.reduce_mean(b.op("Pow", [h, b.scalar(2.0, TensorProto.FLOAT)]), [-1])
        std = b.op("Sqrt", [b.op("Add", [variance, b.scalar(eps, TensorProto.FLOAT)])])
        h = b.op("Mul", [h, b.op("Div", [b.scalar(1.0, TensorProto.FLOAT), std])])
        if half:
            h = b.op("Cast", [h], to=b.ftype)
        return b.op("Mul", [weight, h])


def _rotate_half(b: GraphBuilder, x: str) -> str:
    """cat(-x[..., x.shape[-1] // 2 :], x[..., : x.shape[-1] // 2]), the half size read at run time."""
    half = b.op("Div", [b.dim(x, -1), b.int_scalar(2)])
    x1 = b.slice(x, 0, half, -1)
    x2 = b.slice(x, half, INT64_MAX, -1)
    return b.op("Concat", [b.op("Neg", [x2]), x1], axis=-1)


def _repeat_kv(b: GraphBuilder, x: str, n_rep: int) -> str:
    """``repeat_kv``: x[:, :, None].expand(n, kv, n_rep, s, d).reshape(n, kv * n_rep, s, d).

    The sizes are read from ``x.shape`` at run time, as the traced code does.
    """
    if n_rep == 1:
        return x
    n, kv, s, d = (b.dim(x, i) for i in range(4))
    y = b.unsqueeze(b.full_slice(b.full_slice(x, 0), 1), [2])
    y = b.full_slice(b.full_slice(y, 3), 4)
    expanded = b.expand(y, [n, kv, n_rep, s, d])
    return b.reshape(expanded, [n, b.op("Mul", [kv, b.int_scalar(n_rep)]), s, d])


def _attention(
    b: GraphBuilder,
    x: str,
    mask: str,
    position_ids: str,
    tables: tuple[str, str],
    hidden: int,
    heads: int,
    kv_heads: int,
    cache: tuple[str, str, str, str] | None = None,
) -> str:
    """``LlamaAttention``; ``cache``: (past key, past value, present key, present value): the
    rotated new keys and the new values are concatenated after the past ones (before the KV
    heads are repeated, so the cache holds kv_heads), and are the graph's present outputs."""
    head_dim = hidden // heads
    with b.scope("self_attn"):
        n, s = b.dim(x, 0), b.dim(x, 1)

        def project(name: str, count: int) -> str:
            y = linear(b, x, hidden, count * head_dim, name=name, bias=False)
            return b.op("Transpose", [b.reshape(y, [n, s, count, head_dim])], perm=[0, 2, 1, 3])

        q, k, v = project("q_proj", heads), project("k_proj", kv_heads), project("v_proj", kv_heads)
        kv_seq_len = b.dim(k, -2)
        if cache is not None:  # kv_seq_len += past_key_value[0].shape[-2]
            kv_seq_len = b.op("Add", [kv_seq_len, b.dim(cache[0], -2)])
        with b.scope("rotary_emb"):
            # self.cos_cached[:, :, :seq_len, ...]
            cos, sin = (
                b.slice(b.full_slice(b.full_slice(t, 0), 1), 0, kv_seq_len, 2) for t in tables
            )
        # apply_rotary_pos_emb: cos.squeeze(1).squeeze(0)[position_ids].unsqueeze(1)
        cos, sin = (
            b.unsqueeze(b.op("Gather", [b.squeeze(b.squeeze(t, [1]), [0]), position_ids]), [1])
            for t in (cos, sin)
        )
        q, k = (
            b.op(
                "Add",
                [b.op("Mul", [t, cos]), b.op("Mul", [_rotate_half(b, t), sin])],
            )
            for t in (q, k)
        )
        if cache is not None:
            past_k, past_v, present_k, present_v = cache
            k = b.op("Concat", [past_k, k], axis=-2, out=present_k)
            v = b.op("Concat", [past_v, v], axis=-2, out=present_v)
        n_rep = heads // kv_heads
        k = _repeat_kv(b, k, n_rep)
        v = _repeat_kv(b, v, n_rep)
        scores = b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])])
        scores = b.op("Add", [b.op("Div", [scores, b.scalar(math.sqrt(head_dim))]), mask])
        # softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
        if b.ftype != TensorProto.FLOAT:
            scores = b.op("Cast", [scores], to=TensorProto.FLOAT)
            probs = b.op("Cast", [b.op("Softmax", [scores], axis=-1)], to=b.ftype)
        else:
            probs = b.op("Softmax", [scores], axis=-1)
        ctx = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        ctx = b.reshape(ctx, [n, s, hidden])
        return linear(b, ctx, hidden, hidden, name="o_proj", bias=False)


def _mlp(b: GraphBuilder, x: str, hidden: int, intermediate: int) -> str:
    """down_proj(silu(gate_proj(x)) * up_proj(x)); SiLU exported as Sigmoid then Mul."""
    with b.scope("mlp"):
        gate = linear(b, x, hidden, intermediate, name="gate_proj", bias=False)
        with b.scope("act_fn"):
            gate = b.op("Mul", [gate, b.op("Sigmoid", [gate])])
        up = linear(b, x, hidden, intermediate, name="up_proj", bias=False)
        return linear(
            b, b.op("Mul", [gate, up]), intermediate, hidden, name="down_proj", bias=False
        )


def _causal_mask(b: GraphBuilder, input_ids: str, attention_mask: str) -> str:
    """[n, 1, s, s] additive mask: finfo.min where j > i or the key is padding, else 0."""
    r = b.arange(b.dim(input_ids, 1))
    future = b.op("Greater", [b.unsqueeze(r, [0]), b.unsqueeze(r, [1])])
    padding = b.op("Not", [b.op("Cast", [attention_mask], to=TensorProto.BOOL)])
    masked = b.op("Or", [b.unsqueeze(future, [0, 1]), b.unsqueeze(padding, [1, 2])])
    return b.op("Where", [masked, b.scalar(b.float_min), b.scalar(0.0)])


def _causal_mask_with_past(b: GraphBuilder, input_ids: str, past_key: str) -> str:
    """[1, 1, s, past + s] additive mask: finfo.min where key position j > query position i,
    the queries at positions past .. past + s - 1 (no padding: no attention_mask input)."""
    past = b.dim(past_key, -2)
    total = b.op("Add", [past, b.dim(input_ids, 1)])
    queries = b.op("Range", [past, total, b.int_scalar(1)])
    keys = b.arange(total)
    future = b.op("Greater", [b.unsqueeze(keys, [0]), b.unsqueeze(queries, [1])])
    return b.op("Where", [b.unsqueeze(future, [0, 1]), b.scalar(b.float_min), b.scalar(0.0)])


def _rotary_tables(
    b: GraphBuilder, max_positions: int, head_dim: int, theta: int
) -> tuple[str, str]:
    """The [1, 1, max_positions, head_dim] cos and sin buffers of ``LlamaRotaryEmbedding``."""

    def table(fn: str) -> npt.NDArray[np.generic]:
        inv_freq = 1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
        freqs = np.outer(np.arange(max_positions, dtype=np.float64), inv_freq)
        emb = np.concatenate([freqs, freqs], axis=-1)
        values: npt.NDArray[np.generic] = (np.cos(emb) if fn == "cos" else np.sin(emb))[None, None]
        return values

    shape = [1, 1, max_positions, head_dim]
    prefix = "model.layers.0.self_attn.rotary_emb"
    return (
        b.buffer(f"{prefix}.cos_cached", lambda: table("cos"), shape, b.ftype),
        b.buffer(f"{prefix}.sin_cached", lambda: table("sin"), shape, b.ftype),
    )


def llama(
    *,
    batch: Dim = "batch",
    seq: Dim = "seq",
    layers: int = 32,
    hidden: int = 4096,
    heads: int = 32,
    kv_heads: int = 32,
    intermediate: int = 11008,
    vocab: int = 32000,
    max_positions: int = 2048,
    rope_theta: int = 10000,
    kv_cache: bool = False,
    opts: Options | None = None,
) -> onnx.ModelProto:
    """``LlamaForCausalLM``, LLaMA-7B shape by default; ``kv_heads < heads`` gives GQA.

    The LLaMA-3-8B shape: layers=32, hidden=4096, heads=32, kv_heads=8,
    intermediate=14336, vocab=128256 (rope_theta=500000).

    ``kv_cache``: with past key values in optimum's naming, inputs
    ``past_key_values.{i}.key`` / ``.value`` [batch, kv_heads, past_seq, head_dim] and outputs
    ``present.{i}.key`` / ``.value`` [batch, kv_heads, past_seq + seq, head_dim]; positions
    start at past_seq. There is no attention_mask input then: the mask is causal only.
    """
    check_dim("seq", seq, max_positions)
    check_heads(hidden, heads)
    require(
        heads % kv_heads == 0,
        f"heads={heads} is not divisible by kv_heads={kv_heads}: pass a divisor",
    )
    head_dim = hidden // heads
    require(
        head_dim % 2 == 0,
        f"head size hidden/heads={head_dim} is odd: rotary embeddings need it even",
    )
    eps = 1e-6
    b = GraphBuilder(opts or Options())
    input_ids = b.input("input_ids", TensorProto.INT64, [batch, seq])
    caches: list[tuple[str, str, str, str]] = []
    if kv_cache:
        for i in range(layers):
            past = [
                b.input(
                    f"past_key_values.{i}.{kv}", b.ftype, [batch, kv_heads, "past_seq", head_dim]
                )
                for kv in ("key", "value")
            ]
            caches.append((past[0], past[1], f"present.{i}.key", f"present.{i}.value"))
    else:
        attention_mask = b.input("attention_mask", TensorProto.INT64, [batch, seq])
    tables = _rotary_tables(b, max_positions, head_dim, rope_theta)
    with b.scope("model"):
        with b.scope("embed_tokens"):
            x = b.op("Gather", [b.param("weight", [vocab, hidden], normal(0.02)), input_ids])
        # arange(seq_length).unsqueeze(0).view(-1, seq_length)
        seq_length = b.dim(input_ids, 1)
        if kv_cache:
            # arange(past, past + seq_length).unsqueeze(0).view(-1, seq_length)
            past_length = b.dim(caches[0][0], -2)
            end = b.op("Add", [past_length, seq_length])
            positions = b.op("Range", [past_length, end, b.int_scalar(1)])
            position_ids = b.reshape(b.unsqueeze(positions, [0]), [-1, seq_length])
            mask = _causal_mask_with_past(b, input_ids, caches[0][0])
        else:
            position_ids = b.reshape(b.unsqueeze(b.arange(seq_length), [0]), [-1, seq_length])
            mask = _causal_mask(b, input_ids, attention_mask)
        for i in range(layers):
            with b.scope(f"layers.{i}"):
                h = _rms_norm(b, x, hidden, name="input_layernorm", eps=eps)
                h = _attention(
                    b,
                    h,
                    mask,
                    position_ids,
                    tables,
                    hidden,
                    heads,
                    kv_heads,
                    caches[i] if kv_cache else None,
                )
                x = b.op("Add", [x, h])
                h = _rms_norm(b, x, hidden, name="post_attention_layernorm", eps=eps)
                x = b.op("Add", [x, _mlp(b, h, hidden, intermediate)])
        x = _rms_norm(b, x, hidden, name="norm", eps=eps)
    linear(b, x, hidden, vocab, name="lm_head", bias=False, out="logits")
    b.output("logits", b.ftype, [batch, seq, vocab])
    for _pk, _pv, present_k, present_v in caches:
        for name in (present_k, present_v):
            b.output(name, b.ftype, [batch, kv_heads, "past_seq + seq", head_dim])
    return b.finish(
        "llama",
        "LLaMA-style decoder (Hugging Face LlamaForCausalLM), untied LM head.",
    )
