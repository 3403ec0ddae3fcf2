"""analysis.masks: an additive attention mask an exporter folded into an initializer is no
param. Expected counts are worked out by hand in the comments."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

import onnxcost


def _scores_plus(mask: np.ndarray, name: str) -> int:
    """scores [2, 1, 4, 4] + ``mask`` (an initializer named ``name``) -> Softmax: the params."""
    elem = helper.np_dtype_to_tensor_dtype(mask.dtype)
    graph = helper.make_graph(
        [
            helper.make_node("Add", ["scores", name], ["s"]),
            helper.make_node("Softmax", ["s"], ["p"], axis=-1),
        ],
        "g",
        [helper.make_tensor_value_info("scores", elem, [2, 1, 4, 4])],
        [helper.make_tensor_value_info("p", elem, [2, 1, 4, 4])],
        [numpy_helper.from_array(mask, name)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return onnxcost.analyze(model).totals.params


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
    # a mask of zeros only cannot be told from a zero weight: 32
    assert _scores_plus(np.zeros((2, 1, 4, 4), np.float32), "val_7") == 32
