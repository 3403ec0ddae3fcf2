"""analysis.masks: an additive attention mask an exporter folded into an initializer is no
param. Expected counts are worked out by hand in the comments."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxcost


def _params(
    nodes: list[onnx.NodeProto],
    stored: list[onnx.TensorProto],
    scores: Sequence[int],
    elem: int = TensorProto.FLOAT,
) -> int:
    """The params of ``nodes`` (reading ``stored``) from the input ``scores`` to the output
    ``p`` of the same shape."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("scores", elem, list(scores))],
        [helper.make_tensor_value_info("p", elem, list(scores))],
        stored,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return onnxcost.analyze(model).totals.params


def _scores_plus(mask: np.ndarray, name: str, scores: tuple[int, ...] = (2, 1, 4, 4)) -> int:
    """scores [2, 1, 4, 4] + ``mask`` (an initializer named ``name``) -> Softmax: the params."""
    nodes = [
        helper.make_node("Add", ["scores", name], ["s"]),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
    ]
    elem = helper.np_dtype_to_tensor_dtype(mask.dtype)
    return _params(nodes, [numpy_helper.from_array(mask, name)], scores, elem)


def _causal(lowest: float, dtype: type = np.float32) -> np.ndarray:
    """[2, 1, 4, 4]: 0 on and below the diagonal, ``lowest`` above it."""
    return np.broadcast_to(np.triu(np.full((4, 4), lowest), 1), (2, 1, 4, 4)).astype(dtype)


@pytest.mark.parametrize(
    ("lowest", "dtype"),
    [
        (float(np.finfo(np.float32).min), np.float32),  # Hugging Face's torch.finfo(dtype).min
        (-np.inf, np.float32),
        (float(np.finfo(np.float16).min), np.float16),
    ],
)
def test_a_folded_causal_mask_is_no_param(lowest: float, dtype: type) -> None:
    # dynamo's ``val_160`` [2, 1, 4, 4] of a static-shape export: 32 elements counted before
    assert _scores_plus(_causal(lowest, dtype), "val_160") == 0
    assert _scores_plus(_causal(lowest, dtype), "onnx::Add_12") == 0


def test_what_is_not_a_mask_counts_as_stored() -> None:
    # a tensor named as a param's path is not read: 2 x 1 x 4 x 4 = 32
    assert _scores_plus(_causal(float(np.finfo(np.float32).min)), "bias.table") == 32
    # an exporter-named tensor of ordinary values (a folded weight): 32
    assert _scores_plus(np.linspace(-1, 1, 32, dtype=np.float32).reshape(2, 1, 4, 4), "v") == 32
    # zeros named as a param's path (an untrained model's): 32
    assert _scores_plus(np.zeros((2, 1, 4, 4), np.float32), "attn.bias") == 32
    # zeros of fewer than 3 dims (a bias [4], added to every row): 4
    assert _scores_plus(np.zeros(4, np.float32), "val_7") == 4
    # zeros but one element, the last (read whole below 65,536 elements): 32
    assert _scores_plus(np.eye(1, 32, 31, dtype=np.float32).reshape(2, 1, 4, 4), "val_7") == 32
    # learned zeros the exporter named, shaped otherwise than a mask [..., 1, S, T]: an
    # attention bias expanded to [heads, N, N] (timm's LeViT): 2 x 4 x 4 = 32; a GroupNorm's
    # bias [C, 1, 1] (PoolFormer's), added to [2, 2, 4, 4]: 2
    assert _scores_plus(np.zeros((2, 4, 4), np.float32), "val_3") == 32
    assert _scores_plus(np.zeros((2, 1, 1), np.float32), "view", (2, 2, 4, 4)) == 2
    # a position table [1, N, D] of zeros, folded (sliced at the traced rows): 1 x 4 x 4 = 16
    assert _scores_plus(np.zeros((1, 4, 4), np.float32), "embedding_1", (2, 4, 4)) == 16


def test_a_folded_mask_of_zeros_is_no_param() -> None:
    # A static encoder's padding mask from a mask of ones, nothing masked: dynamo's val_74
    # [2, 1, 4, 4] (BERT's, RoBERTa's, DistilBERT's), 32 elements counted before; -0.0 too
    assert _scores_plus(np.zeros((2, 1, 4, 4), np.float32), "val_74") == 0
    assert _scores_plus(np.full((2, 1, 4, 4), -0.0, np.float32), "val_74") == 0
    assert _scores_plus(np.zeros((2, 1, 4, 4), np.float16), "onnx::Add_12") == 0
    # past 65,536 elements, its first 4,096 and 4,096 spread over the rest are read
    big = (1, 1, 300, 300)
    assert _scores_plus(np.zeros(big, np.float32), "val_9", big) == 0


def _masked_fill(condition_stored: bool) -> int:
    """scores [1, 4, 4] + mask -> Softmax, the mask Swin's way: m = ScatterND(zeros [4, 4]
    from ConstantOfShape, 2 region labels at 2 positions), then Where(m != 0, -100, m); or,
    with ``condition_stored``, Where(a stored bool [4, 4], w, 0.0) of a stored w [4, 4]: the
    params."""
    f = helper.make_tensor("zero", TensorProto.FLOAT, [1], [0.0])
    nodes = [
        helper.make_node("ConstantOfShape", ["mask_shape"], ["zeros"], value=f),
        helper.make_node("ScatterND", ["zeros", "where_idx", "labels"], ["m"]),
        helper.make_node("Equal", ["m", "zero_scalar"], ["is_zero"]),
        helper.make_node("Not", ["is_zero"], ["nonzero"]),
        helper.make_node("Where", ["nonzero", "fill", "m"], ["mask"]),
        helper.make_node("Add", ["scores", "mask"], ["s"]),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
    ]
    stored = [
        numpy_helper.from_array(np.array([4, 4], np.int64), "mask_shape"),
        numpy_helper.from_array(np.array([[0, 1], [2, 3]], np.int64), "where_idx"),
        numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "labels"),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero_scalar"),
        numpy_helper.from_array(np.array(-100.0, np.float32), "fill"),
    ]
    if condition_stored:
        nodes[4] = helper.make_node("Where", ["keep", "w", "fill"], ["mask"])
        stored += [
            numpy_helper.from_array(np.eye(4, dtype=bool), "keep"),
            numpy_helper.from_array(np.ones((4, 4), np.float32), "w"),
        ]
    return _params(nodes, stored, (1, 4, 4))


def test_a_mask_filled_by_a_condition_computed_from_constants_is_no_param() -> None:
    # torch's dynamo exporter computes Swin's shifted-window masks from constants
    # (masked_fill(m != 0, -100.0) of a ScatterND'd ConstantOfShape): no param. Counted as a
    # weight, this mask was its 16 elements plus the 2 labels; swin3d_t's 12,939,920.
    assert _masked_fill(condition_stored=False) == 0
    # A stored condition (a pruning mask over a weight) keeps the rule: w's 4 x 4 = 16
    # count (the bool mask is no weight type, the fill a lone scalar).
    assert _masked_fill(condition_stored=True) == 16


def _scores_plus_unsqueezed(mask: np.ndarray, name: str, constant: bool = False) -> int:
    """scores [1, 2, 4, 4] + Unsqueeze(``mask`` [2, 4, 4], axis 0), the mask an initializer
    named ``name``, or (``constant``) a Constant node's value: the params."""
    axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
    nodes = [
        helper.make_node("Unsqueeze", [name, "axes"], ["m"]),
        helper.make_node("Add", ["scores", "m"], ["s"]),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
    ]
    stored = [axes]
    if constant:
        nodes.insert(
            0, helper.make_node("Constant", [], [name], value=numpy_helper.from_array(mask))
        )
    else:
        stored.append(numpy_helper.from_array(mask, name))
    return _params(nodes, stored, (1, 2, 4, 4))


def test_a_mask_filled_with_minus_100_is_no_param() -> None:
    # Swin's shifted windows, masked_fill(m != 0, -100.0), [2, 4, 4] here (timm's
    # [64, 49, 49] ...), unsqueezed before the Add: 32 elements counted before, each way
    # timm's Swin is stored (timm's swin_tiny: +220,892).
    windows = np.zeros((2, 4, 4), np.float32)
    windows[1, :2, 2:] = windows[1, 2:, :2] = -100.0
    assert _scores_plus_unsqueezed(windows, "layers.0.blocks.1.attn_mask") == 0  # dynamo's
    assert _scores_plus_unsqueezed(windows, "/blocks.1/Constant_13_output_0", constant=True) == 0


def test_what_is_no_filled_mask_counts() -> None:
    windows = np.zeros((2, 4, 4), np.float32)
    windows[1, :2, 2:] = -100.0
    # a param's path that does not name a mask is not read: 2 x 4 x 4 = 32
    assert _scores_plus_unsqueezed(windows, "blocks.1.attn.relative_position_bias") == 32
    # a learned tensor named a mask holds both signs (a mask token): 32
    signed = np.linspace(-1, 1, 32, dtype=np.float32).reshape(2, 4, 4)
    assert _scores_plus_unsqueezed(signed, "blocks.1.mask_token") == 32
    # zeros and a small negative (above -1): no fill, a weight: 32
    assert _scores_plus_unsqueezed(np.where(windows < 0, -0.5, 0).astype(np.float32), "val_3") == 32
