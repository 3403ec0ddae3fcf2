"""Transformer language models as Hugging Face ``transformers`` exports them: BERT and GPT-2.

Reshape targets are computed at run time from Shape -> Gather -> Unsqueeze -> Concat,
positions come from Range over the sequence length, and GPT-2's causal mask is a
[1, 1, n_positions, n_positions] bool buffer sliced to the sequence length, so
shape inference has to propagate values to know the shapes.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto

from onnxcost.zoo._builder import (
    Dim,
    GraphBuilder,
    Options,
    check_dim,
    check_heads,
    normal,
)
from onnxcost.zoo._layers import gelu_erf, gelu_tanh, gemm, layer_norm, linear


# ---------------------------------------------------------------------------- BERT
def _bert_self_attention(b: GraphBuilder, x: str, mask: str, hidden: int, heads: int) -> str:
    """``BertSelfAttention``: softmax(Q K^T / sqrt(d) + mask) V, heads merged back."""
    head_dim = hidden // heads
    with b.scope("self"):
        n, s = b.dim(x, 0), b.dim(x, 1)

        def heads_first(t: str) -> str:
            # transpose_for_scores: view(n, s, heads, head_dim).permute(0, 2, 1, 3)
            return b.op("Transpose", [b.reshape(t, [n, s, heads, head_dim])], perm=[0, 2, 1, 3])

        q = heads_first(linear(b, x, hidden, hidden, name="query"))
        k = heads_first(linear(b, x, hidden, hidden, name="key"))
        v = heads_first(linear(b, x, hidden, hidden, name="value"))
        scores = b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])])
        scores = b.op("Div", [scores, b.scalar(math.sqrt(head_dim))])
        probs = b.op("Softmax", [b.op("Add", [scores, mask])], axis=-1)
        ctx = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        return b.reshape(ctx, [n, s, hidden])


def bert_base(
    *,
    batch: Dim = "batch",
    seq: Dim = "seq",
    layers: int = 12,
    hidden: int = 768,
    heads: int = 12,
    intermediate: int = 3072,
    vocab: int = 30522,
    max_positions: int = 512,
    type_vocab: int = 2,
    opts: Options | None = None,
) -> onnx.ModelProto:
    """``BertModel`` (bert-base-uncased shape) with its pooler: dense + tanh on [CLS]."""
    check_dim("seq", seq, max_positions)
    check_heads(hidden, heads)
    b = GraphBuilder(opts or Options())
    input_ids = b.input("input_ids", TensorProto.INT64, [batch, seq])
    attention_mask = b.input("attention_mask", TensorProto.INT64, [batch, seq])
    token_type_ids = b.input("token_type_ids", TensorProto.INT64, [batch, seq])

    # get_extended_attention_mask: (1 - mask[:, None, None, :]) * finfo.min
    ext = b.op("Cast", [b.unsqueeze(attention_mask, [1, 2])], to=b.ftype)
    ext = b.op("Mul", [b.op("Sub", [b.scalar(1.0), ext]), b.scalar(b.float_min)])

    with b.scope("embeddings"):
        position_ids = b.unsqueeze(b.arange(b.dim(input_ids, 1)), [0])
        with b.scope("word_embeddings"):
            words = b.op("Gather", [b.param("weight", [vocab, hidden], normal(0.02)), input_ids])
        with b.scope("token_type_embeddings"):
            types = b.op(
                "Gather", [b.param("weight", [type_vocab, hidden], normal(0.02)), token_type_ids]
            )
        x = b.op("Add", [words, types])
        with b.scope("position_embeddings"):
            pos = b.op(
                "Gather", [b.param("weight", [max_positions, hidden], normal(0.02)), position_ids]
            )
        x = b.op("Add", [x, pos])
        x = layer_norm(b, x, hidden, name="LayerNorm", eps=1e-12)

    with b.scope("encoder"):
        for i in range(layers):
            last = i == layers - 1
            with b.scope(f"layer.{i}"):
                with b.scope("attention"):
                    y = _bert_self_attention(b, x, ext, hidden, heads)
                    with b.scope("output"):
                        y = b.op("Add", [linear(b, y, hidden, hidden, name="dense"), x])
                        x = layer_norm(b, y, hidden, name="LayerNorm", eps=1e-12)
                with b.scope("intermediate"):
                    y = linear(b, x, hidden, intermediate, name="dense")
                    with b.scope("intermediate_act_fn"):
                        y = gelu_erf(b, y)
                with b.scope("output"):
                    y = b.op("Add", [linear(b, y, intermediate, hidden, name="dense"), x])
                    x = layer_norm(
                        b,
                        y,
                        hidden,
                        name="LayerNorm",
                        eps=1e-12,
                        out="last_hidden_state" if last else None,
                    )

    with b.scope("pooler"):
        first = b.op("Gather", [x, b.int_scalar(0)], axis=1)
        pooled = gemm(b, first, hidden, hidden, name="dense")
        with b.scope("activation"):
            b.op("Tanh", [pooled], out="pooler_output")
    b.output("last_hidden_state", b.ftype, [batch, seq, hidden])
    b.output("pooler_output", b.ftype, [batch, hidden])
    return b.finish(
        "bert_base",
        "BERT encoder with pooler (Hugging Face BertModel).",
    )


# ---------------------------------------------------------------------------- GPT-2
def _conv1d(b: GraphBuilder, x: str, fin: int, fout: int, *, name: str) -> str:
    """HF ``Conv1D``: addmm(bias, x.view(-1, fin), W[fin, fout]).view(*x.shape[:-1], fout)."""
    with b.scope(name):
        n, s = b.dim(x, 0), b.dim(x, 1)
        flat = b.op("Reshape", [x, b.ints([-1, fin])])
        w = b.param("weight", [fin, fout], normal(1.0 / math.sqrt(fin)))
        bias = b.param("bias", [fout], normal(0.02))
        y = b.op("Gemm", [flat, w, bias], alpha=1.0, beta=1.0)
        return b.reshape(y, [n, s, fout])


def _gpt2_attention(
    b: GraphBuilder,
    x: str,
    causal: str,
    hidden: int,
    heads: int,
    cache: tuple[str, str, str, str] | None = None,
) -> str:
    """``GPT2Attention``: the causal mask sliced from the bias buffer.

    ``cache``: (past key, past value, present key, present value) tensor names: the new keys
    and values are concatenated after the past ones on the sequence axis, as HF's
    ``layer_past`` does, and the results are the graph's ``present`` outputs.
    """
    head_dim = hidden // heads
    with b.scope("attn"):
        qkv = _conv1d(b, x, hidden, 3 * hidden, name="c_attn")
        n, s = b.dim(qkv, 0), b.dim(qkv, 1)
        q, k, v = (
            b.op("Transpose", [b.reshape(t, [n, s, heads, head_dim])], perm=[0, 2, 1, 3])
            for t in b.split(qkv, [hidden] * 3, axis=2)
        )
        if cache is not None:
            past_k, past_v, present_k, present_v = cache
            k = b.op("Concat", [past_k, k], axis=-2, out=present_k)
            v = b.op("Concat", [past_v, v], axis=-2, out=present_v)
        scores = b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])])
        scores = b.op("Div", [scores, b.scalar(math.sqrt(head_dim))])
        # causal_mask = self.bias[:, :, key_length - query_length : key_length, :key_length]
        query_length, key_length = b.dim(q, -2), b.dim(k, -2)
        mask = b.full_slice(b.full_slice(causal, 0), 1)
        mask = b.slice(mask, b.op("Sub", [key_length, query_length]), key_length, 2)
        mask = b.slice(mask, 0, key_length, 3)
        scores = b.op("Where", [mask, scores, b.scalar(b.float_min)])
        ctx = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), v])
        ctx = b.op("Transpose", [ctx], perm=[0, 2, 1, 3])
        ctx = b.reshape(ctx, [b.dim(ctx, 0), b.dim(ctx, 1), hidden])
        return _conv1d(b, ctx, hidden, hidden, name="c_proj")


def gpt2(
    *,
    batch: Dim = "batch",
    seq: Dim = "seq",
    layers: int = 12,
    hidden: int = 768,
    heads: int = 12,
    vocab: int = 50257,
    max_positions: int = 1024,
    kv_cache: bool = False,
    opts: Options | None = None,
) -> onnx.ModelProto:
    """``GPT2LMHeadModel`` (gpt2 small shape): the LM head is tied to the token embedding.

    ``kv_cache``: the decoder as optimum exports it with past key values: inputs
    ``past_key_values.{i}.key`` / ``.value`` [batch, heads, past_seq, head_dim], outputs
    ``present.{i}.key`` / ``.value`` [batch, heads, past_seq + seq, head_dim]; positions start
    at past_seq, and attention runs over the past_seq + seq keys.
    """
    check_dim("seq", seq, max_positions)
    check_heads(hidden, heads)
    b = GraphBuilder(opts or Options())
    input_ids = b.input("input_ids", TensorProto.INT64, [batch, seq])
    head_dim = hidden // heads
    caches: list[tuple[str, str, str, str]] = []
    if kv_cache:
        for i in range(layers):
            past = [
                b.input(f"past_key_values.{i}.{kv}", b.ftype, [batch, heads, "past_seq", head_dim])
                for kv in ("key", "value")
            ]
            caches.append((past[0], past[1], f"present.{i}.key", f"present.{i}.value"))

    # One bool buffer stands for every layer's identical `attn.bias` (torch dedups constants).
    causal = b.buffer(
        "transformer.h.0.attn.bias",
        lambda: np.tril(np.ones((max_positions, max_positions), dtype=np.bool_))[None, None],
        [1, 1, max_positions, max_positions],
        TensorProto.BOOL,
    )
    with b.scope("transformer"):
        with b.scope("wte"):
            wte = b.param("weight", [vocab, hidden], normal(0.02))
            x = b.op("Gather", [wte, input_ids])
        if kv_cache:
            # past_length = past_key_values[0][0].size(-2); arange(past_length, past_length + seq)
            past_length = b.dim(caches[0][0], -2)
            end = b.op("Add", [past_length, b.dim(input_ids, 1)])
            positions = b.op("Range", [past_length, end, b.int_scalar(1)])
            position_ids = b.unsqueeze(positions, [0])
        else:
            position_ids = b.unsqueeze(b.arange(b.dim(input_ids, 1)), [0])
        with b.scope("wpe"):
            pos = b.op(
                "Gather", [b.param("weight", [max_positions, hidden], normal(0.01)), position_ids]
            )
        x = b.op("Add", [x, pos])
        for i in range(layers):
            with b.scope(f"h.{i}"):
                y = _gpt2_attention(
                    b,
                    layer_norm(b, x, hidden, name="ln_1"),
                    causal,
                    hidden,
                    heads,
                    caches[i] if kv_cache else None,
                )
                x = b.op("Add", [y, x])
                y = layer_norm(b, x, hidden, name="ln_2")
                with b.scope("mlp"):
                    y = _conv1d(b, y, hidden, 4 * hidden, name="c_fc")
                    with b.scope("act"):
                        y = gelu_tanh(b, y)
                    y = _conv1d(b, y, 4 * hidden, hidden, name="c_proj")
                x = b.op("Add", [x, y])
        x = layer_norm(b, x, hidden, name="ln_f")
    with b.scope("lm_head"):
        # Tied: the same initializer feeds the embedding Gather and, transposed, the head.
        b.op("MatMul", [x, b.op("Transpose", [wte], perm=[1, 0])], out="logits")
    b.output("logits", b.ftype, [batch, seq, vocab])
    for _pk, _pv, present_k, present_v in caches:
        for name in (present_k, present_v):
            b.output(name, b.ftype, [batch, heads, "past_seq + seq", head_dim])
    return b.finish(
        "gpt2",
        "GPT-2 language model (Hugging Face GPT2LMHeadModel), tied LM head.",
    )
