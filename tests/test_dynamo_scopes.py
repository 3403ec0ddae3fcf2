"""analysis.scopes: a torch dynamo export's nodes take their scope from the module path the
exporter recorded (``pkg.torch.onnx.name_scopes``), so ``--depth``, ``--tree``, ``by_scope``,
the JSON and the CSV break it down by module as they do a TorchScript export by node name.
Expected figures are worked out by hand in the comments."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

import onnxcost
from onnxcost.analysis.scopes import MAX_SCOPES_TEXT, SCOPES
from onnxcost.cli.app import app
from onnxcost.report.tree import scope_rows, scope_tree

EXPORTS = Path(__file__).parent / "data" / "exports"
F = TensorProto.FLOAT


def _node(
    op: str, ins: list[str], outs: list[str], name: str, scopes: str | None
) -> onnx.NodeProto:
    node = helper.make_node(op, ins, outs, name=name)
    # As the exporter writes a node's metadata: its name scopes fourth.
    for key, value in (("namespace", ""), ("pkg.torch.onnx.class_hierarchy", "[]")):
        entry = node.metadata_props.add()
        entry.key, entry.value = key, value
    entry = node.metadata_props.add()
    entry.key, entry.value = "pkg.torch.onnx.fx_node", ""
    if scopes is not None:
        entry = node.metadata_props.add()
        entry.key, entry.value = SCOPES, scopes
    return node


def _two_blocks() -> onnx.ModelProto:
    """x [1, 4] -> h.0.fc (MatMul by a [4, 4] weight) -> h.0.act (Relu) -> h.1.fc -> h.1.act
    -> head (MatMul [4, 2]), each as the dynamo exporter names it (``node_MatMul_3``) with its
    name scopes; then an Identity of the root module and one of the exporter's own."""
    chain = "['', 'net', 'net.h.{k}', 'net.h.{k}.{m}', '{fx}']"
    nodes = [
        _node("MatMul", ["x", "w0"], ["a0"], "node_MatMul_1", chain.format(k=0, m="fc", fx="mm")),
        _node("Relu", ["a0"], ["r0"], "node_Relu_2", chain.format(k=0, m="act", fx="relu")),
        _node(
            "MatMul", ["r0", "w1"], ["a1"], "node_MatMul_7", chain.format(k=1, m="fc", fx="mm_1")
        ),
        _node("Relu", ["a1"], ["r1"], "node_Relu_9", chain.format(k=1, m="act", fx="relu_1")),
        _node("MatMul", ["r1", "w2"], ["y0"], "node_linear", "['', 'net', 'net.head', 'linear']"),
        _node("Identity", ["y0"], ["y1"], "node_alias", "['', 'alias']"),
        _node("Identity", ["y1"], ["y"], "node_Shape_0", "['_empty_nn_module_stack', 'size']"),
    ]
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
        for n, s in (("w0", (4, 4)), ("w1", (4, 4)), ("w2", (4, 2)))
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, [1, 4])],
        [helper.make_tensor_value_info("y", F, [1, 2])],
        weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def test_each_node_takes_its_module_path_as_its_scope() -> None:
    a = onnxcost.analyze(_two_blocks())
    # Each module's name relative to the one it is in: net.h.0.fc is /net/h.0/fc (the
    # ModuleList h is never called, so h.0 is one part); a node of the root module itself and
    # the exporter's own have none.
    assert [n.scope for n in a.nodes] == [
        "/net/h.0/fc",
        "/net/h.0/act",
        "/net/h.1/fc",
        "/net/h.1/act",
        "/net/head",
        None,
        None,
    ]
    # By hand: each fc 1 x 4 x 4 = 16 MACs and 16 params, the head 1 x 4 x 2 = 8 and 8.
    by_two = {s.scope: (s.macs, s.params, s.count) for s in a.by_scope(2)}
    assert by_two == {
        "/net/h.0": (16, 16, 2),
        "/net/h.1": (16, 16, 2),
        "/net/head": (8, 8, 1),
        "node_alias": (0, 0, 1),  # a node without a scope falls under its own name
        "node_Shape_0": (0, 0, 1),
    }
    assert {s.scope: s.macs for s in a.by_scope(1)}["/net"] == 40  # 16 + 16 + 8


def test_alike_blocks_fold_though_their_node_names_differ() -> None:
    # h.0 and h.1 hold the same ops at the same costs; their nodes are named by number
    # (node_MatMul_1, node_MatMul_7), which must not keep them apart.
    root = scope_tree(onnxcost.analyze(_two_blocks()).counted_nodes)
    labels = [(depth, label, s.macs) for depth, label, s in scope_rows(root, 2)]
    assert labels[:3] == [
        (1, "net", 40),
        (2, "h.0 … h.1 (2 x)", 32),  # both blocks, 2 x 16
        (2, "head", 8),
    ]


def test_the_json_and_csv_carry_the_scope() -> None:
    a = onnxcost.analyze(_two_blocks())
    nodes = json.loads(a.to_json())["nodes"]
    assert nodes[0]["scope"] == "/net/h.0/fc"
    assert "scope" not in nodes[5]  # none: the key is left out, as for any other export
    text = CliRunner().invoke(app, ["analyze", "models/mlp_torch_script.onnx", "-f", "csv"])
    assert "scope" not in text.output.splitlines()[0]  # TorchScript's names are the scopes


def test_the_csv_of_a_dynamo_export_ends_with_the_scope(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(_two_blocks(), path)
    got = CliRunner().invoke(app, ["analyze", str(path), "-f", "csv"])
    assert got.exit_code == 0, got.output
    rows = list(csv.DictReader(io.StringIO(got.output)))
    assert [r["scope"] for r in rows if r["name"] == "node_Relu_9"] == ["/net/h.1/act"]
    assert [r["scope"] for r in rows if r["name"] == "node_alias"] == [""]


def test_hostile_name_scopes_are_not_read() -> None:
    model = _two_blocks()
    long = "['', " + ", ".join(["'m'"] * (MAX_SCOPES_TEXT // 4)) + ", 'x']"
    model.graph.node[0].metadata_props[3].value = long
    model.graph.node[1].metadata_props[3].value = "not a list"
    a = onnxcost.analyze(model)
    # Neither text is read: each node is placed as one without name scopes, node 1 by its
    # reader (h.1's fc), node 0 by none (its reader is node 1, its input the graph's).
    assert [n.scope for n in a.nodes[:3]] == [None, "/net/h.1/fc", "/net/h.1/fc"]


def test_tiny_gpt2_from_the_dynamo_exporter_breaks_down_by_module() -> None:
    # GPT2LMHeadModel(vocab 100, 32 positions, hidden 32, 2 layers, 4 heads), untrained,
    # torch.onnx.export(dynamo=True), at batch 1, seq 1. By hand, per layer: ln_1 and ln_2
    # 64 params each; attn's c_attn 32 x 96 + 96 = 3,168 and c_proj 32 x 32 + 32 = 1,056;
    # mlp's c_fc 32 x 128 + 128 = 4,224 and c_proj 128 x 32 + 32 = 4,128: 12,704 a layer.
    # MACs a layer: c_attn 32 x 96 = 3,072, c_proj 1,024, c_fc 4,096, c_proj 4,096, and
    # attention at one position, 4 heads of 8: q.k 4 x 8 = 32 and p.v 32: 12,352.
    # wte 100 x 32 = 3,200 params (the LM head reads it, tied: 0 of its own, and 32 x 100 =
    # 3,200 MACs), wpe 32 x 32 = 1,024, ln_f 64.
    a = onnxcost.analyze(EXPORTS / "tiny_gpt2_dynamo_untrained.onnx")
    got = {s.scope: (s.params, s.macs) for s in a.by_scope(3)}
    assert got["/gpt2/transformer/h.0"] == (12_704, 12_352)
    assert got["/gpt2/transformer/h.1"] == (12_704, 12_352)
    assert got["/gpt2/transformer/wte"] == (3_200, 0)
    assert got["/gpt2/transformer/wpe"] == (1_024, 0)
    assert got["/gpt2/transformer/ln_f"] == (64, 0)
    assert got["/gpt2/lm_head"] == (0, 3_200)
    layer = {s.scope: s.params for s in a.by_scope(5)}
    assert layer["/gpt2/transformer/h.1/attn/c_attn"] == 3_168
    assert layer["/gpt2/transformer/h.1/mlp/c_proj"] == 4_128


def test_the_node_tables_show_each_node_in_its_module(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(_two_blocks(), path)
    got = CliRunner().invoke(app, ["analyze", str(path)], env={"COLUMNS": "200"})
    assert got.exit_code == 0, got.output
    assert "/net/h.1/act/node_Relu_9" in got.output  # the terminal table
    assert " node_alias " in got.output  # a node without a scope, as named
    page = tmp_path / "m.html"
    got = CliRunner().invoke(app, ["analyze", str(path), "-f", "html", "-o", str(page)])
    assert got.exit_code == 0, got.output
    assert "/net/h.1/act/node_Relu_9" in page.read_text(encoding="utf-8")


def test_a_sequentials_children_and_a_conv_with_its_batchnorm_folded_in() -> None:
    # torchvision's resnet18 as the dynamo exporter writes it: m.layer1 is a Sequential (it is
    # called, so it is a scope of its own) whose child 0 TorchScript names layer1.0; the Conv
    # of m.layer1.0.conv1 with m.layer1.0.bn1 folded in carries the BatchNorm's record, and
    # its weight keeps the Conv's param path.
    conv = helper.make_node(
        "Conv", ["x", "m.layer1.0.conv1.weight", "m.layer1.0.conv1.weight_bias"], ["c"]
    )
    conv.name = "node_Conv_294"
    for key, value in (
        ("pkg.onnxscript.rewriter.rule_name", "FuseBatchNormIntoConv, RemoveOptionalBiasFromConv"),
        ("pkg.torch.onnx.fx_node", "%_native_batch_norm_legit_no_training"),
        (SCOPES, "['', 'm', 'm.layer1', 'm.layer1.0', 'm.layer1.0.bn1', '_native_batch_norm']"),
    ):
        entry = conv.metadata_props.add()
        entry.key, entry.value = key, value
    relu = _node(
        "Relu",
        ["c"],
        ["y"],
        "node_Relu_1",
        "['', 'm', 'm.layer1', 'm.layer1.0', 'm.layer1.0.relu', 'relu']",
    )
    graph = helper.make_graph(
        [conv, relu],
        "g",
        [helper.make_tensor_value_info("x", F, [1, 2, 3, 3])],
        [helper.make_tensor_value_info("y", F, [1, 2, 1, 1])],
        [
            numpy_helper.from_array(np.ones((2, 2, 3, 3), np.float32), "m.layer1.0.conv1.weight"),
            numpy_helper.from_array(np.ones(2, np.float32), "m.layer1.0.conv1.weight_bias"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    a = onnxcost.analyze(model)
    assert [n.scope for n in a.nodes] == ["/m/layer1/layer1.0/conv1", "/m/layer1/layer1.0/relu"]


def test_the_json_of_depth_lists_every_scope_to_it(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(_two_blocks(), path)
    got = CliRunner().invoke(app, ["analyze", str(path), "--depth", "2", "-f", "json"])
    assert got.exit_code == 0, got.output
    scopes = [
        (s["scope"], s["depth"], s["nodes"], s["macs"]) for s in json.loads(got.output)["scopes"]
    ]
    # Not folded: each block on its own, with its 16 MACs (1 x 4 x 4) and 2 nodes.
    assert scopes == [
        ("/net", 1, 5, 40),
        ("/net/h.0", 2, 2, 16),
        ("/net/h.1", 2, 2, 16),
        ("/net/head", 2, 1, 8),
        ("(other)", 1, 2, 0),
    ]
    plain = CliRunner().invoke(app, ["analyze", str(path), "-f", "json"])
    assert "scopes" not in json.loads(plain.output)  # only where the tree is asked for


def test_a_node_the_optimizer_wrote_goes_where_its_readers_are() -> None:
    # x -> MatMul (/net/h.0/fc) -> Split, which the exporter's optimizer wrote for chunk()
    # and left without name scopes -> Relu (/net/h.1/left) and Relu (/net/h.1/right) ->
    # Concat (/net/h.1) -> Identity, also without: the Split is h.1's (its readers share
    # it), the last Identity, read by no node, its writer's (h.1).
    chain = "['', 'net', 'net.h.{k}', {m}'{fx}']"
    nodes = [
        _node(
            "MatMul",
            ["x", "w0"],
            ["a"],
            "node_MatMul_1",
            chain.format(k=0, m="'net.h.0.fc', ", fx="mm"),
        ),
        helper.make_node("Split", ["a"], ["l", "r"], name="node_Split_2", axis=1, num_outputs=2),
        _node(
            "Relu", ["l"], ["rl"], "node_Relu_3", chain.format(k=1, m="'net.h.1.left', ", fx="relu")
        ),
        _node(
            "Relu",
            ["r"],
            ["rr"],
            "node_Relu_4",
            chain.format(k=1, m="'net.h.1.right', ", fx="relu_1"),
        ),
        _node("Concat", ["rl", "rr"], ["c"], "node_cat", chain.format(k=1, m="", fx="cat")),
        helper.make_node("Identity", ["c"], ["y"], name="node_Identity_5"),
    ]
    nodes[4].attribute.append(helper.make_attribute("axis", 1))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, [1, 4])],
        [helper.make_tensor_value_info("y", F, [1, 4])],
        [numpy_helper.from_array(np.ones((4, 4), np.float32), "w0")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    a = onnxcost.analyze(model)
    assert [n.scope for n in a.nodes] == [
        "/net/h.0/fc",
        "/net/h.1",
        "/net/h.1/left",
        "/net/h.1/right",
        "/net/h.1",
        "/net/h.1",
    ]


def test_the_csv_of_depth_lists_the_scopes_instead_of_the_nodes(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(_two_blocks(), path)
    got = CliRunner().invoke(app, ["analyze", str(path), "--depth", "1", "-f", "csv"])
    assert got.exit_code == 0, got.output
    rows = list(csv.DictReader(io.StringIO(got.output)))
    # /net: 16 + 16 + 8 = 40 MACs and as many params over its 5 nodes; the root module's
    # Identity and the exporter's own are (other), 0 of each.
    assert [(r["scope"], r["nodes"], r["macs"], r["params"]) for r in rows] == [
        ("/net", "5", "40", "40"),
        ("(other)", "2", "0", "0"),
    ]
