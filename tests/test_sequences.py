"""shapes.sequences: sequences known element by element, through the sequence ops and through
a Loop that fills one (torch's ``tensor_split`` as the TorchScript exporter writes it:
torchvision's mvit_v2_s counted 5.5 of its 64.2 GMACs before). Every expected count is worked
out by hand in a comment, and the shapes are checked against onnxruntime's outputs."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxcost
from onnxcost.load.tensors import TensorInfo
from onnxcost.shapes.folding import KnownValues
from onnxcost.shapes.sequences import SequenceInfo, sequence_node

F = TensorProto.FLOAT


def _const(name: str, value: object, dtype: type = np.int64) -> onnx.NodeProto:
    return helper.make_node(
        "Constant", [], [name], value=numpy_helper.from_array(np.array(value, dtype=dtype))
    )


def _split_body() -> onnx.GraphProto:
    """A Loop body that inserts x[:, :, bounds[i]:bounds[i+1]] into the sequence it carries,
    as torch's exporter writes tensor_split (x, bounds and the axes read from outside)."""
    return helper.make_graph(
        [
            helper.make_node("Gather", ["bounds", "i"], ["start"], axis=0),
            _const("one", 1),
            helper.make_node("Add", ["i", "one"], ["next"]),
            helper.make_node("Gather", ["bounds", "next"], ["end"], axis=0),
            helper.make_node("Unsqueeze", ["start", "axis0"], ["starts"]),
            helper.make_node("Unsqueeze", ["end", "axis0"], ["ends"]),
            helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["part"]),
            helper.make_node("SequenceInsert", ["seq_in", "part"], ["seq_out"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_sequence_value_info("seq_in", F, None),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_sequence_value_info("seq_out", F, None),
        ],
    )


def _model(trips: int, bounds: list[int], width: int = 10) -> onnx.ModelProto:
    """x [2, 3, width] split along axis 2 at ``bounds`` by the Loop (``trips`` parts), then
    the rest x[:, :, bounds[trips]:] inserted after the Loop; part k (SequenceAt k) times a
    weight [its width, 5] for each k."""
    parts = [*(bounds[k + 1] - bounds[k] for k in range(trips)), width - bounds[trips]]
    nodes = [
        _const("bounds", bounds),
        _const("axis0", [0]),
        _const("axes", [2]),
        _const("trips", trips),
        _const("cond", True, np.bool_),
        _const("tail_start", [bounds[trips]]),
        _const("tail_end", [width]),
        helper.make_node("SequenceEmpty", [], ["empty"], dtype=F),
        helper.make_node("Loop", ["trips", "cond", "empty"], ["filled"], body=_split_body()),
        helper.make_node("Slice", ["x", "tail_start", "tail_end", "axes"], ["tail"]),
        helper.make_node("SequenceInsert", ["filled", "tail"], ["seq"]),
    ]
    inits, outputs = [], []
    for k, w in enumerate(parts):
        nodes += [
            _const(f"pos{k}", k),
            helper.make_node("SequenceAt", ["seq", f"pos{k}"], [f"part{k}"]),
            helper.make_node("MatMul", [f"part{k}", f"w{k}"], [f"y{k}"]),
        ]
        inits.append(numpy_helper.from_array(np.ones((w, 5), np.float32), f"w{k}"))
        outputs.append(helper.make_tensor_value_info(f"y{k}", F, None))
    graph = helper.make_graph(
        nodes, "split", [helper.make_tensor_value_info("x", F, [2, 3, width])], outputs, inits
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _ort_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {"x": np.zeros((2, 3, 10), np.float32)})
    return {o.name: tuple(v.shape) for o, v in zip(session.get_outputs(), got, strict=True)}


@pytest.mark.parametrize(
    ("trips", "bounds", "macs"),
    [
        # one section, x[:, :, 0:4], then the rest x[:, :, 4:10]: mvit's pattern.
        # part 0 [2, 3, 4] @ [4, 5]: 2*3*4*5 = 120; part 1 [2, 3, 6] @ [6, 5]: 180; 300 in all
        (1, [0, 4], 300),
        # three sections of widths 1, 2, 3, then the rest x[:, :, 6:10] of width 4: each part
        # [2, 3, w] @ [w, 5] is 30*w MACs, 30 * (1 + 2 + 3 + 4) = 300
        (3, [0, 1, 3, 6], 300),
    ],
)
def test_a_loop_that_fills_a_sequence_gives_each_part_its_shape(
    trips: int, bounds: list[int], macs: int
) -> None:
    model = _model(trips, bounds)
    a = onnxcost.analyze(model)
    assert a.totals.macs == macs
    by_name = {n.outputs[0]: n for n in a.nodes if n.op_type == "MatMul"}
    for name, shape in _ort_shapes(model).items():  # onnxruntime's own outputs
        assert by_name[name].output_shapes == (shape,)
        assert by_name[name].status == "ok"


def test_one_iteration_shapes_its_body_too() -> None:
    # one iteration: the body's iteration number is 0, its Slice x[:, :, 0:4] is [2, 3, 4]
    # (4 bytes each: 96 written), its SequenceInsert no longer unknown
    a = onnxcost.analyze(_model(1, [0, 4]))
    body_slice = next(n for n in a.nodes if n.op_type == "Slice" and n.outputs == ("part",))
    assert body_slice.output_shapes == ((2, 3, 4),)
    assert body_slice.bytes_written == 2 * 3 * 4 * 4
    assert all(n.status != "unknown_shape" for n in a.nodes)
    assert not any("could not be resolved" in w for w in a.warnings)


def test_a_sequence_is_read_written_and_live_as_the_elements_it_holds() -> None:
    # onnxruntime's sequence ops copy each element they keep (sequence_ops.cc,
    # CreateCopyAndAppendCpuTensor). x [2, 3, 10] float is 240 bytes; part 0, x[:, :, 0:4],
    # 96; the tail, x[:, :, 4:10], 144; each MatMul's [2, 3, 5] output 120.
    a = onnxcost.analyze(_model(1, [0, 4]))
    by_name = {n.name: n for n in a.nodes}
    insert = next(n for n in a.nodes if n.op_type == "SequenceInsert" and n.outputs == ("seq",))
    # [part 0] + the tail: reads both, 96 + 144 = 240, and writes the new sequence, 240
    assert (insert.bytes_read, insert.bytes_written) == (240, 240)
    first, second = (n for n in a.nodes if n.op_type == "SequenceAt")
    # each copies one element out: part 0 read and written (96), its int64 position read (8)
    assert (first.bytes_read, first.bytes_written) == (96 + 8, 96)
    assert (second.bytes_read, second.bytes_written) == (144 + 8, 144)
    # The peak is at the second SequenceAt: the sequence (240, read there last), y0 (120, an
    # output) and part 1 (144) = 504; before, where a sequence held 0 bytes, the peak was 384
    # (the last MatMul's part 1 + y0 + y1) and the sequence was never live.
    assert a.totals.peak_activation_bytes == 240 + 120 + 144
    assert by_name[a.peak_activation.node].op_type == "SequenceAt"


def test_more_iterations_leave_the_body_s_varying_shapes_unknown() -> None:
    # three iterations slice widths 1, 2 and 3: the body has no one shape, and says so
    a = onnxcost.analyze(_model(3, [0, 1, 3, 6]))
    body_slice = next(n for n in a.nodes if n.op_type == "Slice" and n.outputs == ("part",))
    assert body_slice.status == "unknown_shape"


def _types(**shapes: tuple[int, ...]) -> dict[str, TensorInfo]:
    return {name: TensorInfo(name, F, shape) for name, shape in shapes.items()}


def _values(**known: object) -> KnownValues:
    values = KnownValues()
    for name, value in known.items():
        values.add_folded(name, np.array(value, dtype=np.int64))
    return values


def test_split_to_sequence_parts() -> None:
    types: dict[str, TensorInfo] = _types(x=(2, 10))
    # a scalar split of 4 along axis 1: parts of 4, 4 and what remains, 2
    node = helper.make_node("SplitToSequence", ["x", "s"], ["seq"], axis=1)
    assert sequence_node(node, types, _values(s=4))
    seq = types["seq"]
    assert isinstance(seq, SequenceInfo)
    assert [t.shape for t in seq.elements] == [(2, 4), (2, 4), (2, 2)]
    # sizes [3, 7] along axis 1
    assert sequence_node(node, types, _values(s=[3, 7]))
    assert [t.shape for t in types["seq"].elements] == [(2, 3), (2, 7)]  # type: ignore[attr-defined]
    # sizes that do not add up to 10: left to ONNX
    assert not sequence_node(node, types, _values(s=[3, 6]))
    # no split: one part per index of axis 0, without the axis where keepdims=0
    plain = helper.make_node("SplitToSequence", ["x"], ["rows"], axis=0, keepdims=0)
    assert sequence_node(plain, types, _values())
    assert [t.shape for t in types["rows"].elements] == [(10,), (10,)]  # type: ignore[attr-defined]


def test_insert_erase_at_length_and_concat() -> None:
    types: dict[str, TensorInfo] = _types(a=(2, 3), b=(2, 5))
    values = _values(front=0, last=-1)
    run = [
        helper.make_node("SequenceConstruct", ["a"], ["s1"]),
        helper.make_node("SequenceInsert", ["s1", "b", "front"], ["s2"]),  # [b, a]
        helper.make_node("SequenceInsert", ["s2", "a"], ["s3"]),  # [b, a, a]
        helper.make_node("SequenceErase", ["s3", "front"], ["s4"]),  # [a, a]
        helper.make_node("SequenceAt", ["s3", "last"], ["at_last"]),  # a
        helper.make_node("SequenceLength", ["s3"], ["n"]),  # 3
        helper.make_node("ConcatFromSequence", ["s3"], ["joined"], axis=1),  # [2, 5+3+3]
        helper.make_node("ConcatFromSequence", ["s4"], ["stacked"], axis=0, new_axis=1),
        helper.make_node("SequenceErase", ["s4"], ["s5"]),  # the last one: [a]
    ]
    for node in run:
        assert sequence_node(node, types, values), node.op_type
    assert [t.shape for t in types["s3"].elements] == [(2, 5), (2, 3), (2, 3)]  # type: ignore[attr-defined]
    assert types["at_last"].shape == (2, 3)
    assert int(values["n"]) == 3
    assert types["joined"].shape == (2, 11)
    assert types["stacked"].shape == (2, 2, 3)  # two [2, 3] stacked at a new axis 0
    assert len(types["s5"].elements) == 1  # type: ignore[attr-defined]
    # a sequence is the bytes of the elements it holds, (2*5 + 2*3 + 2*3) * 4 = 88, and has
    # no shape; an empty one is 0 bytes
    assert types["s3"].known_nbytes == 88
    assert SequenceInfo("e", (), F).known_nbytes == 0
    assert not types["s3"].is_concrete
    # unlike elements do not join along a new axis; a position past the end is unknown
    uneven = helper.make_node("ConcatFromSequence", ["s3"], ["bad"], axis=0, new_axis=1)
    assert not sequence_node(uneven, types, values)
    assert not sequence_node(
        helper.make_node("SequenceAt", ["s3", "far"], ["x"]), types, _values(far=3)
    )
    # a sequence not known element by element: ONNX's inference is asked instead
    assert not sequence_node(
        helper.make_node("SequenceAt", ["nope", "front"], ["y"]), types, values
    )


def test_unrolling_stops_at_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    # nested Loops unroll each other again per iteration: one inference unrolls at most
    # MAX_UNROLLED_IN_ALL iterations, past which the sequence is left unknown (here 2 of the
    # 3 iterations: no part has a shape, and the four MatMuls count 0)
    from onnxcost.shapes import sequences

    monkeypatch.setattr(sequences, "MAX_UNROLLED_IN_ALL", 2)
    a = onnxcost.analyze(_model(3, [0, 1, 3, 6]))
    assert a.totals.macs == 0
    assert all(n.status == "unknown_shape" for n in a.nodes if n.op_type == "MatMul")
