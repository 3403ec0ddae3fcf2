"""ai.onnx.ml (scikit-learn's skl2onnx, onnxmltools): MACs, FLOPs and the params held in
attributes, by hand; the output shapes of the ops ONNX's inference leaves untyped, against
onnxruntime's.

X is [N, C]. Linear: MACs N x C x E, + N x E intercepts; kernel SVM: N x S x C kernel MACs
(RBF + C subtractions + 2 a value) + N x (K - 1) x S one-vs-one MACs, + 2 a class pair (rho,
vote); trees: per row the sum of the trees' depths (compares) and of their most weights a
leaf (adds); SOFTMAX 5E - 2 a row, label arg-max E - 1 a row.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.parser
import pytest
from onnx import TensorProto, helper

import onnxcost
from onnxcost.costs import REGISTRY

ML_HEAD = '<ir_version: 8, opset_import: ["" : 17, "ai.onnx.ml" : 3]>\n'


def _model(inputs: str, outputs: str, body: str) -> onnx.ModelProto:
    return onnx.parser.parse_model(f"{ML_HEAD}g ({inputs}) => ({outputs}) {{ {body} }}")


def _node(model: onnx.ModelProto) -> onnxcost.analysis.records.NodeRecord:
    (node,) = onnxcost.analyze(model).nodes
    assert node.status in ("ok", "zero"), node.note
    return node


LINEAR_CLASSIFIER_BODY = (
    "y, z = ai.onnx.ml.LinearClassifier <classlabels_ints = [0, 1, 2], "
    "coefficients = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 1.0, 2.0, 3.0], "
    'intercepts = [0.5, 0.5, 0.5], post_transform = "SOFTMAX"> (x)'
)
LINEAR_CLASSIFIER = _model("float[2,4] x", "int64[2] y, float[2,3] z", LINEAR_CLASSIFIER_BODY)


def test_linear_classifier() -> None:
    # N 2, C 4, E 3: MACs 2 x 4 x 3 = 24; FLOPs 48 + intercepts 2 x 3 = 6 + SOFTMAX
    # 2 x (5 x 3 - 2) = 26 + label 2 x (3 - 1) = 4 -> 84; params 12 coefficients + 3 intercepts
    n = _node(LINEAR_CLASSIFIER)
    assert (n.macs, n.flops, n.params) == (24, 84, 15)


def test_params_held_in_attributes_count_in_the_totals() -> None:
    # the 15 float attributes of the LinearClassifier above: 15 params, 15 x 4 = 60 bytes
    a = onnxcost.analyze(LINEAR_CLASSIFIER)
    assert (a.totals.params, a.totals.param_bytes) == (15, 60)
    assert a.model.params_by_dtype == {"float32": 15}


def test_linear_regressor() -> None:
    # N 4, C 3, T 2: MACs 4 x 3 x 2 = 24; FLOPs 48 + intercepts 4 x 2 = 8 -> 56; params 6 + 2
    n = _node(
        _model(
            "float[4,3] x",
            "float[4,2] y",
            "y = ai.onnx.ml.LinearRegressor <coefficients = [1.0, 1.0, 1.0, 2.0, 2.0, 2.0], "
            "intercepts = [0.1, 0.2], targets = 2> (x)",
        )
    )
    assert (n.macs, n.flops, n.params) == (24, 56, 8)


def test_scaler() -> None:
    # [4, 3]: (x - offset) x scale, 2 x 12 = 24 FLOPs; params 3 offsets + 3 scales
    n = _node(
        _model(
            "float[4,3] x",
            "float[4,3] y",
            "y = ai.onnx.ml.Scaler <offset = [1.0, 2.0, 3.0], scale = [0.5, 0.5, 0.5]> (x)",
        )
    )
    assert (n.macs, n.flops, n.params) == (0, 24, 6)


@pytest.mark.parametrize(
    ("norm", "flops"),
    [
        ("L2", 36),  # 4 rows x (3 squares + 2 adds + sqrt + 3 divides = 9)
        ("L1", 32),  # 4 x (3 abs + 2 adds + 3 divides = 8)
        ("MAX", 20),  # 4 x (2 compares + 3 divides = 5)
    ],
)
def test_normalizer(norm: str, flops: int) -> None:
    n = _node(
        _model("float[4,3] x", "float[4,3] y", f'y = ai.onnx.ml.Normalizer <norm = "{norm}"> (x)')
    )
    assert (n.macs, n.flops, n.params) == (0, flops, 0)


SVC = (
    "classlabels_ints = [0, 1, 2], vectors_per_class = [2, 1, 1], "
    "support_vectors = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], "
    "coefficients = [1.0, -1.0, 0.5, -0.5, 1.0, -1.0, 0.5, -0.5], rho = [0.1, 0.2, 0.3], "
    'kernel_type = "RBF", kernel_params = [0.5, 0.0, 3.0]'
)


def test_svm_classifier_rbf() -> None:
    # N 5, C 2, S 4 support vectors, K 3 classes (3 pairs):
    # MACs: kernels 5 x 4 x 2 = 40 + one-vs-one 5 x (3 - 1) x 4 = 40 -> 80
    # FLOPs: 160 + RBF 5 x 4 x (2 subtractions + 2) = 80 + rho and vote 5 x 3 x 2 = 30
    #   + label 5 x (3 - 1) = 10 -> 280
    # params: 8 support vector values + 8 coefficients + 3 rho = 19
    n = _node(
        _model(
            "float[5,2] x",
            "int64[5] y, float[5,3] z",
            f"y, z = ai.onnx.ml.SVMClassifier <{SVC}> (x)",
        )
    )
    assert (n.macs, n.flops, n.params) == (80, 280, 19)


def test_svm_regressor_rbf() -> None:
    # N 4, C 2, S 3: MACs kernels 4 x 3 x 2 = 24 + coefficients 4 x 3 = 12 -> 36; FLOPs 72
    # + RBF 4 x 3 x 4 = 48 + rho 4 -> 124; params 6 + 3 + 1 = 10
    n = _node(
        _model(
            "float[4,2] x",
            "float[4,1] y",
            "y = ai.onnx.ml.SVMRegressor <n_supports = 3, "
            "support_vectors = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], coefficients = [1.0, 2.0, 3.0], "
            'rho = [0.5], kernel_type = "RBF", kernel_params = [0.5, 0.0, 3.0]> (x)',
        )
    )
    assert (n.macs, n.flops, n.params) == (36, 124, 10)


# Two trees over 3 features. Tree 0: node 0 splits to leaf 1 and node 2, which splits to
# leaves 3 and 4 (depth 2); tree 1: node 0 splits to leaves 1 and 2 (depth 1).
TREES = (
    "nodes_treeids = [0, 0, 0, 0, 0, 1, 1, 1], nodes_nodeids = [0, 1, 2, 3, 4, 0, 1, 2], "
    "nodes_featureids = [0, 0, 1, 0, 0, 2, 0, 0], "
    "nodes_values = [0.5, 0.0, 0.25, 0.0, 0.0, -0.5, 0.0, 0.0], "
    'nodes_modes = ["BRANCH_LEQ", "LEAF", "BRANCH_LEQ", "LEAF", "LEAF", "BRANCH_LT", "LEAF", '
    '"LEAF"], nodes_truenodeids = [1, 0, 3, 0, 0, 1, 0, 0], '
    "nodes_falsenodeids = [2, 0, 4, 0, 0, 2, 0, 0]"
)


def test_tree_ensemble_classifier() -> None:
    # class weights: tree 0's leaves 1, 3, 4 two each (6), tree 1's leaf 1 one, leaf 2 two (3)
    # per row: compares 2 + 1 = 3, leaf adds 2 + 2 (each tree's most a leaf) = 4 -> 7
    # FLOPs 4 rows x 7 + label 4 x (2 - 1) = 32; params 3 thresholds + 9 weights = 12
    n = _node(
        _model(
            "float[4,3] x",
            "int64[4] y, float[4,2] z",
            f"y, z = ai.onnx.ml.TreeEnsembleClassifier <{TREES}, classlabels_int64s = [0, 1], "
            "class_treeids = [0, 0, 0, 0, 0, 0, 1, 1, 1], "
            "class_nodeids = [1, 1, 3, 3, 4, 4, 1, 2, 2], "
            "class_ids = [0, 1, 0, 1, 0, 1, 1, 0, 1], "
            "class_weights = [0.2, 0.8, 0.6, 0.4, 0.9, 0.1, 1.0, 0.3, 0.7]> (x)",
        )
    )
    assert (n.macs, n.flops, n.params) == (0, 32, 12)


def test_tree_ensemble_regressor_average() -> None:
    # one weight a leaf (3 + 2 = 5), base value 0.5, AVERAGE; per row: compares 3 + adds 2
    # + base 1 + divide 1 = 7 -> 4 rows 28; params 3 thresholds + 5 weights + 1 base = 9
    n = _node(
        _model(
            "float[4,3] x",
            "float[4,1] y",
            f"y = ai.onnx.ml.TreeEnsembleRegressor <{TREES}, n_targets = 1, "
            "target_treeids = [0, 0, 0, 1, 1], target_nodeids = [1, 3, 4, 1, 2], "
            "target_ids = [0, 0, 0, 0, 0], target_weights = [1.0, 2.0, 3.0, 4.0, 5.0], "
            'base_values = [0.5], aggregate_function = "AVERAGE"> (x)',
        )
    )
    assert (n.macs, n.flops, n.params) == (0, 28, 9)


def _tree_ensemble_v5() -> onnx.ModelProto:
    """ai.onnx.ml 5's TreeEnsemble: the same two trees, nodes by position (node 0 -> leaf 0
    and node 1 -> leaves 1, 2; node 2 -> leaves 3, 4), one weight a leaf."""
    node = helper.make_node(
        "TreeEnsemble",
        ["x"],
        ["y"],
        domain="ai.onnx.ml",
        tree_roots=[0, 2],
        nodes_featureids=[0, 1, 2],
        nodes_splits=helper.make_tensor("s", TensorProto.FLOAT, [3], [0.5, 0.25, -0.5]),
        nodes_modes=helper.make_tensor("m", TensorProto.UINT8, [3], [0, 0, 1]),
        nodes_truenodeids=[0, 1, 3],
        nodes_trueleafs=[1, 1, 1],
        nodes_falsenodeids=[1, 2, 4],
        nodes_falseleafs=[0, 1, 1],
        leaf_targetids=[0, 0, 0, 0, 0],
        leaf_weights=helper.make_tensor("w", TensorProto.FLOAT, [5], [1.0, 2.0, 3.0, 4.0, 5.0]),
        n_targets=1,
        aggregate_function=1,
        post_transform=0,
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 1])],
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def test_tree_ensemble_v5() -> None:
    # per row: compares 2 + 1 = 3 + one leaf weight's add a tree (2) = 5 -> 4 rows 20 FLOPs;
    # params 3 splits + 5 leaf weights = 8
    n = _node(_tree_ensemble_v5())
    assert (n.macs, n.flops, n.params) == (0, 20, 8)


def test_tree_with_a_cycle_is_an_error_not_a_hang() -> None:
    looped = TREES.replace("nodes_truenodeids = [1, 0, 3", "nodes_truenodeids = [2, 0, 0")
    looped = looped.replace("nodes_falsenodeids = [2, 0, 4", "nodes_falsenodeids = [2, 0, 0")
    model = _model(
        "float[4,3] x",
        "float[4,1] y",
        f"y = ai.onnx.ml.TreeEnsembleRegressor <{looped}, n_targets = 1, "
        "target_treeids = [0], target_nodeids = [1], target_ids = [0], target_weights = [1.0]> (x)",
    )
    (n,) = onnxcost.analyze(model).nodes
    assert n.status == "error"
    assert "cycle" in n.note


def test_zip_map_is_a_sequence_of_maps_with_no_bytes() -> None:
    # scikit-learn's probabilities as a list of {label: probability}: no arithmetic, and no
    # tensor to size (ONNX's sequence of maps), not an unknown shape
    model = _model(
        "float[4,3] p",
        "seq(map(int64, float)) z",
        "z = ai.onnx.ml.ZipMap <classlabels_int64s = [0, 1, 2]> (p)",
    )
    a = onnxcost.analyze(model)
    (n,) = a.nodes
    assert (n.status, n.bytes_read, n.bytes_written) == ("zero", 48, 0)
    assert [(t.dtype, t.shape) for t in a.outputs] == [("seq(map(int64, float32))", None)]
    assert not a.warnings


def test_a_constant_label_table_is_not_params() -> None:
    # ArrayFeatureExtractor(classes, argmax): skl2onnx's label lookup; the classes are not
    # learned numbers
    model = _model(
        "int64[4,1] i",
        "int32[1,4] y",
        "c = Constant <value = int32[3] {7, 8, 9}> () y = ai.onnx.ml.ArrayFeatureExtractor (c, i)",
    )
    a = onnxcost.analyze(model)
    assert a.totals.params == 0
    assert a.nodes[-1].output_shapes == ((1, 4),)


def test_every_ml_op_is_decided() -> None:
    # a new ai.onnx.ml op fails here until someone decides how to count it
    ops = {s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain == "ai.onnx.ml"}
    missing = sorted(op for op in ops if REGISTRY.lookup("ai.onnx.ml", op, 5) is None)
    assert not missing


# --- output shapes, against onnxruntime --------------------------------------------------------

SHAPE_CASES = {
    "scaler": (
        "float[4,3] x",
        "float y",
        "y = ai.onnx.ml.Scaler <offset = [1.0], scale = [2.0]> (x)",
    ),
    "normalizer": ("float[4,3] x", "float y", 'y = ai.onnx.ml.Normalizer <norm = "L2"> (x)'),
    "imputer": (
        "float[4,3] x",
        "float y",
        "y = ai.onnx.ml.Imputer <imputed_value_floats = [0.0], replaced_value_float = 1.0> (x)",
    ),
    "linear_regressor": (
        "float[4,3] x",
        "float y",
        "y = ai.onnx.ml.LinearRegressor <coefficients = [1.0, 1.0, 1.0, 2.0, 2.0, 2.0], "
        "targets = 2> (x)",
    ),
    "linear_regressor_1d": (
        "float[3] x",
        "float y",
        "y = ai.onnx.ml.LinearRegressor <coefficients = [1.0, 1.0, 1.0]> (x)",
    ),
    "svm_classifier": (
        "float[5,2] x",
        "int64 y, float z",
        f"y, z = ai.onnx.ml.SVMClassifier <{SVC}> (x)",
    ),
    "svm_regressor": (
        "float[4,2] x",
        "float y",
        "y = ai.onnx.ml.SVMRegressor <n_supports = 1, support_vectors = [0.1, 0.2], "
        'coefficients = [1.0], rho = [0.5], kernel_type = "RBF", kernel_params = [0.5, 0.0, 3.0]> (x)',
    ),
    "tree_regressor": (
        "float[4,3] x",
        "float y",
        f"y = ai.onnx.ml.TreeEnsembleRegressor <{TREES}, n_targets = 2, "
        "target_treeids = [0, 0, 0, 1, 1], target_nodeids = [1, 3, 4, 1, 2], "
        "target_ids = [0, 1, 0, 1, 0], target_weights = [1.0, 2.0, 3.0, 4.0, 5.0]> (x)",
    ),
    "tree_classifier": (
        "float[4,3] x",
        "int64 y, float z",
        f"y, z = ai.onnx.ml.TreeEnsembleClassifier <{TREES}, classlabels_int64s = [0, 1, 2], "
        "class_treeids = [0, 0, 0, 1, 1], class_nodeids = [1, 3, 4, 1, 2], "
        "class_ids = [0, 1, 2, 0, 1], class_weights = [1.0, 1.0, 1.0, 1.0, 1.0]> (x)",
    ),
    "array_feature_extractor": (
        "float[4,5] x, int64[2] i",
        "float y",
        "y = ai.onnx.ml.ArrayFeatureExtractor (x, i)",
    ),
    # skl2onnx's SVC votes pick a column by a scalar index: ONNX's inference gives [4, ?]
    "array_feature_extractor_scalar": (
        "float[4,3] x",
        "float y",
        "i = Constant <value = int64 {0}> () y = ai.onnx.ml.ArrayFeatureExtractor (x, i)",
    ),
    "feature_vectorizer": (
        "float[4,2] a, float[4,3] b",
        "float y",
        "y = ai.onnx.ml.FeatureVectorizer <inputdimensions = [2, 3]> (a, b)",
    ),
}
"""Graph outputs declared with no shape: what the model says is onnxcost's own rule's."""


@pytest.mark.ort
@pytest.mark.parametrize("case", sorted(SHAPE_CASES))
def test_output_shapes_are_onnxruntimes(case: str) -> None:
    ort = pytest.importorskip("onnxruntime")
    inputs, outputs, body = SHAPE_CASES[case]
    # rank unknown: "float y" parses as a scalar, so drop the shape the parser gives it
    model = _model(inputs, outputs, body)
    for out in model.graph.output:
        out.type.tensor_type.ClearField("shape")
    feeds = {}
    for vi in model.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if vi.type.tensor_type.elem_type == TensorProto.INT64:
            feeds[vi.name] = np.arange(np.prod(shape), dtype=np.int64).reshape(shape) % 3
        else:
            feeds[vi.name] = np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32).reshape(
                shape
            )
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    theirs = [tuple(np.asarray(v).shape) for v in session.run(None, feeds)]
    a = onnxcost.analyze(model)
    assert [t.shape for t in a.outputs] == theirs
    assert {n.status for n in a.nodes} <= {"ok", "zero"}


@pytest.mark.ort
def test_tree_ensemble_v5_output_shape_is_onnxruntimes() -> None:
    ort = pytest.importorskip("onnxruntime")
    model = _tree_ensemble_v5()
    try:
        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
    except Exception as e:  # an onnxruntime without ai.onnx.ml 5
        pytest.skip(f"onnxruntime does not run TreeEnsemble: {type(e).__name__}")
    (y,) = session.run(None, {"x": np.zeros((4, 3), np.float32)})
    assert [t.shape for t in onnxcost.analyze(model).outputs] == [y.shape]


# --- formulas in the unnamed batch ------------------------------------------------------------


def test_formulas_of_a_classifier_are_in_its_unnamed_batch() -> None:
    # skl2onnx's [None, 4]: the dim has no name; the formulas call it x_0 (input x, axis 0).
    # LinearClassifier above per row: MACs 4 x 3 = 12, FLOPs 24 + 3 + 13 + 2 = 42; one walk
    model = _model("float[?,4] x", "int64[?] y, float[?,3] z", LINEAR_CLASSIFIER_BODY)
    a = onnxcost.analyze(model, symbolic=True)
    costs = a.symbolic
    assert costs is not None
    assert costs.symbols == ("x_0",)
    assert costs.analyses == 1, a.warnings
    at5 = a.at(x_0=5)
    assert (at5.macs, at5.flops, at5.params) == (60, 210, 15)
    assert any("has no name in the model: the formulas call it x_0" in w for w in a.warnings)


def test_a_variadic_sum_is_walked() -> None:
    # skl2onnx's SVC votes: a Sum of [n, 1] columns (the symbolic walk had no rule for it)
    model = onnx.parser.parse_model(
        '<ir_version: 8, opset_import: ["" : 17]>'
        "g (float[n,1] a, float[n,1] b, float[n,1] c) => (float[n,1] s, float[n,1] m) {"
        " s = Sum (a, b, c) m = Mean (a, b) }"
    )
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1, a.warnings
    # at n = 7: Sum of 3 is 2 adds an element (14), Mean of 2 an add and a divide (14)
    assert a.at(n=7).flops == 28


def test_the_header_shows_a_sequence_of_maps_by_its_type(tmp_path: Path) -> None:
    # it read 'output_probability: undefined[?]'
    from typer.testing import CliRunner

    from onnxcost.cli.app import app

    model = _model(
        "float[4,3] p",
        "seq(map(int64, float)) output_probability",
        "output_probability = ai.onnx.ml.ZipMap <classlabels_int64s = [0, 1, 2]> (p)",
    )
    path = tmp_path / "zipmap.onnx"
    onnx.save(model, path)
    r = CliRunner().invoke(app, ["analyze", str(path)])
    assert r.exit_code == 0, r.output
    assert "output_probability: seq(map(int64, float32))\n" in r.output
    assert "undefined" not in r.output
