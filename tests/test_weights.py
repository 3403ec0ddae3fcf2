"""Weight provenance: a tensor computed only from constants is a weight, counted where it is
stored (once), never an activation. Each pattern is a small model; x is an fp32 [8, 64]
activation and y = x @ W an fp32 [8, 32] one throughout, unless said otherwise:
x = 8 x 64 x 4 = 2,048 B, y = 8 x 32 x 4 = 1,024 B, so the peak (x and y live at the MatMul)
is 3,072 B whenever W is a weight, whatever chain makes it."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

import onnxcost

X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 32])
PEAK = 2_048 + 1_024


def _model(
    nodes: list[onnx.NodeProto],
    inits: list[onnx.TensorProto],
    *,
    inputs: tuple[onnx.ValueInfoProto, ...] = (X,),
    outputs: tuple[onnx.ValueInfoProto, ...] = (Y,),
    opset: int = 21,
    ms: bool = False,
) -> onnx.ModelProto:
    opsets = [helper.make_opsetid("", opset)]
    if ms:
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    return helper.make_model(
        helper.make_graph(nodes, "g", list(inputs), list(outputs), inits), opset_imports=opsets
    )


def _floats(name: str, dims: list[int], dtype: int = TensorProto.FLOAT) -> onnx.TensorProto:
    n = 1
    for d in dims:
        n *= d
    return helper.make_tensor(name, dtype, dims, [0.5] * n)


def _ints(name: str, dims: list[int], dtype: int) -> onnx.TensorProto:
    n = 1
    for d in dims:
        n *= d
    return helper.make_tensor(name, dtype, dims, [1] * n)


def _totals(model: onnx.ModelProto) -> tuple[int, int, int, int, int]:
    t = onnxcost.analyze(model).totals
    return (t.params, t.stat_params, t.quant_params, t.param_bytes, t.peak_activation_bytes)


def test_constant_of_shape_weight() -> None:
    # W = ConstantOfShape([64, 32]) of 0.5: a generated weight, 2,048 elements at the size
    # MatMul reads them: 2,048 x 4 = 8,192 B in memory; the int64 shape [2] is no weight.
    value = helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])
    model = _model(
        [
            helper.make_node("ConstantOfShape", ["shape"], ["w"], value=value),
            helper.make_node("MatMul", ["x", "w"], ["y"]),
        ],
        [helper.make_tensor("shape", TensorProto.INT64, [2], [64, 32])],
    )
    assert _totals(model) == (2_048, 0, 0, 8_192, PEAK)


@pytest.mark.parametrize(
    ("chain", "stored"),
    [
        # fp16 W [64, 32] cast to fp32: stored 2,048 x 2 = 4,096 B; the fp32 copy (8,192 B) is
        # a weight, not an activation: peak 3,072, not 3,072 + 8,192 = 11,264
        (
            [helper.make_node("Cast", ["w0"], ["w"], to=TensorProto.FLOAT)],
            _floats("w0", [64, 32], TensorProto.FLOAT16),
        ),
        # W stored transposed [32, 64]: 8,192 B
        ([helper.make_node("Transpose", ["w0"], ["w"], perm=[1, 0])], _floats("w0", [32, 64])),
        # W stored flat [2,048] and reshaped to [64, 32]: 8,192 B
        ([helper.make_node("Reshape", ["w0", "shape"], ["w"])], _floats("w0", [2_048])),
        # W behind two Identities: 8,192 B
        (
            [
                helper.make_node("Identity", ["w0"], ["w1"]),
                helper.make_node("Identity", ["w1"], ["w"]),
            ],
            _floats("w0", [64, 32]),
        ),
    ],
    ids=["cast_fp16_fp32", "transpose", "reshape", "identity"],
)
def test_weight_chains_count_the_stored_weight_once(
    chain: list[onnx.NodeProto], stored: onnx.TensorProto
) -> None:
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [64, 32])
    model = _model([*chain, helper.make_node("MatMul", ["x", "w"], ["y"])], [stored, shape])
    params, stats, quant, param_bytes, peak = _totals(model)
    assert (params, stats, quant, peak) == (2_048, 0, 0, PEAK)
    assert param_bytes == (4_096 if stored.data_type == TensorProto.FLOAT16 else 8_192)


def test_tied_embedding_counts_once() -> None:
    # E [100, 16] is read by Gather (the embedding) and, transposed, by the LM head MatMul:
    # 1,600 params once, 6,400 B. Live: ids int64 [1, 8] = 64 B, h [1, 8, 16] = 512 B,
    # logits [1, 8, 100] = 3,200 B; E^T (6,400 B) is a weight. Order Gather, Transpose,
    # MatMul: 64 + 512 = 576 at Gather, 512 at Transpose, 512 + 3,200 = 3,712 at MatMul.
    model = _model(
        [
            helper.make_node("Gather", ["emb", "ids"], ["h"]),
            helper.make_node("Transpose", ["emb"], ["emb_t"], perm=[1, 0]),
            helper.make_node("MatMul", ["h", "emb_t"], ["logits"]),
        ],
        [_floats("emb", [100, 16])],
        inputs=(helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 8]),),
        outputs=(helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 8, 100]),),
    )
    a = onnxcost.analyze(model)
    assert _totals(model) == (1_600, 0, 0, 6_400, 3_712)
    assert [n.params for n in a.nodes] == [1_600, 0, 0]


def test_batchnorm_through_identity_and_shared_by_two() -> None:
    # torch's training-mode export: BN1 reads scale, bias, mean, var through Identity nodes;
    # BN2 reads the same four tensors directly. Params: scale 4 + bias 4 = 8 (32 B); statistics:
    # mean 4 + var 4 = 8, each counted once. x, y1, y2 [1, 4, 2, 2] fp32 = 64 B each: x and y1
    # live at BN1, y1 and y2 at BN2: peak 128 (the Identity outputs are weights).
    names = ["scale", "bias", "mean", "var"]
    model = _model(
        [
            *[helper.make_node("Identity", [n], [f"{n}_id"]) for n in names],
            helper.make_node("BatchNormalization", ["x", *[f"{n}_id" for n in names]], ["y1"]),
            helper.make_node("BatchNormalization", ["y1", *names], ["y"]),
        ],
        [_floats(n, [4]) for n in names],
        inputs=(helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 2, 2]),),
        outputs=(helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 2, 2]),),
    )
    assert _totals(model) == (8, 8, 0, 32, 128)


@pytest.mark.parametrize(
    ("weight", "scale", "zero_point", "attrs", "expected"),
    [
        # int4 W [64, 32] with fp32 per-channel scales [32] (axis 1): W 2,048 x 0.5 = 1,024 B
        # + 32 x 4 = 128 B -> 1,152 B; 32 quantization params
        (
            _ints("w0", [64, 32], TensorProto.INT4),
            _floats("s", [32]),
            None,
            {"axis": 1},
            (2_048, 0, 32, 1_152, PEAK),
        ),
        # int4 W with blocks of 16 along axis 0, fp16 scales [4, 32]: 1,024 + 128 x 2 = 1,280 B.
        # The DQ output is fp16, so x and y are fp16: 1,024 + 512 = 1,536 B peak
        (
            _ints("w0", [64, 32], TensorProto.INT4),
            _floats("s", [4, 32], TensorProto.FLOAT16),
            None,
            {"axis": 0, "block_size": 16},
            (2_048, 0, 128, 1_280, 1_536),
        ),
        # int8 W, per-channel fp32 scales [32] and int8 zero points [32]:
        # 2,048 + 128 + 32 = 2,208 B; 64 quantization params
        (
            _ints("w0", [64, 32], TensorProto.INT8),
            _floats("s", [32]),
            _ints("zp", [32], TensorProto.INT8),
            {"axis": 1},
            (2_048, 0, 64, 2_208, PEAK),
        ),
        # int8 W, blocks of 16 along axis 0, fp32 scales [4, 32]: 2,048 + 512 = 2,560 B
        (
            _ints("w0", [64, 32], TensorProto.INT8),
            _floats("s", [4, 32]),
            None,
            {"axis": 0, "block_size": 16},
            (2_048, 0, 128, 2_560, PEAK),
        ),
        # int8 W, one fp32 scale and one int8 zero point (per tensor): scalars count as
        # quantization params: 2 of them, 2,048 + 4 + 1 = 2,053 B
        (
            _ints("w0", [64, 32], TensorProto.INT8),
            _floats("s", []),
            _ints("zp", [], TensorProto.INT8),
            {},
            (2_048, 0, 2, 2_053, PEAK),
        ),
    ],
    ids=[
        "int4_per_channel",
        "int4_block16_fp16",
        "int8_per_channel_zp",
        "int8_block16",
        "int8_per_tensor",
    ],
)
def test_dequantized_weights_keep_their_scales(
    weight: onnx.TensorProto,
    scale: onnx.TensorProto,
    zero_point: onnx.TensorProto | None,
    attrs: dict[str, int],
    expected: tuple[int, int, int, int, int],
) -> None:
    fp16 = scale.data_type == TensorProto.FLOAT16
    dtype = TensorProto.FLOAT16 if fp16 else TensorProto.FLOAT
    inputs = ["w0", "s"] + (["zp"] if zero_point is not None else [])
    model = _model(
        [
            helper.make_node("DequantizeLinear", inputs, ["w"], **attrs),
            helper.make_node("MatMul", ["x", "w"], ["y"]),
        ],
        [weight, scale] + ([zero_point] if zero_point is not None else []),
        inputs=(helper.make_tensor_value_info("x", dtype, [8, 64]),),
        outputs=(helper.make_tensor_value_info("y", dtype, [8, 32]),),
    )
    assert _totals(model) == expected


def test_matmul_nbits_counts_logical_weights_and_its_scales() -> None:
    # MatMulNBits K=64, N=32, 4 bits, blocks of 16: B uint8 [32, 4, 8] = 1,024 B holds
    # 32 x 64 = 2,048 weights; fp32 scales [32 x 4 = 128] = 512 B: param_bytes 1,536;
    # A [8, 64] fp32 2,048 B + Y [8, 32] 1,024 B: peak 3,072
    model = _model(
        [
            helper.make_node(
                "MatMulNBits",
                ["x", "b", "s"],
                ["y"],
                domain="com.microsoft",
                K=64,
                N=32,
                bits=4,
                block_size=16,
            )
        ],
        [_ints("b", [32, 4, 8], TensorProto.UINT8), _floats("s", [128])],
        ms=True,
    )
    assert _totals(model) == (2_048, 0, 128, 1_536, PEAK)


def test_weight_used_by_two_chains_is_stored_once() -> None:
    # W [64, 32] read directly by one MatMul and through Identity by another: 2,048 params
    # once; x 2,048 + y1 1,024 at the first MatMul, x + y1 + y 1,024 at the second: 4,096
    model = _model(
        [
            helper.make_node("MatMul", ["x", "w"], ["y1"]),
            helper.make_node("Identity", ["w"], ["w_id"]),
            helper.make_node("MatMul", ["x", "w_id"], ["y2"]),
            helper.make_node("Add", ["y1", "y2"], ["y"]),
        ],
        [_floats("w", [64, 32])],
    )
    assert _totals(model) == (2_048, 0, 0, 8_192, 2_048 + 1_024 + 1_024)


def test_reports_show_quantization_params() -> None:
    # the int4 per-channel model: 32 fp32 scales
    from rich.console import Console

    from onnxcost.report.as_text import to_markdown
    from onnxcost.report.table import render_totals

    model = _model(
        [
            helper.make_node("DequantizeLinear", ["w0", "s"], ["w"], axis=1),
            helper.make_node("MatMul", ["x", "w"], ["y"]),
        ],
        [_ints("w0", [64, 32], TensorProto.INT4), _floats("s", [32])],
    )
    a = onnxcost.analyze(model)
    assert a.to_dict()["totals"]["quant_params"] == 32
    assert "| quantization params | 32 |" in to_markdown(a, a.nodes)
    console = Console(record=True, width=120)
    render_totals(a, console)
    assert "2,048 + 32 quantization params" in console.export_text()


def test_resnet18_with_batchnorm_read_through_identity() -> None:
    # torch's training-mode export feeds every BatchNormalization's scale, bias, mean and var
    # through an Identity node. The built-in ResNet-18 rewritten that way keeps torchvision's
    # 11,689,512 params and 9,600 BN statistics (running mean + var of 4,800 channels).
    from onnxcost.prepare import build_builtin

    model = build_builtin("resnet18", weights=False)
    assert model is not None
    nodes: list[onnx.NodeProto] = []
    for node in model.graph.node:
        if node.op_type == "BatchNormalization":
            for i in range(1, 5):
                through = f"{node.input[i]}/identity"
                nodes.append(helper.make_node("Identity", [node.input[i]], [through]))
                node.input[i] = through
        nodes.append(node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    a = onnxcost.analyze(model)
    assert sum(n.op_type == "Identity" for n in a.nodes) == 4 * 20
    assert (a.totals.params, a.totals.stat_params) == (11_689_512, 9_600)
    assert (
        a.totals.peak_activation_bytes == onnxcost.analyze("resnet18").totals.peak_activation_bytes
    )


@pytest.mark.parametrize("bias_first", [True, False])
def test_the_bias_of_a_one_unit_dense_layer_is_a_param(bias_first: bool) -> None:
    # torch's Linear(4, 1) on a sequence, and Keras' Dense(1) through tf2onnx: MatMul by W
    # [4, 1] then Add of b [1] (torch writes the bias first, tf2onnx second). torch's
    # sum(p.numel()): 4 + 1 = 5, where the one-element b was left out as a lone scalar (4).
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 1])
    add = ["b", "p"] if bias_first else ["p", "b"]
    model = _model(
        [helper.make_node("MatMul", ["x", "w"], ["p"]), helper.make_node("Add", add, ["y"])],
        [_floats("w", [4, 1]), _floats("b", [1])],
        inputs=(x,),
        outputs=(y,),
    )
    a = onnxcost.analyze(model)
    assert a.totals.params == 5
    assert [n.params for n in a.nodes] == [4, 1]
    assert a.totals.param_bytes == 5 * 4


@pytest.mark.parametrize(
    ("w_dims", "b_input", "params"),
    [
        # two output units: a scalar added to their product is no bias (an epsilon): W 8
        ([4, 2], "b", 8),
        # the one-element tensor is the product's other operand of the MatMul, not an Add
        # of it: W 4 only (x @ W + x@W is no bias either: the Add reads no constant)
        ([4, 1], "p", 4),
    ],
)
def test_a_lone_scalar_after_a_matmul_is_no_param(
    w_dims: list[int], b_input: str, params: int
) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, w_dims[1]])
    model = _model(
        [
            helper.make_node("MatMul", ["x", "w"], ["p"]),
            helper.make_node("Add", ["p", b_input], ["y"]),
        ],
        [_floats("w", w_dims), _floats("b", [1])],
        inputs=(x,),
        outputs=(y,),
    )
    assert onnxcost.analyze(model).totals.params == params
