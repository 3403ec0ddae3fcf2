"""Static checks ONNX's inference does not make (a Conv's channels against its weight, a
Reshape that changes the element count), and the message that blames the shape flags."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import onnx

from onnxcost.load.graph import DEFAULT_DOMAINS
from onnxcost.load.tensors import TensorInfo
from onnxcost.shapes.folding import _attr
from onnxcost.shapes.overrides import _fmt_dims
from onnxcost.units import shape_text

_SHAPE_ERROR = "[ShapeInferenceError]"
"""How ONNX's InferenceError starts when shapes (not types or attributes) disagree."""

_CHANNEL_OPS = {
    "Conv": (0, 1),
    "ConvTranspose": (0, 1),
    "ConvInteger": (0, 1),
    "QLinearConv": (0, 3),
}
"""Ops whose input channels must match their weight's (ONNX's inference does not check):
op -> (index of the input X, index of the weight W)."""


@dataclass(frozen=True, slots=True)
class _NodeFailure:
    """A node whose concrete input shapes disagree."""

    node: str
    op: str
    why: str
    inputs: tuple[str, ...]
    """Each input's shape, as text."""

    def text(self) -> str:
        return f"node {self.node!r} ({self.op}): {self.why} (inputs {', '.join(self.inputs)})"


def _op_label(domain: str, op_type: str) -> str:
    return op_type if domain in DEFAULT_DOMAINS else f"{domain}::{op_type}"


_STATIC_CHECKED = frozenset({"Reshape", *_CHANNEL_OPS})
"""The op types ``_static_failures`` checks."""


def _static_failures(
    nodes: Iterable[tuple[onnx.NodeProto, str, str, Sequence[str]]],
    types: Mapping[str, TensorInfo],
) -> list[_NodeFailure]:
    """Nodes whose concrete shapes disagree where ONNX's inference does not look: a Conv-like
    node's input channels against its weight, a Reshape that changes the element count."""
    out = []
    for node, op_type, domain, ins in nodes:
        if domain not in DEFAULT_DOMAINS:
            continue
        if op_type in _CHANNEL_OPS:
            why = _channel_mismatch(node, op_type, ins, types)
        elif op_type == "Reshape":
            why = _reshape_mismatch(node, ins, types)
        else:
            continue
        if why:
            shapes = tuple(shape_text(types[i].shape) if i in types else "?" for i in ins if i)
            out.append(_NodeFailure(node.name, _op_label(domain, op_type), why, shapes))
    return out


def _channel_mismatch(
    node: onnx.NodeProto, op_type: str, ins: Sequence[str], types: Mapping[str, TensorInfo]
) -> str:
    """Why a Conv-like node's input channels C differ from what its weight W takes, else '':
    Conv, ConvInteger, QLinearConv: C = W[1] x group; ConvTranspose: C = W[0]."""
    x_at, w_at = _CHANNEL_OPS[op_type]
    if len(ins) <= w_at:
        return ""
    x, w = types.get(ins[x_at]), types.get(ins[w_at])
    if x is None or w is None or not (x.is_concrete and w.is_concrete):
        return ""
    if x.shape is None or w.shape is None or len(x.shape) < 3 or len(w.shape) < 3:
        return ""
    group = _attr(node, "group", 1)
    if not isinstance(group, int) or group < 1:
        return ""  # a malformed group is the cost formula's to report
    c, wdims = x.shape[1], cast(tuple[int, ...], w.shape)  # concrete: ints
    if op_type == "ConvTranspose":
        expected, how = wdims[0], f"weight {shape_text(wdims)} takes {wdims[0]}"
    else:
        expected = wdims[1] * group
        how = f"weight {shape_text(wdims)} with group {group} takes {expected}"
    return "" if c == expected else f"input {ins[x_at]!r} has {c} channels but {how}"


def _reshape_mismatch(
    node: onnx.NodeProto, ins: Sequence[str], types: Mapping[str, TensorInfo]
) -> str:
    """Why a Reshape's output holds another number of elements than its input, else ''. ONNX
    takes a fully given target shape as it is: an export that baked a traced length into it
    (a torch MultiheadAttention's key reshape) reads 128x8x64 from a 1x1x512 input."""
    x = types.get(ins[0]) if ins and ins[0] else None
    y = types.get(node.output[0]) if node.output and node.output[0] else None
    if x is None or y is None or not (x.is_concrete and y.is_concrete):
        return ""
    old, new = cast(tuple[int, ...], x.shape), cast(tuple[int, ...], y.shape)  # concrete: ints
    n_in, n_out = _elements(old), _elements(new)
    if n_in == n_out:
        return ""  # equal, or both past 2**64: no tensor that size is run
    return (
        f"input {ins[0]!r} has {_count(n_in)} elements but the new shape {shape_text(new)} "
        f"has {_count(n_out)}"
    )


_HUGE = 1 << 64


def _elements(shape: Sequence[int]) -> int | None:
    """The number of elements of ``shape``, None past 2**64: a product of thousands of huge
    dims (a malformed model) is an integer of millions of bits, seconds to compute."""
    if 0 in shape:
        return 0
    n = 1
    for d in shape:
        n *= d
        if n > _HUGE:
            return None
    return n


def _count(n: int | None) -> str:
    return "more than 2^64" if n is None else f"{n:,}"


def _blame(
    failures: Sequence[_NodeFailure],
    input_shapes: Mapping[str, Sequence[int]],
    dims: Mapping[str, int],
    allow_reshape: bool,
    pristine: Sequence[onnx.ValueInfoProto],
    own: Sequence[_NodeFailure] = (),
) -> str:
    """The ShapeError message: the first node the flags broke, the flags, what the model says;
    and where ``own`` (the nodes that disagree with no flag at all) breaks elsewhere, that the
    model breaks without the flags too (an exporter's broken Transpose breaks it at every
    shape, the ones it was traced at included, where "fix the flags" alone misleads)."""
    declared = {vi.name: vi.type.tensor_type.shape for vi in pristine}
    flags = [
        f"--input-shape {name}={'x'.join(map(str, shape))}"
        + (f" (the model declares {_fmt_dims(declared[name])})" if name in declared else "")
        for name, shape in input_shapes.items()
    ]
    flags += [f"--dim {sym}={value}" for sym, value in dims.items()]
    if allow_reshape:
        flags.append("--allow-reshape")
    more = f"; {len(failures) - 1} more nodes disagree" if len(failures) > 1 else ""
    if own and all(o.node != failures[0].node for o in own):
        return (
            f"the shapes from {', '.join(flags)} do not fit the model: {failures[0].text()}"
            f"{more}; without them (each symbolic dim at 1) it breaks too, at {own[0].text()}: "
            f"the model itself may be malformed (check it with onnxruntime or "
            f"onnx.checker.check_model), or fix the flags to match its inputs"
        )
    return (
        f"the shapes from {', '.join(flags)} do not fit the model: {failures[0].text()}{more}; "
        f"fix the flags to match the model's inputs"
    )
