"""Regenerate the small optimized and quantized models in this folder.

Run from the repository root: ``python tests/data/optimized/generate.py``. Needs onnx,
numpy and onnxruntime (its transformer optimizer, quantization tools and graph optimizer).
See README.md for what each file is. Weights are seeded random numbers: the models are for
cost analysis, not for accuracy.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
RNG = np.random.default_rng(0)

BATCH, SEQ, HIDDEN, HEADS, FFN, VOCAB, MAX_POS = 2, 8, 32, 4, 64, 50, 16
HEAD = HIDDEN // HEADS


class Builder:
    """Collects nodes and initializers; names are unique by prefix."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}_{self.count}"

    def const(self, value: np.ndarray, prefix: str = "c") -> str:
        n = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(value), n))
        return n

    def weight(self, *shape: int, prefix: str = "w") -> str:
        return self.const((RNG.standard_normal(shape) * 0.05).astype(np.float32), prefix)

    def op(self, op_type: str, inputs: Sequence[str], n_out: int = 1, **attrs: Any) -> list[str]:
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(
            helper.make_node(op_type, list(inputs), outs, name=self.name(op_type), **attrs)
        )
        return outs

    def op1(self, op_type: str, inputs: Sequence[str], **attrs: Any) -> str:
        return self.op(op_type, inputs, **attrs)[0]

    def i64(self, *values: int) -> str:
        return self.const(np.array(values, dtype=np.int64), "i")

    def f32(self, value: float) -> str:
        return self.const(np.array(value, dtype=np.float32), "f")

    def linear(self, x: str, d_in: int, d_out: int) -> str:
        return self.op1(
            "Add",
            [self.op1("MatMul", [x, self.weight(d_in, d_out)]), self.weight(d_out, prefix="b")],
        )

    def layer_norm(self, x: str) -> str:
        gamma = self.const(np.ones(HIDDEN, np.float32), "gamma")
        beta = self.const(np.zeros(HIDDEN, np.float32), "beta")
        return self.op1("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-5)

    def rms_norm(self, x: str) -> str:
        """x * 1/sqrt(mean(x^2) + eps) * w: the pattern of Llama's RMSNorm."""
        sq = self.op1("Pow", [x, self.f32(2.0)])
        mean = self.op1("ReduceMean", [sq], axes=[-1], keepdims=1)
        inv = self.op1(
            "Div", [self.f32(1.0), self.op1("Sqrt", [self.op1("Add", [mean, self.f32(1e-6)])])]
        )
        return self.op1(
            "Mul", [self.const(np.ones(HIDDEN, np.float32), "rms_w"), self.op1("Mul", [x, inv])]
        )

    def gelu(self, x: str) -> str:
        """x * 0.5 * (1 + erf(x / sqrt(2)))."""
        erf = self.op1("Erf", [self.op1("Div", [x, self.f32(math.sqrt(2.0))])])
        return self.op1(
            "Mul", [self.op1("Mul", [x, self.op1("Add", [erf, self.f32(1.0)])]), self.f32(0.5)]
        )

    def model(
        self,
        inputs: Sequence[onnx.ValueInfoProto],
        outputs: Sequence[onnx.ValueInfoProto],
        opset: int = 17,
        extra_opsets: Sequence[tuple[str, int]] = (),
    ) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, "g", list(inputs), list(outputs), self.inits)
        opsets = [
            helper.make_opsetid("", opset),
            *(helper.make_opsetid(d, v) for d, v in extra_opsets),
        ]
        model = helper.make_model(graph, opset_imports=opsets, producer_name="pytorch")
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model


def attention_block(b: Builder, x: str, mask_add: str | None, causal: bool) -> str:
    """BERT / GPT-2 self-attention as exported by torch, ending in the output projection."""
    q = b.op1(
        "Transpose",
        [b.op1("Reshape", [b.linear(x, HIDDEN, HIDDEN), b.i64(0, 0, HEADS, HEAD)])],
        perm=[0, 2, 1, 3],
    )
    k = b.op1(
        "Transpose",
        [b.op1("Reshape", [b.linear(x, HIDDEN, HIDDEN), b.i64(0, 0, HEADS, HEAD)])],
        perm=[0, 2, 3, 1],
    )
    v = b.op1(
        "Transpose",
        [b.op1("Reshape", [b.linear(x, HIDDEN, HIDDEN), b.i64(0, 0, HEADS, HEAD)])],
        perm=[0, 2, 1, 3],
    )
    scores = b.op1("Div", [b.op1("MatMul", [q, k]), b.f32(math.sqrt(HEAD))])
    if causal:
        tri = np.tril(np.ones((MAX_POS, MAX_POS), np.uint8)).reshape(1, 1, MAX_POS, MAX_POS)
        bias = b.const(tri.astype(bool), "causal")
        sliced = b.op1("Slice", [bias, b.i64(0, 0), b.i64(SEQ, SEQ), b.i64(2, 3)])
        scores = b.op1("Where", [sliced, scores, b.f32(-10000.0)])
    if mask_add is not None:
        scores = b.op1("Add", [scores, mask_add])
    probs = b.op1("Softmax", [scores], axis=3)
    ctx = b.op1("Transpose", [b.op1("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    ctx = b.op1("Reshape", [ctx, b.i64(0, 0, HIDDEN)])
    return b.linear(ctx, HIDDEN, HIDDEN)


def bert(path: Path) -> None:
    """A 2-layer BERT, fused by onnxruntime.transformers.optimizer (model_type='bert')."""
    from onnxruntime.transformers.optimizer import optimize_model

    b = Builder()
    ids, segs, mask = "input_ids", "token_type_ids", "attention_mask"
    shape = b.op1("Shape", [ids])
    seq_len = b.op1("Gather", [shape, b.i64(1)], axis=0)
    positions = b.op1(
        "Range", [b.const(np.array(0, np.int64)), seq_len, b.const(np.array(1, np.int64))]
    )
    positions = b.op1("Expand", [b.op1("Unsqueeze", [positions, b.i64(0)]), shape])
    word = b.op1("Gather", [b.weight(VOCAB, HIDDEN, prefix="word_emb"), ids])
    seg = b.op1("Gather", [b.weight(2, HIDDEN, prefix="seg_emb"), segs])
    pos = b.op1("Gather", [b.weight(MAX_POS, HIDDEN, prefix="pos_emb"), positions])
    x = b.layer_norm(b.op1("Add", [b.op1("Add", [word, seg]), pos]))
    m = b.op1(
        "Cast",
        [b.op1("Unsqueeze", [b.op1("Unsqueeze", [mask, b.i64(1)]), b.i64(2)])],
        to=TensorProto.FLOAT,
    )
    mask_add = b.op1("Mul", [b.op1("Sub", [b.f32(1.0), m]), b.f32(-10000.0)])
    for _ in range(2):
        x = b.layer_norm(b.op1("Add", [attention_block(b, x, mask_add, causal=False), x]))
        ffn = b.linear(b.gelu(b.linear(x, HIDDEN, FFN)), FFN, HIDDEN)
        x = b.layer_norm(b.op1("Add", [ffn, x]))
    ints = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
        for n in (ids, segs, mask)
    ]
    out = helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", "seq", HIDDEN])
    model = b.model(ints, [out])
    opt = optimize_model(model, model_type="bert", num_heads=HEADS, hidden_size=HIDDEN, opt_level=0)
    opt.save_model_to_file(str(path))


def gpt2(path: Path) -> None:
    """A 2-layer GPT-2-style causal decoder (pre-LayerNorm), fused with model_type='gpt2'; the
    unfused source is saved beside it (``*_source.onnx``)."""
    from onnxruntime.transformers.optimizer import optimize_model

    b = Builder()
    x = "hidden_states"
    for _ in range(2):
        h = attention_block(b, b.layer_norm(x), None, causal=True)
        x = b.op1("Add", [x, h])
        ffn = b.linear(b.gelu(b.linear(b.layer_norm(x), HIDDEN, FFN)), FFN, HIDDEN)
        x = b.op1("Add", [x, ffn])
    x = b.layer_norm(x)
    inp = helper.make_tensor_value_info("hidden_states", TensorProto.FLOAT, [BATCH, SEQ, HIDDEN])
    out = helper.make_tensor_value_info(x, TensorProto.FLOAT, [BATCH, SEQ, HIDDEN])
    model = b.model([inp], [out])
    onnx.save(model, path.with_name(path.name.replace("_optimized", "_source")))
    opt = optimize_model(model, model_type="gpt2", num_heads=HEADS, hidden_size=HIDDEN, opt_level=0)
    opt.save_model_to_file(str(path))


def llama_mlp(path: Path) -> None:
    """RMSNorm + SwiGLU MLP blocks, fused by the optimizer into (Skip)SimplifiedLayerNormalization;
    the unfused source is saved beside it (``*_source.onnx``)."""
    from onnxruntime.transformers.optimizer import optimize_model

    b = Builder()
    x = "hidden_states"
    for _ in range(2):
        h = b.rms_norm(x)
        gate = b.op1("MatMul", [h, b.weight(HIDDEN, FFN)])
        up = b.op1("MatMul", [h, b.weight(HIDDEN, FFN)])
        act = b.op1("Mul", [gate, b.op1("Sigmoid", [gate])])
        down = b.op1("MatMul", [b.op1("Mul", [act, up]), b.weight(FFN, HIDDEN)])
        x = b.op1("Add", [x, down])
    x = b.rms_norm(x)
    inp = helper.make_tensor_value_info("hidden_states", TensorProto.FLOAT, [BATCH, SEQ, HIDDEN])
    out = helper.make_tensor_value_info(x, TensorProto.FLOAT, [BATCH, SEQ, HIDDEN])
    model = b.model([inp], [out])
    onnx.save(model, path.with_name(path.name.replace("_optimized", "_source")))
    opt = optimize_model(model, model_type="gpt2", num_heads=HEADS, hidden_size=HIDDEN, opt_level=0)
    opt.save_model_to_file(str(path))


def small_cnn() -> onnx.ModelProto:
    """Conv-Relu, Conv-Add-Relu (residual), Conv-Sigmoid, pool, Gemm-Relu: a CNN for onnxruntime's fusions."""
    b = Builder()
    x = "image"
    c1 = b.op1(
        "Relu",
        [b.op1("Conv", [x, b.weight(8, 3, 3, 3), b.weight(8, prefix="b")], pads=[1, 1, 1, 1])],
    )
    c2 = b.op1("Conv", [c1, b.weight(8, 8, 3, 3), b.weight(8, prefix="b")], pads=[1, 1, 1, 1])
    r = b.op1("Relu", [b.op1("Add", [c2, c1])])
    c3 = b.op1("Sigmoid", [b.op1("Conv", [r, b.weight(8, 8, 1, 1)])])
    cat = b.op1("Concat", [c3, r], axis=1)
    pooled = b.op1("AveragePool", [cat], kernel_shape=[2, 2], strides=[2, 2])
    g = b.op1("GlobalAveragePool", [pooled])
    flat = b.op1("Flatten", [g])
    y = b.op1("Relu", [b.op1("Gemm", [flat, b.weight(10, 16), b.weight(10, prefix="b")], transB=1)])
    inp = helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 16, 16])
    out = helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 10])
    return b.model([inp], [out], opset=13)


def cnn_ort(path: Path) -> None:
    """small_cnn optimized by an onnxruntime CPU session (ORT_ENABLE_EXTENDED) and saved."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "cnn.onnx"
        onnx.save(small_cnn(), src)
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        so.optimized_model_filepath = str(path)
        ort.InferenceSession(str(src), so, providers=["CPUExecutionProvider"])


class _Images:
    """Calibration data for quantize_static: a few seeded images."""

    def __init__(self) -> None:
        self.items = iter(
            [{"image": RNG.standard_normal((1, 3, 16, 16)).astype(np.float32)} for _ in range(4)]
        )

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.items, None)


def cnn_qoperator(path: Path) -> None:
    """small_cnn quantized statically, QOperator format (QLinearConv, QLinearAdd, ...)."""
    from onnxruntime.quantization import QuantFormat, quantize_static

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "cnn.onnx"
        onnx.save(small_cnn(), src)
        quantize_static(str(src), str(path), _Images(), quant_format=QuantFormat.QOperator)


def cnn_qdq(path: Path) -> None:
    """small_cnn quantized statically, QDQ format (QuantizeLinear / DequantizeLinear pairs)."""
    from onnxruntime.quantization import QuantFormat, quantize_static

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "cnn.onnx"
        onnx.save(small_cnn(), src)
        quantize_static(str(src), str(path), _Images(), quant_format=QuantFormat.QDQ)


def mlp() -> onnx.ModelProto:
    """Three MatMul + Add layers with Relu, and a token embedding in front."""
    b = Builder()
    x = b.op1("Gather", [b.weight(VOCAB, 64, prefix="emb"), "input_ids"])
    for d_in, d_out in ((64, 128), (128, 128), (128, 64)):
        x = b.op1("Relu", [b.linear(x, d_in, d_out)])
    inp = helper.make_tensor_value_info("input_ids", TensorProto.INT64, [BATCH, SEQ])
    out = helper.make_tensor_value_info(x, TensorProto.FLOAT, [BATCH, SEQ, 64])
    return b.model([inp], [out], opset=17)


def mlp_dynamic(path: Path) -> None:
    """mlp quantized dynamically, then optimized by an onnxruntime session (MatMulIntegerToFloat)."""
    import onnxruntime as ort
    from onnxruntime.quantization import quantize_dynamic

    with tempfile.TemporaryDirectory() as tmp:
        src, q = Path(tmp) / "mlp.onnx", Path(tmp) / "mlp.q.onnx"
        onnx.save(mlp(), src)
        quantize_dynamic(str(src), str(q))
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        so.optimized_model_filepath = str(path)
        ort.InferenceSession(str(q), so, providers=["CPUExecutionProvider"])


def mlp_nbits(path: Path, bits: int) -> None:
    """mlp with its MatMuls quantized to MatMulNBits and its embedding to GatherBlockQuantized."""
    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig,
        MatMulNBitsQuantizer,
    )

    config = DefaultWeightOnlyQuantConfig(
        block_size=32,
        is_symmetric=False,
        bits=bits,
        op_types_to_quantize=("MatMul", "Gather"),
        quant_axes=(("MatMul", 0), ("Gather", 1)),
    )
    quant = MatMulNBitsQuantizer(mlp(), algo_config=config)
    quant.process()
    quant.model.save_model_to_file(str(path))


def lstm_dynamic(path: Path) -> None:
    """A bidirectional LSTM quantized dynamically: DynamicQuantizeLSTM."""
    from onnxruntime.quantization import quantize_dynamic

    b = Builder()
    hidden, inp_size = 16, 8
    w = b.weight(2, 4 * hidden, inp_size)
    r = b.weight(2, 4 * hidden, hidden)
    bias = b.weight(2, 8 * hidden, prefix="b")
    y = b.op("LSTM", ["x", w, r, bias], n_out=3, hidden_size=hidden, direction="bidirectional")
    inp = helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, BATCH, inp_size])
    out = helper.make_tensor_value_info(y[0], TensorProto.FLOAT, [5, 2, BATCH, hidden])
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "lstm.onnx"
        onnx.save(b.model([inp], [out], opset=14), src)
        quantize_dynamic(str(src), str(path), op_types_to_quantize=["LSTM"])


def main() -> None:
    bert(HERE / "bert_tiny_optimized.onnx")
    gpt2(HERE / "gpt2_tiny_optimized.onnx")
    llama_mlp(HERE / "llama_mlp_optimized.onnx")
    cnn_ort(HERE / "cnn_ort_extended.onnx")
    cnn_qoperator(HERE / "cnn_qoperator.onnx")
    cnn_qdq(HERE / "cnn_qdq.onnx")
    mlp_dynamic(HERE / "mlp_dynamic_quant_ort.onnx")
    mlp_nbits(HERE / "mlp_nbits4.onnx", 4)
    mlp_nbits(HERE / "mlp_nbits8.onnx", 8)
    lstm_dynamic(HERE / "lstm_dynamic_quant.onnx")
    for f in sorted(HERE.glob("*.onnx")):
        m = onnx.load(f)
        ops = sorted({(n.domain or "ai.onnx", n.op_type) for n in m.graph.node})
        print(f"{f.name}: {f.stat().st_size} bytes; " + ", ".join(f"{d}::{o}" for d, o in ops))


if __name__ == "__main__":
    main()
