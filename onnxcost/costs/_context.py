"""What a cost formula sees of one node: typed inputs and outputs, attributes with defaults."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import onnx
from onnx import helper

# The tensor types live below the cost formulas (graph and shapes need them too); they are
# re-exported here, where formulas and older callers import them from.
from onnxcost.load.tensors import (
    Dim,
    Shape,
    TensorInfo,
    UnknownShapeError,
    dtype_name,
    element_bits,
    known_bytes,
    tensor_bytes,
)
from onnxcost.symdim import sym_max, sym_min


class InvalidAttributeError(Exception):
    """Raised inside a formula when an attribute's value is impossible: infinity or a string
    where a count belongs, a group that does not divide the channels, a stride of 0.

    The analyzer gives the node the status ``error`` and the message as its note: the
    model is malformed, not onnxcost.
    """


def as_int(name: str, value: Any) -> int:
    """``value`` as an int, if it is one (an integral float too); else InvalidAttributeError."""
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise InvalidAttributeError(f"attribute {name}={value!r} is not an integer")


def dim_max(a: int, b: int) -> int:
    """``max(a, b)`` of two counts: the builtin on ints, else a ``SymDim`` max (a formula run
    over symbolic shapes by ``symbolic.node_costs``, where a comparison has no answer)."""
    if type(a) is int and type(b) is int:
        return max(a, b)
    return sym_max(a, b)  # type: ignore[return-value]


def dim_min(a: int, b: int) -> int:
    """``min(a, b)`` of two counts: the builtin on ints, else a ``SymDim`` min."""
    if type(a) is int and type(b) is int:
        return min(a, b)
    return sym_min(a, b)  # type: ignore[return-value]


def numel_over(shape: Sequence[int], axes: Iterable[int]) -> int:
    """numel(shape) / prod(shape[axes]), 0 where that product is 0: rows of a softmax, groups
    of a normalization.

    Over a symbolic product (``SymDim`` dims) it is the product of the other axes times
    min(prod(shape[axes]), 1), equal wherever every dim is >= 0; that needs distinct axes.
    """
    axes = list(axes)
    n = math.prod(shape[a] for a in axes)
    if type(n) is int:
        return math.prod(shape) // n if n else 0
    picked = {a % len(shape) for a in axes}
    if len(picked) != len(axes):
        raise ValueError(f"axes {axes} repeat one: no symbolic quotient")
    rest = math.prod(d for i, d in enumerate(shape) if i not in picked)
    return rest * dim_min(n, 1)


__all__ = [
    "Dim",
    "InvalidAttributeError",
    "OpContext",
    "Shape",
    "TensorInfo",
    "UnknownShapeError",
    "as_int",
    "dim_max",
    "dim_min",
    "dtype_name",
    "element_bits",
    "known_bytes",
    "numel_over",
    "tensor_bytes",
]


@lru_cache(maxsize=4096)
def _schema_defaults(op_type: str, domain: str, opset: int) -> dict[str, Any]:
    try:
        schema = onnx.defs.get_schema(op_type, opset, domain)
    except (onnx.defs.SchemaError, TypeError):  # TypeError: an opset past int32
        return {}
    defaults: dict[str, Any] = {}
    for name, attr in schema.attributes.items():
        if attr.default_value is not None and attr.default_value.type != 0:
            defaults[name] = helper.get_attribute_value(attr.default_value)
    return defaults


@dataclass(frozen=True, slots=True)
class OpContext:
    """Everything a formula may read about one node.

    ``inputs[i]`` is None where an optional input is omitted (empty name).
    """

    node: onnx.NodeProto
    opset: int
    inputs: tuple[TensorInfo | None, ...]
    outputs: tuple[TensorInfo | None, ...]

    @property
    def op_type(self) -> str:
        return self.node.op_type

    def attr(self, name: str, default: Any = None) -> Any:
        """The attribute's value, else the schema default, else ``default``."""
        for a in self.node.attribute:
            if a.name == name:
                value = helper.get_attribute_value(a)
                return value.decode() if isinstance(value, bytes) else value
        value = _schema_defaults(self.node.op_type, self.node.domain, self.opset).get(name, default)
        return value.decode() if isinstance(value, bytes) else value

    def int_attr(self, name: str, default: int | None = None) -> int:
        """The attribute as an int (schema default, else ``default``); InvalidAttributeError
        when the model gives something else (a string, infinity, 1.5) or omits one it needs."""
        value = self.attr(name, default)
        if value is None:
            raise InvalidAttributeError(f"attribute {name} is missing")
        return as_int(name, value)

    def has_input(self, i: int) -> bool:
        return i < len(self.inputs) and self.inputs[i] is not None

    def input(self, i: int) -> TensorInfo:
        if not self.has_input(i):
            raise UnknownShapeError(f"{self.node.name}: input {i} is absent")
        return self.inputs[i]  # type: ignore[return-value]

    def output(self, i: int = 0) -> TensorInfo:
        if i >= len(self.outputs) or self.outputs[i] is None:
            raise UnknownShapeError(f"{self.node.name}: output {i} is absent")
        return self.outputs[i]  # type: ignore[return-value]

    def shape(self, i: int) -> tuple[int, ...]:
        """Concrete shape of input ``i``."""
        return self.input(i).concrete_shape

    def out_shape(self, i: int = 0) -> tuple[int, ...]:
        return self.output(i).concrete_shape

    def numel(self, i: int) -> int:
        return self.input(i).numel

    def out_numel(self, i: int = 0) -> int:
        return self.output(i).numel

    def present_inputs(self) -> Sequence[TensorInfo]:
        return [t for t in self.inputs if t is not None]
