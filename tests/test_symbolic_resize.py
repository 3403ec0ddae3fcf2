"""Resize and Upsample by stored scales in the symbolic walk (``symbolic.more_shapes``): each
output dim is ONNX's ``floor(d * scale)``, the scale a float32, as an exact integer floor;
by hand, against ONNX's own inference, and through ``analyze --symbolic`` (walked once, no
sampling, equal to a concrete analysis)."""

from __future__ import annotations

import random

import onnx
import pytest

import onnxcost
from onnxcost.prepare import prepare
from onnxcost.symbolic.node_costs import node_costs
from onnxcost.symbolic.shapes import symbolic_shapes
from onnxcost.symdim import SymDim


def _model(
    inputs: str, outputs: str, body: str, opset: int = 19, init: str = ""
) -> onnx.ModelProto:
    return onnx.parser.parse_model(
        f'<ir_version: 9, opset_import: ["" : {opset}]>\n'
        f"g ({inputs}) => ({outputs}) {init} {{ {body} }}"
    )


def _at(d: int | SymDim, h: int) -> int:
    return d if isinstance(d, int) else d.evaluate({"b": 1, "h": h, "w": h})


def _inferred(proto: onnx.ModelProto, h: int) -> tuple[int, ...]:
    """ONNX's inference of output y with h = w = ``h`` (none of onnxcost's code)."""
    m = onnx.ModelProto()
    m.CopyFrom(proto)
    for d in m.graph.input[0].type.tensor_type.shape.dim:
        if d.dim_param:
            d.ClearField("dim_param")
            d.dim_value = 1 if d.dim_param == "b" else h
    del m.graph.output[:]
    m = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    (y,) = [vi for vi in m.graph.value_info if vi.name == "y"]
    return tuple(d.dim_value for d in y.type.tensor_type.shape.dim)


# scale -> (h, floor(h * scale)) by hand: 2 x 5 = 10; 0.5 x 7 = 3.5 -> 3; 1.5 x 5 = 7.5 -> 7;
# 0.75 x 9 = 6.75 -> 6 (0.75 = 3/4 exactly in float32).
BY_HAND = [(2.0, 5, 10), (0.5, 7, 3), (1.5, 5, 7), (0.75, 9, 6)]


@pytest.mark.parametrize(("scale", "h", "want"), BY_HAND)
def test_resize_by_stored_scales_is_floor_of_dim_times_scale(
    scale: float, h: int, want: int
) -> None:
    proto = _model(
        "float[b, 3, h, w] x",
        "float[b, 3, p, q] y",
        'y = Resize<mode = "nearest">(x, roi, scales)',
        init=f"<float[0] roi = {{}}, float[4] scales = {{1.0, 1.0, {scale}, {scale}}}>",
    )
    found = symbolic_shapes(proto)
    assert found.uncarried == []
    _b, c, p, q = found.shapes["y"]
    assert (c, _at(p, h), _at(q, h)) == (3, want, want)
    for size in (1, 2, 5, 7, 9, 16):  # the walk's floor is ONNX's, at every size tried
        assert (_at(p, size), _at(q, size)) == _inferred(proto, size)[2:]


def test_opset_10_resize_and_upsample_read_their_scales_too() -> None:
    # Resize-10 (X, scales) and Upsample-9 (X, scales): [b, 3, h, w] x 2 on h and w; Upsample-7
    # (scales an attribute) x 3 on w only. At h = w = 4: (8, 8) and (4, 12).
    resize10 = _model(
        "float[b, 3, h, w] x",
        "float[b, 3, p, q] y",
        "y = Resize(x, scales)",
        opset=10,
        init="<float[4] scales = {1.0, 1.0, 2.0, 2.0}>",
    )
    upsample9 = _model(
        "float[b, 3, h, w] x",
        "float[b, 3, p, q] y",
        "y = Upsample(x, scales)",
        opset=9,
        init="<float[4] scales = {1.0, 1.0, 2.0, 2.0}>",
    )
    upsample7 = _model(
        "float[b, 3, h, w] x",
        "float[b, 3, p, q] y",
        "y = Upsample<scales = [1.0, 1.0, 1.0, 3.0]>(x)",
        opset=7,
    )
    for proto, want in ((resize10, (8, 8)), (upsample9, (8, 8)), (upsample7, (4, 12))):
        found = symbolic_shapes(proto)
        assert found.uncarried == []
        assert tuple(_at(d, 4) for d in found.shapes["y"][2:]) == want


def test_scales_it_cannot_take_exactly_are_named_not_guessed() -> None:
    # 0.1 in float32 is 13421773 / 2**27: more than 16 bits below the point; scales computed
    # in the graph are not stored; tf_crop_and_resize's size also takes its ROI.
    tenth = _model(
        "float[b, 3, h, w] x",
        "float[b, 3, p, q] y",
        "y = Resize(x, roi, scales)",
        init="<float[0] roi = {}, float[4] scales = {1.0, 1.0, 0.1, 0.1}>",
    )
    computed = _model(
        "float[b, 3, h, w] x, float[4] scales",
        "float[b, 3, p, q] y",
        "y = Resize(x, roi, scales)",
        init="<float[0] roi = {}>",
    )
    crop = _model(
        "float[b, 3, h, w] x",
        "float[b, 3, p, q] y",
        'y = Resize<coordinate_transformation_mode = "tf_crop_and_resize">(x, roi, scales)',
        init="<float[8] roi = {0, 0, 0, 0, 1, 1, 1, 1}, float[4] scales = {1.0, 1.0, 2.0, 2.0}>",
    )
    infinite = _model(
        "float[b, 3, h, w] x",
        "float[b, 3, p, q] y",
        "y = Resize(x, roi, scales)",
        init="<float[0] roi = {}, float[4] scales = {1.0, 1.0, 2.0, 2.0}>",
    )
    infinite.graph.initializer[1].float_data[2] = float("inf")  # a hostile file's
    reasons = [symbolic_shapes(p).uncarried[0][2] for p in (tenth, computed, crop, infinite)]
    assert "more than 16 bits below its point" in reasons[0]
    assert reasons[1] == "Resize by scales that are not stored in the model"
    assert reasons[2] == "tf_crop_and_resize"
    assert reasons[3] == "a scale of inf"


def test_two_resizes_of_one_input_by_other_scales_are_two_classes() -> None:
    # The walk's memo keys a tensor by its type, shape and value: scales 2 and 4 of the same
    # shape must not share a class (2h and 4h rows).
    proto = _model(
        "float[b, 3, h, w] x",
        "float[b, 3, p, q] y, float[b, 3, r, t] z",
        "y = Resize(x, roi, two)\n z = Resize(x, roi, four)",
        init="<float[0] roi = {}, float[4] two = {1.0, 1.0, 2.0, 2.0}, "
        "float[4] four = {1.0, 1.0, 4.0, 4.0}>",
    )
    walked = node_costs(prepare(proto))
    assert walked.reasons == {}
    assert walked.classes[0] != walked.classes[1]
    shapes = walked.shapes
    assert shapes is not None
    assert [_at(d, 3) for d in shapes.shapes["y"][2:]] == [6, 6]
    assert [_at(d, 3) for d in shapes.shapes["z"][2:]] == [12, 12]


def test_an_upsampling_cnn_is_walked_once_and_exact() -> None:
    # A decoder stage as YOLO's and U-Net's necks write it: Conv 3x3 stride 2 pad 1 (h -> (h +
    # 1) // 2), Resize x 2 by stored scales, Conv 3x3 pad 1. Formulas from the one walk (no
    # sampled analyses), equal to a concrete analysis at random h, w (odd ones too) and at 1.
    proto = _model(
        "float[b, 3, h, w] x",
        "float[b, 4, p, q] y",
        "d = Conv<strides = [2, 2], pads = [1, 1, 1, 1]>(x, k1)\n"
        ' u = Resize<mode = "nearest">(d, roi, scales)\n'
        " y = Conv<pads = [1, 1, 1, 1]>(u, k2)",
        init="<float[8, 3, 3, 3] k1 = {" + ", ".join(["0.5"] * 216) + "}, "
        "float[4, 8, 3, 3] k2 = {" + ", ".join(["0.5"] * 288) + "}, "
        "float[0] roi = {}, float[4] scales = {1.0, 1.0, 2.0, 2.0}>",
    )
    a = onnxcost.analyze(prepare(proto), symbolic=True)
    costs = a.symbolic
    assert costs is not None
    assert costs.analyses == 1, a.warnings  # the one walk; the sampler runs more
    assert not [w for w in a.warnings if "sampled" in w]
    rng = random.Random(3)
    points = [{"b": 1, "h": 1, "w": 1}] + [
        {"b": rng.randint(1, 4), "h": rng.randint(2, 33), "w": rng.randint(2, 33)} for _ in range(4)
    ]
    for point in points:
        concrete = onnxcost.analyze(proto, dims=point)
        at = a.at(**point)
        assert (at.macs, at.flops) == (concrete.totals.macs, concrete.totals.flops), point
    # By hand at b = 1, h = w = 8: d is 8 x 4 x 4, u is 8 x 8 x 8; the first Conv 8 x 16
    # outputs x 27 = 3,456 MACs, the second 4 x 64 x 72 = 18,432: 21,888 in all.
    assert a.at(b=1, h=8, w=8).macs == 3_456 + 18_432
