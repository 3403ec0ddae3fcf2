"""One prepared model for every command; the formula registry passed in; compare on analyses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import onnx
import pytest
from onnx import TensorProto, helper
from onnxcost_testing import parse

from onnxcost import zoo
from onnxcost.api import analyze
from onnxcost.bench.session import prepare_model
from onnxcost.compare import compare
from onnxcost.costs import REGISTRY, Cost, OpContext
from onnxcost.errors import UsageError
from onnxcost.prepare import prepare

# Two unnamed nodes and a call of a local function: onnxruntime would name all three itself.
UNNAMED = """
<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
g (float[N, 4] x) => (float[N, 4] y) {
    a = Relu(x)
    b = local.Twice(a)
    y = Relu(b)
}
<domain: "local", opset_import: ["" : 17]>
Twice (t) => (u) {
    s = Add(t, t)
    u = Relu(s)
}
"""


def test_prepare_inlines_names_and_indexes_once() -> None:
    prepared = prepare(parse(UNNAMED))
    assert prepared.renamed
    assert not prepared.proto.functions
    names = [n.name for n in prepared.proto.graph.node]
    assert all(names)
    assert len(set(names)) == len(names)
    assert prepared.view.names == tuple(names)
    assert prepare(prepared) is prepared


def test_a_named_file_is_not_renamed(tmp_path: Path) -> None:
    model = parse(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x) => (float[N, 4] y) {
            a = Relu(x)
            y = Relu(a)
        }
        """
    )
    for i, node in enumerate(model.graph.node):
        node.name = f"n{i}"
    path = tmp_path / "named.onnx"
    onnx.save(model, path)
    prepared = prepare(path)
    assert not prepared.renamed
    assert prepared.path == path
    assert prepared.display == str(path)


def test_analysing_a_prepared_model_leaves_it_unchanged() -> None:
    prepared = prepare(parse(UNNAMED))
    before = prepared.proto.SerializeToString()
    one = analyze(prepared, dims={"N": 1})
    eight = analyze(prepared, dims={"N": 8})
    assert prepared.proto.SerializeToString() == before
    # Relu, Add, Relu, Relu over N x 4 elements: 4 FLOPs per row each, 16 per row.
    assert one.totals.flops == 16
    assert eight.totals.flops == 8 * 16
    assert one.prepared is prepared
    assert one.to_dict() == analyze(parse(UNNAMED), dims={"N": 1}).to_dict()


def test_bench_runs_the_prepared_graph_whose_names_the_analysis_has() -> None:
    """onnxruntime gets the prepared model's bytes (no second naming pass), so the names in
    the graph it profiles are, node for node, the analysis' names."""
    ort_model = prepare_model(parse(UNNAMED))
    assert ort_model.renamed
    assert ort_model.data is not None
    assert ort_model.prepared is not None
    ran = onnx.ModelProto()
    ran.ParseFromString(ort_model.data)
    analysis = analyze(ort_model.prepared, dims={"N": 2})
    assert [n.name for n in ran.graph.node] == [r.name for r in analysis.nodes]


def test_a_builtin_model_is_built_once_for_analysis_and_bench(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    build = zoo.build

    def counting(name: str, **kwargs: Any) -> onnx.ModelProto:
        calls.append(name)
        return build(name, **kwargs)

    monkeypatch.setattr(zoo, "build", counting)
    ort_model = prepare_model("mlp")
    assert ort_model.prepared is not None
    analyze(ort_model.prepared)
    assert calls == ["mlp"]


def test_prepare_builds_a_builtin_model_with_its_parameters() -> None:
    prepared = prepare("gpt2", params={"layers": 1, "hidden": 16, "heads": 2, "vocab": 32})
    assert prepared.builtin == "gpt2"
    assert prepared.display == "gpt2"
    # layers=1 was built: GPT-2 has two LayerNorms per block (ln_1, ln_2) and ln_f, 1 x 2 + 1 = 3
    assert sum(1 for n in prepared.proto.graph.node if n.op_type == "LayerNormalization") == 3


def test_prepare_params_apply_to_builtin_models_only(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(parse(UNNAMED), path)
    with pytest.raises(UsageError, match=r"built-in models only; .*m\.onnx.* is not one"):
        prepare(str(path), params={"layers": 1})
    with pytest.raises(UsageError, match=r"built-in models only \(onnxcost zoo list\)"):
        prepare(parse(UNNAMED), params={"layers": 1})
    with pytest.raises(UsageError, match="again from the built-in model's name"):
        prepare(prepare("mlp"), params={"layers": 1})


def doubled_relu(ctx: OpContext) -> Cost:
    """FLOPs = 2 x numel(Y): a user's own count."""
    return Cost(flops=2 * ctx.out_numel())


def test_registry_override_for_one_run_leaves_the_global_registry() -> None:
    model = parse(UNNAMED)
    builtin = analyze(model, dims={"N": 1})
    relu_flops = sum(n.flops for n in builtin.nodes if n.op_type == "Relu")
    assert relu_flops == 3 * 4  # three Relus over 1 x 4 elements, one FLOP each
    mine = REGISTRY.with_formula("Relu", doubled_relu)
    overridden = analyze(model, dims={"N": 1}, registry=mine)
    assert sum(n.flops for n in overridden.nodes if n.op_type == "Relu") == 2 * 3 * 4
    assert overridden.totals.flops == builtin.totals.flops + 3 * 4
    again = analyze(model, dims={"N": 1})
    assert again.totals.flops == builtin.totals.flops
    relu = REGISTRY.lookup("", "Relu", 17)
    assert relu is not None
    assert relu.formula is not doubled_relu


def test_compare_two_analyses_as_compare_of_the_models() -> None:
    a, b = prepare("mlp"), prepare("resnet20_cifar")
    from_analyses = compare([analyze(a), analyze(b)])
    from_sources = compare(["mlp", "resnet20_cifar"])
    assert json.loads(from_analyses.to_json()) == json.loads(from_sources.to_json())


def test_compare_an_analysis_of_a_file_reads_its_graph_again(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(parse(UNNAMED), path)
    c = compare([analyze(path, dims={"N": 2}), prepare(path)], dims={"N": 2})
    flops = next(r for r in c.totals if r.key == "flops")
    assert flops.values == (2 * 16, 2 * 16)  # 16 FLOPs per row (see above), N = 2


def test_compare_an_analysis_of_bytes_says_to_prepare_it() -> None:
    data = parse(UNNAMED).SerializeToString()
    with pytest.raises(UsageError, match=r"analyze\(onnxcost.prepare.prepare\(source\)\)"):
        compare([analyze(data), data])


def test_compare_refuses_analyses_of_another_convention() -> None:
    with pytest.raises(UsageError, match="convention='torch'"):
        compare([analyze("mlp", convention="torch"), "mlp"])


def test_prepare_makes_every_name_text() -> None:
    # Each name below is written with a byte that is not UTF-8 (0xFF); protobuf hands such a
    # string field out as bytes. Preparing makes each text, the byte written \xff.
    body = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r~"], name="in~body")],
        "body~",
        [],
        [helper.make_tensor_value_info("r~", TensorProto.FLOAT, ["n~"])],
    )
    nodes = [
        helper.make_node("Add", ["x", "w~"], ["a~"], name="add~"),
        helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body),
    ]
    graph = helper.make_graph(
        nodes,
        "g~",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n~"]),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n~"])],
        [helper.make_tensor("w~", TensorProto.FLOAT, [1], [1.0])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    data = model.SerializeToString().replace(b"~", b"\xff")
    proto = prepare(data).proto
    g, add, sub = proto.graph, proto.graph.node[0], proto.graph.node[1].attribute[0].g
    assert (g.name, add.name, tuple(add.input), tuple(add.output)) == (
        "g\\xff",
        "add\\xff",
        ("x", "w\\xff"),
        ("a\\xff",),
    )
    assert g.initializer[0].name == "w\\xff"
    assert g.input[0].type.tensor_type.shape.dim[0].dim_param == "n\\xff"
    assert (sub.name, sub.node[0].name, sub.node[0].output[0]) == (
        "body\\xff",
        "in\\xffbody",
        "r\\xff",
    )
    assert sub.output[0].type.tensor_type.shape.dim[0].dim_param == "n\\xff"
