"""More of the symbolic walk's shape rules (``symbolic.shapes`` dispatches to them): ArgMax
and ArgMin, Einsum, Resize (and Upsample) with constant sizes or scales, TopK, Tile,
DepthToSpace and SpaceToDepth, OneHot, GatherElements, the quantized matrix products
(MatMulInteger, QLinearMatMul), and LSTM, GRU and RNN. Each gives what ONNX's shape inference gives, over
SymDims; a value it needs (K, repeats, sizes, depth) must be a known integer tensor, else
the node is not carried. NonZero is not carried (its shape depends on the data).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction

import onnx

from onnxcost.symbolic.shape_core import (
    Shape,
    SymbolicShapes,
    _axis,
    _broadcast,
    _matmul_shape,
    _UncarriedError,
    _value,
)
from onnxcost.symdim import Dim, SymDim, as_dim


def _arg_reduce(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    """ArgMax, ArgMin: X with the ``axis`` dim 1 (``keepdims``, the default) or dropped."""
    x = shapes[0]
    assert x is not None
    axis = _axis(int(attrs.get("axis", 0)), len(x))  # type: ignore[call-overload]
    if not 0 <= axis < len(x):
        raise _UncarriedError(f"axis {axis} of rank {len(x)}")
    keep = attrs.get("keepdims", 1)
    out.shapes[node.output[0]] = (*x[:axis], *((1,) if keep else ()), *x[axis + 1 :])


def _einsum(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    """Einsum as ONNX's inference gives it: each letter's dim where it is first seen (a later
    unlike dim: not carried), the ellipsis' dims broadcast (of one rank in every input that
    has one); without ``->``, the ellipsis, then the letters seen once in ASCII order."""
    equation = attrs.get("equation", b"")
    text = (equation.decode() if isinstance(equation, bytes) else str(equation)).replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise _UncarriedError(f"{len(terms)} terms for {len(shapes)} inputs")
    dims: dict[str, Dim] = {}
    ellipses: list[Shape] = []
    for term, shape in zip(terms, shapes, strict=True):
        assert shape is not None
        head, dots, tail = term.partition("...")
        spread = len(shape) - len(head) - len(tail)
        if ((head + tail) and not (head + tail).isalpha()) or spread < 0 or (spread and not dots):
            raise _UncarriedError(f"the term {term!r} of rank {len(shape)}")
        if dots:
            ellipses.append(shape[len(head) : len(head) + spread])
        rest = shape[len(head) + spread :]
        for letter, d in (
            *zip(head, shape[: len(head)], strict=True),
            *zip(tail, rest, strict=True),
        ):
            seen = dims.setdefault(letter, d)
            if seen != d:
                raise _UncarriedError(f"{letter!r} is both {seen} and {d}")
    if len({len(e) for e in ellipses}) > 1:
        raise _UncarriedError("ellipses of unlike ranks")
    ellipsis = _broadcast(ellipses) if ellipses and ellipses[0] else ()
    if not arrow:
        letters = lhs.replace(",", "").replace(".", "")
        once = sorted(c for c in set(letters) if letters.count(c) == 1)
        rhs = ("..." if ellipses else "") + "".join(once)
    head, dots, tail = rhs.partition("...")
    missing = [c for c in head + tail if c not in dims]
    if missing:
        raise _UncarriedError(f"the output letter {missing[0]!r} is in no input")
    out.shapes[node.output[0]] = (
        *(dims[c] for c in head),
        *(ellipsis if dots else ()),
        *(dims[c] for c in tail),
    )


def _resize(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    """Resize (on ``axes`` where given) by a known ``sizes`` input (stretch only): the sizes;
    or by stored ``scales`` (input 2; input 1 before opset 11, and Upsample's): each dim
    ``floor(d * scale)`` as ONNX's inference computes it, in doubles from the float32 scale.
    A float32 is exactly m / 2**k, and d * m is exact in a double for any real d, so the
    size is the integer floor ``(m * d) // 2**k``: ``2 * h`` for a scale of 2, ``h // 2``
    for 0.5. Not carried: a scale of more than 16 bits below its point, or computed in the
    graph; ``tf_crop_and_resize`` (its size also takes the ROI)."""
    x = shapes[0]
    assert x is not None
    policy = attrs.get("keep_aspect_ratio_policy", b"stretch")
    if policy not in (b"stretch", "stretch"):
        raise _UncarriedError(f"keep_aspect_ratio_policy {policy!r}")
    if attrs.get("coordinate_transformation_mode") in (b"tf_crop_and_resize", "tf_crop_and_resize"):
        raise _UncarriedError("tf_crop_and_resize")
    raw = attrs.get("axes")
    axes = [int(a) for a in raw] if isinstance(raw, list) else list(range(len(x)))
    result = list(x)
    if len(node.input) >= 4 and node.input[3]:
        sizes: Sequence[Dim] = _value(out, node.input[3])
    else:
        by = (
            node.input[2] if len(node.input) >= 3 else node.input[1] if len(node.input) == 2 else ""
        )
        scales = out.floats.get(by) if by else None
        if scales is None:
            raise _UncarriedError("Resize by scales that are not stored in the model")
        sizes = [_scaled(x[_axis(a, len(x))], s) for a, s in zip(axes, scales, strict=False)]
        if len(scales) != len(axes):
            raise _UncarriedError(f"{len(scales)} scales for {len(axes)} axes")
    if len(sizes) != len(axes):
        raise _UncarriedError(f"{len(sizes)} sizes for {len(axes)} axes")
    for a, size in zip(axes, sizes, strict=True):
        result[_axis(a, len(x))] = size
    out.shapes[node.output[0]] = tuple(result)


def _scaled(d: Dim, scale: float) -> Dim:
    """``floor(d * scale)`` for a float32 ``scale`` > 0 (``_resize``)."""
    if not 0 < scale < math.inf:
        raise _UncarriedError(f"a scale of {scale}")
    exact = Fraction(scale)  # m / 2**k, exactly
    if exact.denominator > 1 << 16:
        raise _UncarriedError(f"a scale of {scale} (more than 16 bits below its point)")
    return as_dim(SymDim.of(d) * exact.numerator // exact.denominator)


def _upsample(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    """Upsample (opsets 7 to 9): ``floor(d * scale)`` per dim as Resize's, its scales the
    attribute (opset 7) or a stored input (opset 9)."""
    x = shapes[0]
    assert x is not None
    raw = attrs.get("scales")
    scales = (
        raw
        if isinstance(raw, list)
        else out.floats.get(node.input[1])
        if len(node.input) > 1
        else None
    )
    if scales is None:
        raise _UncarriedError("Upsample by scales that are not stored in the model")
    if len(scales) != len(x):
        raise _UncarriedError(f"{len(scales)} scales for rank {len(x)}")
    out.shapes[node.output[0]] = tuple(_scaled(d, float(s)) for d, s in zip(x, scales, strict=True))


def _topk(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    """TopK: Values and Indices are X with the ``axis`` dim (default -1) K (the input, or the
    attribute ``k`` before opset 10)."""
    x = shapes[0]
    assert x is not None
    if len(node.input) > 1 and node.input[1]:
        (k,) = _value(out, node.input[1])
    else:
        k = int(attrs.get("k", 0))  # type: ignore[call-overload]
    axis = _axis(int(attrs.get("axis", -1)), len(x))  # type: ignore[call-overload]
    shape = (*x[:axis], k, *x[axis + 1 :])
    for name in node.output[:2]:
        if name:
            out.shapes[name] = shape


def _tile(
    out: SymbolicShapes, node: onnx.NodeProto, shapes: list[Shape | None], _a: Mapping[str, object]
) -> None:
    """Tile: each dim times its repeat."""
    x = shapes[0]
    assert x is not None
    repeats = _value(out, node.input[1])
    if len(repeats) != len(x):
        raise _UncarriedError(f"{len(repeats)} repeats for rank {len(x)}")
    out.shapes[node.output[0]] = tuple(
        as_dim(SymDim.of(d) * r) for d, r in zip(x, repeats, strict=True)
    )


def _exact(d: Dim, n: int) -> Dim:
    """d / n where n divides d for every value of its symbols (each coefficient)."""
    whole = SymDim.of(d)
    if any(c % n for c in whole.terms.values()):
        raise _UncarriedError(f"{d} in {n} equal parts")
    return as_dim(whole // n)


def _depth_to_space(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    """DepthToSpace [N, C / b², H b, W b]; SpaceToDepth [N, C b², H / b, W / b] (b: the
    blocksize)."""
    x = shapes[0]
    assert x is not None
    if len(x) != 4:
        raise _UncarriedError(f"rank {len(x)}")
    b = int(attrs.get("blocksize", 0))  # type: ignore[call-overload]
    if b < 1:
        raise _UncarriedError(f"blocksize {b}")
    c, h, w = (SymDim.of(d) for d in x[1:])
    if node.op_type == "DepthToSpace":
        shape = (x[0], _exact(x[1], b * b), as_dim(h * b), as_dim(w * b))
    else:
        shape = (x[0], as_dim(c * (b * b)), as_dim(h // b), as_dim(w // b))
    out.shapes[node.output[0]] = shape


def _one_hot(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    """OneHot: the indices' shape with the depth inserted at ``axis`` (default -1, of the
    output's rank); its value too, where the indices, the depth and the integer (off, on)
    values are known and the depth is last (torch's repeat_interleave by a constant, as the
    TorchScript exporter writes it: a Tile's repeats, [1, k, 1] = OneHot([1], 3, [1, k]))."""
    indices = shapes[0]
    assert indices is not None
    (depth,) = _value(out, node.input[1])
    rank = len(indices) + 1
    axis = _axis(int(attrs.get("axis", -1)), rank)  # type: ignore[call-overload]
    out.shapes[node.output[0]] = (*indices[:axis], depth, *indices[axis:])
    found = out.values.get(node.input[0])
    off_on = out.values.get(node.input[2]) if len(node.input) > 2 else None
    if found is None or off_on is None or axis != rank - 1 or len(off_on) != 2:
        return
    ints = [v for v in (*found, *off_on, depth) if isinstance(v, int)]
    if len(ints) != len(found) + 3 or len(found) * ints[-1] > 64:
        return
    *indices_value, off, on, n = ints
    hot = [i + n if i < 0 else i for i in indices_value]  # -depth .. depth - 1: from the end
    out.values[node.output[0]] = tuple(on if j == i else off for i in hot for j in range(n))


def _quantized_matmul(
    out: SymbolicShapes, node: onnx.NodeProto, shapes: list[Shape | None], _a: Mapping[str, object]
) -> None:
    """MatMulInteger (A, B: inputs 0 and 1) and QLinearMatMul (inputs 0 and 3): matmul's
    shape."""
    a, b = shapes[0], shapes[3 if node.op_type == "QLinearMatMul" else 1]
    assert a is not None and b is not None
    out.shapes[node.output[0]] = _matmul_shape(a, b)


def _gather_elements(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    """GatherElements: its indices' shape."""
    indices = shapes[1]
    assert indices is not None
    out.shapes[node.output[0]] = indices


def _grid_sample(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    """GridSample: X [N, C, D1 ...] sampled at grid [N, H1 ..., r]: [N, C, H1 ...] (RAFT's
    correlation lookup)."""
    x, grid = shapes[0], shapes[1]
    assert x is not None and grid is not None
    out.shapes[node.output[0]] = (x[0], x[1], *grid[1:-1])


def _recurrent(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    """LSTM, GRU and RNN: from X [T, B, I] ([B, T, I] with ``layout`` 1) and R [D, G H, H],
    Y [T, D, B, H] ([B, T, D, H]), Y_h and LSTM's Y_c [D, B, H] ([B, D, H]), as ONNX's
    inference gives them (D from R, H from ``hidden_size`` or R)."""
    x, r = shapes[0], shapes[2] if len(shapes) > 2 else None
    if x is None or r is None or len(x) != 3 or len(r) != 3:
        raise _UncarriedError("an input X or R that is not 3-D")
    layout = attrs.get("layout", 0)
    seq, batch = (x[1], x[0]) if layout else (x[0], x[1])
    directions, hidden = r[0], attrs.get("hidden_size", r[2])
    assert isinstance(hidden, int | SymDim)
    y = (batch, seq, directions, hidden) if layout else (seq, directions, batch, hidden)
    state = (batch, directions, hidden) if layout else (directions, batch, hidden)
    for name, shape in zip(node.output, (y, state, state), strict=False):
        if name:
            out.shapes[name] = shape


MORE_RULES = {
    "ArgMax": _arg_reduce,
    "ArgMin": _arg_reduce,
    "Einsum": _einsum,
    "Resize": _resize,
    "Upsample": _upsample,
    "TopK": _topk,
    "Tile": _tile,
    "DepthToSpace": _depth_to_space,
    "SpaceToDepth": _depth_to_space,
    "OneHot": _one_hot,
    "MatMulInteger": _quantized_matmul,
    "QLinearMatMul": _quantized_matmul,
    "GatherElements": _gather_elements,
    "GridSample": _grid_sample,
    "LSTM": _recurrent,
    "GRU": _recurrent,
    "RNN": _recurrent,
}
"""Op type (ONNX's domain) -> its rule, as ``symbolic.shapes._RULES``."""

__all__ = ["MORE_RULES"]
