"""Built-in decoders with a KV cache (``--param kv_cache=true``), in optimum's naming.

Published shapes: Llama-3-8B (32 layers, 8 KV heads of 128) and GPT-2 small (12 layers,
12 heads of 64); the KV cache per token is layers x 2 (K and V) x kv_heads x head_dim x
bytes per element, derived in each test from the config.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from typer.testing import CliRunner

import onnxcost
from onnxcost import zoo
from onnxcost.cli.app import app
from onnxcost.errors import UsageError

LLAMA3_8B = {
    "layers": 32,
    "hidden": 4096,
    "heads": 32,
    "kv_heads": 8,
    "intermediate": 14336,
    "vocab": 128256,
    "rope_theta": 500000,
}
TINY_GPT2 = {"layers": 2, "hidden": 32, "heads": 4, "vocab": 64, "max_positions": 32}
TINY_LLAMA = {
    "layers": 2,
    "hidden": 32,
    "heads": 4,
    "kv_heads": 2,
    "intermediate": 48,
    "vocab": 64,
    "max_positions": 32,
}


def cache_bytes_per_token(a: onnxcost.Analysis) -> int:
    """Bytes of every past_key_values input for one position, from an analysis at
    batch=1, past_seq=1 (each input [1, kv_heads, 1, head_dim])."""
    sizes = {"float32": 4, "float16": 2}
    return sum(
        math.prod(int(d) for d in t.shape or ()) * sizes[t.dtype]
        for t in a.inputs
        if t.name.startswith("past_key_values.")
    )


def test_gpt2_names_follow_optimum(tmp_path: Path) -> None:
    path = zoo.save("gpt2", tmp_path / "g.onnx", weights=False, params={"kv_cache": "true"})
    m = onnx.load(str(path), load_external_data=False)
    names = [i.name for i in m.graph.input]
    assert names[:3] == ["input_ids", "past_key_values.0.key", "past_key_values.0.value"]
    assert len(names) == 1 + 2 * 12
    outs = [o.name for o in m.graph.output]
    assert outs[:3] == ["logits", "present.0.key", "present.0.value"]
    assert outs[-1] == "present.11.value"
    dims = [d.dim_param or d.dim_value for d in m.graph.input[1].type.tensor_type.shape.dim]
    assert dims == ["batch", 12, "past_seq", 64]


def test_gpt2_small_cache_is_73728_bytes_per_token() -> None:
    model = zoo.build("gpt2", weights=False, params={"kv_cache": True})
    a = onnxcost.analyze(_virtual(model), dims={"batch": 1, "seq": 1, "past_seq": 1})
    # 12 layers x 2 (K, V) x 12 heads x 64 x 4 bytes (fp32) = 12 x 2 x 768 x 4 = 73,728
    assert cache_bytes_per_token(a) == 12 * 2 * 768 * 4 == 73_728


def test_llama3_8b_cache_is_131072_bytes_per_token() -> None:
    model = zoo.build("llama", dtype="fp16", weights=False, params={**LLAMA3_8B, "kv_cache": True})
    a = onnxcost.analyze(_virtual(model), dims={"batch": 1, "seq": 1, "past_seq": 1})
    # 32 layers x 2 (K, V) x 8 KV heads x 128 (4096 / 32 heads) x 2 bytes (fp16) = 131,072
    assert cache_bytes_per_token(a) == 32 * 2 * 8 * 128 * 2 == 131_072
    present = [t for t in a.outputs if t.name.startswith("present.")]
    assert len(present) == 64
    assert present[0].shape == (1, 8, 2, 128)  # past 1 + 1 new token


def _virtual(model: onnx.ModelProto) -> onnx.ModelProto:
    """A zoo model built without weights, its external data marked as nowhere (never read)."""
    from onnxcost.load.model import VIRTUAL_LOCATION_PREFIX

    for t in model.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = VIRTUAL_LOCATION_PREFIX + e.value
    return model


def test_gpt2_decode_macs_by_hand(tmp_path: Path) -> None:
    path = zoo.save("gpt2", tmp_path / "g.onnx", weights=False, params={**TINY_GPT2, "kv_cache": 1})
    a = onnxcost.analyze(path, symbolic=True)
    assert a.symbols == ("batch", "seq", "past_seq")
    # Per new token, width d = 32, vocab 64: per layer 32*96 + 32*32 + 2*32*128 = 12,288,
    # two layers 24,576, LM head 32*64 = 2,048: a = 26,624. Attention per key: QK^T and AV,
    # d each, two layers: c = 2 * 2 * 32 = 128, over past_seq + seq keys:
    # MACs = a*b*s + c*b*s*(s + P).
    f = a.formulas["macs"]
    assert f is not None
    assert dict(f.terms) == {(1, 1, 0): 26_624, (1, 2, 0): 128, (1, 1, 1): 128}
    # One decode step (s = 1) at past P: a*b + c*b*(P + 1); at b=2, P=9: 53,248 + 2,560
    assert f(batch=2, seq=1, past_seq=9) == 26_624 * 2 + 128 * 2 * 10 == 55_808
    assert a.symbolic is not None
    assert a.symbolic.zero_allowed["past_seq"]


def test_llama_kv_analyses_at_empty_cache(tmp_path: Path) -> None:
    path = zoo.save(
        "llama", tmp_path / "l.onnx", weights=False, params={**TINY_LLAMA, "kv_cache": "yes"}
    )
    a = onnxcost.analyze(path, dims={"batch": 1, "seq": 4, "past_seq": 0})
    assert not [n.name for n in a.nodes if n.status not in ("ok", "zero")]
    # present = [1, 2 KV heads, 0 + 4, 8]
    assert next(t for t in a.outputs if t.name == "present.1.value").shape == (1, 2, 4, 8)


def test_kv_cache_param_takes_true_or_false(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="kv_cache='maybe': pass true or false"):
        zoo.build("gpt2", weights=False, params={"kv_cache": "maybe"})
    plain = zoo.build("gpt2", weights=False, params={"kv_cache": "false", "layers": 1})
    assert [i.name for i in plain.graph.input] == ["input_ids"]
    r = CliRunner().invoke(
        app,
        ["zoo", "save", "llama", str(tmp_path / "l.onnx"), "--no-weights"]
        + [f"--param={k}={v}" for k, v in {**TINY_LLAMA, "kv_cache": "true"}.items()],
    )
    assert r.exit_code == 0, r.output
    m = onnx.load(str(tmp_path / "l.onnx"), load_external_data=False)
    assert "past_key_values.1.value" in [i.name for i in m.graph.input]


def _run_decoder(ort: Any, model: onnx.ModelProto, tokens: np.ndarray) -> np.ndarray:
    """Prefill all but the last token with an empty cache, then decode the last one, feeding
    each present back as the past: the last token's logits."""
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    pasts = [i for i in sess.get_inputs() if i.name.startswith("past_key_values.")]
    feed: dict[str, np.ndarray] = {
        i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32) for i in pasts
    }
    out_names = [o.name for o in sess.get_outputs()]
    for chunk in (tokens[:, :-1], tokens[:, -1:]):
        outs = dict(zip(out_names, sess.run(None, {"input_ids": chunk, **feed}), strict=True))
        feed = {i.name: outs[i.name.replace("past_key_values.", "present.")] for i in pasts}
    return np.asarray(outs["logits"][:, -1])


@pytest.mark.ort
@pytest.mark.parametrize(("name", "params"), [("gpt2", TINY_GPT2), ("llama", TINY_LLAMA)])
def test_cached_decode_equals_the_full_forward_pass(name: str, params: dict[str, int]) -> None:
    ort = pytest.importorskip("onnxruntime")
    tokens = np.array([[3, 14, 15, 9, 26, 5]], dtype=np.int64)
    full = zoo.build(name, params=params, seed=7)
    cached = zoo.build(name, params={**params, "kv_cache": True}, seed=7)
    sess = ort.InferenceSession(full.SerializeToString(), providers=["CPUExecutionProvider"])
    feed = {"input_ids": tokens}
    if name == "llama":
        feed["attention_mask"] = np.ones_like(tokens)
    want = sess.run(["logits"], feed)[0][:, -1]
    got = _run_decoder(ort, cached, tokens)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
