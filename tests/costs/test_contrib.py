"""com.microsoft fused ops (and SimplifiedLayerNormalization, SwiGLU) by hand, and the
onnxruntime-optimized models of tests/data/optimized.

Activations count as elementwise.py does (Relu 1, Sigmoid 4, SiLU 5, Gelu 5, tanh-Gelu 8),
LayerNorm as normalization.py (standardize 5 per element + 3 per row, scale 1, bias 1),
RMS norm 4 per element + 3 per row.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import onnx
import pytest
from onnxcost_testing import analyze_text, only_node

import onnxcost
from onnxcost.analysis.records import NodeRecord
from onnxcost.costs import REGISTRY

MS = '["" : 17, "com.microsoft" : 1]'
OPTIMIZED = Path(__file__).resolve().parents[1] / "data" / "optimized"


def ms_node(text: str, op_type: str, **kwargs: Any) -> NodeRecord:
    """The record of the one ``op_type`` node (``kwargs``: ``analyze``'s).

    ONNX shape inference does not know com.microsoft ops, so a contrib op's output has no
    shape; the test models route it through an Identity instead of declaring it a graph output.
    """
    records: tuple[NodeRecord, ...] = analyze_text(text, **kwargs).nodes
    nodes = [n for n in records if n.op_type == op_type]
    assert len(nodes) == 1, [n.op_type for n in records]
    return nodes[0]


def one_op(node: str, inputs: str, inits: str = "", opsets: str = MS) -> str:
    """A model running ``node`` (which writes y) on ``inputs``, y routed through an Identity."""
    inits = f"<{inits}>" if inits else ""
    return f"""
<ir_version: 8, opset_import: {opsets}>
g ({inputs}) => (float[] out) {inits} {{
  {node}
  out = Identity (y)
}}"""


CONV_INITS = "float[4,3,3,3] w = {0.0}, float[4] b = {0.0, 0.0, 0.0, 0.0}"


@pytest.mark.parametrize(
    ("node", "flops"),
    [
        # 1x3x8x8 -> 1x4x8x8 (k3, p1): MACs = 256 x 27 = 6,912 -> 13,824; bias 256 + Relu 256
        ('y = com.microsoft.FusedConv <activation="Relu", pads=[1,1,1,1]> (x, w, b)', 14_336),
        # Sigmoid counts 4: 13,824 + 256 + 1,024 = 15,104
        ('y = com.microsoft.FusedConv <activation="Sigmoid", pads=[1,1,1,1]> (x, w, b)', 15_104),
        # Z (the fused residual sum) adds 256 more: 14,592
        ('y = com.microsoft.FusedConv <activation="Relu", pads=[1,1,1,1]> (x, w, b, z)', 14_592),
    ],
)
def test_fused_conv(node: str, flops: int) -> None:
    text = one_op(node, "float[1,3,8,8] x, float[1,4,8,8] z", CONV_INITS)
    n = ms_node(text, "FusedConv")
    assert (n.macs, n.flops, n.params, n.status) == (6_912, flops, 112, "ok")


def test_fused_conv_stride_computes_the_output() -> None:
    # 1x3x9x9, k3 s2 no pad -> 1x4x4x4: MACs = 64 x 27 = 1,728; + bias 64 + Relu 64
    node = 'y = com.microsoft.FusedConv <activation="Relu", strides=[2,2]> (x, w, b)'
    n = ms_node(one_op(node, "float[1,3,9,9] x", CONV_INITS), "FusedConv")
    assert (n.macs, n.flops) == (1_728, 3_456 + 128)


def test_nhwc_conv() -> None:
    # NHWC 1x8x8x3 -> 1x8x8x4 (k3, p1): MACs = 256 x 27 = 6,912; + bias 256
    node = "y = com.microsoft.NhwcConv <pads=[1,1,1,1]> (x, w, b)"
    n = ms_node(one_op(node, "float[1,8,8,3] x", CONV_INITS), "NhwcConv")
    assert (n.macs, n.flops) == (6_912, 14_080)


@pytest.mark.parametrize(
    ("a", "b", "attrs", "flops"),
    [
        # [2,4,8,16] . [2,4,16,8] -> [2,4,8,8] = 512 outputs x K 16 = 8,192 MACs
        ("2,4,8,16", "2,4,16,8", "", 16_384),
        # transB: B is [2,4,8,16]; alpha 0.125 scales 512 outputs
        ("2,4,8,16", "2,4,8,16", "transB=1, alpha=0.125", 16_896),
        # transA: A is [2,4,16,8]
        ("2,4,16,8", "2,4,16,8", "transA=1", 16_384),
        # transBatchA: A [8,2,4,16] is read as [2,4,8,16]
        ("8,2,4,16", "2,4,16,8", "transBatchA=1", 16_384),
        # transBatchB + transB: B [8,2,4,16] -> [2,4,8,16] -> [2,4,16,8]
        ("2,4,8,16", "8,2,4,16", "transBatchB=1, transB=1", 16_384),
    ],
)
def test_fused_matmul(a: str, b: str, attrs: str, flops: int) -> None:
    attrs = f"<{attrs}>" if attrs else ""
    n = ms_node(
        one_op(f"y = com.microsoft.FusedMatMul {attrs} (a, b)", f"float[{a}] a, float[{b}] b"),
        "FusedMatMul",
    )
    assert (n.macs, n.flops) == (8_192, flops)


def test_fused_matmul_broadcasts() -> None:
    # [4, 8, 16] . [16, 32] -> [4, 8, 32] = 1,024 outputs x 16 = 16,384 MACs
    n = ms_node(
        one_op("y = com.microsoft.FusedMatMul (a, b)", "float[4,8,16] a, float[16,32] b"),
        "FusedMatMul",
    )
    assert n.macs == 16_384


@pytest.mark.parametrize(
    ("activation", "flops"),
    [
        # A [4, 16] . B [16, 10] + C [10]: MACs 640 -> 1,280; C 40 + Relu 40 = 1,360
        ("Relu", 1_360),
        # LeakyRelu counts 2: 1,280 + 40 + 80 = 1,400
        ("LeakyRelu", 1_400),
    ],
)
def test_fused_gemm(activation: str, flops: int) -> None:
    node = f'y = com.microsoft.FusedGemm <activation="{activation}"> (a, w, c)'
    text = one_op(node, "float[4,16] a", "float[16,10] w = {0.0}, float[10] c = {0.0}")
    n = ms_node(text, "FusedGemm")
    assert (n.macs, n.flops, n.params) == (640, flops, 170)


def test_gemm_fast_gelu() -> None:
    # X [2, 8, 16] . W [16, 32] -> 512 outputs: MACs 8,192 -> 16,384; bias 512; tanh-Gelu 8 x 512
    text = one_op(
        "y = com.microsoft.GemmFastGelu (x, w, b)",
        "float[2,8,16] x",
        "float[16,32] w = {0.0}, float[32] b = {0.0}",
    )
    n = ms_node(text, "GemmFastGelu")
    assert (n.macs, n.flops) == (8_192, 16_384 + 512 + 4_096)


ACTS = "float[2,8,64] a, float[2,8,64] b, float[64] bias"


@pytest.mark.parametrize(
    ("node", "flops"),
    [
        # [2, 8, 64] = 1,024 elements
        # exact Gelu: div, erf, add, mul, mul = 5 x 1,024
        ("y = com.microsoft.Gelu (a)", 5_120),
        # bias add + Gelu: 6 x 1,024
        ("y = com.microsoft.BiasGelu (a, bias)", 6_144),
        # tanh Gelu (x^3 as one pow): 8 x 1,024; a bias adds 1,024
        ("y = com.microsoft.FastGelu (a)", 8_192),
        ("y = com.microsoft.FastGelu (a, bias)", 9_216),
        # alpha x, sigmoid (4), multiply: 6 x 1,024
        ("y = com.microsoft.QuickGelu <alpha=1.702> (a)", 6_144),
        # alpha 1 (the default; the optimizer's fused SiLU): x x sigmoid(x) is Sigmoid (4) and
        # Mul (1), no multiply by 1: 5 x 1,024
        ("y = com.microsoft.QuickGelu <alpha=1.0> (a)", 5_120),
        ("y = com.microsoft.QuickGelu (a)", 5_120),
        # bias add, skip add: 2 x 1,024
        ("y = com.microsoft.BiasAdd (a, bias, b)", 2_048),
        # bias add + residual add (inference dropout is a copy): 2 x 1,024
        ("y = com.microsoft.BiasDropout (a, bias, b)", 2_048),
        # bias add + softmax over the last axis (5 n - 2 per row, 16 rows): 6 x 1,024 - 32
        ("y = com.microsoft.BiasSoftmax <is_inner_broadcast=0, axis=-1> (a, bias)", 6_112),
        # axis 1 (the default): softmax over [8, 64] per batch row, 2 rows: 6 x 1,024 - 4
        ("y = com.microsoft.BiasSoftmax <is_inner_broadcast=0> (a, bias)", 6_140),
        # bias add 1,024 + right half Gelu (5) times left half (1): 512 x 6 = 3,072 -> 4,096
        ("y = com.microsoft.BiasSplitGelu (a, bias)", 4_096),
    ],
)
def test_fused_activations(node: str, flops: int) -> None:
    op = node.split("com.microsoft.")[1].split(" ")[0]
    n = ms_node(one_op(node, ACTS), op)
    assert (n.macs, n.flops, n.status) == (0, flops, "ok")


@pytest.mark.parametrize(
    ("attrs", "flops"),
    [
        # Swish(A) (sigmoid 4 + multiply) times B: 6 x 1,024
        ("", 6_144),
        # alpha != 1 adds alpha x A: 7 x 1,024
        ("<alpha=1.702>", 7_168),
    ],
)
def test_swiglu(attrs: str, flops: int) -> None:
    text = f"""
<ir_version: 13, opset_import: ["" : 28]>
g (float[2,8,64] a, float[2,8,64] b) => (float[2,8,64] y) {{
  y = SwiGLU {attrs} (a, b)
}}"""
    assert only_node(text).flops == flops


LN_INITS = "float[32] gamma = {1.0}, float[32] beta = {0.0}, float[32] bias = {0.0}"


@pytest.mark.parametrize(
    ("inputs", "flops", "params"),
    [
        # [2, 8, 32]: 512 elements, 16 rows; standardize 5 x 512 + 3 x 16 = 2,608
        # + skip 512 + gamma 512 + beta 512 + bias 512 = 4,656; params gamma + beta + bias = 96
        ("x, skip, gamma, beta, bias", 4_656, 96),
        # no beta, no bias: 2,608 + 1,024 = 3,632
        ("x, skip, gamma", 3_632, 32),
    ],
)
def test_skip_layer_norm(inputs: str, flops: int, params: int) -> None:
    node = f"y = com.microsoft.SkipLayerNormalization <epsilon=1e-5> ({inputs})"
    n = ms_node(
        one_op(node, "float[2,8,32] x, float[2,8,32] skip", LN_INITS), "SkipLayerNormalization"
    )
    assert (n.flops, n.params) == (flops, params)


@pytest.mark.parametrize(
    ("inputs", "flops"),
    [
        # skip add 512 + RMS norm 4 x 512 + 3 x 16 = 2,608
        ("x, skip, gamma", 2_608),
        # + bias add 512
        ("x, skip, gamma, bias", 3_120),
    ],
)
def test_skip_simplified_layer_norm(inputs: str, flops: int) -> None:
    node = f"y = com.microsoft.SkipSimplifiedLayerNormalization ({inputs})"
    text = one_op(node, "float[2,8,32] x, float[2,8,32] skip", LN_INITS)
    assert ms_node(text, "SkipSimplifiedLayerNormalization").flops == flops


@pytest.mark.parametrize(
    ("domain", "attrs", "flops"),
    [
        # default domain, as onnxruntime's optimizer emits it: 4 x 512 + 3 x 16 rows = 2,096
        ("", "", 2_096),
        # axis = 1 on [2, 8, 32]: 2 rows: 2,048 + 6 = 2,054
        ("", "<axis=1>", 2_054),
        ("com.microsoft.", "", 2_096),
    ],
)
def test_simplified_layer_norm(domain: str, attrs: str, flops: int) -> None:
    node = f"y = {domain}SimplifiedLayerNormalization {attrs} (x, gamma)"
    text = one_op(node, "float[2,8,32] x", LN_INITS)
    n = ms_node(text, "SimplifiedLayerNormalization")
    assert (n.flops, n.params) == (flops, 32)


EMBED_INITS = (
    "float[50,32] word = {0.0}, float[16,32] pos = {0.0}, float[2,32] seg = {0.0}, "
    "float[32] gamma = {1.0}, float[32] beta = {0.0}"
)


@pytest.mark.parametrize(
    ("inputs", "flops", "params"),
    [
        # B=2, S=8, D=32: 512 elements, 16 rows: standardize 2,608 + (word + pos + seg: 2 adds,
        # gamma, beta) 4 x 512 + mask sum 16 = 4,672; params 1,600 + 512 + 64 + 64 = 2,240
        ("ids, segs, word, pos, seg, gamma, beta, mask", 4_672, 2_240),
        # no segment, no mask: 2,608 + 3 x 512 = 4,144; params 1,600 + 512 + 64 = 2,176
        ("ids, , word, pos, , gamma, beta", 4_144, 2_176),
    ],
)
def test_embed_layer_norm(inputs: str, flops: int, params: int) -> None:
    node = f"y, mask_index = com.microsoft.EmbedLayerNormalization <epsilon=1e-5> ({inputs})"
    text = one_op(node, "int32[2,8] ids, int32[2,8] segs, int32[2,8] mask", EMBED_INITS)
    n = ms_node(text, "EmbedLayerNormalization")
    assert (n.flops, n.params) == (flops, params)


@pytest.mark.parametrize(
    ("traffic", "bytes_read"),
    [
        # ids, segs, mask int32 [2, 8]: 64 B each = 192; the 16 tokens' rows of word, pos and
        # seg: 3 x 16 x 32 x 4 = 6,144; gamma, beta 2 x 128 = 256 -> 6,592
        ("runtime", 6_592),
        # whole tables: word 50 x 32 x 4 = 6,400, pos 16 x 128 = 2,048, seg 2 x 128 = 256:
        # 192 + 8,704 + 256 = 9,152
        ("all-inputs", 9_152),
    ],
)
def test_embed_layer_norm_reads_the_rows_it_gathers(traffic: str, bytes_read: int) -> None:
    node = "y, mask_index = com.microsoft.EmbedLayerNormalization <epsilon=1e-5> (ids, segs, word, pos, seg, gamma, beta, mask)"
    text = one_op(node, "int32[2,8] ids, int32[2,8] segs, int32[2,8] mask", EMBED_INITS)
    assert ms_node(text, "EmbedLayerNormalization", traffic=traffic).bytes_read == bytes_read


@pytest.mark.parametrize(
    ("node", "flops"),
    [
        # NHWC [1, 4, 4, 8] = 128, 2 groups: standardize 5 x 128 + 3 x 2 = 646, scale and bias 256,
        # SiLU 5 x 128 = 640 -> 1,542
        ("y = com.microsoft.GroupNorm <groups=2, activation=1, epsilon=1e-5> (x, g, b)", 1_542),
        # skip and bias adds, no activation: 646 + 256 + 256 = 1,158
        ("y = com.microsoft.SkipGroupNorm <groups=2, activation=0> (x, g, b, skip, bias)", 1_158),
    ],
)
def test_group_norm(node: str, flops: int) -> None:
    inits = "float[8] g = {1.0}, float[8] b = {0.0}, float[8] bias = {0.0}"
    op = node.split("com.microsoft.")[1].split(" ")[0]
    n = ms_node(one_op(node, "float[1,4,4,8] x, float[1,4,4,8] skip", inits), op)
    assert n.flops == flops


# --- real models from onnxruntime's optimizers and quantizers ---------------------------------

MODELS = sorted(OPTIMIZED.glob("*.onnx"))


def test_optimized_models_are_present() -> None:
    assert len(MODELS) >= 10, MODELS


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.name)
def test_optimized_model_has_no_unsupported_nodes(path: Path) -> None:
    a = onnxcost.analyze(path)
    assert a.unsupported == ()
    assert all(n.status != "unsupported" for n in a.nodes)


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.name)
def test_every_emitted_op_is_registered(path: Path) -> None:
    model = onnx.load(path, load_external_data=False)
    missing = [
        (n.domain, n.op_type) for n in model.graph.node if not REGISTRY.known(n.domain, n.op_type)
    ]
    assert missing == []


def isolate(file: str, node_name: str, shapes: dict[str, tuple[int, ...]]) -> NodeRecord:
    """Analyse one node of a saved model alone: its initializers kept, its other inputs made
    graph inputs of the given shapes (float, or int32 for names ending in 'mask_index'), its
    first output routed through an Identity."""
    model = onnx.load(OPTIMIZED / file)
    node = next(n for n in model.graph.node if n.name == node_name)
    inits = {t.name: t for t in model.graph.initializer}
    inputs = []
    for name in node.input:
        if name and name not in inits:
            elem = onnx.TensorProto.INT32 if name.endswith("mask_index") else onnx.TensorProto.FLOAT
            inputs.append(onnx.helper.make_tensor_value_info(name, elem, shapes[name]))
    tail = onnx.helper.make_node("Identity", [node.output[0]], ["out"])
    graph = onnx.helper.make_graph(
        [node, tail],
        "isolated",
        inputs,
        [onnx.helper.make_tensor_value_info("out", onnx.TensorProto.FLOAT, None)],
        [inits[n] for n in dict.fromkeys(node.input) if n in inits],
    )
    alone = onnx.helper.make_model(
        graph, opset_imports=model.opset_import, ir_version=model.ir_version
    )
    records = [r for r in onnxcost.analyze(alone).nodes if r.name == node_name]
    assert len(records) == 1
    return records[0]


@pytest.mark.parametrize(
    ("file", "node", "shapes", "macs", "flops"),
    [
        # BERT Attention, input [2, 8, 32], 4 heads of 8, mask_index [2]:
        # QKV 16 x 32 x 96 = 49,152 MACs + 2 x 4 x 8 x 8 = 512 scores x (8 + 8) = 8,192 -> 57,344
        # FLOPs = 114,688 + bias 16 x 96 = 1,536 + 512 x (scale 1 + mask 1) + softmax 5 x 512 - 2 x 64
        # rows = 3,456 -> 119,680: what the unfused MatMul/Add/Div/Add/Softmax/MatMul graph costs
        (
            "bert_tiny_optimized.onnx",
            "Attention_0",
            {
                "EmbedLayerNormalization_0_output": (2, 8, 32),
                "EmbedLayerNormalization_0_dummy_mask_index": (2,),
            },
            57_344,
            119_680,
        ),
        # SkipLayerNormalization with beta and bias on [2, 8, 32]: 2,608 + 4 x 512 = 4,656
        (
            "bert_tiny_optimized.onnx",
            "SkipLayerNorm_AddBias_0",
            {"matmul_96": (2, 8, 32), "EmbedLayerNormalization_0_output": (2, 8, 32)},
            0,
            4_656,
        ),
        # BiasGelu on [2, 8, 64]: 6 x 1,024
        ("bert_tiny_optimized.onnx", "Gelu_AddBias_0", {"matmul_108": (2, 8, 64)}, 0, 6_144),
        # SkipSimplifiedLayerNormalization on [2, 8, 32]: skip 512 + RMS 4 x 512 + 3 x 16 = 2,608
        (
            "llama_mlp_optimized.onnx",
            "SkipLayerNorm_0",
            {"hidden_states": (2, 8, 32), "matmul_32": (2, 8, 32)},
            0,
            2_608,
        ),
        # MatMulNBits 4-bit, K 64, N 128, A [2, 8, 64]: MACs 16 x 128 x 64 = 131,072 -> 262,144
        # + dequantize 2 x 128 x 64 = 16,384 -> 278,528
        ("mlp_nbits4.onnx", "MatMul_6_Q4", {"gather_2": (2, 8, 64)}, 131_072, 278_528),
        # DynamicQuantizeMatMul, A [2, 8, 128] . B [128, 128]: MACs 262,144 -> 524,288
        # + quantize A 6 x 2,048 + rescale 2,048 + bias 2,048 = 16,384 -> 540,672
        (
            "mlp_dynamic_quant_ort.onnx",
            "MatMul_14_quant",
            {"relu_10": (2, 8, 128)},
            262_144,
            540_672,
        ),
        # FusedConv 1x1, 8 -> 8 channels on [1, 8, 16, 16], Sigmoid: MACs 2,048 x 8 = 16,384
        # FLOPs 32,768 + sigmoid 4 x 2,048 = 40,960
        ("cnn_ort_extended.onnx", "Conv_17", {"relu_13": (1, 8, 16, 16)}, 16_384, 40_960),
        # FusedGemm [1, 16] . W^T [10, 16] + b, Relu: MACs 160 -> 320 + bias 10 + Relu 10
        ("cnn_ort_extended.onnx", "fused Gemm_31", {"flatten_26": (1, 16)}, 160, 340),
        # QGemm [1, 16] . W^T [10, 16] + C, quantized output: 320 + rescale 10 + C 10 + requantize 30
        ("cnn_qoperator.onnx", "Gemm_31_quant", {"flatten_26_quantized": (1, 16)}, 160, 370),
        # QLinearAveragePool k2 s2 on [1, 16, 16, 16] -> 1,024 outputs x (4 + 2 + 4) = 10,240
        (
            "cnn_qoperator.onnx",
            "AveragePool_23_quant",
            {"concat_20_quantized": (1, 16, 16, 16)},
            0,
            10_240,
        ),
    ],
    ids=lambda v: v if isinstance(v, str) and not v.endswith(".onnx") else None,
)
def test_optimized_model_nodes(
    file: str, node: str, shapes: dict[str, tuple[int, ...]], macs: int, flops: int
) -> None:
    n = isolate(file, node, shapes)
    assert (n.macs, n.flops, n.status) == (macs, flops, "ok")


def test_bert_optimized_embedding() -> None:
    # bert_tiny_optimized.onnx with batch 2, seq 8 (hidden 32): EmbedLayerNormalization reads graph
    # inputs only: standardize 5 x 512 + 3 x 16 = 2,608, 2 embedding adds + gamma + beta 4 x 512,
    # mask sum 16 -> 4,672; params 50x32 + 16x32 + 2x32 + 32 + 32 = 2,240
    a = onnxcost.analyze(OPTIMIZED / "bert_tiny_optimized.onnx", dims={"batch": 2, "seq": 8})
    embed = next(n for n in a.nodes if n.op_type == "EmbedLayerNormalization")
    assert (embed.flops, embed.params, embed.status) == (4_672, 2_240, "ok")


def test_lstm_quantized_model() -> None:
    # lstm_dynamic_quant.onnx: DynamicQuantizeLSTM, bidirectional, X [5, 2, 8], hidden 16, with bias:
    # the same layer as test_recurrent.test_dynamic_quantize_lstm: 30,720 MACs, 76,000 FLOPs
    n = isolate(
        "lstm_dynamic_quant.onnx", _only_node_name("lstm_dynamic_quant.onnx"), {"x": (5, 2, 8)}
    )
    assert (n.macs, n.flops, n.params) == (30_720, 76_000, 3_328)


def _only_node_name(file: str) -> str:
    (node,) = onnx.load(OPTIMIZED / file).graph.node
    return str(node.name)


def test_qdq_model_is_fully_counted() -> None:
    # cnn_qdq.onnx holds ONNX ops only, so every shape resolves: nothing unknown, nothing unsupported;
    # each QuantizeLinear costs 4 per element, each DequantizeLinear 2
    a = onnxcost.analyze(OPTIMIZED / "cnn_qdq.onnx")
    assert {n.status for n in a.nodes} <= {"ok", "zero"}
    per = {"QuantizeLinear": 4, "DequantizeLinear": 2}
    q = [n for n in a.nodes if n.op_type in per]
    assert len(q) > 10
    assert all(n.flops == per[n.op_type] * _numel(n.input_shapes[0]) for n in q)


def _numel(shape: tuple[int | str | None, ...] | None) -> int:
    assert shape is not None
    return math.prod(d for d in shape if isinstance(d, int))


@pytest.mark.ort
@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.name)
def test_optimized_model_loads_in_onnxruntime(path: Path) -> None:
    # the saved models are real: onnxruntime's CPU provider accepts every node in them
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert session.get_outputs()


def test_fused_norm_and_gelu_cost_what_their_unfused_graphs_cost() -> None:
    # Add bias, Add skip, LayerNormalization (with B) on [2, 8, 32]: 512 + 512 + 2,608 + 512 + 512
    # = 4,656 = SkipLayerNormalization; Add bias, Div, Erf, Add, Mul, Mul on [2, 8, 64]: 6 x 1,024
    # = 6,144 = BiasGelu
    unfused = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,8,32] x, float[2,8,32] skip, float[2,8,64] h) => (float[2,8,32] y, float[2,8,64] gelu)
  <float[32] gamma = {1.0}, float[32] beta = {0.0}, float[32] bias = {0.0}, float[64] hb = {0.0},
   float sqrt2 = {1.4142135}, float one = {1.0}, float half = {0.5}> {
  a = Add (x, bias)
  s = Add (a, skip)
  y = LayerNormalization <axis=-1> (s, gamma, beta)
  h1 = Add (h, hb)
  h2 = Div (h1, sqrt2)
  h3 = Erf (h2)
  h4 = Add (h3, one)
  h5 = Mul (h1, h4)
  gelu = Mul (h5, half)
}"""
    nodes = analyze_text(unfused).nodes
    assert [n.status for n in nodes] == ["ok"] * 9
    ln_part = sum(n.flops for n in nodes[:3])
    gelu_part = sum(n.flops for n in nodes[3:])
    assert (ln_part, gelu_part) == (4_656, 6_144)
    skip = ms_node(
        one_op(
            "y = com.microsoft.SkipLayerNormalization (x, skip, gamma, beta, bias)",
            "float[2,8,32] x, float[2,8,32] skip",
            LN_INITS,
        ),
        "SkipLayerNormalization",
    )
    gelu = ms_node(one_op("y = com.microsoft.BiasGelu (a, bias)", ACTS), "BiasGelu")
    assert (skip.flops, gelu.flops) == (ln_part, gelu_part)


@pytest.mark.parametrize(
    ("source", "macs", "flops"),
    [
        # the unfused sources of gpt2_tiny_optimized.onnx and llama_mlp_optimized.onnx ([2, 8, 32],
        # 2 layers): every MatMul, LayerNorm, Gelu and attention op counted node by node
        ("gpt2_tiny_source.onnx", 278_528, 600_560),
        ("llama_mlp_source.onnx", 196_608, 412_816),
    ],
)
def test_source_model_totals(source: str, macs: int, flops: int) -> None:
    a = onnxcost.analyze(OPTIMIZED / source)
    assert {n.status for n in a.nodes} <= {"ok", "zero"}
    assert (a.totals.macs, a.totals.flops) == (macs, flops)


@pytest.mark.parametrize(
    ("source", "optimized"),
    [
        ("gpt2_tiny_source.onnx", "gpt2_tiny_optimized.onnx"),
        ("llama_mlp_source.onnx", "llama_mlp_optimized.onnx"),
    ],
)
def test_fusion_keeps_the_totals(source: str, optimized: str) -> None:
    # fused formulas count what the subgraphs they replace count, and onnxcost's shape rules
    # (shape_rules.py) type the fused outputs: 600,560 and 412,816 FLOPs both ways
    before = onnxcost.analyze(OPTIMIZED / source).totals
    after = onnxcost.analyze(OPTIMIZED / optimized).totals
    assert (after.macs, after.flops, after.params) == (before.macs, before.flops, before.params)
