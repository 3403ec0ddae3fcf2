"""A Slice whose end may come before its start in the symbolic walk (issue 22): ONNX clamps
the start and end to 0 .. dim and takes ``max(0, ceil((end - start) / step))`` rows, an empty
slice where the end is before the start. The walk wrote ``ceil((end - start) / step)``,
assuming end >= start: x[:, 30:29] over s was ``min(29, s) - min(30, s)``, 0 up to s = 29
(every point the walk checks: 1, 0 and a random point from 2 to 14) and -1 from s = 30, a
formula published with no warning and wrong there."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxcost
from onnxcost.symbolic.shapes import symbolic_shapes


def _ints(name: str, *values: int) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _model(
    nodes: list[onnx.NodeProto],
    inits: list[onnx.TensorProto],
    x_shape: list[int | str],
    out: str = "z",
) -> onnx.ModelProto:
    """A model of ``nodes`` over one float32 input x of ``x_shape``, writing ``out``."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _slice_model(start: int, end: int, step: int = 1) -> onnx.ModelProto:
    """x [b, s] (float32) -> x[:, start:end:step] -> Relu."""
    inits = [_ints("st", start), _ints("en", end), _ints("ax", 1), _ints("stp", step)]
    nodes = [
        helper.make_node("Slice", ["x", "st", "en", "ax", "stp"], ["y"]),
        helper.make_node("Relu", ["y"], ["z"]),
    ]
    return _model(nodes, inits, ["b", "s"])


def _rows(start: int, end: int, step: int, s: int) -> int:
    """ONNX's Slice by hand: a start or end below 0 counted from the end, both clamped to
    0 .. s, then max(0, ceil((end - start) / step)) rows."""
    lo, hi = (min(max(v + s if v < 0 else v, 0), s) for v in (start, end))
    return max(0, -(-(hi - lo) // step))


@pytest.mark.parametrize(
    ("start", "end", "step"),
    [
        (30, 29, 1),  # ends before it starts: 0 rows at every s (the walk's -1 from s = 30)
        (20, 15, 2),  # so with a step of 2 (the walk's -1 at s = 17, 18, -2 from 19)
        (5, -5, 1),  # x[:, 5:-5]: s - 10 rows from s = 10, none below (the walk's -5 at s = 1)
        (-3, 2**62, 1),  # x[:, -3:]: the last min(3, s) rows (the walk's 3 at s = 1)
        (-1, 2**62, 1),  # x[:, -1:]: the last row, none at s = 0 (the walk's 1 there)
        (-4, -1, 1),  # x[:, -4:-1]: min(3, s - 1) rows from s = 1 (the walk's 3 at s = 1)
        (-5, 2**62, 2),  # x[:, -5::2]: rows s - 5, s - 3, s - 1 that exist: 3 from s = 5
    ],
)
def test_a_slice_whose_end_may_come_before_its_start_is_exact_at_every_size(
    start: int, end: int, step: int
) -> None:
    # bytes written = 4 bytes x b x rows; at b = 2 and every s from 0 to 60, against a
    # concrete analysis and against ONNX's rule by hand (_rows). E.g. (30, 29): 0 at every s;
    # (20, 15, 2): 0 at every s; (5, -5): s = 12 has rows 5 .. 7, 2 of them: 16 bytes.
    model = _slice_model(start, end, step)
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1, a.warnings
    written = a.symbolic.nodes[0]["bytes_written"]
    assert written is not None, a.warnings
    for s in range(61):
        point = {"b": 2, "s": s}
        want = onnxcost.analyze(model, dims=point).nodes[0].bytes_written
        assert want == 4 * 2 * _rows(start, end, step, s), point
        assert written.evaluate(point) == want, (point, written)
    if (start, end) == (5, -5):
        assert written.evaluate({"b": 2, "s": 12}) == 16


def test_a_symbolic_end_that_may_be_below_0_is_not_carried() -> None:
    # x[:, 2:s - 6]: ONNX counts the end from the end where s - 6 < 0: at s = 5 the end is
    # -1 + 5 = 4, and rows 2 .. 3 are 2 (8 bytes at b = 1), where min(s - 6, s) - 2 reads
    # none. Not carried (sampled); no formula that is wrong there.
    inits = [_ints("one", 1), _ints("six", 6), _ints("st", 2), _ints("ax", 1)]
    nodes = [
        helper.make_node("Shape", ["x"], ["xs"]),
        helper.make_node("Gather", ["xs", "one"], ["s"], axis=0),
        helper.make_node("Sub", ["s", "six"], ["en"]),
        helper.make_node("Slice", ["x", "st", "en", "ax"], ["y"]),
        helper.make_node("Relu", ["y"], ["z"]),
    ]
    model = _model(nodes, inits, ["b", "s"])
    assert onnxcost.analyze(model, dims={"b": 1, "s": 5}).nodes[3].bytes_written == 8
    assert ("Slice_3", "Slice", "a start or end, s - 6, that may be below 0") in (
        symbolic_shapes(model).uncarried
    )
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    for s in range(1, 40):
        point = {"b": 1, "s": s}
        want = onnxcost.analyze(model, dims=point)
        for k, node in enumerate(want.nodes):
            for key, f in a.symbolic.nodes[k].items():
                assert f is None or f.evaluate(point) == getattr(node, key), (point, key)


def test_a_start_below_0_at_every_point_is_counted_from_the_end() -> None:
    # T5's decoder keeps the last seq positions of its biases: x[:, -s:] over x [b, t], s read
    # from y [b, s] (Shape, Gather, Neg). ONNX: start -s counted from the end, t - s, clamped
    # at 0: min(s, t) rows. At b = 2, t = 7: s = 3 gives 3 rows (24 bytes), s = 9 gives 7 (56).
    # At s = 0 the start, -0, is 0, no count from the end: all t rows. So the formulas hold
    # from s = 1 and s = 0 is left out, with a warning (not each formula null). The walk did
    # not carry Neg's value, nor a symbolic start below 0: the Slice and the Relu after it
    # were sampled.
    inits = [_ints("one", 1), _ints("big", 2**62), _ints("ax", 1)]
    nodes = [
        helper.make_node("Shape", ["y"], ["ys"]),
        helper.make_node("Gather", ["ys", "one"], ["s"], axis=0),
        helper.make_node("Neg", ["s"], ["st"]),
        helper.make_node("Slice", ["x", "st", "big", "ax"], ["z"]),
        helper.make_node("Relu", ["z"], ["r"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tail",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "t"]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "s"]),
        ],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert not symbolic_shapes(model).uncarried
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1, a.warnings
    written = a.symbolic.nodes[3]["bytes_written"]
    assert written is not None, a.warnings
    assert written.evaluate({"b": 2, "t": 7, "s": 3}) == 24
    assert written.evaluate({"b": 2, "t": 7, "s": 9}) == 56
    assert a.symbolic.zero_allowed == {"b": True, "t": True, "s": False}
    assert any(w.startswith("s=0 is left out: node 'Slice_3' (Slice)") for w in a.warnings)
    for t in range(6):
        for s in range(6):
            point = {"b": 2, "t": t, "s": s}
            want = onnxcost.analyze(model, dims=point).nodes[3].bytes_written
            assert want == 4 * 2 * (min(s, t) if s else t), point
            if s:
                assert written.evaluate(point) == want, (point, written)


def test_f_pad_as_the_torchscript_exporter_writes_it_is_walked_once() -> None:
    # torchvision's Swin pads its [b, h, w, c] windows to a multiple of 7 with F.pad((0, 0, 0,
    # pad_r, 0, pad_b)), pad_r = (7 - w % 7) % 7, traced over the input's shape: the pads
    # (last dim first, in pairs) padded with zeros to 8, reshaped to [4, 2], reversed by a
    # Slice of step -1, transposed and flattened into ONNX's order. The walk carried neither
    # Mod nor a step below 0 nor a [4, 2] value: every Swin export was sampled, with no peak
    # formula. Here w = 5: pad_r = (7 - 5) % 7 = 2, pads [0, 0, 0, 0, 0, 0, 2, 0] (w's end),
    # y [b, 5, 7, 4]: the Relu writes 4 bytes x 5 x 7 x 4 = 560·b.
    inits = [
        numpy_helper.from_array(np.array(7, np.int64), "seven"),
        _ints("zero", 0),
        _ints("two", 2),
        _ints("pairs", -1, 2),
        _ints("flat", -1),
        _ints("last", -1),
        _ints("first", -(2**63) + 1),
        _ints("ax0", 0),
        _ints("back", -1),
        numpy_helper.from_array(np.array(2, np.int64), "w_at"),  # scalars, as torch's
    ]
    nodes = [
        helper.make_node("Shape", ["x"], ["xs"]),
        helper.make_node("Gather", ["xs", "w_at"], ["w"], axis=0),
        helper.make_node("Mod", ["w", "seven"], ["m"]),
        helper.make_node("Sub", ["seven", "m"], ["d"]),
        helper.make_node("Mod", ["d", "seven"], ["p"]),
        helper.make_node("Unsqueeze", ["p", "ax0"], ["pu"]),
        helper.make_node("Concat", ["zero", "zero", "zero", "pu", "zero", "zero"], ["p6"], axis=0),
        helper.make_node("ConstantOfShape", ["two"], ["z2"], value=_ints("v", 0)),
        helper.make_node("Concat", ["p6", "z2"], ["p8"], axis=0),
        helper.make_node("Reshape", ["p8", "pairs"], ["r"]),
        helper.make_node("Slice", ["r", "last", "first", "ax0", "back"], ["rev"]),
        helper.make_node("Transpose", ["rev"], ["t"], perm=[1, 0]),
        helper.make_node("Reshape", ["t", "flat"], ["pads"]),
        helper.make_node("Pad", ["x", "pads"], ["y"]),
        helper.make_node("Relu", ["y"], ["z"]),
    ]
    model = _model(nodes, inits, ["b", 5, 5, 4])
    assert symbolic_shapes(model).values["pads"] == (0, 0, 0, 0, 0, 0, 2, 0)
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1, a.warnings
    written = a.symbolic.nodes[-1]["bytes_written"]
    assert str(written) == "560*b"
    assert a.formulas["peak_activation_bytes"] is not None
    assert onnxcost.analyze(model, dims={"b": 3}).nodes[-1].bytes_written == 1680  # 3 x 560


def test_an_empty_shape_value_is_known_where_its_class_was_seen_before() -> None:
    # x.shape[2:] of a 2-D x is (): torch's shape arithmetic concatenates it. The walk took a
    # known () for unknown (falsy) where the Slice's class came from its memo: its second
    # use, here the reshape of x [b, 6] to [-1, 3] + x.shape[2:] = [2b, 3], was not carried
    # and the model sampled (torchvision's Swin: 3,493 of 6,194 nodes). The Relu writes
    # 4 bytes x 2b x 3 = 24·b.
    inits = [_ints("two", 2), _ints("big", 2**62), _ints("ax0", 0), _ints("k", -1, 3)]
    nodes = [
        helper.make_node("Shape", ["x"], ["xs"]),
        helper.make_node("Slice", ["xs", "two", "big", "ax0"], ["tail1"]),
        helper.make_node("Concat", ["xs", "tail1"], ["c1"], axis=0),
        helper.make_node("Reshape", ["x", "c1"], ["y1"]),
        helper.make_node("Slice", ["xs", "two", "big", "ax0"], ["tail2"]),
        helper.make_node("Concat", ["k", "tail2"], ["c2"], axis=0),
        helper.make_node("Reshape", ["y1", "c2"], ["y2"]),
        helper.make_node("Relu", ["y2"], ["z"]),
    ]
    model = _model(nodes, inits, ["b", 6])
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1, a.warnings
    assert str(a.symbolic.nodes[-1]["bytes_written"]) == "24*b"
    assert onnxcost.analyze(model, dims={"b": 5}).nodes[-1].bytes_written == 120  # 5 x 24


def test_an_end_within_the_dim_at_every_point_needs_no_min() -> None:
    # RAFT runs its encoder on both frames at once, [2b, ...], and splits the result at b:
    # x[:b] of y [2b, 4]. The end b is within 2b wherever b >= 0, so the slice has b rows, not
    # min(b, 2b): with the min, the reshape to [b, -1] after it had no exact -1 (4·min(2b, b)
    # / b) and the model was sampled. Relu writes 4 bytes x b x 4 = 16·b.
    inits = [_ints("zero", 0), _ints("minus", -1)]
    nodes = [
        helper.make_node("Concat", ["x", "x"], ["y"], axis=0),
        helper.make_node("Shape", ["x"], ["xs"]),
        helper.make_node("Gather", ["xs", "zero"], ["b"], axis=0),
        helper.make_node("Slice", ["y", "zero", "b", "zero"], ["first"]),
        helper.make_node("Concat", ["b", "minus"], ["to"], axis=0),
        helper.make_node("Reshape", ["first", "to"], ["r"]),
        helper.make_node("Relu", ["r"], ["z"]),
    ]
    model = _model(nodes, inits, ["b", 4])
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1, a.warnings
    assert str(a.symbolic.nodes[-1]["bytes_written"]) == "16*b"
    assert onnxcost.analyze(model, dims={"b": 3}).nodes[-1].bytes_written == 48  # 3 x 16
