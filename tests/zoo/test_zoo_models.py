"""The zoo models against published parameter counts and MACs, and run in onnxruntime.

Published figures: torchvision 0.29 weights metadata (``num_params``, ``_ops`` =
GMACs of convolutions and matrix products), Hugging Face model cards for BERT-base
(110M) and GPT-2 (124M), the LLaMA paper for 7B. Exact counts are derived by hand
in the comments; nothing is copied from the tool's own output.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
import pytest
from onnx import TensorProto

import onnxcost
from onnxcost import zoo

FLOAT_TYPES = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16}
BUFFER_SUFFIXES = (".running_mean", ".running_var", ".cos_cached", ".sin_cached")

LLAMA3_8B = {"kv_heads": 8, "intermediate": 14336, "vocab": 128256, "rope_theta": 500000}


def learned_params(model: onnx.ModelProto) -> int:
    """Elements of float initializers, less buffers (BatchNorm statistics, rotary tables)."""
    return sum(
        math.prod(t.dims)
        for t in model.graph.initializer
        if t.data_type in FLOAT_TYPES and not t.name.endswith(BUFFER_SUFFIXES)
    )


def bn_statistics(model: onnx.ModelProto) -> int:
    """Elements of BatchNorm running means and variances."""
    return sum(
        math.prod(t.dims)
        for t in model.graph.initializer
        if t.name.endswith((".running_mean", ".running_var"))
    )


# --------------------------------------------------------------------------- parameters
# Hand arithmetic (weights + biases; BatchNorm weight and bias count, running stats do not):
#
# mlp: 784*128+128 = 100,480; 128*32+32 = 4,128; 32*10+10 = 330 -> 104,938.
#
# resnet20_cifar (option A, He et al. 2016: "0.27M"): conv1 3*16*9 = 432, bn 32;
#   layer1: 3 blocks x (2 * 16*16*9 + 2*32) = 3 x 4,672 = 14,016;
#   layer2: 16*32*9 + 32*32*9 + 128 = 13,952, then 2 x (2 * 9,216 + 128) = 37,120 -> 51,072;
#   layer3: 32*64*9 + 64*64*9 + 256 = 55,552, then 2 x (2 * 36,864 + 256) = 147,968 -> 203,520;
#   fc 64*10+10 = 650.  Total 432+32+14,016+51,072+203,520+650 = 269,722.
#
# resnet18 (torchvision 11,689,512): conv1 3*64*7*7 = 9,408, bn1 128;
#   layer1: 2 x (2 * 64*64*9 + 2*128) = 147,968;
#   layer2: 64*128*9 + 128*128*9 + 512 + (64*128 + 256) = 230,144; 2 * 147,456 + 512 = 295,424
#           -> 525,568;
#   layer3: 128*256*9 + 256*256*9 + 1,024 + (128*256 + 512) = 919,040; 2 * 589,824 + 1,024
#           = 1,180,672 -> 2,099,712;
#   layer4: 256*512*9 + 512*512*9 + 2,048 + (256*512 + 1,024) = 3,673,088; 2 * 2,359,296
#           + 2,048 = 4,720,640 -> 8,393,728;
#   fc 512*1000+1000 = 513,000.  Total 11,689,512.
#
# resnet50 (torchvision 25,557,032). Bottleneck(cin, w): cin*w + 9w^2 + 4w^2 + BN (2w+2w+8w),
#   plus downsample cin*4w + 8w on the first block:
#   stem 9,408 + 128 = 9,536;
#   layer1 w=64: 75,008 + 2 x 70,400 = 215,808;
#   layer2 w=128: 379,392 + 3 x 280,064 = 1,219,584;
#   layer3 w=256: 1,512,448 + 5 x 1,117,184 = 7,098,368;
#   layer4 w=512: 6,039,552 + 2 x 4,462,592 = 14,964,736;
#   fc 2048*1000+1000 = 2,049,000.  Total 25,557,032.
#
# mobilenet_v2 (torchvision 3,504,872). features.0: 3*32*9 + 64 = 928; features.1 (t=1):
#   32*9 + 64 + 32*16 + 32 = 896; a t=6 block with h = 6*cin: cin*h + 9h + h*cout + 4h + 2cout:
#   16->24: 5,136; 24->24: 8,832; 24->32: 10,000; 32->32: 2 x 14,848; 32->64: 21,056;
#   64->64: 3 x 54,272; 64->96: 66,624; 96->96: 2 x 118,272; 96->160: 155,264;
#   160->160: 2 x 320,000; 160->320: 473,920; features.18: 320*1280 + 2,560 = 412,160;
#   classifier 1280*1000+1000 = 1,281,000.  Total 3,504,872.
#
# vit_b_16 (torchvision 86,567,656): conv_proj 768*3*16*16+768 = 590,592; class token 768;
#   pos_embedding 197*768 = 151,296; per layer: ln 2 x 1,536, in_proj 768*2304+2304 =
#   1,771,776, out_proj 590,592, mlp 768*3072+3072 + 3072*768+768 = 4,722,432 -> 7,087,872,
#   x 12 = 85,054,464; final ln 1,536; head 768*1000+1000 = 769,000.  Total 86,567,656.
#
# bert_base (HF bert-base-uncased, "110M"): embeddings 30522*768 + 512*768 + 2*768 + 1,536
#   = 23,837,184; per layer: 4 x (768*768+768) = 2,362,368, 768*3072+3072 = 2,362,368,
#   3072*768+768 = 2,360,064, 2 LayerNorms 3,072 -> 7,087,872, x 12 = 85,054,464;
#   pooler 768*768+768 = 590,592.  Total 109,482,240.
#
# gpt2 (HF gpt2, "124M"): wte 50257*768 = 38,597,376 (shared with the LM head), wpe
#   1024*768 = 786,432; per layer 7,087,872 as for BERT, x 12 = 85,054,464; ln_f 1,536.
#   Total 124,439,808.
#
# llama 7B (LLaMA-7B, HF count 6,738,415,616): embed 32000*4096 = 131,072,000; per layer
#   4 x 4096^2 = 67,108,864, 3 x 4096*11008 = 135,266,304, 2 norms 8,192 -> 202,383,360,
#   x 32 = 6,476,267,520; norm 4,096; lm_head 131,072,000.  Total 6,738,415,616.
#
# llama 8B shape (LLaMA-3-8B, 8,030,261,248): embed 128256*4096 = 525,336,576; per layer
#   2 x 4096^2 + 2 x 4096*1024 = 41,943,040, 3 x 4096*14336 = 176,160,768, norms 8,192
#   -> 218,112,000, x 32 = 6,979,584,000; norm 4,096; lm_head 525,336,576.
#   Total 8,030,261,248.
PARAMS: list[tuple[str, dict[str, int | str], int]] = [
    ("mlp", {}, 104_938),
    ("resnet20_cifar", {}, 269_722),
    ("resnet18", {}, 11_689_512),
    ("resnet50", {}, 25_557_032),
    ("mobilenet_v2", {}, 3_504_872),
    ("vit_b_16", {}, 86_567_656),
    ("bert_base", {}, 109_482_240),
    ("gpt2", {}, 124_439_808),
    ("llama", {}, 6_738_415_616),
    ("llama", LLAMA3_8B, 8_030_261_248),
]


@pytest.mark.parametrize(("name", "params", "expected"), PARAMS)
def test_parameter_count(name: str, params: dict[str, int | str], expected: int) -> None:
    model = zoo.build(name, weights=False, params=params)
    assert learned_params(model) == expected


# BatchNorm channels x 2 (mean and variance):
#   resnet18: 64 + layer1 4*64 + layer2 5*128 + layer3 5*256 + layer4 5*512 = 4,800 -> 9,600.
#   resnet20_cifar: 16 + 6*16 + 6*32 + 6*64 = 688 -> 1,376.
@pytest.mark.parametrize(("name", "expected"), [("resnet18", 9_600), ("resnet20_cifar", 1_376)])
def test_batchnorm_statistics_kept_apart(name: str, expected: int) -> None:
    model = zoo.build(name, weights=False)
    assert bn_statistics(model) == expected


# --------------------------------------------------------------------------- through the analyzer
needs_analyzer = pytest.mark.skipif(
    not hasattr(onnxcost, "analyze"), reason="onnxcost.analyze is not written yet"
)


def _analyze(
    name: str, params: dict[str, int | str], tmp_path: Path, seq: int | None = None
) -> onnxcost.Analysis:
    path = zoo.save(name, tmp_path / f"{name}.onnx", weights=False, params=params)
    dims = {"batch": 1} if seq is None else {"batch": 1, "seq": seq}
    return onnxcost.analyze(path, dims=dims)


# MACs: convolutions, Gemm and MatMul (attention products included), batch 1.
#   mlp: 784*128 + 128*32 + 32*10 = 100,352 + 4,096 + 320 = 104,768.
#   resnet20_cifar: conv1 32*32*16*27 = 442,368; layer1 6 x 1024*16*144 = 14,155,776;
#     layer2 256*32*144 + 5 x 256*32*288 = 1,179,648 + 11,796,480 = 12,976,128;
#     layer3 64*64*288 + 5 x 64*64*576 = 12,976,128; fc 640.  Total 40,551,040.
#   vit_b_16 (torchvision 17.564): conv_proj 196*768*768 = 115,605,504; per layer:
#     qkv 197*768*2304 = 348,585,984, scores and context 2 x 12*197*197*64 = 59,610,624,
#     out_proj 197*768*768 = 116,195,328, mlp 2 x 197*768*3072 = 929,562,624
#     -> 1,453,954,560, x 12 = 17,447,454,720; head 768,000.  Total 17,563,828,224.
#   bert_base, seq 128: per layer 4 x 128*768*768 = 301,989,888, attention
#     2 x 12*128*128*64 = 25,165,824, ffn 2 x 128*768*3072 = 603,979,776 -> 931,135,488,
#     x 12 = 11,173,625,856; pooler 768*768 = 589,824.  Total 11,174,215,680.
#   gpt2, seq 128: the same 931,135,488 per layer x 12 = 11,173,625,856; tied head
#     128*768*50257 = 4,940,464,128.  Total 16,114,089,984.
#   llama 7B, seq 128: per layer 4 x 128*4096*4096 = 8,589,934,592, attention
#     2 x 32*128*128*128 = 134,217,728, mlp 3 x 128*4096*11008 = 17,314,086,912
#     -> 26,038,239,232, x 32 = 833,223,655,424; lm_head 128*4096*32000 = 16,777,216,000.
#     Total 850,000,871,424.
EXACT_MACS: list[tuple[str, int | None, int]] = [
    ("mlp", None, 104_768),
    ("resnet20_cifar", None, 40_551_040),
    ("vit_b_16", None, 17_563_828_224),
    ("bert_base", 128, 11_174_215_680),
    ("gpt2", 128, 16_114_089_984),
    ("llama", 128, 850_000_871_424),
]


@needs_analyzer
@pytest.mark.parametrize(("name", "seq", "expected"), EXACT_MACS)
def test_macs_by_hand_through_analyzer(
    name: str, seq: int | None, expected: int, tmp_path: Path
) -> None:
    assert _analyze(name, {}, tmp_path, seq).totals.macs == expected


# torchvision `_ops` (GMACs at 224x224), to the three decimals published.
@needs_analyzer
@pytest.mark.parametrize(
    ("name", "gmacs"),
    [("resnet18", 1.814), ("resnet50", 4.089), ("mobilenet_v2", 0.301), ("vit_b_16", 17.564)],
)
def test_gmacs_match_torchvision(name: str, gmacs: float, tmp_path: Path) -> None:
    macs = _analyze(name, {}, tmp_path).totals.macs
    assert round(macs / 1e9, 3) == gmacs


@needs_analyzer
@pytest.mark.parametrize(("name", "params", "expected"), PARAMS)
def test_params_through_analyzer(
    name: str, params: dict[str, int | str], expected: int, tmp_path: Path
) -> None:
    totals = _analyze(
        name, params, tmp_path, 16 if "seq" in zoo.MODELS[name].params else None
    ).totals
    # (the llama shape's cos/sin tables, 2 x max_positions 2048 x head_dim 128 = 524,288
    # floats, are torch buffers, and the built-in names them so: no params)
    assert totals.params == expected


@needs_analyzer
def test_batchnorm_statistics_through_analyzer(tmp_path: Path) -> None:
    assert _analyze("resnet18", {}, tmp_path).totals.stat_params == 9_600


# --------------------------------------------------------------------------- structure
def _producer(model: onnx.ModelProto) -> dict[str, onnx.NodeProto]:
    return {o: n for n in model.graph.node for o in n.output}


def _dims(vi: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]


@pytest.mark.parametrize("name", zoo.names())
def test_symbolic_batch_and_seq(name: str) -> None:
    model = zoo.build(name, weights=False)
    for vi in model.graph.input:
        dims = _dims(vi)
        assert dims[0] == "batch"
        if vi.type.tensor_type.elem_type == TensorProto.INT64:
            assert dims == ["batch", "seq"]
    assert _dims(model.graph.output[0])[0] == "batch"


@pytest.mark.parametrize(
    ("name", "node", "initializer"),
    [
        ("resnet18", "/layer1/layer1.0/conv1/Conv", "layer1.0.conv1.weight"),
        (
            "resnet50",
            "/layer2/layer2.0/downsample/downsample.0/Conv",
            "layer2.0.downsample.1.running_var",
        ),
        (
            "mobilenet_v2",
            "/features/features.2/conv/conv.1/conv.1.0/Conv",
            "features.2.conv.1.0.weight",
        ),
        (
            "vit_b_16",
            "/encoder/layers/encoder_layer_0/ln_1/LayerNormalization",
            "encoder.layers.encoder_layer_11.mlp.3.bias",
        ),
        (
            "bert_base",
            "/encoder/layer.0/attention/self/query/MatMul",
            "encoder.layer.11.output.LayerNorm.weight",
        ),
        ("gpt2", "/transformer/h.0/attn/c_attn/Gemm", "transformer.h.11.mlp.c_proj.weight"),
        (
            "llama",
            "/model/layers.0/self_attn/q_proj/MatMul",
            "model.layers.31.mlp.down_proj.weight",
        ),
    ],
)
def test_torch_style_names(name: str, node: str, initializer: str) -> None:
    model = zoo.build(name, weights=False)
    names = [n.name for n in model.graph.node]
    assert node in names
    assert len(set(names)) == len(names)
    assert initializer in {t.name for t in model.graph.initializer}


def test_resnet20_uses_option_a_shortcuts() -> None:
    model = zoo.build("resnet20_cifar", weights=False)
    ops = [n.op_type for n in model.graph.node]
    # 1 stem conv + 9 blocks x 2 convs; the two shape-changing shortcuts are Slice + Pad.
    assert ops.count("Conv") == 19
    assert ops.count("Pad") == 2


def test_batchnorm_kept_as_nodes() -> None:
    ops = [n.op_type for n in zoo.build("resnet18", weights=False).graph.node]
    # bn1 + 8 blocks x 2 + 3 downsample BNs = 20.
    assert ops.count("BatchNormalization") == 20


def test_gpt2_head_is_tied_to_token_embedding() -> None:
    model = zoo.build("gpt2", weights=False)
    users = [n for n in model.graph.node if "transformer.wte.weight" in n.input]
    assert sorted(n.op_type for n in users) == ["Gather", "Transpose"]
    transpose = next(n for n in users if n.op_type == "Transpose")
    head = next(n for n in model.graph.node if transpose.output[0] in n.input)
    assert (head.op_type, head.output[0]) == ("MatMul", "logits")
    vocab_sized = [t for t in model.graph.initializer if 50257 in t.dims]
    assert len(vocab_sized) == 1


def test_gpt2_causal_mask_is_a_sliced_bool_buffer() -> None:
    model = zoo.build("gpt2", weights=False)
    buffers = {t.name: t for t in model.graph.initializer}
    bias = buffers["transformer.h.0.attn.bias"]
    assert (bias.data_type, list(bias.dims)) == (TensorProto.BOOL, [1, 1, 1024, 1024])
    producer = _producer(model)
    where = [n for n in model.graph.node if n.op_type == "Where"]
    assert len(where) == 12
    # Where(mask, scores, min): mask <- Slice(axis 3) <- Slice(axis 2) <- Slice <- Slice <- bias;
    # the ends of the last slice come from Shape -> Gather -> Unsqueeze.
    sliced = producer[where[0].input[0]]
    assert sliced.op_type == "Slice"
    chain = [producer[sliced.input[2]]]
    while chain[-1].op_type != "Shape":
        chain.append(producer[chain[-1].input[0]])
    assert [n.op_type for n in chain] == ["Unsqueeze", "Gather", "Shape"]
    node = sliced
    while node.input[0] != bias.name:
        node = producer[node.input[0]]
        assert node.op_type == "Slice"


def test_llama_graph_size_and_gqa() -> None:
    model = zoo.build("llama", weights=False, params=LLAMA3_8B)
    # About 300 nodes per layer, as torch's exporter writes them; the analyzer benchmark
    # wants about 10,000 for this shape.
    assert 9_000 <= len(model.graph.node) <= 11_000
    shapes = {t.name: list(t.dims) for t in model.graph.initializer}
    assert shapes["model.layers.0.self_attn.k_proj.weight"] == [4096, 8 * 128]
    assert shapes["model.layers.0.self_attn.q_proj.weight"] == [4096, 4096]
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("Expand") == 2 * 32  # repeat_kv for K and V in every layer
    for op in ("Pow", "ReduceMean", "Sqrt", "Neg", "Sigmoid"):
        assert ops.count(op) >= 32


def test_weights_are_seeded_and_sensible() -> None:
    a = zoo.build("resnet20_cifar", seed=1)
    b = zoo.build("resnet20_cifar", seed=1)
    c = zoo.build("resnet20_cifar", seed=2)
    assert a.SerializeToString() == b.SerializeToString()
    assert a.graph.initializer[0].raw_data != c.graph.initializer[0].raw_data
    for t in a.graph.initializer:
        values = onnx.numpy_helper.to_array(t)
        if t.name.endswith(".bias"):
            assert np.all(values != 0), t.name
        if t.name.endswith(".running_var"):
            assert np.all(values > 0), t.name


# --------------------------------------------------------------------------- onnxruntime
SMALL: dict[str, dict[str, int | str]] = {
    "mlp": {},
    "resnet20_cifar": {},
    "resnet18": {"image_size": 64},
    "resnet50": {"image_size": 64},
    "mobilenet_v2": {"image_size": 64},
    "vit_b_16": {"image_size": 32, "layers": 2, "hidden": 64, "heads": 4, "mlp_dim": 128},
    "bert_base": {
        "layers": 2,
        "hidden": 64,
        "heads": 4,
        "intermediate": 128,
        "vocab": 100,
        "max_positions": 32,
    },
    "gpt2": {"layers": 2, "hidden": 64, "heads": 4, "vocab": 100, "max_positions": 32},
    "llama": {
        "layers": 2,
        "hidden": 64,
        "heads": 4,
        "kv_heads": 2,
        "intermediate": 128,
        "vocab": 100,
        "max_positions": 32,
    },
}
BATCH, SEQ, VOCAB = 2, 8, 100


def _feeds(model: onnx.ModelProto, rng: np.random.Generator) -> dict[str, npt.NDArray[Any]]:
    feeds: dict[str, npt.NDArray[Any]] = {}
    for vi in model.graph.input:
        shape = [BATCH if d == "batch" else SEQ if d == "seq" else int(d) for d in _dims(vi)]
        elem = vi.type.tensor_type.elem_type
        if elem == TensorProto.INT64:
            high = {"input_ids": VOCAB, "token_type_ids": 2, "attention_mask": 1}[vi.name]
            feeds[vi.name] = (
                np.ones(shape, np.int64)
                if high == 1
                else rng.integers(0, high, shape, dtype=np.int64)
            )
        else:
            dtype = np.float16 if elem == TensorProto.FLOAT16 else np.float32
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def _run(model: onnx.ModelProto, feeds: dict[str, npt.NDArray[Any]]) -> list[npt.NDArray[Any]]:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return list(session.run(None, feeds))


def _expected_shapes(name: str, params: dict[str, int | str]) -> list[tuple[int, ...]]:
    defaults = {**zoo.MODELS[name].params, **params}
    if name == "bert_base":
        return [(BATCH, SEQ, int(defaults["hidden"])), (BATCH, int(defaults["hidden"]))]
    if name in ("gpt2", "llama"):
        return [(BATCH, SEQ, int(defaults["vocab"]))]
    return [(BATCH, int(defaults["num_classes"]))]


@pytest.mark.ort
@pytest.mark.parametrize("name", list(SMALL))
def test_small_variant_runs(name: str) -> None:
    model = zoo.build(name, params=SMALL[name])
    onnx.checker.check_model(model, full_check=True)
    outputs = _run(model, _feeds(model, np.random.default_rng(0)))
    assert [o.shape for o in outputs] == _expected_shapes(name, SMALL[name])
    assert all(np.isfinite(o).all() for o in outputs)


@pytest.mark.ort
@pytest.mark.parametrize("name", ["mlp", "bert_base", "llama"])
def test_fp16_runs(name: str) -> None:
    model = zoo.build(name, dtype="fp16", params=SMALL[name])
    assert all(
        t.data_type == TensorProto.FLOAT16
        for t in model.graph.initializer
        if t.data_type in FLOAT_TYPES
    )
    outputs = _run(model, _feeds(model, np.random.default_rng(0)))
    assert outputs[0].dtype == np.float16
    assert np.isfinite(outputs[0]).all()


@pytest.mark.ort
@pytest.mark.parametrize(
    ("name", "opset"), [("bert_base", 13), ("vit_b_16", 16), ("llama", 18), ("gpt2", 23)]
)
def test_other_opsets_compute_the_same(name: str, opset: int) -> None:
    """Below 17 LayerNormalization is decomposed; from 18 ReduceMean takes axes as an input."""
    feeds = _feeds(zoo.build(name, params=SMALL[name], weights=False), np.random.default_rng(0))
    reference = _run(zoo.build(name, params=SMALL[name]), feeds)
    other = zoo.build(name, params=SMALL[name], opset=opset)
    assert other.opset_import[0].version == opset
    for got, want in zip(_run(other, feeds), reference, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.ort
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_decoders_are_causal(name: str) -> None:
    model = zoo.build(name, params=SMALL[name])
    feeds = _feeds(model, np.random.default_rng(0))
    changed = {k: v.copy() for k, v in feeds.items()}
    changed["input_ids"][:, -1] = (changed["input_ids"][:, -1] + 1) % VOCAB
    before, after = _run(model, feeds)[0], _run(model, changed)[0]
    np.testing.assert_allclose(before[:, :-1], after[:, :-1], rtol=1e-5, atol=1e-5)
    assert not np.allclose(before[:, -1], after[:, -1])


@pytest.mark.ort
def test_bert_ignores_masked_tokens() -> None:
    model = zoo.build("bert_base", params=SMALL["bert_base"])
    feeds = _feeds(model, np.random.default_rng(0))
    feeds["attention_mask"][:, -1] = 0
    changed = {k: v.copy() for k, v in feeds.items()}
    changed["input_ids"][:, -1] = (changed["input_ids"][:, -1] + 1) % VOCAB
    before, after = _run(model, feeds)[0], _run(model, changed)[0]
    np.testing.assert_allclose(before[:, :-1], after[:, :-1], rtol=1e-5, atol=1e-5)


@pytest.mark.ort
def test_gqa_matches_repeated_heads() -> None:
    """kv_heads=2 of 4 equals full attention whose K/V projections repeat each KV head twice."""
    params = SMALL["llama"]
    gqa = zoo.build("llama", params=params)
    full = zoo.build("llama", params={**params, "kv_heads": 4})
    weights = {t.name: t for t in gqa.graph.initializer}
    head_dim = 64 // 4
    for t in full.graph.initializer:
        source = onnx.numpy_helper.to_array(weights[t.name])
        if t.name.endswith(("k_proj.weight", "v_proj.weight")):
            # [hidden, kv*d] -> [hidden, kv, 1, d] -> repeat -> [hidden, kv*2*d]
            source = np.repeat(source.reshape(64, 2, 1, head_dim), 2, axis=2).reshape(
                64, 4 * head_dim
            )
        t.CopyFrom(onnx.numpy_helper.from_array(source, t.name))
    feeds = _feeds(gqa, np.random.default_rng(0))
    np.testing.assert_allclose(_run(gqa, feeds)[0], _run(full, feeds)[0], rtol=1e-4, atol=1e-4)


FULL_SIZE = ["resnet18", "resnet50", "mobilenet_v2", "vit_b_16", "bert_base", "gpt2"]


@pytest.mark.ort
@pytest.mark.slow
@pytest.mark.parametrize("name", FULL_SIZE)
def test_full_size_runs(name: str) -> None:
    model = zoo.build(name)
    outputs = _run(model, _feeds(model, np.random.default_rng(0)))
    defaults = zoo.MODELS[name].params
    if name == "bert_base":
        assert [o.shape for o in outputs] == [(BATCH, SEQ, 768), (BATCH, 768)]
    elif name == "gpt2":
        assert [o.shape for o in outputs] == [(BATCH, SEQ, int(defaults["vocab"]))]
    else:
        assert [o.shape for o in outputs] == [(BATCH, 1000)]
    assert all(np.isfinite(o).all() for o in outputs)
