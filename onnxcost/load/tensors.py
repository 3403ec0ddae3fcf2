"""Tensor types as every layer sees them: element types and sizes, ``TensorInfo``, domains.

The bottom of the analysis stack: graph, shapes and the cost formulas all import from here,
and this module imports nothing else of onnxcost, so arrows run one way
(model -> graph -> shapes -> costs -> records).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from functools import lru_cache

import onnx
from onnx import helper

SUBGRAPH_OPS = frozenset({"If", "Loop", "Scan", "SequenceMap"})
"""Ops of the default domain whose attributes hold subgraphs the analyzer walks."""

FLOAT_TYPES = frozenset(
    {
        onnx.TensorProto.FLOAT,
        onnx.TensorProto.FLOAT16,
        onnx.TensorProto.BFLOAT16,
        onnx.TensorProto.DOUBLE,
    }
)
"""The element types of float weights (not the int64 shapes and indices an exporter stores)."""

PARAMETER_PATH = re.compile(r"[A-Za-z_]\w*(?:\.\w+)+\Z")
"""A parameter's path in its module as torch names it (``layer1.0.bn1.weight``): dotted, with
none of the ``/``, ``:`` of the names exporters make up for what they compute
(``/bn/Identity_output_0``, ``onnx::MatMul_9``, ``val_180``)."""


ZOO_BUFFERS = "onnxcost.zoo.buffers"
"""The model metadata key where a built-in model names its non-learned initializers (a rotary
table), one a line: no params, as a buffer of torch's graph signature (``analysis.signature``)."""


def normalize_domain(domain: str) -> str:
    """The default domain as '' whichever way a model spells it ('' or 'ai.onnx')."""
    return "" if domain in ("", "ai.onnx") else domain


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


@lru_cache(maxsize=256)
def dtype_name(elem_type: int) -> str:
    """``'float32'``, ``'float16'``, ``'int4'``...: numpy-style names users know.

    Cached: the analysis names an operand type per node, and onnx's lookup takes ~10 us."""
    if elem_type == 0:
        return "undefined"
    try:
        name = helper.tensor_dtype_to_string(elem_type)  # 'TensorProto.FLOAT'
    except (KeyError, ValueError):
        return f"type{elem_type}"
    short = name.split(".")[-1].lower()
    return {"float": "float32", "double": "float64"}.get(short, short)


def type_text(t: onnx.TypeProto) -> str:
    """A value's type as text: a tensor's dtype name (``float32``), else what holds what
    (``seq(map(int64, float32))``: scikit-learn's ZipMap of class probabilities)."""
    kind = t.WhichOneof("value")
    if kind == "tensor_type":
        return dtype_name(t.tensor_type.elem_type)
    if kind == "sequence_type":
        return f"seq({type_text(t.sequence_type.elem_type)})"
    if kind == "map_type":
        key = dtype_name(t.map_type.key_type)
        return f"map({key}, {type_text(t.map_type.value_type)})"
    if kind == "optional_type":
        return f"optional({type_text(t.optional_type.elem_type)})"
    if kind == "sparse_tensor_type":
        return f"sparse({dtype_name(t.sparse_tensor_type.elem_type)})"
    return "undefined"


def is_tensor_type(t: onnx.TypeProto) -> bool:
    """Whether a value is a tensor (not a sequence, map or optional: no bytes of its own)."""
    return t.WhichOneof("value") in ("tensor_type", None)


def tensor_bytes(numel: int, elem_type: int) -> int:
    """Bytes of ``numel`` packed elements, rounded up to a whole byte."""
    return (numel * _BITS.get(elem_type, 32) + 7) // 8


class UnknownShapeError(Exception):
    """Raised inside a formula when a shape it needs is not concrete.

    The analyzer catches it and gives the node the status ``unknown_shape``.
    """


class TensorInfo:
    """A tensor as the analyzer knows it: name, element type, shape (None if unknown rank).

    Read-only by contract (records and formulas share instances). The element count and
    byte size are computed once, since the analyzer reads them for every node:
    ``known_numel`` and ``known_nbytes`` hold them, -1 when the shape is not concrete;
    ``numel`` and ``nbytes`` raise UnknownShapeError instead.
    """

    __slots__ = ("elem_type", "known_nbytes", "known_numel", "name", "shape")

    name: str
    elem_type: int
    shape: Shape | None
    known_numel: int
    """Elements, or -1 when the shape is not concrete."""
    known_nbytes: int
    """Bytes (sub-byte types packed), or -1 when the shape is not concrete."""

    def __init__(self, name: str, elem_type: int, shape: Shape | None) -> None:
        self.name = name
        self.elem_type = elem_type
        self.shape = shape
        concrete = shape is not None and all(type(d) is int and d >= 0 for d in shape)
        numel = math.prod(shape) if concrete else -1  # type: ignore[arg-type]
        self.known_numel = numel
        self.known_nbytes = (numel * _BITS.get(elem_type, 32) + 7) // 8 if concrete else -1

    def renamed(self, name: str) -> TensorInfo:
        """The same type under another name (cheap: nothing is recomputed)."""
        new = object.__new__(TensorInfo)
        new.name = name
        new.elem_type = self.elem_type
        new.shape = self.shape
        new.known_numel = self.known_numel
        new.known_nbytes = self.known_nbytes
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
        return self.known_numel >= 0

    @property
    def concrete_shape(self) -> tuple[int, ...]:
        """The shape with every dim an int; raises UnknownShapeError otherwise."""
        if self.known_numel < 0:
            raise UnknownShapeError(self.name)
        return self.shape  # type: ignore[return-value]

    @property
    def numel(self) -> int:
        if self.known_numel < 0:
            raise UnknownShapeError(self.name)
        return self.known_numel

    @property
    def nbytes(self) -> int:
        if self.known_nbytes < 0:
            raise UnknownShapeError(self.name)
        return self.known_nbytes


def known_bytes(tensors: Iterable[TensorInfo | None]) -> tuple[int, bool]:
    """Total bytes of the tensors whose shapes are known, and whether that is all of them."""
    total = 0
    complete = True
    for t in tensors:
        if t is not None:
            if t.known_nbytes < 0:
                complete = False
            else:
                total += t.known_nbytes
    return total, complete


def name_text(value: str | bytes) -> str:
    """A model string as text: protobuf hands out ``bytes`` for one that is not UTF-8, which
    neither sorts nor compares with ``str``; those bytes are escaped (``\\xff``)."""
    return value if isinstance(value, str) else bytes(value).decode("utf-8", "backslashreplace")
