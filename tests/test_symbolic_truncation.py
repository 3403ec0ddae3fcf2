"""ONNX's truncation in the symbolic walk's Conv and pool output sizes (issue 22): ONNX's
inference divides ``size + pads - kernel`` by the stride rounding toward 0, not down, so a
3x3 Conv at stride 2 without pads gives 1 row at h = 2 where a floor gives 0. The walk's
size formulas are checked against ONNX's own inference (``onnx.shape_inference`` on the
concrete model, none of onnxcost's code) at every size from 0 to 12, by hand, and through
``analyze --symbolic`` on models that downsample with a Resize before their convolutions,
whose floors the guard against truncation used to refuse."""

from __future__ import annotations

import itertools
import random
from typing import Any

import onnx
import pytest
from onnx import TensorProto, helper

import onnxcost
from onnxcost.symbolic.shapes import symbolic_shapes
from onnxcost.symdim import SymDim

SIZES = range(13)
"""The input sizes every window is checked at: 0 to 12."""


def _window_model(
    op: str, sizes: list[int | str], opset: int, attrs: dict[str, Any]
) -> onnx.ModelProto:
    """One 1-D node ``op`` per input x{i} [1, 2, sizes[i]] (Conv: 3 filters of the kernel)."""
    kernel = attrs["kernel_shape"][0]
    nodes, inputs, outputs = [], [], []
    inits = [helper.make_tensor("w", TensorProto.FLOAT, [3, 2, kernel], [1.0] * 6 * kernel)]
    for i, size in enumerate(sizes):
        inputs.append(helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [1, 2, size]))
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None))
        ins = [f"x{i}", "w"] if op == "Conv" else [f"x{i}"]
        nodes.append(helper.make_node(op, ins, [f"y{i}"], **attrs))
    graph = helper.make_graph(nodes, "windows", inputs, outputs, inits if op == "Conv" else [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _onnx_sizes(op: str, opset: int, attrs: dict[str, Any]) -> list[int]:
    """ONNX's inferred output size at each of SIZES."""
    model = _window_model(op, list(SIZES), opset, attrs)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    dims = {o.name: o.type.tensor_type.shape.dim for o in inferred.graph.output}
    return [dims[f"y{h}"][2].dim_value for h in SIZES]


def _windows() -> list[tuple[str, int, dict[str, Any]]]:
    """(op, opset, attributes) of every window checked: kernels 1 to 4, strides 1 to 3,
    dilations 1 and 2 (Conv, MaxPool), explicit pads (each below the kernel for a pool),
    VALID, SAME_UPPER and SAME_LOWER, floor and ceil mode (pools), opsets 19 and 22 (whose
    ceil mode drops a window that would start in the end padding)."""
    found = []
    pads = [(0, 0), (1, 0), (0, 1), (1, 1), (2, 1)]
    autos = ["VALID", "SAME_UPPER", "SAME_LOWER"]
    for op, opset, k, s, d in itertools.product(
        ("Conv", "MaxPool", "AveragePool"), (19, 22), (1, 2, 3, 4), (1, 2, 3), (1, 2)
    ):
        if d > 1 and op == "AveragePool":
            continue
        for ceil in (0, 1) if op != "Conv" else (0,):
            base: dict[str, Any] = {"kernel_shape": [k], "strides": [s]}
            if d > 1:
                base["dilations"] = [d]
            if op != "Conv":
                base["ceil_mode"] = ceil
            for pb, pe in pads:
                if op == "Conv" or (pb < k and pe < k):
                    found.append((op, opset, {**base, "pads": [pb, pe]}))
            found += [(op, opset, {**base, "auto_pad": auto}) for auto in autos]
    return found


WINDOWS = _windows()


def test_every_window_s_size_is_onnx_s_at_every_size_from_0_to_12() -> None:
    # For each window, ONNX's inference at h = 0..12, against (1) the walk of the concrete
    # model (every size an int) and (2) the walk's formula over a symbolic h, evaluated at
    # each h: at h >= 1 always, at h = 0 unless the walk says its formula holds from 1
    # (``SymbolicShapes.assumed``: a condition that fails at 0), as for a 3x3 Conv, stride 2,
    # pad 1, whose (h - 1) // 2 + 1 is 0 at h = 0 and ONNX's (0 + 2 - 3) / 2 + 1 is 1.
    misses = []
    zeros_refused = 0
    for op, opset, attrs in WINDOWS:
        want = _onnx_sizes(op, opset, attrs)
        concrete = symbolic_shapes(_window_model(op, list(SIZES), opset, attrs))
        walked = [concrete.shapes[f"y{h}"][2] for h in SIZES]
        symbolic = symbolic_shapes(_window_model(op, ["h"], opset, attrs))
        assert symbolic.uncarried == [], (op, opset, attrs)
        size = symbolic.shapes["y0"][2]
        holds_at_zero = all(c.evaluate({"h": 0}) >= 0 for c in symbolic.assumed)
        zeros_refused += not holds_at_zero
        for h in SIZES:
            got = size if isinstance(size, int) else size.evaluate({"h": h})
            if walked[h] != want[h] or (got != want[h] and (h > 0 or holds_at_zero)):
                misses.append(
                    f"{op}-{opset} {attrs} at h={h}: ONNX {want[h]}, walk {walked[h]}, "
                    f"formula {size} = {got}"
                )
    assert not misses, "\n".join(misses[:20]) + f"\n({len(misses)} in all)"
    assert len(WINDOWS) > 1_300  # the grid is not empty (docs/symbolic.md says so)
    assert 0 < zeros_refused < len(WINDOWS)


def _conv_model() -> onnx.ModelProto:
    """x [b, 4, h, w] -> Conv 3x3, stride 2, no pads, 8 filters (no bias)."""
    w = helper.make_tensor("k", TensorProto.FLOAT, [8, 4, 3, 3], [0.5] * 288)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "k"], ["c"], kernel_shape=[3, 3], strides=[2, 2])],
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 4, "h", "w"])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)],
        [w],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_strided_conv_without_pads_by_hand() -> None:
    # Conv 3x3, stride 2, no pads: ONNX's h' = trunc((h - 3) / 2) + 1, rounded toward 0:
    # h = 1: trunc(-2 / 2) + 1 = 0; h = 2: trunc(-1 / 2) + 1 = 0 + 1 = 1 (a floor gives 0);
    # h = 3: 0 + 1 = 1; h = 4: trunc(1 / 2) + 1 = 1; h = 5: 1 + 1 = 2.
    model = _conv_model()
    size = symbolic_shapes(model).shapes["c"][2]
    assert isinstance(size, SymDim)
    for h, by_hand in zip((1, 2, 3, 4, 5), (0, 1, 1, 1, 2), strict=True):
        concrete = onnx.ModelProto()
        concrete.CopyFrom(model)
        dims = concrete.graph.input[0].type.tensor_type.shape.dim
        for d, value in zip(dims, (1, 4, h, 7), strict=True):
            d.dim_value = value
        inferred = onnx.shape_inference.infer_shapes(concrete, strict_mode=True)
        onnx_h = inferred.graph.output[0].type.tensor_type.shape.dim[2].dim_value
        assert size.evaluate({"b": 1, "h": h, "w": 7}) == onnx_h == by_hand, h
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1
    macs = a.formulas["macs"]
    assert macs is not None  # the floors' guard left it null
    # MACs at b = 2, h = 2, w = 7: h' = 1 (above), w' = trunc((7 - 3) / 2) + 1 = 3, and each
    # of the 2 x 8 x 1 x 3 = 48 outputs takes 4 x 3 x 3 = 36 MACs: 1,728.
    assert macs(b=2, h=2, w=7) == 1_728
    assert onnxcost.analyze(model, dims={"b": 2, "h": 2, "w": 7}).totals.macs == 1_728
    # exact at h = 0 too (ONNX's trunc(-3 / 2) + 1 = 0 rows), so no symbol is refused there
    assert a.symbolic.zero_allowed == {"b": True, "h": True, "w": True}
    for point in ({"b": 1, "h": 0, "w": 5}, {"b": 3, "h": 1, "w": 1}, {"b": 2, "h": 6, "w": 9}):
        assert macs(**point) == onnxcost.analyze(model, dims=point).totals.macs, point


def _resize_conv_model() -> onnx.ModelProto:
    """x [b, 3, h, w] -> Resize by stored scales 0.5 (nearest) -> Conv 3x3, stride 1, pad 1,
    4 filters: a model that downsamples its input before its convolutions."""
    return onnx.parser.parse_model(
        '<ir_version: 9, opset_import: ["" : 19]>\n'
        "g (float[b, 3, h, w] x) => (float[b, 4, p, q] y)"
        "<float[4, 3, 3, 3] k = {" + ", ".join(["0.5"] * 108) + "}, "
        "float[0] roi = {}, float[4] scales = {1.0, 1.0, 0.5, 0.5}> {"
        ' d = Resize<mode = "nearest">(x, roi, scales)\n'
        " y = Conv<pads = [1, 1, 1, 1]>(d, k) }"
    )


def test_a_resize_by_a_half_before_a_conv_keeps_its_formulas() -> None:
    # The Resize's sizes are ONNX's floor(h * 0.5) = h // 2 exactly (floor is its rule), which
    # is 0 at h = 1: the guard against truncation refused every formula with a floor there.
    model = _resize_conv_model()
    a = onnxcost.analyze(model, symbolic=True)
    costs = a.symbolic
    assert costs is not None
    assert costs.analyses == 1, a.warnings
    assert all(f is not None for f in costs.totals.values()), a.warnings
    assert all(f is not None for node in costs.nodes for f in node.values()), a.warnings
    assert costs.zero_allowed == {"b": True, "h": True, "w": True}
    # By hand at b = 2, h = 9, w = 7: d is [2, 3, 4, 3] (9 // 2 = 4, 7 // 2 = 3), the Conv
    # (stride 1, pad 1) keeps 4 x 3: 2 x 4 x 4 x 3 = 96 outputs of 3 x 3 x 3 = 27 MACs: 2,592.
    macs = a.formulas["macs"]
    assert macs is not None
    assert macs(b=2, h=9, w=7) == 2_592
    rng = random.Random(22)
    points = [
        {"b": 1, "h": 1, "w": 1},
        {"b": 2, "h": 9, "w": 7},
        {"b": 3, "h": 1, "w": 13},
        {"b": 1, "h": 0, "w": 3},
    ] + [{s: rng.randint(1, 40) for s in ("b", "h", "w")} for _ in range(4)]
    for point in points:
        want = onnxcost.analyze(model, dims=point)
        at = a.at(**point)
        for key in ("macs", "flops", "bytes_read", "bytes_written", "params", "param_bytes"):
            assert getattr(at, key) == getattr(want.totals, key), (point, key)
        for k, node in enumerate(want.nodes):
            for key, f in costs.nodes[k].items():
                assert f is not None
                assert f.evaluate(point) == getattr(node, key), (point, node.name, key)


@pytest.mark.parametrize("opset", [19, 22])
def test_a_pool_at_stride_2_over_a_resize_by_a_quarter_is_exact(opset: int) -> None:
    # Resize by 0.25 (h // 4), then MaxPool 2x2 stride 2 (ONNX: trunc((h // 4 - 2) / 2) + 1,
    # 1 where h // 4 is 1 and a floor gives 0), then AveragePool 3x3 stride 2 pad 1 with
    # ceil_mode (from opset 22 a window that would start in the end padding is dropped).
    model = onnx.parser.parse_model(
        f'<ir_version: 9, opset_import: ["" : {opset}]>\n'
        "g (float[b, 2, h, w] x) => (float[b, 2, p, q] y)"
        "<float[0] roi = {}, float[4] scales = {1.0, 1.0, 0.25, 0.25}> {"
        ' d = Resize<mode = "nearest">(x, roi, scales)\n'
        " m = MaxPool<kernel_shape = [2, 2], strides = [2, 2]>(d)\n"
        " y = AveragePool<kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1],"
        " ceil_mode = 1>(m) }"
    )
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1, a.warnings
    assert all(f is not None for f in a.symbolic.totals.values()), a.warnings
    for h in range(0, 41, 3):
        point = {"b": 2, "h": h, "w": 43 - h}
        want = onnxcost.analyze(model, dims=point).totals
        at = a.at(**point)
        assert (at.flops, at.bytes_written) == (want.flops, want.bytes_written), point


def _onnx_dim(
    model: onnx.ModelProto, values: dict[str, int], output: int = 0, axis: int = 2
) -> int:
    """ONNX's inferred dim ``axis`` of graph output ``output`` with the input dims named in
    ``values`` set to them (none of onnxcost's code)."""
    concrete = onnx.ModelProto()
    concrete.CopyFrom(model)
    for d in concrete.graph.input[0].type.tensor_type.shape.dim:
        if d.dim_param:
            d.dim_value = values[d.dim_param]
    inferred = onnx.shape_inference.infer_shapes(concrete, strict_mode=True, data_prop=True)
    return inferred.graph.output[output].type.tensor_type.shape.dim[axis].dim_value


def test_onnx_s_qlinear_conv_rounds_toward_0_as_conv_does() -> None:
    # ONNX's QLinearConv (its weight the 4th input), 3x3, stride 2, no pads: ONNX's inference
    # is Conv's, trunc((h - 3) / 2) + 1: 0, 1, 1, 1, 2, 2 at h = 1..6 (at h = 2, (2 - 3) / 2
    # rounds to 0 and gives 1 where a floor gives 0, the rule onnxcost has for the contrib op).
    model = onnx.parser.parse_model(
        '<ir_version: 8, opset_import: ["" : 17]>\n'
        "g (uint8[b, 3, h, w] x) => (uint8[b, 4, p, q] y)"
        "<float xs = {0.1}, uint8 xz = {128}, int8[4, 3, 3, 3] k = {"
        + ", ".join(["1"] * 108)
        + "}, float ws = {0.1}, int8 wz = {0}, float ys = {0.2}, uint8 yz = {128}> {"
        " y = QLinearConv<strides = [2, 2]>(x, xs, xz, k, ws, wz, ys, yz) }"
    )
    walked = symbolic_shapes(model)
    assert walked.uncarried == []
    size = walked.shapes["y"][2]
    assert isinstance(size, SymDim)
    for h, by_hand in zip(range(1, 7), (0, 1, 1, 1, 2, 2), strict=True):
        onnx_h = _onnx_dim(model, {"b": 1, "h": h, "w": 5})
        assert size.evaluate({"h": h}) == onnx_h == by_hand, h
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1, a.warnings
    macs = a.formulas["macs"]
    assert macs is not None
    # At b = 1, h = 2, w = 5: h' = 1, w' = trunc(2 / 2) + 1 = 2: 1 x 4 x 1 x 2 = 8 outputs of
    # 3 x 3 x 3 = 27 MACs: 216.
    assert macs(b=1, h=2, w=5) == 216
    for point in ({"b": 1, "h": 2, "w": 5}, {"b": 2, "h": 1, "w": 9}, {"b": 3, "h": 8, "w": 4}):
        assert macs(**point) == onnxcost.analyze(model, dims=point).totals.macs, point


def test_an_integer_div_of_a_shape_value_rounds_toward_0() -> None:
    # n = (h - 3) / 2 + 1 computed in the graph on int64 values (ONNX's Div rounds toward 0,
    # as the concrete analysis' folding does: np.trunc), then ConstantOfShape([n]). By hand,
    # n at h = 0..5: trunc(-3 / 2) + 1 = 0, trunc(-2 / 2) + 1 = 0, trunc(-1 / 2) + 1 = 1 (a
    # floor gives 0), 1, trunc(1 / 2) + 1 = 1, 2. Bytes written: Shape, Sub, Div and Add an
    # int64[1] each (32) and y n floats: 32 + 4 n.
    model = onnx.parser.parse_model(
        '<ir_version: 9, opset_import: ["" : 19]>\n'
        "g (float[b, h] x) => (float[n] y)"
        "<int64[1] three = {3}, int64[1] two = {2}, int64[1] one = {1}> {"
        " s = Shape<start = 1>(x)\n d = Sub(s, three)\n e = Div(d, two)\n f = Add(e, one)\n"
        " y = ConstantOfShape(f) }"
    )
    walked = symbolic_shapes(model)
    assert walked.uncarried == []
    (size,) = walked.shapes["y"]
    assert isinstance(size, SymDim)
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1, a.warnings
    written = a.formulas["bytes_written"]
    assert written is not None
    for h, n in zip(range(6), (0, 0, 1, 1, 1, 2), strict=True):
        assert size.evaluate({"h": h}) == n, h
        concrete = onnxcost.analyze(model, dims={"b": 1, "h": h}).totals.bytes_written
        assert written(b=1, h=h) == concrete == 32 + 4 * n, h
