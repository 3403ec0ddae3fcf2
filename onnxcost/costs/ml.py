"""The ai.onnx.ml domain: what scikit-learn (skl2onnx), XGBoost, LightGBM and CatBoost
(onnxmltools) exports are made of. Linear models, SVMs and tree ensembles hold their learned
numbers in attributes, not initializers: ``attribute_params`` counts them as params.

X is [N, C] (a 1-D [C] is one row): N rows of C features. Same rules as elementwise.py: one
FLOP per primitive, a comparison counts 1.

* Linear models (LinearClassifier, LinearRegressor; SVMs without support vectors): a
  [N, C] x [C, E] product, E scores a row, + N x E intercept adds.
* Kernel SVMs: the kernel of each row with each of the S support vectors (C MACs; RBF also
  C subtractions, its scaling and exp), then per class pair the two classes' support vectors'
  coefficients (one-vs-one: (K - 1) x S MACs a row), a rho add and a vote a pair.
* Tree ensembles: per row and tree, the comparisons along the tree's deepest path (its
  depth: an upper bound, since a row takes one path whose length depends on its values),
  then the adds of the leaf's weights into the scores.
* ``post_transform``: LOGISTIC 4 a score (as Sigmoid), SOFTMAX 5 E - 2 a row (as Softmax),
  SOFTMAX_ZERO as SOFTMAX, PROBIT 2 a score; a classifier's label an arg-max (E - 1 a row).

Params are the learned numbers (coefficients, intercepts, support vectors, rho, a tree's
split thresholds and leaf weights, base values, a Scaler's offset and scale, an Imputer's
values); the structure (node and feature ids, modes, class labels) is not counted, as shapes
and indices are not.
"""

from __future__ import annotations

import math
from typing import Any

from onnx import TensorProto, numpy_helper

from onnxcost.costs._context import InvalidAttributeError, OpContext
from onnxcost.costs._registry import Cost, register, register_zero
from onnxcost.costs.contrib import SIGMOID_FLOPS

ML = "ai.onnx.ml"

PROBIT_FLOPS = 2  # scale, inverse error function
KERNEL_FLOPS = {"LINEAR": 0, "POLY": 3, "SIGMOID": 3}
"""FLOPs a kernel value takes past its C MACs: POLY gamma x, + coef0, ^ degree; SIGMOID gamma
x, + coef0, tanh. RBF: C subtractions + 2 (x -gamma, exp), by the features."""


_TRANSFORMS = {0: "NONE", 1: "SOFTMAX", 2: "LOGISTIC", 3: "SOFTMAX_ZERO", 4: "PROBIT"}
"""ai.onnx.ml 5's TreeEnsemble names its post_transform by number."""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _list(ctx: OpContext, name: str) -> list[Any]:
    """A list attribute (a tensor one too, ``*_as_tensor`` and opset 5's), [] where absent."""
    value = ctx.attr(name, None)
    if value is None:
        return []
    if isinstance(value, TensorProto):
        return list(numpy_helper.to_array(value).reshape(-1).tolist())
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _size(ctx: OpContext, *names: str) -> int:
    """Elements of the first of ``names`` the node has (``nodes_values`` or
    ``nodes_values_as_tensor``)."""
    for name in names:
        value = ctx.attr(name, None)
        if isinstance(value, TensorProto):
            return math.prod(value.dims)
        if isinstance(value, (list, tuple)):
            return len(value)
        if value is not None:
            return 1
    return 0


def _rows(ctx: OpContext) -> tuple[int, int]:
    """(N, C) of X: [N, C], or [C] as one row (a scalar is one feature)."""
    x = ctx.shape(0)
    if not x:
        return 1, 1
    return math.prod(x[:-1]) if len(x) > 1 else 1, x[-1]


def post_transform(ctx: OpContext, rows: int, scores: int) -> int:
    """FLOPs of ``post_transform`` on ``rows`` rows of ``scores`` scores."""
    value = ctx.attr("post_transform", "NONE")
    kind = _TRANSFORMS.get(value, "") if isinstance(value, int) else _text(value).upper()
    if kind == "LOGISTIC":
        return SIGMOID_FLOPS * rows * scores
    if kind in ("SOFTMAX", "SOFTMAX_ZERO"):
        return rows * (5 * scores - 2) if scores else 0
    if kind == "PROBIT":
        return PROBIT_FLOPS * rows * scores
    return 0


def _label(rows: int, scores: int) -> int:
    """A classifier's arg-max over ``scores`` (a binary one's single score: one compare)."""
    return rows * max(scores - 1, 1)


def _scores(ctx: OpContext, coefficients: int, features: int) -> int:
    if not features:
        return 0
    if coefficients % features:
        raise InvalidAttributeError(
            f"{coefficients} coefficients are not a multiple of the {features} features"
        )
    return coefficients // features


def _linear_params(ctx: OpContext) -> tuple[int, int]:
    return _size(ctx, "coefficients") + _size(ctx, "intercepts"), TensorProto.FLOAT


@register("LinearClassifier", domain=ML, attribute_params=_linear_params)
def linear_classifier(ctx: OpContext) -> Cost:
    """MACs = N x C x E; FLOPs = 2 x MACs + N x E (intercepts) + post_transform + N x (E - 1) (label)."""
    rows, features = _rows(ctx)
    scores = _scores(ctx, _size(ctx, "coefficients"), features)
    extra = rows * scores * int(bool(_size(ctx, "intercepts")))
    extra += post_transform(ctx, rows, scores) + _label(rows, scores)
    return Cost.contraction(rows * features * scores, extra)


@register("LinearRegressor", domain=ML, attribute_params=_linear_params)
def linear_regressor(ctx: OpContext) -> Cost:
    """MACs = N x C x T (T targets); FLOPs = 2 x MACs + N x T (intercepts) + post_transform."""
    rows, features = _rows(ctx)
    targets = ctx.int_attr("targets", 1)
    extra = rows * targets * int(bool(_size(ctx, "intercepts")))
    extra += post_transform(ctx, rows, targets)
    return Cost.contraction(rows * features * targets, extra)


def _scaler_params(ctx: OpContext) -> tuple[int, int]:
    return _size(ctx, "offset") + _size(ctx, "scale"), TensorProto.FLOAT


def _imputer_params(ctx: OpContext) -> tuple[int, int]:
    return _size(ctx, "imputed_value_floats"), TensorProto.FLOAT


@register("Scaler", domain=ML, attribute_params=_scaler_params)
def scaler(ctx: OpContext) -> Cost:
    """FLOPs = 2 x numel(X): (x - offset) x scale."""
    return Cost(flops=2 * ctx.numel(0))


@register("Normalizer", domain=ML)
def normalizer(ctx: OpContext) -> Cost:
    """FLOPs a row of C: MAX 2C - 1 (max, divide), L1 3C - 1 (abs, sum, divide), L2 3C (square, sum, sqrt, divide)."""
    rows, features = _rows(ctx)
    norm = _text(ctx.attr("norm", "MAX")).upper()
    per_row = {"MAX": 2 * features - 1, "L1": 3 * features - 1}.get(norm, 3 * features)
    return Cost(flops=rows * per_row if features else 0)


@register("Binarizer", "Imputer", domain=ML, attribute_params=_imputer_params)
def compare_each(ctx: OpContext) -> Cost:
    """FLOPs = numel(X): one compare an element (with the threshold, or the replaced value)."""
    return Cost(flops=ctx.numel(0))


def _svm_params(ctx: OpContext) -> tuple[int, int]:
    names = ("support_vectors", "coefficients", "rho", "prob_a", "prob_b")
    return sum(_size(ctx, n) for n in names), TensorProto.FLOAT


def _kernel(ctx: OpContext, rows: int, features: int, vectors: int) -> Cost:
    """The kernel of every row with every support vector."""
    kind = _text(ctx.attr("kernel_type", "LINEAR")).upper()
    per_value = features + 2 if kind == "RBF" else KERNEL_FLOPS.get(kind, 0)
    return Cost.contraction(rows * vectors * features, rows * vectors * per_value)


@register("SVMClassifier", domain=ML, attribute_params=_svm_params)
def svm_classifier(ctx: OpContext) -> Cost:
    """MACs = N x S x C (kernels) + N x (K - 1) x S (one-vs-one sums); FLOPs = 2 x MACs + kernel + N x K(K-1)/2 x 2 (rho, vote) + N x (K - 1) (label) + post_transform.

    Without support vectors (a linear SVM): MACs = N x C x E, + N x E rho adds and the label.
    NB: prob_a/prob_b's probability estimates (Platt scaling and the pairwise coupling) are not
    counted.
    """
    rows, features = _rows(ctx)
    per_class = [int(v) for v in _list(ctx, "vectors_per_class")]
    vectors = _size(ctx, "support_vectors") // features if features else 0
    if not vectors or not per_class:  # linear: coefficients [E, C]
        scores = _scores(ctx, _size(ctx, "coefficients"), features)
        extra = rows * scores + post_transform(ctx, rows, scores) + _label(rows, scores)
        return Cost.contraction(rows * features * scores, extra)
    classes = len(per_class)
    pairs = classes * (classes - 1) // 2
    kernel = _kernel(ctx, rows, features, vectors)
    votes = rows * pairs * 2 + _label(rows, classes) + post_transform(ctx, rows, max(pairs, 1))
    return kernel + Cost.contraction(rows * (classes - 1) * vectors, votes)


@register("SVMRegressor", domain=ML, attribute_params=_svm_params)
def svm_regressor(ctx: OpContext) -> Cost:
    """MACs = N x S x C (kernels) + N x S (coefficients); FLOPs = 2 x MACs + kernel + N (rho) (+ N one_class compares) + post_transform.

    Without support vectors (a linear SVM): MACs = N x C, + N."""
    rows, features = _rows(ctx)
    vectors = ctx.int_attr("n_supports", 0)
    one_class = rows * int(bool(ctx.int_attr("one_class", 0)))
    tail = rows + one_class + post_transform(ctx, rows, 1)
    if not vectors:
        return Cost.contraction(rows * features, tail)
    return _kernel(ctx, rows, features, vectors) + Cost.contraction(rows * vectors, tail)


# --- tree ensembles ----------------------------------------------------------------------------

Tree = dict[int, tuple[bool, int, int]]
"""Node id -> (whether it is a leaf, its true child's id, its false child's id)."""


def _heights(tree: Tree) -> dict[int, int]:
    """Node id -> the branch nodes on the deepest path from it (a leaf 0; a child id the tree
    does not list ends a path, as a leaf). Post-order without recursion; InvalidAttributeError
    where the child ids loop."""
    height: dict[int, int] = {}
    on_path: set[int] = set()
    for start in tree:
        stack = [start]
        while stack:
            node = stack[-1]
            entry = tree.get(node)
            if node in height or entry is None or entry[0]:
                height.setdefault(node, 0)
                on_path.discard(node)
                stack.pop()
                continue
            pending = [c for c in entry[1:] if c not in height and tree.get(c) is not None]
            if pending:
                if node in on_path and any(c in on_path for c in pending):
                    raise InvalidAttributeError("the tree's child ids make a cycle")
                on_path.add(node)
                stack += pending
                continue
            height[node] = 1 + max(height.get(c, 0) for c in entry[1:])
            on_path.discard(node)
            stack.pop()
    return height


def _trees(ctx: OpContext) -> dict[int, Tree]:
    """The ai.onnx.ml 1 and 3 trees: every node listed with its tree id and node id."""
    trees: dict[int, Tree] = {}
    ids = _list(ctx, "nodes_nodeids")
    columns = [_list(ctx, n) for n in ("nodes_treeids", "nodes_modes", "nodes_truenodeids")]
    columns.append(_list(ctx, "nodes_falsenodeids"))
    if any(len(c) != len(ids) for c in columns):
        raise InvalidAttributeError("the nodes_* attributes differ in length")
    for node, tree, mode, true, false in zip(ids, *columns, strict=True):
        trees.setdefault(int(tree), {})[int(node)] = (_text(mode) == "LEAF", int(true), int(false))
    return trees


def _depth(tree: Tree) -> int:
    """The branch nodes on the tree's deepest path (from its root, the node no other has as a
    child: the largest height of any node)."""
    return max(_heights(tree).values(), default=0)


def _leaf_adds(ctx: OpContext, prefix: str) -> int:
    """Per row, the adds of leaf weights into the scores: per tree, its most weights a leaf."""
    trees, nodes = _list(ctx, f"{prefix}_treeids"), _list(ctx, f"{prefix}_nodeids")
    per_leaf: dict[tuple[int, int], int] = {}
    for tree, node in zip(trees, nodes, strict=False):
        key = (int(tree), int(node))
        per_leaf[key] = per_leaf.get(key, 0) + 1
    most: dict[int, int] = {}
    for (tree, _node), n in per_leaf.items():
        most[tree] = max(most.get(tree, 0), n)
    return sum(most.values())


def _tree_params(ctx: OpContext) -> tuple[int, int]:
    """Split thresholds (one a branch node) + leaf weights + base values."""
    branches = sum(_text(m) != "LEAF" for m in _list(ctx, "nodes_modes"))
    weights = _size(ctx, "class_weights", "class_weights_as_tensor")
    weights += _size(ctx, "target_weights", "target_weights_as_tensor")
    base = _size(ctx, "base_values", "base_values_as_tensor")
    return branches + weights + base, TensorProto.FLOAT


def _classes(ctx: OpContext) -> int:
    return _size(ctx, "classlabels_int64s") or _size(ctx, "classlabels_strings")


@register("TreeEnsembleClassifier", domain=ML, attribute_params=_tree_params)
def tree_classifier(ctx: OpContext) -> Cost:
    """FLOPs = N x (sum of the trees' depths (compares) + sum of their most weights a leaf (adds)) + N x K (base values) + post_transform + N x (K - 1) (label).

    NB: an upper bound: a row compares along one path of each tree, the deepest counted.
    """
    rows, _features = _rows(ctx)
    classes = _classes(ctx)
    compares = sum(_depth(t) for t in _trees(ctx).values())
    per_row = compares + _leaf_adds(ctx, "class")
    extra = classes * int(bool(_size(ctx, "base_values", "base_values_as_tensor")))
    return Cost(
        flops=rows * (per_row + extra) + post_transform(ctx, rows, classes) + _label(rows, classes)
    )


@register("TreeEnsembleRegressor", domain=ML, attribute_params=_tree_params)
def tree_regressor(ctx: OpContext) -> Cost:
    """FLOPs = N x (sum of the trees' depths (compares) + sum of their most weights a leaf (adds)) + N x T (base values; AVERAGE: + N x T divides) + post_transform.

    NB: an upper bound: a row compares along one path of each tree, the deepest counted.
    """
    rows, _features = _rows(ctx)
    targets = ctx.int_attr("n_targets", 1)
    compares = sum(_depth(t) for t in _trees(ctx).values())
    per_row = compares + _leaf_adds(ctx, "target")
    per_row += targets * int(bool(_size(ctx, "base_values", "base_values_as_tensor")))
    per_row += targets * int(_text(ctx.attr("aggregate_function", "SUM")).upper() == "AVERAGE")
    return Cost(flops=rows * per_row + post_transform(ctx, rows, targets))


def _ensemble_depths(ctx: OpContext) -> list[int]:
    """ai.onnx.ml 5's TreeEnsemble: per tree, from its root, the deepest path's branch nodes
    (a child is a leaf where ``nodes_trueleafs``/``nodes_falseleafs`` says so)."""
    true, false = _list(ctx, "nodes_truenodeids"), _list(ctx, "nodes_falsenodeids")
    true_leaf, false_leaf = _list(ctx, "nodes_trueleafs"), _list(ctx, "nodes_falseleafs")
    if not len(true) == len(false) == len(true_leaf) == len(false_leaf):
        raise InvalidAttributeError("the nodes_* attributes differ in length")
    # node k's children as node ids; a leaf child as -1 (an id no node has)
    tree: Tree = {
        k: (False, -1 if tl else int(t), -1 if fl else int(f))
        for k, (t, f, tl, fl) in enumerate(zip(true, false, true_leaf, false_leaf, strict=True))
    }
    height = _heights(tree)
    return [height.get(int(root), 0) for root in _list(ctx, "tree_roots")]


def _ensemble_params(ctx: OpContext) -> tuple[int, int]:
    """Split thresholds + leaf weights, in their tensors' type."""
    splits = ctx.attr("nodes_splits", None)
    elem = splits.data_type if isinstance(splits, TensorProto) else TensorProto.FLOAT
    return _size(ctx, "nodes_splits") + _size(ctx, "leaf_weights"), elem


@register("TreeEnsemble", domain=ML, attribute_params=_ensemble_params)
def tree_ensemble(ctx: OpContext) -> Cost:
    """FLOPs = N x (sum of the trees' depths (compares) + trees (a leaf weight's add each)) (AVERAGE: + N x T divides) + post_transform.

    NB: an upper bound: a row compares along one path of each tree, the deepest counted; a
    set-membership split counts one compare.
    """
    rows, _features = _rows(ctx)
    targets = ctx.int_attr("n_targets", 1)
    depths = _ensemble_depths(ctx)
    per_row = sum(depths) + len(depths)
    per_row += targets * int(ctx.int_attr("aggregate_function", 1) == 0)  # 0: AVERAGE
    return Cost(flops=rows * per_row + post_transform(ctx, rows, targets))


register_zero(
    "ArrayFeatureExtractor",
    domain=ML,
    reason="no arithmetic: gathers the indexed columns (a constant X is a label table, not params)",
    meta_inputs=(0, 1),
)
register_zero(
    "ZipMap",
    "FeatureVectorizer",
    "DictVectorizer",
    "CastMap",
    "LabelEncoder",
    "CategoryMapper",
    "OneHotEncoder",
    domain=ML,
    reason="no arithmetic: selects, gathers, looks up or re-packs values",
)
