"""Pooling and resampling cost formulas: exact window taps, separable interpolation."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from onnxcost.analysis.records import NodeRecord
from onnxcost.costs.pooling import separable_filter_flops

NodeOf = Callable[..., NodeRecord]


def model(signature: str, body: str, opset: int = 21) -> str:
    return f'<ir_version: 10, opset_import: ["" : {opset}]>\ng {signature} {{ {body} }}'


# Each case: X shape, pool attributes, output spatial shape, taps (input elements read).
_POOLS = [
    pytest.param(
        (1, 1, 4, 4), "kernel_shape=[2,2], strides=[2,2]", (2, 2), 16, id="no-pad"
    ),  # 4 windows x 4 = 16 taps
    pytest.param(
        (1, 3, 8, 8), "kernel_shape=[3,3], strides=[2,2], pads=[1,1,1,1]", (4, 4), 363, id="pads"
    ),  # per axis, windows start at -1,1,3,5: 2+3+3+3 = 11 taps; 3 channels x 11 x 11 = 363
    pytest.param(
        (1, 1, 5, 5), 'kernel_shape=[2,2], auto_pad="SAME_UPPER"', (5, 5), 81, id="same-upper"
    ),  # total pad 1, at the end: windows at 0..4 read 2,2,2,2,1 = 9 per axis; 9 x 9
    pytest.param(
        (1, 1, 5, 5), 'kernel_shape=[2,2], auto_pad="SAME_LOWER"', (5, 5), 81, id="same-lower"
    ),  # total pad 1, at the start: windows at -1..3 read 1,2,2,2,2 = 9 per axis; 9 x 9
    pytest.param(
        (1, 1, 5, 5), 'kernel_shape=[3,3], auto_pad="VALID"', (3, 3), 81, id="valid"
    ),  # 9 windows x 9 taps
    pytest.param(
        (1, 1, 5, 5), "kernel_shape=[2,2], strides=[2,2]", (2, 2), 16, id="floor"
    ),  # windows at 0, 2: 2+2 = 4 per axis; 4 x 4
    pytest.param(
        (1, 1, 5, 5), "kernel_shape=[2,2], strides=[2,2], ceil_mode=1", (3, 3), 25, id="ceil-mode"
    ),  # windows at 0, 2, 4 read 2, 2, 1 = 5 per axis; 5 x 5
    pytest.param(
        (1, 1, 5, 5), "kernel_shape=[2,2], dilations=[2,2]", (3, 3), 36, id="dilated"
    ),  # windows read (o, o+2) for o = 0..2: 6 per axis; 6 x 6
    pytest.param(
        (2, 2, 6), "kernel_shape=[3], strides=[3]", (2,), 24, id="1d"
    ),  # 2x2 x 2 windows x 3 taps
]


@pytest.mark.parametrize(("x", "attrs", "out", "taps"), _POOLS)
def test_max_pool(
    node_of: NodeOf, x: tuple[int, ...], attrs: str, out: tuple[int, ...], taps: int
) -> None:
    sig = f"(float[{','.join(map(str, x))}] x) => (float y)"
    rec = node_of(model(sig, f"y = MaxPool<{attrs}>(x)"))
    assert rec.output_shapes == ((*x[:2], *out),)
    outputs = math.prod(x[:2]) * math.prod(out)
    assert rec.flops == taps - outputs  # n - 1 compares per window of n taps
    assert rec.macs == 0


@pytest.mark.parametrize(("x", "attrs", "out", "taps"), _POOLS)
def test_average_pool(
    node_of: NodeOf, x: tuple[int, ...], attrs: str, out: tuple[int, ...], taps: int
) -> None:
    sig = f"(float[{','.join(map(str, x))}] x) => (float y)"
    assert node_of(model(sig, f"y = AveragePool<{attrs}>(x)")).flops == taps  # n - 1 adds + 1 div


@pytest.mark.parametrize(("x", "attrs", "out", "taps"), _POOLS[:3])
def test_lp_pool(
    node_of: NodeOf, x: tuple[int, ...], attrs: str, out: tuple[int, ...], taps: int
) -> None:
    sig = f"(float[{','.join(map(str, x))}] x) => (float y)"
    assert (
        node_of(model(sig, f"y = LpPool<{attrs}>(x)")).flops == 2 * taps
    )  # pow per tap, adds, root


def test_max_pool_opset1(node_of: NodeOf) -> None:
    # Opset 1 has no dilations or ceil_mode attributes: the defaults apply.
    text = model(
        "(float[1,3,8,8] x) => (float y)", "y = MaxPool<kernel_shape=[2,2], strides=[2,2]>(x)", 7
    )
    assert node_of(text).flops == 144  # 48 outputs x (4 - 1) compares


def test_max_pool_fp16_bytes(node_of: NodeOf) -> None:
    text = model(
        "(float16[1,3,8,8] x) => (float16 y)", "y = MaxPool<kernel_shape=[2,2], strides=[2,2]>(x)"
    )
    rec = node_of(text)
    assert rec.bytes_read == 192 * 2  # 1x3x8x8 halfs
    assert rec.bytes_written == 48 * 2  # 1x3x4x4 halfs


@pytest.mark.parametrize(
    ("op", "flops"),
    [
        ("GlobalAveragePool", 96),  # 6 channels x (15 adds + 1 div)
        ("GlobalMaxPool", 90),  # 6 channels x 15 compares
        ("GlobalLpPool", 192),  # 96 pows + 90 adds + 6 roots
    ],
)
def test_global_pools(node_of: NodeOf, op: str, flops: int) -> None:
    assert node_of(model("(float[2,3,4,4] x) => (float y)", f"y = {op}(x)")).flops == flops


def test_max_roi_pool(node_of: NodeOf) -> None:
    text = model(
        "(float[1,2,8,8] x, float[3,5] rois) => (float y)",
        "y = MaxRoiPool<pooled_shape=[2,2]>(x, rois)",
    )
    # Y 3x2x2x2 = 24 bins, each counted over ceil(8/2) x ceil(8/2) = 16 elements: 24 x 15
    assert node_of(text).flops == 360


@pytest.mark.parametrize(
    ("attrs", "flops"),
    [
        ('mode="avg", sampling_ratio=2', 960),  # 24 outputs x 4 samples x (9 bilinear + 1 add/div)
        ('mode="max", sampling_ratio=2', 936),  # 24 x (4 x 9 + 3 compares)
        ('mode="avg", sampling_ratio=1', 240),  # 24 x 1 x 10
        ('mode="avg", sampling_ratio=0', 3840),  # adaptive: ceil(8/2)^2 = 16 samples: 24 x 16 x 10
    ],
)
def test_roi_align(node_of: NodeOf, attrs: str, flops: int) -> None:
    text = model(
        "(float[1,2,8,8] x, float[3,4] rois, int64[3] idx) => (float y)",
        f"y = RoiAlign<output_height=2, output_width=2, {attrs}>(x, rois, idx)",
        16,
    )
    rec = node_of(text)
    assert rec.output_shapes == ((3, 2, 2, 2),)  # Y 3x2x2x2 = 24
    assert rec.flops == flops


def test_max_unpool_is_zero(node_of: NodeOf) -> None:
    text = model(
        "(float[1,1,2,2] x, int64[1,1,2,2] i) => (float y)",
        "y = MaxUnpool<kernel_shape=[2,2], strides=[2,2]>(x, i)",
    )
    rec = node_of(text)
    assert rec.status == "zero"
    assert rec.flops == 0


@pytest.mark.parametrize(
    ("taps", "flops"),
    [
        ([], 0),  # nothing interpolated
        ([2], 3),  # one lerp: sub, mul, add
        ([2, 2], 9),  # bilinear: 2 lerps along the last axis, 1 along the first
        ([2, 2, 2], 21),  # trilinear: 4 + 2 + 1 lerps
        ([4], 7),  # cubic: 4 mul + 3 add
        ([4, 4], 35),  # bicubic: 4 filters + 1 filter of 7
        ([4, 2], 19),  # last axis 2 taps: 4 lerps (12); first axis 4 taps: 7
    ],
)
def test_separable_filter_flops(taps: list[int], flops: int) -> None:
    assert separable_filter_flops(taps) == flops


_SCALES2 = "float[4] scales = {1.0, 1.0, 2.0, 2.0}"


@pytest.mark.parametrize(
    ("attrs", "x", "inits", "args", "flops"),
    [
        ('mode="nearest"', "1,3,4,4", _SCALES2, "x, , scales", 0),  # index arithmetic only
        (
            'mode="linear"',
            "1,3,4,4",
            _SCALES2,
            "x, , scales",
            1728,
        ),  # Y 1x3x8x8 = 192 x 9 (bilinear)
        ('mode="cubic"', "1,3,4,4", _SCALES2, "x, , scales", 6720),  # 192 x 35 (bicubic)
        (
            'mode="linear"',
            "1,1,4,4",
            "int64[4] sizes = {1, 1, 4, 8}",
            "x, , , sizes",
            96,
        ),  # only the last axis resized: Y 1x1x4x8 = 32 x 3
        (
            'mode="linear", antialias=1',
            "1,1,8,8",
            "float[4] scales = {1.0, 1.0, 0.5, 0.5}",
            "x, , scales",
            560,
        ),  # downscale x2 widens 2 taps to 4 per axis: Y 16 x 35
        (
            'mode="linear"',
            "1,1,8,8",
            "float[4] scales = {1.0, 1.0, 0.5, 0.5}",
            "x, , scales",
            144,
        ),  # no antialias: Y 16 x 9
    ],
)
def test_resize(node_of: NodeOf, attrs: str, x: str, inits: str, args: str, flops: int) -> None:
    rec = node_of(
        model(f"(float[{x}] x) => (float y) <{inits}>", f"y = Resize<{attrs}>({args})", 19)
    )
    assert rec.flops == flops
    assert rec.status == ("zero" if flops == 0 else "ok")
    assert rec.params == 0  # scales and sizes are meta inputs


def test_resize_opset10(node_of: NodeOf) -> None:
    text = model(
        f"(float[1,3,4,4] x) => (float y) <{_SCALES2}>",
        'y = Resize<mode="linear">(x, scales)',
        10,
    )
    assert node_of(text).flops == 1728  # 192 outputs x 9, as at opset 19


@pytest.mark.parametrize(("mode", "flops"), [("nearest", 0), ("linear", 144)])
def test_upsample(node_of: NodeOf, mode: str, flops: int) -> None:
    text = model(
        f"(float[1,1,2,2] x) => (float y) <{_SCALES2}>",
        f'y = Upsample<mode="{mode}">(x, scales)',
        9,
    )
    assert node_of(text).flops == flops  # Y 1x1x4x4 = 16 x 9 for bilinear


@pytest.mark.parametrize(
    ("opset", "mode", "flops"),
    [
        (20, "linear", 216),  # Y 1x2x3x3 = 18 x 9 + grid 18 coordinates x 3
        (20, "nearest", 54),  # 18 x 3 coordinate maps only
        (20, "cubic", 684),  # 18 x 35 + 54
        (16, "bilinear", 216),  # opset 16 names: as linear
        (16, "bicubic", 684),  # as cubic
    ],
)
def test_grid_sample(node_of: NodeOf, opset: int, mode: str, flops: int) -> None:
    text = model(
        "(float[1,2,4,4] x, float[1,3,3,2] grid) => (float y)",
        f'y = GridSample<mode="{mode}">(x, grid)',
        opset,
    )
    assert node_of(text).flops == flops


def test_affine_grid(node_of: NodeOf) -> None:
    text = model(
        "(float[2,2,3] theta) => (float grid) <int64[4] size = {2, 1, 3, 4}>",
        "grid = AffineGrid(theta, size)",
        20,
    )
    rec = node_of(text)
    assert rec.output_shapes == ((2, 3, 4, 2),)  # 48 coordinates
    assert rec.macs == 144  # 48 x (2 + 1): theta row . (x, y, 1)
    assert rec.flops == 288  # 2 x MACs
