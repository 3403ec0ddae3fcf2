"""analysis.merged: the params torch's dynamo exporter merged into one tensor or dropped from
an untrained model, counted as the model's own. Expected counts are worked out by hand in the
comments; the tiny GPT-2's is also transformers' own ``num_parameters()`` at export."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import onnxcost

EXPORTS = Path(__file__).parent / "data" / "exports"
SCOPES = "pkg.torch.onnx.name_scopes"
F = TensorProto.FLOAT


def test_tiny_gpt2_from_the_dynamo_exporter_counts_every_param() -> None:
    # GPT2LMHeadModel(vocab 100, 32 positions, hidden 32, 2 layers, 4 heads), untrained,
    # torch.onnx.export(dynamo=True), torch 2.13 (node metadata kept: name scopes, and the FX
    # node of each Gemm). By hand: wte 100 x 32 = 3,200 (the LM head is tied), wpe 32 x 32 =
    # 1,024; per layer ln_1 and ln_2 2 x 64, c_attn 32 x 96 + 96 = 3,168, attn c_proj
    # 32 x 32 + 32 = 1,056, c_fc 32 x 128 + 128 = 4,224, mlp c_proj 128 x 32 + 32 = 4,128:
    # 12,704 a layer, 25,408; ln_f 64. 29,696 in all, transformers' num_parameters().
    # The file stores 832 fewer: its 5 LayerNorm weights (ones) are one tensor, and so are
    # the 5 biases (zeros): 2 x 4 x 32 = 256 merged; its 8 Gemms lost their zero biases,
    # 2 x (96 + 32 + 128 + 32) = 576 dropped. 28,864 were counted before.
    a = onnxcost.analyze(EXPORTS / "tiny_gpt2_dynamo_untrained.onnx")
    assert a.totals.params == 29_696
    assert a.totals.param_bytes == 29_696 * 4
    norms = [n for n in a.nodes if n.op_type == "LayerNormalization"]
    assert [n.params for n in norms] == [64] * 5  # each its own weight and bias
    gemms = {n.params for n in a.nodes if n.op_type == "Gemm"}
    assert gemms == {3_168, 1_056, 4_224, 4_128}  # each with its bias
    (warning,) = [w for w in a.warnings if w.startswith("torch's exporter")]
    assert "merged 2 tensors" in warning
    assert "dropped 8 Gemm biases" in warning
    assert "832 params" in warning


def _node(op: str, ins: list[str], outs: list[str], module: str) -> onnx.NodeProto:
    node = helper.make_node(op, ins, outs, name=f"{module}/{op}")
    entry = node.metadata_props.add()
    entry.key, entry.value = SCOPES, repr(["", *module.split("|"), f"{op.lower()}_0"])
    return node


def _two_norms(modules: tuple[str, str], weight: np.ndarray, bias_name: str = "a.bias") -> int:
    """x [2, 4] -> LayerNorm -> LayerNorm, both reading ``a.weight`` (``weight``) and
    ``bias_name`` (zeros): the params counted."""
    graph = helper.make_graph(
        [
            _node("LayerNormalization", ["x", "a.weight", bias_name], ["h"], modules[0]),
            _node("LayerNormalization", ["h", "a.weight", bias_name], ["y"], modules[1]),
        ],
        "g",
        [helper.make_tensor_value_info("x", F, [2, 4])],
        [helper.make_tensor_value_info("y", F, [2, 4])],
        [
            numpy_helper.from_array(weight.astype(np.float32), "a.weight"),
            numpy_helper.from_array(np.zeros(4, np.float32), bias_name),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return onnxcost.analyze(model).totals.params


def test_a_merged_tensor_counts_once_per_module_that_reads_it() -> None:
    # two LayerNorms of modules "a" and "b" read one weight of ones [4] and one bias of zeros
    # [4]: each module's own, 2 x (4 + 4) = 16
    assert _two_norms(("a", "b"), np.ones(4)) == 16
    # one module called twice (ALBERT's shared layer): its params, once, 4 + 4 = 8
    assert _two_norms(("a", "a"), np.ones(4)) == 8
    # a weight of distinct values is one param both read (a tie): 4, and the zeros 4 x 2
    assert _two_norms(("a", "b"), np.arange(1, 5)) == 4 + 4 + 4
    # a tensor the exporter named (a folded mask, ``where``) is no param merged: the weight
    # twice, 4 + 4, and ``where`` once, 4
    assert _two_norms(("a", "b"), np.ones(4), bias_name="where") == 4 + 4 + 4


_ADDMM = (
    "%addmm : [num_users=1] = call_function[target=torch.ops.aten.addmm.default]"
    "(args = (%p_fc_bias, %x, %p_fc_weight), kwargs = {})"
)
_LINEAR = (
    "%linear : [num_users=1] = call_function[target=torch.ops.aten.linear.default]"
    "(args = (%view, %p_fc_weight, %p_fc_bias), kwargs = {})"
)


def _gemm(metadata: bool, stored_bias: bool, record: str = _ADDMM) -> int:
    """x [2, 8] -> Gemm by fc.weight [8, 3] (addmm) or, transposed, [3, 8] (linear), written
    without C: the params counted."""
    linear = record is _LINEAR
    node = _node("Gemm", ["x", "fc.weight"], ["y"], "fc")
    if linear:
        node.attribute.append(helper.make_attribute("transB", 1))
    if metadata:
        entry = node.metadata_props.add()
        entry.key, entry.value = "pkg.torch.onnx.fx_node", record
    weight = np.ones((3, 8) if linear else (8, 3), np.float32)
    inits = [numpy_helper.from_array(weight, "fc.weight")]
    if stored_bias:  # (read by nothing: the bias is stored, so none was dropped)
        inits.append(numpy_helper.from_array(np.ones(3, np.float32), "fc.bias"))
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", F, [2, 8])],
        [helper.make_tensor_value_info("y", F, [2, 3])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return onnxcost.analyze(model).totals.params


def test_a_gemm_bias_the_optimizer_dropped_is_counted_from_the_exporter_record() -> None:
    # fc.weight 8 x 3 = 24; its FX node, addmm(%p_fc_bias, ...), had a bias of 3 (the Gemm's
    # output features): 27
    assert _gemm(metadata=True, stored_bias=False) == 24 + 3
    # no record: what is stored, 24; the bias stored after all: nothing dropped, 24
    assert _gemm(metadata=False, stored_bias=False) == 24
    assert _gemm(metadata=True, stored_bias=True) == 24
    # nn.Linear on a 2-D input (a classifier head), linear(x, %p_fc_weight, %p_fc_bias): the
    # weight [3, 8] read transposed, 24, and its bias of 3 output features: 27
    assert _gemm(metadata=True, stored_bias=False, record=_LINEAR) == 24 + 3


def test_tiny_bert_from_the_dynamo_exporter_counts_every_param() -> None:
    # tests/data/exports/bert.onnx: BertModel(vocab 100, hidden 32, 2 layers, intermediate 64,
    # 64 positions), untrained, dynamo, its last hidden state (no pooler). By hand: embeddings
    # 100 x 32 + 64 x 32 + 2 x 32 + LayerNorm 64 = 5,376; a layer's q, k, v and output
    # 4 x (32 x 32 + 32) = 4,224, LayerNorm 64, intermediate 32 x 64 + 64 = 2,112, output
    # 64 x 32 + 32 = 2,080, LayerNorm 64: 8,544, and 2 of them 17,088. 22,464 in all; the
    # file stores 640 fewer: its 5 LayerNorm weights are one tensor of ones (4 x 32 merged),
    # its 5 LayerNorm, 8 attention and 2 output biases of zeros [32] another (14 x 32), the
    # intermediate's 2 zero biases [64] a third (64): 128 + 448 + 64.
    a = onnxcost.analyze(EXPORTS / "bert.onnx")
    assert a.totals.params == 22_464


def test_merged_and_dropped_params_train_as_the_stored_ones() -> None:
    # The tiny GPT-2's 29,696 params all train: AdamW's two fp32 moments, 8 x 29,696 =
    # 237,568 bytes (28,864 and 230,912 before). Each counts under its own param's path, so
    # --freeze finds it: the 5 LayerNorms, 5 x 64 = 320, frozen leave 29,376; c_attn, its
    # 2 x (32 x 96) weights and 2 x 96 dropped biases, 6,336, leave 23,360.
    path = EXPORTS / "tiny_gpt2_dynamo_untrained.onnx"
    trained = onnxcost.analyze(path, training=True).totals.training
    assert trained is not None
    assert trained.trainable_params == 29_696
    assert trained.training_memory.optimizer_bytes == 8 * 29_696
    for frozen, left in ((r"\.ln_", 29_376), (r"c_attn", 23_360)):
        trained = onnxcost.analyze(path, training=True, frozen=frozen).totals.training
        assert trained is not None
        assert trained.trainable_params == left


def _conv(op: str, weight: tuple[int, ...], record: str, group: int = 1) -> int:
    """x [1, 3, 4, 4] -> ``op`` by conv.weight (ones), written without B, its FX record
    ``record``: the params counted."""
    node = _node(op, ["x", "conv.weight"], ["y"], "conv")
    node.attribute.append(helper.make_attribute("group", group))
    entry = node.metadata_props.add()
    entry.key, entry.value = "pkg.torch.onnx.fx_node", record
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", F, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", F, None)],
        [numpy_helper.from_array(np.ones(weight, np.float32), "conv.weight")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    a = onnxcost.analyze(model)
    for warning in (w for w in a.warnings if w.startswith("torch's exporter")):
        assert f"dropped 1 {op} bias of zeros" in warning  # its op, one bias
    return a.totals.params


def test_a_conv_bias_the_optimizer_dropped_is_counted_from_the_exporter_record() -> None:
    # A fresh ViT's patch embedding: conv2d(x, %p_conv_weight, %p_conv_bias, [2, 2]) written
    # as a Conv without B. W [8, 3, 3, 3] = 216, and a bias per output channel, 8: 224
    record = (
        "%conv2d : [num_users=1] = call_function[target=torch.ops.aten.conv2d.default]"
        "(args = (%x, %p_conv_weight, %p_conv_bias, [2, 2]), kwargs = {})"
    )
    assert _conv("Conv", (8, 3, 3, 3), record) == 216 + 8
    # ConvTranspose: W [3, 4, 2, 2] = 48, output channels W's second dim x groups, 4 x 1: 52
    transposed = record.replace("aten.conv2d", "aten.conv_transpose2d")
    assert _conv("ConvTranspose", (3, 4, 2, 2), transposed) == 48 + 4
    # a conv without a bias (bias=False: conv2d(x, %p_conv_weight)) has none to add: 216
    assert _conv("Conv", (8, 3, 3, 3), record.replace(", %p_conv_bias", "")) == 216
    # a BatchNorm folded into the Conv (ResNet's): the record is the BatchNorm's, and the
    # folded bias, its shift (zeros, untrained), one per output channel: 216 + 8, as the
    # TorchScript exporter stores it (torchvision's resnet18: 11,684,712, its 11,689,512 less
    # its 4,800 BatchNorm channels, where 11,679,912 was counted)
    folded = (
        "%_native_batch_norm_legit_no_training : [num_users=1] = call_function[target=torch."
        "ops.aten._native_batch_norm_legit_no_training.default](args = (%conv2d, %p_bn1_weight, "
        "%p_bn1_bias, %b_bn1_running_mean, %b_bn1_running_var, 0.1, 1e-05), kwargs = {})"
    )
    assert _conv("Conv", (8, 3, 3, 3), folded) == 216 + 8


def _recorded(op: str, ins: list[str], out: str, chain: list[str], fx: str) -> onnx.NodeProto:
    """A node of module ``chain[-1]`` (its name scopes, then ``out``) with its FX record."""
    node = helper.make_node(op, ins, [out], name=f"node_{out}")
    for key, value in ((SCOPES, repr(["", *chain, out])), ("pkg.torch.onnx.fx_node", fx)):
        entry = node.metadata_props.add()
        entry.key, entry.value = key, value
    return node


def _params_of(nodes: list[onnx.NodeProto], out: str, stored: list[onnx.TensorProto]) -> int:
    """The params counted in the graph of ``nodes`` from x [2, 4] to ``out`` [2, 4]."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, [2, 4])],
        [helper.make_tensor_value_info(out, F, [2, 4])],
        stored,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return onnxcost.analyze(model).totals.params


def test_two_params_of_one_module_merged_count_as_two() -> None:
    # CaiT's blocks: gamma_1 and gamma_2 (layer scales, each [4] of one value at init) of
    # blocks.0 and blocks.1, all four merged into blocks.0.gamma_1 and read by 4 Muls. Each
    # Mul's FX record names its param: 4 params of 4 = 16 (8 were counted: once a module).
    chains = (["blocks", "blocks.0"], ["blocks", "blocks.1"])
    muls = []
    for b, chain in enumerate(chains):
        for g in (1, 2):
            fx = f"%mul_{b}{g} = aten.mul.Tensor](args = (%p_blocks_{b}_gamma_{g}, %x), kwargs = {{}})"
            muls.append((chain, g, fx))
    nodes, last = [], "x"
    for k, (chain, _g, fx) in enumerate(muls):
        nodes.append(_recorded("Mul", [last, "blocks.0.gamma_1"], f"mul_{k}", chain, fx))
        last = f"mul_{k}"
    gamma = numpy_helper.from_array(np.full(4, 1e-5, np.float32), "blocks.0.gamma_1")
    assert _params_of(nodes, last, [gamma]) == 16


def test_a_batchnorms_weight_and_bias_merged_count_apart() -> None:
    # LeViT's BatchNorm1d layers with weight and bias both zeros at init: the optimizer keeps
    # one tensor, bn1.weight [4], and two BatchNorms read it as weight (input 1) and bias
    # (input 2). Each module's weight and bias: 2 x (4 + 4) = 16 params (8 were counted),
    # and their running statistics, 2 x (4 + 4) = 16 statistics.
    nodes = []
    for k, module in enumerate(("bn1", "bn2")):
        ins = [
            "x" if k == 0 else "h",
            "bn1.weight",
            "bn1.weight",
            f"{module}.mean",
            f"{module}.var",
        ]
        fx = f"%bn_{k} = aten._native_batch_norm_legit_no_training.default](args = (%x, ...))"
        nodes.append(_recorded("BatchNormalization", ins, "h" if k == 0 else "y", [module], fx))
    stored = [numpy_helper.from_array(np.zeros(4, np.float32), "bn1.weight")]
    for module in ("bn1", "bn2"):
        stored += [
            numpy_helper.from_array(np.zeros(4, np.float32), f"{module}.mean"),
            numpy_helper.from_array(np.ones(4, np.float32), f"{module}.var"),
        ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, [2, 4])],
        [helper.make_tensor_value_info("y", F, [2, 4])],
        stored,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    a = onnxcost.analyze(model)
    assert (a.totals.params, a.totals.stat_params) == (16, 16)


def _scaled(tensor: str, values: list[str], op: str = "Mul", fx: str = "") -> int:
    """x [2, 4] through one ``op`` per module blocks.0, blocks.1, blocks.2, each reading
    ``tensor`` (4 elements of 1e-6: a layer scale at init), the k-th's FX record naming
    ``values[k]`` as its argument (``fx`` with k for {k}, where given, in its place): the
    params counted."""
    nodes, last = [], "x"
    for k, value in enumerate(values):
        record = f"%m_{k} = aten.mul.Tensor](args = (%permute_{k}, %{value}))"
        if fx:
            record = fx.format(k=k)
        chain = ["blocks", f"blocks.{k}"]
        nodes.append(_recorded(op, [last, tensor], f"out_{k}", chain, record))
        last = f"out_{k}"
    return _params_of(nodes, last, [numpy_helper.from_array(np.full(4, 1e-6, np.float32), tensor)])


def test_a_layer_scale_folded_and_merged_counts_once_per_module() -> None:
    # timm's ConvNeXt blocks: x * gamma.view(1, -1, 1, 1), gamma 1e-6 x ones at init; the
    # optimizer folds each view and merges the three into the first, ``view``. Each Mul's
    # record names its own view: 3 blocks x 4 = 12 (4 were counted: timm's convnext_tiny
    # from the dynamo exporter had 5,184 params fewer than torch, 28,589,128 now).
    assert _scaled("view", ["view", "view_1", "view_2"]) == 12
    # Gemma's norms scale by 1 + weight (zeros at init): each folded to ones, merged into
    # add_4, the records naming add_4, add_9, add_12: 3 x 4 = 12
    assert _scaled("add_4", ["add_4", "add_9", "add_12"]) == 12
    # one value torch itself shares, every record naming it: 4, once
    assert _scaled("view", ["view", "view", "view"]) == 4
    # a mask folded and merged (``where``: computed, no param): 4, once, as ever
    assert _scaled("where", ["where", "where_1", "where_2"]) == 4


def test_a_groupnorm_taken_apart_counts_its_weight_in_each_module() -> None:
    # poolformer's GroupNorm(1, C) as the dynamo exporter writes it: InstanceNormalization,
    # then times weight.view(C, 1, 1) (``val_21``) plus bias.view(C, 1, 1). The weights
    # are ones at init, merged into one tensor read by each block's Mul, whose record is
    # group_norm's, naming the block's weight and bias: 3 x 4 = 12 (4 were counted).
    def group_norm(k: int) -> str:
        return (
            f"%group_norm_{k} = aten.group_norm.default](args = (%x, 1, "
            f"%p_blocks_{k}_weight, %p_blocks_{k}_bias, 1e-05))"
        )

    nodes, last = [], "x"
    for k in range(3):
        chain = ["blocks", f"blocks.{k}"]
        nodes.append(_recorded("Mul", [last, "val_21"], f"m_{k}", chain, group_norm(k)))
        nodes.append(_recorded("Add", [f"m_{k}", "val_23"], f"a_{k}", chain, group_norm(k)))
        last = f"a_{k}"
    stored = [
        numpy_helper.from_array(np.ones(4, np.float32), "val_21"),
        numpy_helper.from_array(np.zeros(4, np.float32), "val_23"),
    ]
    # weights 3 x 4 and biases 3 x 4: 24 (8 were counted)
    assert _params_of(nodes, last, stored) == 24


def test_a_constant_an_op_was_given_is_no_param_of_each_module() -> None:
    # read by an InstanceNormalization per block (a GroupNorm(2, C) taken apart), not by a
    # Mul or Add: the scale of ones [groups] the exporter made up for the op, though the
    # record names the block's params; counted as stored, once: 4
    record = "%gn = aten.group_norm](args = (%x, 2, %p_blocks_{k}_weight, %p_blocks_{k}_bias))"
    assert _scaled("val_8", ["", "", ""], op="InstanceNormalization", fx=record) == 4
    # the same record on a Mul: the weight of each block, 3 x 4 = 12
    assert _scaled("val_8", ["", "", ""], op="Mul", fx=record) == 12
