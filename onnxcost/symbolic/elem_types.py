"""The element type of each output of a node, from its op, attributes and input types: what
ONNX's type inference gives, for the symbolic walk (``symbolic.node_costs``), which sizes
bytes by it. Called once per class of nodes.

Most ops' outputs have their first input's type; the table below lists the ones that do not
(a cast, a comparison, an index, a quantization). The ops onnxcost has its own shape rule
for (``shapes.rules``: onnxruntime's contrib ops) take their types from that rule
(``symbolic.contrib``), not from here. NB: another op of another domain is given its first
input's type.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx
from onnx import TensorProto

_INT64 = TensorProto.INT64
_BOOL = TensorProto.BOOL
_FLOAT = TensorProto.FLOAT

_COMPARISONS = (
    *("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"),
    *("And", "Or", "Xor", "Not", "IsNaN", "IsInf"),
)
_FIXED: dict[str, tuple[int, ...]] = {
    **dict.fromkeys(("Shape", "Size", "NonZero", "ArgMax", "ArgMin"), (_INT64,)),
    **dict.fromkeys(_COMPARISONS, (_BOOL,)),
    **dict.fromkeys(("MatMulInteger", "ConvInteger"), (TensorProto.INT32,)),
    "DynamicQuantizeLinear": (TensorProto.UINT8, _FLOAT, TensorProto.UINT8),
}
"""Ops whose outputs have fixed types, whatever their inputs."""

_FROM_INPUT: dict[str, int] = {
    "Where": 1,
    "CastLike": 1,
    "DequantizeLinear": 1,
    "QLinearMatMul": 7,
    "QLinearConv": 7,
    "OneHot": 2,
}
"""Ops whose outputs have the type of another input than the first."""

_CONSTANT_TYPES = {
    "value_float": _FLOAT,
    "value_floats": _FLOAT,
    "value_int": _INT64,
    "value_ints": _INT64,
    "value_string": TensorProto.STRING,
    "value_strings": TensorProto.STRING,
}


def _int(node: onnx.NodeProto, name: str) -> int | None:
    """The node's int attribute ``name``, or None where it has none."""
    for a in node.attribute:
        if a.name == name:
            return int(a.i)
    return None


def output_elem_types(
    node: onnx.NodeProto, op_type: str, domain: str, inputs: Sequence[int], opset: int = 1
) -> tuple[int, ...]:
    """Per output of ``node`` (``domain`` normalized, of ``opset``), its element type, given
    its inputs' (0 where omitted)."""
    n = len(node.output)
    first = inputs[0] if inputs else _FLOAT
    if domain != "":
        return (first,) * n
    fixed = _FIXED.get(op_type)
    if fixed is not None:
        return (fixed * n)[:n] if len(fixed) == 1 else fixed[:n]
    if op_type in _FROM_INPUT:
        k = _FROM_INPUT[op_type]
        return ((inputs[k] if len(inputs) > k else first),) * n
    if op_type == "Dropout":  # the mask: bool from opset 10, the data's type before
        return (first, _BOOL if opset >= 10 else first)[:n]
    if op_type == "Cast":
        to = _int(node, "to")
        return (first if to is None else to,) * n
    if op_type in ("Constant", "ConstantOfShape"):
        for a in node.attribute:
            if a.name == "value":
                return (a.t.data_type,) * n
            if a.name in _CONSTANT_TYPES:
                return (_CONSTANT_TYPES[a.name],) * n
        return (_FLOAT,) * n
    if op_type == "QuantizeLinear":
        zero = inputs[2] if len(inputs) > 2 and inputs[2] else 0
        return (zero or _int(node, "output_dtype") or TensorProto.UINT8,) * n
    if op_type == "TopK":
        return (first, _INT64)[:n]
    if op_type == "LayerNormalization":
        stash = _int(node, "stash_type")
        return (first, *([_FLOAT if stash is None else stash] * (n - 1)))
    if op_type in ("RandomNormal", "RandomUniform", "EyeLike", "RandomNormalLike"):
        dtype = _int(node, "dtype")
        return ((dtype if dtype is not None else first),) * n
    return (first,) * n


__all__ = ["output_elem_types"]
