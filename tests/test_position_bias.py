"""analysis.position_bias: a relative position bias an exporter gathered from its table and
stored expanded counts as that table. Expected counts are worked out by hand in the comments."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import onnxcost

EXPORTS = Path(__file__).parent / "data" / "exports"
F = TensorProto.FLOAT
RNG = np.random.default_rng(0)


def _pairs(m: int) -> tuple[np.ndarray, np.ndarray]:
    """Each pair (i, j) of an m x m window's positions: its row in a table by offset (dy, dx),
    (2m - 1)² rows, and in one by (|dy|, |dx|), m² rows, written out as Swin and LeViT do."""
    coords = [(y, x) for y in range(m) for x in range(m)]
    by_offset = np.array(
        [
            [(yi - yj + m - 1) * (2 * m - 1) + (xi - xj + m - 1) for yj, xj in coords]
            for yi, xi in coords
        ]
    )
    by_size = np.array(
        [[abs(yi - yj) * m + abs(xi - xj) for yj, xj in coords] for yi, xi in coords]
    )
    return by_offset, by_size


def _scores_plus(bias: np.ndarray, *, pairs_first: bool = False, name: str = "val_7") -> int:
    """scores [1, heads, N, N] + ``bias`` (stored, [1, heads, N, N]; with ``pairs_first``
    [N², heads], reshaped to [N, N, heads] and transposed), as a window attention adds it: the
    params counted."""
    heads, n = bias.shape[1], bias.shape[-1]
    nodes = [helper.make_node("Add", ["scores", "b" if pairs_first else name], ["y"])]
    inits = [numpy_helper.from_array(bias.astype(np.float32), name)]
    if pairs_first:
        stored = bias[0].reshape(heads, n * n).T  # the gather's own result: [pairs, heads]
        inits = [
            numpy_helper.from_array(np.ascontiguousarray(stored).astype(np.float32), name),
            numpy_helper.from_array(np.array([n, n, heads], np.int64), "shape"),
        ]
        nodes = [
            helper.make_node("Reshape", [name, "shape"], ["r"]),
            helper.make_node("Transpose", ["r"], ["t"], perm=[2, 0, 1]),
            helper.make_node("Unsqueeze", ["t", "axes"], ["b"]),
            *nodes,
        ]
        inits.append(numpy_helper.from_array(np.array([0], np.int64), "axes"))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("scores", F, [1, heads, n, n])],
        [helper.make_tensor_value_info("y", F, [1, heads, n, n])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return onnxcost.analyze(model).totals.params


def _gathered(m: int, heads: int, by_size: bool = False) -> np.ndarray:
    """A bias [1, heads, m², m²] gathered from a random table, as the exporter stores it."""
    index = _pairs(m)[1 if by_size else 0]
    table = RNG.normal(0.0, 0.02, (int(index.max()) + 1, heads))
    return table[index].transpose(2, 0, 1)[None]


def test_a_swin_bias_counts_as_its_table() -> None:
    # a 3 x 3 window, 2 heads: the table has (2 x 3 - 1)² = 25 rows a head, 2 x 25 = 50
    # params; stored expanded it holds 2 x 9 x 9 = 162
    bias = _gathered(3, 2)
    assert _scores_plus(bias) == 50
    # stored as the gather gives it, [81 pairs, 2 heads], reshaped and transposed: 50
    assert _scores_plus(bias, pairs_first=True) == 50


def test_a_beit_bias_with_its_class_token_counts_as_its_table() -> None:
    # BEiT's index (transformers' BeitRelativePositionBias) for a 3 x 3 window and a class
    # token first, 10 positions: (dy, dx) between patches, 25 rows, then row 25 for the token
    # to each patch, 26 for each patch to the token, 27 for the token to itself: 28 rows a
    # head, 2 heads, 56 params (2 x 10 x 10 = 200 stored)
    m, rows = 3, 25
    by_offset = _pairs(m)[0]
    index = np.empty((10, 10), np.int64)
    index[1:, 1:] = by_offset
    index[0, 0:] = rows
    index[0:, 0] = rows + 1
    index[0, 0] = rows + 2
    table = RNG.normal(0.0, 0.02, (rows + 3, 2))
    bias = table[index].transpose(2, 0, 1)[None]
    assert _scores_plus(bias) == 56
    assert _scores_plus(bias, pairs_first=True) == 56


def test_a_levit_bias_counts_as_its_table() -> None:
    # LeViT indexes by (|dy|, |dx|): a 4 x 4 resolution, 3 heads, 16 rows a head, 48 params
    # (3 x 16 x 16 = 768 stored)
    assert _scores_plus(_gathered(4, 3, by_size=True)) == 48


def test_what_is_no_gathered_bias_counts_as_stored() -> None:
    # values spread at random, no function of the offset: 2 x 9 x 9 = 162 as stored
    assert _scores_plus(RNG.normal(0.0, 0.02, (1, 2, 9, 9))) == 162
    # one pair's value changed: no table gives it, 162
    bias = _gathered(3, 2)
    bias[0, 1, 4, 2] += 1.0
    assert _scores_plus(bias) == 162
    # a zero-initialised bias says nothing of its table: 162 as stored
    assert _scores_plus(np.zeros((1, 2, 9, 9))) == 162
    # a causal mask is a function of the offset too (i - j = 3 dy + dx), of two values: no
    # table. Named as a param's path (so analysis.masks does not read it): 1 x 9 x 9 = 81 as
    # stored; named as an exporter names what it computes, a mask: 0
    causal = np.where(np.tril(np.ones((9, 9))) > 0, 0.0, -100.0)[None, None]
    assert _scores_plus(causal, name="attn.bias_table") == 81
    assert _scores_plus(causal) == 0


def test_torchvisions_tiny_swin_counts_torchs_params() -> None:
    # SwinTransformer([4, 4], 8, [2], [1], [7, 7], num_classes=4) through the TorchScript
    # exporter (scripts/export_holdout_torchvision.py): patch embedding 8 x 3 x 4 x 4 + 8 =
    # 392 and its norm 16; per block norm1 16, the bias table 169 x 1, qkv 24 x 8 + 24 = 216,
    # proj 8 x 8 + 8 = 72, norm2 16, mlp 32 x 8 + 32 = 288 and 8 x 32 + 8 = 264: 1,041, two
    # blocks 2,082; the final norm 16; the head 4 x 8 + 4 = 36. 2,542, torch's
    # sum(p.numel()). Each block's table is stored gathered, 49 x 49 = 2,401 a head:
    # 2 x (2,401 - 169) = 4,464 more were counted (7,006).
    totals = onnxcost.analyze(EXPORTS / "tv_tiny_swin_script.onnx").totals
    assert totals.params == 2_542
    # the bytes stay those the file stores: 4 x 7,006 = 28,024 (as a packed weight's)
    assert totals.param_bytes == 28_024
