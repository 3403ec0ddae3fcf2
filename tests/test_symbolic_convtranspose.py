"""ConvTranspose in the symbolic walk (issue 22): its output sizes against onnx 1.23's own
inference (``onnx.shape_inference`` on the concrete model, none of onnxcost's code) at every
size from 0 to 12, its costs by hand, and a UNet-like graph (a stride-2 Conv down, a stride-2
ConvTranspose up, the skip joined) walked once and exact, at 1 and at odd sizes. Before, the
walk had no ConvTranspose rule: the node and what follows it were sampled (20 analyses for the
UNet below, and no formula for its ConvTranspose: its size is 2 x ceil(h / 2), a floor)."""

from __future__ import annotations

import itertools
import random
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_symbolic_onewalk import _every_formula_holds

import onnxcost
from onnxcost.symbolic.shapes import symbolic_shapes
from onnxcost.symdim import SymDim

SIZES = range(13)
"""The input sizes every ConvTranspose is checked at: 0 to 12."""


def _model(sizes: list[int | str], attrs: dict[str, Any], group: int) -> onnx.ModelProto:
    """One 1-D ConvTranspose per input x{i} [1, 2, sizes[i]], W [2, 3, k] (``group`` x 3
    output channels)."""
    k = attrs["kernel_shape"][0]
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 3, k], [1.0] * 6 * k)
    nodes, inputs, outputs = [], [], []
    for i, size in enumerate(sizes):
        inputs.append(helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [1, 2, size]))
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None))
        nodes.append(
            helper.make_node("ConvTranspose", [f"x{i}", "w"], [f"y{i}"], group=group, **attrs)
        )
    graph = helper.make_graph(nodes, "convt", inputs, outputs, [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _onnx_shapes(attrs: dict[str, Any], group: int) -> list[list[int]]:
    """ONNX's inferred output shape at each of SIZES (its dims' values; below 0 as given)."""
    inferred = onnx.shape_inference.infer_shapes(
        _model(list(SIZES), attrs, group), strict_mode=True
    )
    dims = {o.name: o.type.tensor_type.shape.dim for o in inferred.graph.output}
    return [[d.dim_value for d in dims[f"y{h}"]] for h in SIZES]


def _configs() -> list[tuple[dict[str, Any], int]]:
    """(attributes, group) of every ConvTranspose checked: kernels 1 to 4, strides 1 to 3,
    dilations 1 and 2, every output_padding below the stride, explicit pads, no pads (NOTSET),
    VALID, SAME_UPPER and SAME_LOWER (a kernel shorter than the stride too), groups 1 and 2;
    and output_shape given (2, 7 and 12: below, within and at the top of the sizes)."""
    found: list[tuple[dict[str, Any], int]] = []
    pads = [(0, 0), (1, 0), (0, 1), (1, 1), (2, 1)]
    for k, s, d, group in itertools.product((1, 2, 3, 4), (1, 2, 3), (1, 2), (1, 2)):
        for extra in range(s):
            base: dict[str, Any] = {"kernel_shape": [k], "strides": [s]}
            if d > 1:
                base["dilations"] = [d]
            if extra:
                base["output_padding"] = [extra]
            found += [({**base, "pads": [pb, pe]}, group) for pb, pe in pads]
            found.append((base, group))
            found += [
                ({**base, "auto_pad": a}, group) for a in ("VALID", "SAME_UPPER", "SAME_LOWER")
            ]
        found += [
            ({"kernel_shape": [k], "strides": [s], "output_shape": [n]}, 1) for n in (2, 7, 12)
        ]
    return found


CONFIGS = _configs()


def test_every_conv_transpose_s_shape_is_onnx_s_at_every_size_from_0_to_12() -> None:
    # For each ConvTranspose, ONNX's inferred shape at h = 0..12, against (1) the walk of the
    # concrete model (every size an int): the same shape where ONNX's size is >= 0 (with
    # output_shape below h, ONNX's inference stops before the size: rank 2), not carried where
    # it is below 0 (a concrete analysis has no shape there); (2) the walk's formula over a
    # symbolic h, evaluated at each h: ONNX's value everywhere, below 0 (at h = 0) included.
    # Not carried over a symbolic h: a size below 0 at h = 1 (pads past the kernel; the
    # formulas are then from a least value, below), and output_shape (ONNX gives no size past
    # it).
    misses = []
    negative_at_1 = 0
    for attrs, group in CONFIGS:
        want = _onnx_shapes(attrs, group)
        concrete = symbolic_shapes(_model(list(SIZES), attrs, group))
        lost = {name for name, _op, _why in concrete.uncarried}
        symbolic = symbolic_shapes(_model(["h"], attrs, group))
        lost_why = [why for *_, why in symbolic.uncarried]
        if "output_shape" in attrs:
            assert lost_why == [
                f"output_shape {attrs['output_shape']} over a symbolic size (h): ONNX's "
                "inference gives no size past it"
            ]
        elif want[1][2] < 0:  # below 0 at h = 1 (pads past the kernel): from a least value
            assert len(lost_why) == 1, (attrs, group)
            assert lost_why[0].endswith("that may be below 0 where every symbol is at least 1")
            negative_at_1 += 1
        else:
            assert symbolic.uncarried == [], (attrs, group)
            assert symbolic.assumed == {}  # no floor: nothing that fails at h = 0
            y = symbolic.shapes["y0"]
            assert y[:2] == (1, 3 * group), (attrs, group)
        for h in SIZES:
            if len(want[h]) == 3 and want[h][2] < 0:
                if f"ConvTranspose_{h}" not in lost:
                    misses.append(f"{attrs} g{group} at h={h}: ONNX {want[h]}, walk carried it")
            elif list(walked := concrete.shapes.get(f"y{h}", ())) != want[h]:
                misses.append(f"{attrs} g{group} at h={h}: ONNX {want[h]}, walk {walked}")
            if "output_shape" not in attrs and want[1][2] >= 0:
                size = y[2]
                got = size if isinstance(size, int) else size.evaluate({"h": h})
                if got != want[h][2]:
                    misses.append(
                        f"{attrs} g{group} at h={h}: ONNX {want[h]}, formula {size} = {got}"
                    )
    assert not misses, "\n".join(misses[:20]) + f"\n({len(misses)} in all)"
    assert len(CONFIGS) > 800  # the grid is not empty
    assert 0 < negative_at_1 < len(CONFIGS) // 10
    # explicit pads with an auto_pad: ONNX refuses them, and the walk does not carry them
    attrs = {"kernel_shape": [3], "strides": [2], "pads": [1, 1], "auto_pad": "VALID"}
    with pytest.raises(onnx.shape_inference.InferenceError, match="simultaneously"):
        onnx.shape_inference.infer_shapes(_model([5], attrs, 1), strict_mode=True)
    assert [op for _, op, _ in symbolic_shapes(_model(["h"], attrs, 1)).uncarried] == [
        "ConvTranspose"
    ]


# --- by hand --------------------------------------------------------------------------------


def _up_model() -> onnx.ModelProto:
    """x [b, 8, h, w] -> ConvTranspose 2x2, stride 2, 8 -> 4 channels, with a bias."""
    w = helper.make_tensor("k", TensorProto.FLOAT, [8, 4, 2, 2], [0.5] * 128)
    bias = helper.make_tensor("bias", TensorProto.FLOAT, [4], [0.1] * 4)
    node = helper.make_node(
        "ConvTranspose", ["x", "k", "bias"], ["y"], kernel_shape=[2, 2], strides=[2, 2]
    )
    graph = helper.make_graph(
        [node],
        "up",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 8, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [w, bias],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_2x2_stride_2_conv_transpose_by_hand() -> None:
    # ONNX's ConvTranspose: out = stride * (in - 1) + output_padding + ((k - 1) * d + 1) - pads
    # = 2 * (h - 1) + 0 + 2 - 0 = 2h (2w alike): y is [b, 4, 2h, 2w].
    # MACs (docs/numbers.md, costs/conv.py: from the input side, each input element scattered
    # into C_out/group x kH x kW outputs) = numel(X) * 4 * 2 * 2 = (8 b h w) * 16 = 128 b h w;
    # from the output side it is the same: numel(Y) * C_in * kH * kW / (sH * sW), each output
    # touched by one kernel tap per input channel at stride 2 = (4 b 2h 2w) * 8 * 4 / 4.
    # FLOPs = 2 * MACs + numel(Y) (the bias) = 256 b h w + 16 b h w = 272 b h w.
    # Bytes read: X 8bhw * 4 B = 32 b h w, W 128 * 4 = 512, bias 16: 32 b h w + 528;
    # written: Y 16 b h w * 4 B = 64 b h w.
    # At b = 2, h = 3, w = 5 (bhw = 30): MACs 3,840, FLOPs 8,160, read 1,488, written 1,920.
    model = _up_model()
    shapes = symbolic_shapes(model)
    b, h, w = (SymDim.of(s) for s in "bhw")
    assert shapes.shapes["y"] == (b, 4, 2 * h, 2 * w)
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1, a.warnings
    point = {"b": 2, "h": 3, "w": 5}
    by_hand = {"macs": 3_840, "flops": 8_160, "bytes_read": 1_488, "bytes_written": 1_920}
    for key, value in by_hand.items():
        f = a.formulas[key]
        assert f is not None, key
        assert f(**point) == value, key
        assert getattr(onnxcost.analyze(model, dims=point).totals, key) == value, key
    macs = a.formulas["macs"]
    assert macs is not None
    assert macs.pretty() == "128·b·h·w"
    assert a.symbolic.zero_allowed == {"b": True, "h": True, "w": True}


# --- a UNet-like graph ----------------------------------------------------------------------


def _unet() -> onnx.ModelProto:
    """x [b, 4, h, w] -> Conv 3x3, stride 2, pad 1 (8 filters, ceil(h / 2) rows) -> Relu ->
    ConvTranspose 2x2, stride 2 (4 channels, 2 ceil(h / 2) rows) -> cropped to x's h and w
    (a Slice to Shape(x)[2:4], as a UNet does at odd sizes) -> Concat with the skip x (8
    channels) -> Conv 3x3, pad 1, 5 filters."""
    rng = np.random.default_rng(0)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    def ints(name: str, *values: int) -> onnx.TensorProto:
        return numpy_helper.from_array(np.array(values, np.int64), name)

    nodes = [
        helper.make_node(
            "Conv", ["x", "wd", "bd"], ["d"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4
        ),
        helper.make_node("Relu", ["d"], ["r"]),
        helper.make_node(
            "ConvTranspose", ["r", "wu", "bu"], ["u"], kernel_shape=[2, 2], strides=[2, 2]
        ),
        helper.make_node("Shape", ["x"], ["xs"]),
        helper.make_node("Slice", ["xs", "two", "four"], ["hw"]),
        helper.make_node("Slice", ["u", "zeros", "hw", "axes"], ["uc"]),
        helper.make_node("Concat", ["uc", "x"], ["cat"], axis=1),
        helper.make_node("Conv", ["cat", "wo", "bo"], ["y"], kernel_shape=[3, 3], pads=[1] * 4),
    ]
    inits = [
        weight("wd", 8, 4, 3, 3),
        weight("bd", 8),
        weight("wu", 8, 4, 2, 2),
        weight("bu", 4),
        weight("wo", 5, 8, 3, 3),
        weight("bo", 5),
        ints("two", 2),
        ints("four", 4),
        ints("zeros", 0, 0),
        ints("axes", 2, 3),
    ]
    graph = helper.make_graph(
        nodes,
        "unet",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 4, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_unet_is_walked_once() -> None:
    # By hand, with h' = ceil(h / 2) = floor((h + 1) / 2) (the stride-2 Conv's rows), w' alike:
    # the Conv down: b * 8 * h' w' outputs of 4 * 3 * 3 = 36 MACs: 288 b h' w';
    # the ConvTranspose: numel(X) * 4 * 2 * 2 = 8 b h' w' * 16 = 128 b h' w';
    # the Conv out: b * 5 * h w outputs of 8 * 3 * 3 = 72 MACs: 360 b h w.
    # At b = 1, h = 1, w = 1: 288 + 128 + 360 = 776; at b = 2, h = 7, w = 5 (h' = 4, w' = 3):
    # 416 * 2 * 12 + 360 * 70 = 9,984 + 25,200 = 35,184.
    model = _unet()
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1, a.warnings
    macs = a.formulas["macs"]
    assert macs is not None
    assert macs(b=1, h=1, w=1) == 776
    assert macs(b=2, h=7, w=5) == 35_184
    assert onnxcost.analyze(model, dims={"b": 2, "h": 7, "w": 5}).totals.macs == 35_184


@pytest.mark.parametrize(
    "point",
    [
        {"b": 1, "h": 1, "w": 1},
        {"b": 2, "h": 7, "w": 5},
        {"b": 1, "h": 1, "w": 9},
        {"b": 3, "h": 8, "w": 13},
    ]
    + [{s: random.Random(i).randint(1, 40) for s in "bhw"} for i in range(3)],
)
def test_a_unet_s_formulas_equal_the_concrete_analysis(point: dict[str, int]) -> None:
    model = _unet()
    a = onnxcost.analyze(model, symbolic=True)
    _every_formula_holds(a, model, point)


def _one_node(x: list[int | str], w: list[int], **attrs: Any) -> onnx.ModelProto:
    """x -> ConvTranspose with W of shape ``w`` (0.5s) and ``attrs`` -> Relu."""
    k = helper.make_tensor("k", TensorProto.FLOAT, w, [0.5] * int(np.prod(w)))
    nodes = [
        helper.make_node("ConvTranspose", ["x", "k"], ["y"], **attrs),
        helper.make_node("Relu", ["y"], ["t"]),
    ]
    graph = helper.make_graph(
        nodes,
        "one",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)],
        [k],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_generator_with_a_dynamic_batch_only_is_walked_once() -> None:
    # A GAN generator's layer: z [b, 16, 4, 4] -> ConvTranspose 4x4, stride 2, pad 1, 16 -> 8
    # channels: 2 * (4 - 1) + 4 - 2 = 8 rows and columns. MACs = numel(X) * 8 * 4 * 4 =
    # 256 b * 128 = 32,768 b. It was sampled (5 analyses, no peak formula): no rule at all.
    model = _one_node(
        ["b", 16, 4, 4], [16, 8, 4, 4], kernel_shape=[4, 4], strides=[2, 2], pads=[1] * 4
    )
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1, a.warnings
    macs, peak = a.formulas["macs"], a.formulas["peak_activation_bytes"]
    assert macs is not None
    assert peak is not None
    assert macs.pretty() == "32,768·b"
    _every_formula_holds(a, model, {"b": 3})


def test_a_size_below_0_at_1_is_not_carried_and_is_from_its_least_value() -> None:
    # Kernel 1, stride 2, pads 2 + 2 over x [b, 2, h]: ONNX's 2 (h - 1) + 1 - 4 = 2h - 5, below
    # 0 at h = 1 and 2, where a concrete analysis has no shape: not carried (sampled, as
    # before, its formulas null), and walked once from h = 3 given (--dim h>=3), where it is
    # 1. MACs = numel(X) * 3 * 1 = 2bh * 3 = 6 b h (6 * 3 = 18 at b = 1, h = 3; 6 * 2 * 10 = 120 at
    # b = 2, h = 10).
    model = _one_node(["b", 2, "h"], [2, 3, 1], kernel_shape=[1], strides=[2], pads=[2, 2])
    lost = symbolic_shapes(model).uncarried
    assert [why for _, op, why in lost if op == "ConvTranspose"] == [
        "a size, 2*h - 5, that may be below 0 where every symbol is at least 1"
    ]
    a = onnxcost.analyze(model, symbolic=True, least={"h": 3})
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1, a.warnings
    macs = a.formulas["macs"]
    assert macs is not None
    assert (macs(b=1, h=3), macs(b=2, h=10)) == (18, 120)
    for point in ({"b": 1, "h": 3}, {"b": 2, "h": 10}, {"b": 3, "h": 4}):
        _every_formula_holds(a, model, point)
    # Kernel 1, stride 3 without pads: 3h - 2, 1 at h = 1 but -2 at h = 0: from h = 1.
    model = _one_node(["b", 2, "h"], [2, 3, 1], kernel_shape=[1], strides=[3])
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1, a.warnings
    assert a.symbolic.zero_allowed == {"b": True, "h": False}


def test_the_unet_s_training_formulas_are_its_floors() -> None:
    from onnxcost.analysis.training import options

    # With H = ceil(h / 2) = (h + 1) // 2 rows (and W so) after the stride-2 Conv: backward
    # MACs by hand, each node's weight gradient, and its input's where that needs one (x, a
    # graph input, does not): the Conv down 8 x 4 x 9 = 288·b·H·W (weights only), the
    # ConvTranspose 2 x 8 x 4 x 4 = 256·b·H·W, the last Conv 2 x 5 x 8 x 9 = 720·b·h·w:
    # 720·b·h·w + 544·b·H·W. At b = 2, h = 7, w = 9 (H = 4, W = 5): 90,720 + 21,760 =
    # 112,480. These were null ("no polynomial form"), the forward's exact floors with them.
    a = onnxcost.analyze(_unet(), symbolic=True, training=options())
    assert a.symbolic is not None
    assert not any("sampled" in w for w in a.warnings), a.warnings  # from the one walk
    backward = a.formulas["backward_macs"]
    assert backward is not None, a.warnings
    assert backward.evaluate({"b": 2, "h": 7, "w": 9}) == 112_480
    assert "min(" not in str(backward.expression)  # the crop, min(2·⌊(h + 1)/2⌋, h), is h
    for key in ("backward_flops", "training_flops", "saved_activation_bytes", "peak_bytes"):
        assert a.formulas[key] is not None, (key, a.warnings)
    # At b = 0 every tensor but the weights is empty: no FLOPs. The bias gradients' numel(Y)
    # - C_out adds were -8, -4 and -5 there (-17 backward FLOPs, in the formula as well).
    empty = onnxcost.analyze(_unet(), dims={"b": 0, "h": 5, "w": 3}, training=options())
    assert empty.totals.training is not None
    assert empty.totals.training.backward_flops == 0
    flops = a.formulas["backward_flops"]
    assert flops is not None
    assert flops.evaluate({"b": 0, "h": 5, "w": 3}) == 0
    for point in ({"b": 2, "h": 7, "w": 9}, {"b": 0, "h": 5, "w": 3}, {"b": 3, "h": 1, "w": 12}):
        t = onnxcost.analyze(_unet(), dims=point, training=options()).totals.training
        assert t is not None
        assert backward.evaluate(point) == t.backward_macs, point
        training_flops = a.formulas["training_flops"]
        assert training_flops is not None
        assert training_flops.evaluate(point) == t.training_flops, point
