"""The symbolic walk's Conv, ConvTranspose and pool output sizes (``symbolic.shapes``
dispatches to them): Conv, ONNX's QLinearConv, MaxPool, AveragePool and the Global pools, each
size what ONNX's shape inference gives for every input size >= 0 (``_window``), and
ConvTranspose (``_conv_transpose``: no division, its own rule). ONNX divides the strided
positions rounding toward 0, not down (a 3x3 Conv, stride 2, no pads has 1 row at h = 2,
where a floor gives 0), so a size is written as the plain floor only where what it divides
is >= 0 wherever every symbol is at least 1, and the walk's check at a symbol's 0 decides
whether that still holds there (``shape_core.trunc_div``, ``SymbolicShapes.assumed``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import onnx

from onnxcost.symbolic.domain import _sign
from onnxcost.symbolic.shape_core import (
    Shape,
    SymbolicShapes,
    _ints,
    _trunc,
    _UncarriedError,
    trunc_div,
)
from onnxcost.symdim import Dim, SymDim, as_dim, sym_max, sym_min

_SAME = ("SAME_UPPER", "SAME_LOWER")


def _windows(
    out: SymbolicShapes,
    x: Shape,
    kernel: Sequence[int],
    attrs: Mapping[str, object],
    name: str,
    *,
    ceil: bool,
) -> list[Dim]:
    """Each spatial output size of a Conv or pool over ``x`` (``_window``): explicit pads
    where the node has them (ONNX's inference reads them before auto_pad), else SAME's, else
    none (VALID)."""
    k = len(kernel)
    strides = _ints(attrs, "strides", [1] * k)
    dilations = _ints(attrs, "dilations", [1] * k)
    explicit = isinstance(attrs.get("pads"), list)
    pads = _ints(attrs, "pads", [0] * (2 * k))
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else str(auto)
    same = "" if explicit or auto not in _SAME else auto
    return [
        _window(
            out,
            x[2 + i],
            dilations[i] * (kernel[i] - 1) + 1,
            strides[i],
            (pads[i], pads[i + k]),
            same,
            ceil,
            name,
        )
        for i in range(k)
    ]


def _window(
    out: SymbolicShapes,
    size: Dim,
    span: int,
    s: int,
    pads: tuple[int, int],
    same: str,
    ceil: bool,
    name: str,
) -> Dim:
    """One output size of windows of ``span`` elements (dilation included) at stride ``s``
    over ``size`` padded with ``pads`` (or ``same``'s), as ONNX's inference has it for every
    size >= 0 (onnx 1.23's ``convPoolShapeInference``; its ``_opset19`` before opset 22): an
    int by ONNX's own arithmetic (``_onnx_window``); a SymDim exactly wherever every symbol is
    at least 1, with n = size + pads - span:

    - floor mode: ``trunc(n / s) + 1``, ``trunc_div`` (``(h - 1) // 2 + 1`` for a 3x3 Conv,
      stride 2, pad 1; ONNX rounds toward 0, so at h = 2 without pads it is 1, not 0);
    - ceil_mode before opset 22: ``ceil(n / s) + 1``, exact for every n;
    - ceil_mode from opset 22: t + 1 with t = ``trunc((n + s - 1) / s)``, less 1 where that
      window would start in the end padding (PyTorch's rule: t s >= size + pad_begin). With
      delta = span - pad_end, for every size >= 0 that is ``ceil(n / s)`` for delta < 0,
      ``ceil((size + pad_begin) / s)`` for 0 <= delta < s, ``t + min(1, size + pad_begin)``
      for s <= delta < 2 s - 1 (the last window starts late only at size + pad_begin = 0)
      and t + 1 past that;
    - SAME_UPPER/SAME_LOWER: ``ceil(size / s)`` (``_same_window``)."""
    if s < 1:
        raise _UncarriedError(f"a stride of {s}")
    if isinstance(size, int):
        return _onnx_window(size, span, s, pads, same, ceil, out.opset)
    if same:
        return _same_window(out, size, span, s, same, ceil, name)
    begin, end = pads
    n = size + (begin + end - span)
    if not ceil:
        return as_dim(SymDim.of(trunc_div(out, n, s, name)) + 1)
    if out.opset < 22:
        return as_dim(n.ceil_div(s) + 1)
    delta = span - end
    if delta < 0:
        return as_dim(n.ceil_div(s))
    if delta < s:
        return as_dim((size + begin).ceil_div(s))
    t = SymDim.of(trunc_div(out, n + (s - 1), s, name))
    if delta >= 2 * s - 1:
        return as_dim(t + 1)
    start = size + begin  # the last window starts late only where this is 0
    if _sign(start - 1, sorted(start.symbols), None) == 1:
        out.assumed.setdefault(start - 1, name)
        return as_dim(t + 1)
    return as_dim(t + sym_min(1, start))


def _same_window(
    out: SymbolicShapes, size: SymDim, span: int, s: int, same: str, ceil: bool, name: str
) -> Dim:
    """SAME padding's output size: ``ceil(size / s)``, save that ONNX's pads (from ``size %
    s``) make it 1 at size 0 where the window is shorter than the stride (floor mode), or
    where the start is padded (ceil_mode from opset 22), and ``(size + 2 s - span - 1) // s``
    with ceil_mode before 22 where the window is shorter than the stride."""
    if s == 1:
        return size
    if ceil and out.opset < 22 and span < s:
        return as_dim((size + (2 * s - span - 1)) // s)
    up = size.ceil_div(s)
    if ceil and out.opset < 22:
        return as_dim(up)
    if ceil:  # 1 at size 0 where SAME's pads there (span - s in all) pad the start
        total = max(0, span - s)
        one_at_zero = (total // 2 if same == "SAME_UPPER" else total - total // 2) > 0
    else:
        one_at_zero = span < s
    if not one_at_zero:
        return as_dim(up)
    if _sign(size - 1, sorted(size.symbols), None) == 1:
        out.assumed.setdefault(size - 1, name)
        return as_dim(up)
    return sym_max(1, up)


def _onnx_window(
    size: int, span: int, s: int, pads: tuple[int, int], same: str, ceil: bool, opset: int
) -> int:
    """``_window`` at an int size: ONNX's own arithmetic (``convPoolShapeInference``)."""
    begin, end = pads
    if same and size >= 0:
        total = max(0, span - (size % s or s))
        small = total // 2
        begin, end = (small, total - small) if same == "SAME_UPPER" else (total - small, small)
    n = size + begin + end - span
    if not ceil:
        return _trunc(n, s) + 1
    if opset < 22:
        return -(-n // s) + 1
    t = _trunc(n + s - 1, s)
    return t if t * s >= size + begin else t + 1


def _conv(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    """Conv, and ONNX's QLinearConv (its weight the 4th input): [N, M, sizes], the kernel
    its attribute's where it has one, else the weight's (ONNX's inference)."""
    x, w = shapes[0], shapes[3 if node.op_type == "QLinearConv" else 1]
    assert x is not None and w is not None
    kernel = _ints(attrs, "kernel_shape", [int(d) for d in w[2:] if isinstance(d, int)])
    if len(kernel) != len(x) - 2:
        raise _UncarriedError("a symbolic kernel size")
    sizes = _windows(out, x, kernel, attrs, node.output[0], ceil=False)
    out.shapes[node.output[0]] = (x[0], w[0], *sizes)


def _pool(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    x = shapes[0]
    assert x is not None
    if node.op_type.startswith("Global"):
        out.shapes[node.output[0]] = (x[0], x[1], *([1] * (len(x) - 2)))
        return
    kernel = _ints(attrs, "kernel_shape", [])
    ceil = bool(attrs.get("ceil_mode", 0))
    sizes = _windows(out, x, kernel, attrs, node.output[0], ceil=ceil)
    out.shapes[node.output[0]] = (x[0], x[1], *sizes)


def _conv_transpose(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    """ConvTranspose: [N, W[1] x group, sizes], each size as onnx 1.23's inference has it
    (``convTransposeShapeInference``), for every input size: with ``output_shape``, that
    (pads ignored); else ``s (in - 1) + output_padding + span - pads``, span = ``d (k - 1) +
    1``, the pads explicit (with an auto_pad other than NOTSET, ONNX fails), VALID's 0 or
    SAME's ``max(0, span - s)`` in all (so ``in * s + output_padding`` where span >= s: ONNX's
    inference, not the spec's ``in * s``, where the kernel is shorter than the stride). NB: a
    size ONNX gives below 0 (pads past the kernel, in = 0 at a stride above the span) is no
    shape in a concrete analysis: such a size is not carried, nor a symbolic one not proven
    >= 0 wherever every symbol is at least 1 (its 0s are checked as the walk's others)."""
    x, w = shapes[0], shapes[1]
    assert x is not None and w is not None
    k = len(x) - 2
    kernel = _ints(attrs, "kernel_shape", [int(d) for d in w[2:] if isinstance(d, int)])
    strides = _ints(attrs, "strides", [1] * k)
    dilations = _ints(attrs, "dilations", [1] * k)
    padding = _ints(attrs, "output_padding", [0] * k)
    if k < 1 or not len(kernel) == len(strides) == len(dilations) == len(padding) == k:
        raise _UncarriedError("kernel, strides, dilations or output_padding of another rank")
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else str(auto)
    spans = [dilations[i] * (kernel[i] - 1) + 1 for i in range(k)]
    if isinstance(attrs.get("pads"), list):
        pads = _ints(attrs, "pads", [])
        if len(pads) != 2 * k or auto != "NOTSET":
            raise _UncarriedError("pads of another rank, or with an auto_pad (ONNX refuses)")
        totals = [pads[i] + pads[i + k] for i in range(k)]
    elif auto in _SAME:
        totals = [max(0, spans[i] - strides[i]) for i in range(k)]
    else:
        totals = [0] * k
    channels = as_dim(SymDim.of(w[1]) * int(attrs.get("group", 1)))  # type: ignore[call-overload]
    head: tuple[Dim, ...] = (x[0], channels)
    given = attrs.get("output_shape")
    if isinstance(given, list):
        if len(given) != k:
            raise _UncarriedError("an output_shape of another rank")
        sizes: list[Dim] = []
        for i, size in enumerate(x[2:]):
            if isinstance(size, SymDim):
                raise _UncarriedError(
                    f"output_shape {given} over a symbolic size ({size}): ONNX's inference "
                    f"gives no size past it"
                )
            if int(given[i]) < size:
                break  # ONNX's inference stops there: the dims so far only
            sizes.append(int(given[i]))
        out.shapes[node.output[0]] = (*head, *sizes)
        return
    sizes = []
    for i, size in enumerate(x[2:]):
        extra = padding[i] + spans[i] - totals[i] - strides[i]
        if isinstance(size, int):
            if strides[i] * size + extra < 0:
                raise _UncarriedError(f"a size of {strides[i] * size + extra}")
            sizes.append(strides[i] * size + extra)
        else:
            found = size * strides[i] + extra
            if _sign(found, sorted(found.symbols), None) != 1:
                raise _UncarriedError(
                    f"a size, {found}, that may be below 0 where every symbol is at least 1"
                )
            sizes.append(as_dim(found))
    out.shapes[node.output[0]] = (*head, *sizes)


WINDOW_RULES = {
    "Conv": _conv,
    "QLinearConv": _conv,
    "ConvTranspose": _conv_transpose,
    "MaxPool": _pool,
    "AveragePool": _pool,
    "GlobalAveragePool": _pool,
    "GlobalMaxPool": _pool,
    "GlobalLpPool": _pool,
}
"""Op type (ONNX's domain) -> its rule, as ``symbolic.shapes._RULES``."""

__all__ = ["WINDOW_RULES"]
