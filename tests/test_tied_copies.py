"""A tied LM head that the exporter stored twice counts once (``analysis.tied``).

A toy decoder: ids [2, 3] -> Gather of the table E [V=6, H=4] -> MatMul by the head W
[4, 6] -> logits [2, 3, 6]. torch's ``sum(p.numel())`` of a model whose head is tied to its
embedding counts E once: 6 x 4 = 24 params. The TorchScript exporter and optimum write W as
a stored copy of E transposed; an untied head is a tensor of its own: 24 + 24 = 48.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxcost
from onnxcost.load.model import LAZY_MIN_BYTES

IDS = helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3])


def _decoder(
    table: np.ndarray, head: np.ndarray, *, extra: np.ndarray | None = None
) -> onnx.ModelProto:
    vocab = table.shape[0]
    logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 3, vocab])
    inits = [
        numpy_helper.from_array(table, "embed.weight"),
        numpy_helper.from_array(head, "onnx::MatMul_9"),
    ]
    nodes = [
        helper.make_node("Gather", ["embed.weight", "ids"], ["h"]),
        helper.make_node("MatMul", ["h", "onnx::MatMul_9"], ["logits"]),
    ]
    return helper.make_model(
        helper.make_graph(nodes, "g", [IDS], [logits], inits),
        opset_imports=[helper.make_opsetid("", 17)],
    )


def _table(vocab: int = 6, hidden: int = 4, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((vocab, hidden)).astype(np.float32)


def test_a_transposed_copy_of_the_table_counts_once() -> None:
    e = _table()
    a = onnxcost.analyze(_decoder(e, e.T.copy()))
    assert a.totals.params == 24  # E once: 6 x 4
    assert a.totals.param_bytes == 24 * 4
    assert [n.params for n in a.nodes] == [24, 0]  # the head reads the table's params
    # the head still reads its own 96 bytes at runtime: traffic is what moves
    assert a.nodes[1].bytes_read_weights == 24 * 4


@pytest.mark.parametrize(
    ("head", "params"),
    [
        ("untied", 48),  # a head of its own: 24 + 24
        # equal but at one of its 24 positions: a tensor of its own (the 4,096 positions
        # drawn over 24 elements reach every one)
        ("one_element_differs", 48),
        ("zeros", 48),  # both all zeros (a model written without weights): no evidence, 48
    ],
)
def test_a_head_that_is_not_the_table_counts_apart(head: str, params: int) -> None:
    e = _table()
    if head == "untied":
        w = _table(4, 6, seed=1)
    elif head == "one_element_differs":
        w = e.T.copy()
        w[2, 5] += 1.0
    else:
        e = np.zeros_like(e)
        w = np.zeros((4, 6), np.float32)
    assert onnxcost.analyze(_decoder(e, w)).totals.params == params


def test_a_copy_in_external_data_counts_once(tmp_path: Path) -> None:
    e = _table()
    model = _decoder(e, e.T.copy())
    path = tmp_path / "m.onnx"
    onnx.save(
        model,
        path,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="m.data",
        size_threshold=0,
    )
    before = path.read_bytes(), (tmp_path / "m.data").read_bytes()
    assert onnxcost.analyze(path).totals.params == 24
    assert (path.read_bytes(), (tmp_path / "m.data").read_bytes()) == before  # read, never written


def test_a_copy_inline_in_a_large_file_counts_once(tmp_path: Path) -> None:
    # 2,048 x 1,024 fp32 = 8 MiB each, 16 MiB together: at LAZY_MIN_BYTES the loader leaves
    # both payloads in the file, and the sampler reads them there. 2,097,152 params, not twice.
    e = _table(2048, 1024)
    path = tmp_path / "big.onnx"
    onnx.save(_decoder(e, e.T.copy()), path)
    assert path.stat().st_size >= LAZY_MIN_BYTES
    assert onnxcost.analyze(path).totals.params == 2048 * 1024


def test_hostile_dims_are_no_table() -> None:
    # A table and a "head" that claim negative dims (-2 x -3: a product of 6, and 6 elements
    # of data) are no table: nothing is compared, nothing raised (an empty corner was read).
    data = np.arange(6, dtype=np.float32).tobytes()  # 6 elements: what -2 x -3 claims
    table = onnx.TensorProto(
        name="embed.weight", data_type=TensorProto.FLOAT, dims=[-2, -3], raw_data=data
    )
    head = onnx.TensorProto(
        name="onnx::MatMul_9", data_type=TensorProto.FLOAT, dims=[-3, -2], raw_data=data
    )
    model = _decoder(_table(), _table(4, 6, seed=1))
    del model.graph.initializer[:]
    model.graph.initializer.extend([table, head])
    from onnxcost.analysis.tied import tied_copies
    from onnxcost.prepare import prepare

    prepared = prepare(model)
    assert tied_copies(prepared.proto, prepared.view, None) == {}


def _shared_layer(
    first: np.ndarray, second: np.ndarray, names: tuple[str, str], dynamo: bool = True
) -> int:
    """x [2, 4] -> MatMul by ``first`` [4, 4] -> MatMul by ``second``, each node with torch's
    dynamo exporter's record of its module where ``dynamo``: the params counted."""
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    nodes = [
        helper.make_node("MatMul", ["x", names[0]], ["h"]),
        helper.make_node("MatMul", ["h", names[1]], ["y"]),
    ]
    for node in nodes if dynamo else ():
        entry = node.metadata_props.add()
        entry.key, entry.value = "pkg.torch.onnx.name_scopes", "['', 'enc', 'enc.ffn', 'linear']"
    inits = [
        numpy_helper.from_array(first.astype(np.float32), names[0]),
        numpy_helper.from_array(second.astype(np.float32), names[1]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [out], inits),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    return onnxcost.analyze(model).totals.params


def test_a_weight_the_exporter_wrote_once_per_call_counts_once() -> None:
    # ALBERT's one shared layer, called per layer: torch's dynamo exporter folds its weight's
    # transpose once per call (``val_106``, ``val_180``). One weight of 4 x 4 = 16 params.
    w = np.random.default_rng(0).standard_normal((4, 4))
    assert _shared_layer(w, w, ("val_106", "val_180")) == 16
    # the same values under a param's own name and a copy's: 16
    assert _shared_layer(w, w, ("enc.ffn.weight", "val_180")) == 16
    # two weights that differ: 32; two of zeros (untrained biases, Keras'): 32, no evidence
    other = np.random.default_rng(1).standard_normal((4, 4))
    assert _shared_layer(w, other, ("val_106", "val_180")) == 32
    assert _shared_layer(np.zeros((4, 4)), np.zeros((4, 4)), ("val_106", "val_180")) == 32
    # two params named as such are two params, whatever they hold: 32
    assert _shared_layer(w, w, ("a.weight", "b.weight")) == 32
    # another exporter's model (no record of modules) is not read for copies: as stored, 32
    assert _shared_layer(w, w, ("val_106", "val_180"), dynamo=False) == 32


def _two_convs(weight: np.ndarray, bias: np.ndarray) -> int:
    """x [1, 4, 3, 3] -> Conv -> Conv, both 1x1 [4, 4, 1, 1], as the TorchScript exporter
    writes two whose weights and biases held equal values: conv1 reads ``onnx::Conv_7`` and
    ``onnx::Conv_8``, conv2 the same through Identity nodes (``onnx::Conv_10``,
    ``onnx::Conv_11``), its de-duplication pass's way. The params."""
    nodes = [
        helper.make_node("Identity", ["onnx::Conv_7"], ["onnx::Conv_10"]),
        helper.make_node("Identity", ["onnx::Conv_8"], ["onnx::Conv_11"]),
        helper.make_node("Conv", ["x", "onnx::Conv_7", "onnx::Conv_8"], ["h"], name="/conv1/Conv"),
        helper.make_node(
            "Conv", ["h", "onnx::Conv_10", "onnx::Conv_11"], ["y"], name="/conv2/Conv"
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 3, 3])],
        [
            numpy_helper.from_array(weight, "onnx::Conv_7"),
            numpy_helper.from_array(bias, "onnx::Conv_8"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return onnxcost.analyze(model).totals.params


def test_params_the_torchscript_exporter_deduplicated_count_apart() -> None:
    # An untrained model's folded BatchNorm shifts (zeros) and the weights a zero BatchNorm
    # scale folded into (+0 and -0, W x 0): two convolutions' params held equal values, one is
    # stored. By hand, each conv 4 x 4 x 1 x 1 = 16 weights and 4 biases: 2 x 20 = 40
    # (16 + 4 = 20 counted before).
    signed_zeros = np.zeros((4, 4, 1, 1), np.float32)
    signed_zeros[::2] = -0.0
    assert _two_convs(signed_zeros, np.zeros(4, np.float32)) == 40
    # Ones, any one value: 40
    assert _two_convs(np.ones((4, 4, 1, 1), np.float32), np.full(4, 0.5, np.float32)) == 40
    # Values that are not all alike read through an Identity: one weight shared (a tied
    # weight is read as it is): the weight counts once, 16, the alike bias twice, 8: 24
    rng = np.random.default_rng(0)
    assert (
        _two_convs(rng.standard_normal((4, 4, 1, 1)).astype(np.float32), np.zeros(4, np.float32))
        == 24
    )
