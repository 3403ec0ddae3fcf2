"""What a cost formula sees of one node: typed inputs and outputs, attributes with defaults."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import onnx
from onnx import helper

Dim = int | str | None
Shape = tuple[Dim, ...]

# Bits per element of each ONNX tensor type; sub-byte types are packed.
_BITS: dict[int, int] = {
    onnx.TensorProto.FLOAT: 32,
    onnx.TensorProto.UINT8: 8,
    onnx.TensorProto.INT8: 8,
    onnx.TensorProto.UINT16: 16,
    onnx.TensorProto.INT16: 16,
    onnx.TensorProto.INT32: 32,
    onnx.TensorProto.INT64: 64,
    onnx.TensorProto.STRING: 0,
    onnx.TensorProto.BOOL: 8,
    onnx.TensorProto.FLOAT16: 16,
    onnx.TensorProto.DOUBLE: 64,
    onnx.TensorProto.UINT32: 32,
    onnx.TensorProto.UINT64: 64,
    onnx.TensorProto.COMPLEX64: 64,
    onnx.TensorProto.COMPLEX128: 128,
    onnx.TensorProto.BFLOAT16: 16,
}
for _name, _bits in (
    ("FLOAT8E4M3FN", 8),
    ("FLOAT8E4M3FNUZ", 8),
    ("FLOAT8E5M2", 8),
    ("FLOAT8E5M2FNUZ", 8),
    ("FLOAT8E8M0", 8),
    ("UINT4", 4),
    ("INT4", 4),
    ("FLOAT4E2M1", 4),
    ("UINT2", 2),
    ("INT2", 2),
):
    if hasattr(onnx.TensorProto, _name):
        _BITS[getattr(onnx.TensorProto, _name)] = _bits


def element_bits(elem_type: int) -> int:
    """Bits one element of ``elem_type`` occupies (4 for int4: two per byte)."""
    return _BITS.get(elem_type, 32)


def dtype_name(elem_type: int) -> str:
    """``'float32'``, ``'float16'``, ``'int4'``...: numpy-style names users know."""
    if elem_type == 0:
        return "undefined"
    try:
        name = helper.tensor_dtype_to_string(elem_type)  # 'TensorProto.FLOAT'
    except (KeyError, ValueError):
        return f"type{elem_type}"
    short = name.split(".")[-1].lower()
    return {"float": "float32", "double": "float64"}.get(short, short)


def tensor_bytes(numel: int, elem_type: int) -> int:
    """Bytes of ``numel`` packed elements, rounded up to a whole byte."""
    return (numel * _BITS.get(elem_type, 32) + 7) // 8


class UnknownShapeError(Exception):
    """Raised inside a formula when a shape it needs is not concrete.

    The analyzer catches it and gives the node the status ``unknown_shape``.
    """


class TensorInfo:
    """A tensor as the analyzer knows it: name, element type, shape (None if unknown rank).

    Read-only by contract (records and formulas share instances); ``numel`` and ``nbytes``
    are computed once, since the analyzer reads them often.
    """

    __slots__ = ("_nbytes", "_numel", "elem_type", "name", "shape")

    name: str
    elem_type: int
    shape: Shape | None
    _numel: int
    _nbytes: int

    def __init__(self, name: str, elem_type: int, shape: Shape | None) -> None:
        self.name = name
        self.elem_type = elem_type
        self.shape = shape
        concrete = shape is not None and all(type(d) is int and d >= 0 for d in shape)
        numel = math.prod(shape) if concrete else -1  # type: ignore[arg-type]
        self._numel = numel
        self._nbytes = (numel * _BITS.get(elem_type, 32) + 7) // 8 if concrete else -1

    def renamed(self, name: str) -> TensorInfo:
        """The same type under another name (cheap: nothing is recomputed)."""
        new = object.__new__(TensorInfo)
        new.name = name
        new.elem_type = self.elem_type
        new.shape = self.shape
        new._numel = self._numel
        new._nbytes = self._nbytes
        return new

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorInfo) and (self.name, self.elem_type, self.shape) == (
            other.name,
            other.elem_type,
            other.shape,
        )

    def __hash__(self) -> int:
        return hash((self.name, self.elem_type, self.shape))

    def __repr__(self) -> str:
        return f"TensorInfo({self.name!r}, {self.dtype}, {self.shape})"

    @property
    def dtype(self) -> str:
        return dtype_name(self.elem_type)

    @property
    def is_concrete(self) -> bool:
        return self._numel >= 0

    @property
    def concrete_shape(self) -> tuple[int, ...]:
        """The shape with every dim an int; raises UnknownShapeError otherwise."""
        if self._numel < 0:
            raise UnknownShapeError(self.name)
        return self.shape  # type: ignore[return-value]

    @property
    def numel(self) -> int:
        if self._numel < 0:
            raise UnknownShapeError(self.name)
        return self._numel

    @property
    def nbytes(self) -> int:
        if self._nbytes < 0:
            raise UnknownShapeError(self.name)
        return self._nbytes


def known_bytes(tensors: Iterable[TensorInfo | None]) -> tuple[int, bool]:
    """Total bytes of the tensors whose shapes are known, and whether that is all of them."""
    total = 0
    complete = True
    for t in tensors:
        if t is not None:
            if t._nbytes < 0:
                complete = False
            else:
                total += t._nbytes
    return total, complete


@lru_cache(maxsize=4096)
def _schema_defaults(op_type: str, domain: str, opset: int) -> dict[str, Any]:
    try:
        schema = onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
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
