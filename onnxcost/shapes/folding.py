"""Concrete evaluation (numpy, or onnx's reference ops) of shape-computing sub-graphs
(Shape, Gather, Concat, Slice, Range, Where, ...), and the small known values they read."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxcost.load.tensors import TensorInfo
from onnxcost.load.wire import FOLD_MAX_ELEMENTS, FOLDABLE_TYPES

# --- concrete evaluation of shape sub-graphs -------------------------------------------------


def _attr(node: onnx.NodeProto, name: str, default: object = None) -> object:
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _ints(v: np.ndarray | None) -> list[int]:
    return [] if v is None else [int(x) for x in np.asarray(v).reshape(-1)]


def _slice(node: onnx.NodeProto, x: list[np.ndarray | None]) -> np.ndarray:
    data = x[0]
    assert data is not None
    starts, ends = _ints(x[1]), _ints(x[2])
    axes = _ints(x[3]) if len(x) > 3 and x[3] is not None else list(range(len(starts)))
    steps = _ints(x[4]) if len(x) > 4 and x[4] is not None else [1] * len(starts)
    index: list[slice] = [slice(None)] * data.ndim
    for s, e, a, st in zip(starts, ends, axes, steps, strict=False):
        index[a] = slice(s, e, st)
    return data[tuple(index)]


def _binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    def run(node: onnx.NodeProto, x: list[np.ndarray | None]) -> np.ndarray:
        a, b = x[0], x[1]
        assert a is not None and b is not None
        return np.asarray(fn(a, b))

    return run


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer):
        return np.asarray(np.trunc(a / b).astype(a.dtype))
    return np.asarray(a / b)


def _shape_value(node: onnx.NodeProto, types: Mapping[str, TensorInfo]) -> np.ndarray | None:
    info = types.get(node.input[0]) if node.input else None
    if info is None or not info.is_concrete:
        return None
    shape = list(info.concrete_shape)
    start = int(_attr(node, "start", 0))  # type: ignore[call-overload]
    end = _attr(node, "end", None)
    return np.array(shape[start : None if end is None else int(end)], dtype=np.int64)  # type: ignore[call-overload]


def _cast(node: onnx.NodeProto, x: list[np.ndarray | None]) -> np.ndarray:
    to = int(_attr(node, "to", TensorProto.FLOAT))  # type: ignore[call-overload]
    assert x[0] is not None
    return x[0].astype(helper.tensor_dtype_to_np_dtype(to))


def _squeeze(node: onnx.NodeProto, x: list[np.ndarray | None]) -> np.ndarray:
    assert x[0] is not None
    axes = _ints(x[1]) if len(x) > 1 and x[1] is not None else list(_attr(node, "axes", []) or [])  # type: ignore[call-overload]
    return np.squeeze(x[0], axis=tuple(axes)) if axes else np.squeeze(x[0])


def _unsqueeze(node: onnx.NodeProto, x: list[np.ndarray | None]) -> np.ndarray:
    assert x[0] is not None
    axes = _ints(x[1]) if len(x) > 1 and x[1] is not None else list(_attr(node, "axes", []) or [])  # type: ignore[call-overload]
    return np.expand_dims(x[0], axis=tuple(axes))


def _reshape(node: onnx.NodeProto, x: list[np.ndarray | None]) -> np.ndarray:
    assert x[0] is not None
    shape = _ints(x[1])
    shape = [x[0].shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return x[0].reshape(shape)


def _constant_of_shape(node: onnx.NodeProto, x: list[np.ndarray | None]) -> np.ndarray:
    value = _attr(node, "value")
    fill = (
        numpy_helper.to_array(value) if isinstance(value, TensorProto) else np.zeros(1, np.float32)
    )
    return np.full(_ints(x[0]), fill.reshape(-1)[0], dtype=fill.dtype)


def _x(x: list[np.ndarray | None], i: int) -> np.ndarray:
    v = x[i]
    assert v is not None
    return v


_FOLD: dict[str, Callable[[onnx.NodeProto, list[np.ndarray | None]], np.ndarray]] = {
    "Identity": lambda n, x: _x(x, 0),
    "Transpose": lambda n, x: np.transpose(_x(x, 0), _attr(n, "perm", None)),  # type: ignore[call-overload]
    "Cast": _cast,
    "Gather": lambda n, x: np.take(_x(x, 0), _x(x, 1), axis=int(_attr(n, "axis", 0))),  # type: ignore[call-overload]
    "Concat": lambda n, x: np.concatenate([_x([v], 0) for v in x], axis=int(_attr(n, "axis", 0))),  # type: ignore[call-overload]
    "Slice": _slice,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Reshape": _reshape,
    "Add": _binary(np.add),
    "Sub": _binary(np.subtract),
    "Mul": _binary(np.multiply),
    "Div": _binary(_div),
    "Mod": _binary(np.mod),
    "Min": lambda n, x: np.minimum.reduce([_x([v], 0) for v in x]),
    "Max": lambda n, x: np.maximum.reduce([_x([v], 0) for v in x]),
    "Equal": _binary(np.equal),
    "Less": _binary(np.less),
    "Greater": _binary(np.greater),
    "LessOrEqual": _binary(np.less_equal),
    "GreaterOrEqual": _binary(np.greater_equal),
    "And": _binary(np.logical_and),
    "Or": _binary(np.logical_or),
    "Not": lambda n, x: np.logical_not(_x(x, 0)),
    "Neg": lambda n, x: np.negative(_x(x, 0)),
    "Abs": lambda n, x: np.abs(_x(x, 0)),
    "Where": lambda n, x: np.where(_x(x, 0), _x(x, 1), _x(x, 2)),
    "Range": lambda n, x: np.arange(
        _x(x, 0).item(), _x(x, 1).item(), _x(x, 2).item(), dtype=_x(x, 0).dtype
    ),
    "ConstantOfShape": _constant_of_shape,
    "Expand": lambda n, x: _x(x, 0) * np.ones(_ints(x[1]), dtype=_x(x, 0).dtype),
    "ReduceProd": lambda n, x: np.prod(_x(x, 0), keepdims=bool(_attr(n, "keepdims", 1))),
    "ReduceSum": lambda n, x: np.sum(_x(x, 0), keepdims=bool(_attr(n, "keepdims", 1))),
    "Floor": lambda n, x: np.floor(_x(x, 0)),
    "Ceil": lambda n, x: np.ceil(_x(x, 0)),
    "Sqrt": lambda n, x: np.sqrt(_x(x, 0)),
}


_BROADCASTING = frozenset(
    {"Add", "Sub", "Mul", "Div", "Mod", "Min", "Max", "Equal", "Less", "Greater"}
    | {"LessOrEqual", "GreaterOrEqual", "And", "Or", "Where"}
    | {"Pow", "Xor", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Sum", "Mean"}
)

_REFERENCE_FOLDS = frozenset(
    {"Flatten", "CastLike", "Sign", "Round", "Reciprocal", "IsNaN", "IsInf", "BitwiseNot"}
    | {"Trilu", "Clip", "CumSum", "ScatterND", "ScatterElements", "GatherElements", "GatherND"}
    | {"ReduceMax", "ReduceMin", "ReduceMean", "ReduceL1", "ReduceL2", "ReduceSumSquare"}
    | {"ArgMax", "ArgMin", "Split", "Compress", "Unique", "NonZero", "Tile", "Pad", "OneHot"}
    | {"Pow", "Xor", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Sum", "Mean"}
)
"""The other ops a shape sub-graph may hold (exporters build pads, masks and axes with
them), folded by onnx's reference implementation: ``_fold_size`` bounds each before it runs."""


def _fold_size(node: onnx.NodeProto, x: list[np.ndarray | None]) -> int | None:
    """Elements ``_FOLD[op]`` would produce, computed from the shapes and values before it
    runs (Python ints, so 2**62 does not wrap); None when the inputs make no sense.

    Folding a ConstantOfShape([32768, 32768]) would otherwise allocate 8 GB to learn that
    the result is too large to keep.
    """
    present = [v for v in x if v is not None]
    op_type = node.op_type
    if op_type == "ConstantOfShape":
        dims = _ints(x[0])
        return math.prod(dims) if all(d >= 0 for d in dims) else None
    if op_type == "Expand":
        dims = _ints(x[1])
        if any(d < 0 for d in dims):
            return None
        return _broadcast_numel([_x(x, 0).shape, tuple(dims)])
    if op_type == "Range":
        start, limit, delta = (float(_x(x, i).reshape(-1)[0]) for i in range(3))
        if delta == 0 or not all(math.isfinite(v) for v in (start, limit, delta)):
            return None
        return max(0, math.ceil((limit - start) / delta))
    if op_type == "Gather":
        data, indices = _x(x, 0), _x(x, 1)
        axis = int(_attr(node, "axis", 0))  # type: ignore[call-overload]
        if not -data.ndim <= axis < data.ndim:
            return None
        return int(data.size // max(1, data.shape[axis]) * indices.size)
    if op_type == "Concat":
        return sum(v.size for v in present)
    if op_type == "Tile":
        return _x(x, 0).size * math.prod(_ints(x[1])) if min(_ints(x[1]), default=0) >= 0 else None
    if op_type == "Pad":
        return _pad_size(node, x)
    if op_type == "OneHot":
        return _x(x, 0).size * max(0, int(_x(x, 1).reshape(-1)[0]))
    if op_type == "NonZero":
        return _x(x, 0).ndim * _x(x, 0).size
    if op_type == "GatherND":
        data, indices = _x(x, 0), _x(x, 1)
        batch = int(_attr(node, "batch_dims", 0))  # type: ignore[call-overload]
        if indices.ndim < 1 or not 0 <= batch + indices.shape[-1] <= data.ndim:
            return None
        return math.prod(indices.shape[:-1]) * math.prod(data.shape[batch + indices.shape[-1] :])
    if op_type in _BROADCASTING:
        return _broadcast_numel([v.shape for v in present])
    return max((v.size for v in present), default=0)  # never larger than an input


def _pad_size(node: onnx.NodeProto, x: list[np.ndarray | None]) -> int | None:
    """Elements of a Pad's output: each dim plus its pads (the attribute before opset 11)."""
    data = _x(x, 0)
    pads = _ints(x[1]) if len(x) > 1 else list(_attr(node, "pads", []) or [])  # type: ignore[call-overload]
    axes = _ints(x[3]) if len(x) > 3 and x[3] is not None else list(range(data.ndim))
    if len(pads) != 2 * len(axes) or not all(-data.ndim <= a < data.ndim for a in axes):
        return None
    dims = list(data.shape)
    for i, a in enumerate(axes):
        dims[a] += pads[i] + pads[i + len(axes)]
    return math.prod(dims) if min(dims, default=0) >= 0 else None


def _reference_fold(
    node: onnx.NodeProto, x: list[np.ndarray | None], opset: int | None
) -> tuple[np.ndarray, ...]:
    """Every output of ``node`` by onnx's reference implementation (``_REFERENCE_FOLDS``):
    a Split gives one value per output."""
    from onnx.reference.ops import load_op  # imports every reference op: only when needed

    op = load_op("", node.op_type, opset)(
        node, {"log": lambda *_a: None, "opsets": {"": opset}, "verbose": 0, "new_ops": None}
    )
    return tuple(np.asarray(v) for v in op.run(*x))


def _broadcast_numel(shapes: Sequence[tuple[int, ...]]) -> int | None:
    """Elements of numpy broadcasting ``shapes`` together; None if they do not broadcast."""
    rank = max((len(s) for s in shapes), default=0)
    total = 1
    for i in range(1, rank + 1):
        sizes = {s[-i] for s in shapes if len(s) >= i} - {1}
        if len(sizes) > 1:
            return None
        total *= sizes.pop() if sizes else 1
    return total


_ValueSource = TensorProto | onnx.NodeProto
"""An initializer, or a Constant node."""


class KnownValues:
    """Small tensors whose values are known: constants, read into numpy on first use, and
    the values folded from shape sub-graphs. Weights and large tensors are never read."""

    __slots__ = ("_constant_keys", "_constants", "_sources", "_values")

    def __init__(self, sources: dict[str, _ValueSource] | None = None) -> None:
        self._sources = sources or {}
        self._values: dict[str, np.ndarray] = {}
        self._constants: dict[bytes, np.ndarray | None] = {}
        """Constant nodes by their serialized attribute: exporters repeat the same few
        (axes [0], index 1) thousands of times; each is read once. Shared arrays are read-only."""
        self._constant_keys: dict[str, bytes] = {}
        """Constant output -> the serialized attribute its node was registered with, where the
        walk that registered it (``_per_node``) had read it already."""

    def get(self, name: str) -> np.ndarray | None:
        value = self._values.get(name)
        if value is None and name in self._sources:
            source = self._sources.pop(name)
            if isinstance(source, onnx.NodeProto):
                key = self._constant_keys.pop(name, None) or _attribute_key(source)
                if key in self._constants:
                    value = self._constants[key]
                else:
                    value = self._constants[key] = _to_array(source)
                    if value is not None:
                        value.flags.writeable = False
            else:
                value = _to_array(source)
            if value is not None:
                self._values[name] = value
        return value

    def add_constant(self, name: str, node: onnx.NodeProto, key: bytes) -> None:
        """Register Constant output ``name``, its node's serialized attribute ``key`` read
        already: its value is that of every Constant of the same ``key``, read on first use."""
        if key in self._constants:  # read before: shared
            value = self._constants[key]
            if value is not None:
                self._values[name] = value
            return
        self._sources[name] = node
        self._constant_keys[name] = key

    def add_folded(self, name: str, value: np.ndarray) -> None:
        """Give ``name`` the folded ``value``, unless its value is known or readable already."""
        if name not in self._values and name not in self._sources:
            self._values[name] = value

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __getitem__(self, name: str) -> np.ndarray:
        value = self.get(name)
        if value is None:
            raise KeyError(name)
        return value

    def __setitem__(self, name: str, value: np.ndarray) -> None:
        self._sources.pop(name, None)
        self._values[name] = value


class ScopedValues(KnownValues):
    """The known values inside a body (If branch, Loop or Scan body): its own constants and
    folded values, then those of the scope around it, which it may read. Values folded in the
    body stay in it: two branches may name different tensors alike."""

    __slots__ = ("_outer",)

    def __init__(self, sources: dict[str, _ValueSource], outer: KnownValues) -> None:
        super().__init__(sources)
        self._outer = outer

    def get(self, name: str) -> np.ndarray | None:
        value = super().get(name)
        return self._outer.get(name) if value is None else value


def _attribute_key(node: onnx.NodeProto) -> bytes:
    """A node's attributes as bytes: equal for nodes that differ only in name and tensors."""
    attrs = node.attribute
    # One attribute (most nodes) serialized alone: the join in every case costs 3.4% more
    # instructions of an 8B-shaped decoder's analysis (callgrind, 709M against 686M for two).
    if len(attrs) == 1:
        only: bytes = attrs[0].SerializeToString()
        return only
    return b"".join([a.SerializeToString() for a in attrs]) if attrs else b""


def _to_array(source: _ValueSource) -> np.ndarray | None:
    if isinstance(source, onnx.NodeProto):
        for a in source.attribute:
            # The attribute's type must be the one its name says: a value_int holding a
            # string or infinity is a malformed model, its value unknown.
            expected = _CONSTANT_ATTRIBUTES.get(a.name)
            if expected is None or a.type != expected[0]:
                continue
            if a.name == "value":
                return _tensor_to_array(a.t)
            return np.array(helper.get_attribute_value(a), dtype=expected[1])
        return None
    return _tensor_to_array(source)


_CONSTANT_ATTRIBUTES: dict[str, tuple[int, type[np.generic] | None]] = {
    "value": (onnx.AttributeProto.TENSOR, None),
    "value_int": (onnx.AttributeProto.INT, np.int64),
    "value_ints": (onnx.AttributeProto.INTS, np.int64),
    "value_float": (onnx.AttributeProto.FLOAT, np.float32),
    "value_floats": (onnx.AttributeProto.FLOATS, np.float32),
}
"""A Constant's value attributes, their attribute type and the numpy type of the value."""


def _tensor_to_array(source: TensorProto) -> np.ndarray | None:
    dtype = _VALUE_DTYPES.get(source.data_type)
    if source.data_location == TensorProto.EXTERNAL or dtype is None:
        return None
    dims = tuple(source.dims)
    if math.prod(dims) > FOLD_MAX_ELEMENTS:
        return None
    # numpy_helper.to_array is general and slow; these four types are all a shape needs.
    if source.HasField("raw_data"):
        if len(source.raw_data) != math.prod(dims) * dtype.itemsize:
            return None  # bytes that do not fill the dims: unknown, as weights are
        flat = np.frombuffer(source.raw_data, dtype=dtype.newbyteorder("<")).astype(dtype)
    elif source.data_type == TensorProto.INT64:
        flat = np.array(source.int64_data, dtype=dtype)
    elif source.data_type == TensorProto.FLOAT:
        flat = np.array(source.float_data, dtype=dtype)
    else:
        flat = np.array(source.int32_data, dtype=dtype)
    if flat.size != math.prod(dims) or any(d < 0 or d > FOLD_MAX_ELEMENTS for d in dims):
        return None  # data that does not fill its dims (or dims numpy refuses): unknown
    return flat.reshape(dims)


_VALUE_DTYPES: dict[int, np.dtype[Any]] = {
    t: np.dtype(helper.tensor_dtype_to_np_dtype(t)) for t in FOLDABLE_TYPES
}
"""The types a known value may have: those the payload-free parse keeps (``load.wire``)."""


_FLOAT_VALUE_MAX_ELEMENTS = 64
"""A float initializer is a known value up to this many elements. A shape never comes from a
larger one (scales, Range bounds and pads are a scalar or one per axis); the per-channel
weights exporters keep inline (LayerNorm scales, biases) are larger, and reading them made
every layer a node kind of its own (GPT-2 saved with its weights: 154 kinds, not 86)."""


def _known_values(graph: onnx.GraphProto, constants: bool = True) -> KnownValues:
    """Where the value of each initializer and (with ``constants``) Constant output can be
    read, if it is needed. Without, the caller registers Constants as it meets them."""
    return KnownValues(_value_sources(graph, constants))


def _value_sources(graph: onnx.GraphProto, constants: bool = True) -> dict[str, _ValueSource]:
    """``_known_values``' sources: initializers (and Constants) of ``graph`` by name, its
    subgraphs left out."""
    sources: dict[str, _ValueSource] = {}
    for t in graph.initializer:
        readable = t.data_location != TensorProto.EXTERNAL and t.data_type in _VALUE_DTYPES
        small = t.data_type != TensorProto.FLOAT or math.prod(t.dims) <= _FLOAT_VALUE_MAX_ELEMENTS
        if readable and small:
            sources[t.name] = t
    if constants:
        for node in graph.node:
            if node.op_type == "Constant" and node.output:
                sources[node.output[0]] = node
    return sources


_FOLDS_WITH_TYPES = frozenset({"Shape", "Size"})
_FOLDS = frozenset(_FOLD) | _FOLDS_WITH_TYPES | _REFERENCE_FOLDS


def typed_by_value(name: str, old: TensorInfo | None, value: np.ndarray) -> TensorInfo | None:
    """The type a folded value gives its tensor where inference left the shape unknown
    (``old`` None or not concrete), where it agrees with what inference knew (rank, fixed
    dims, element type); else None. A NonZero of a constant (torch's ``as_strided``, written
    as NonZero(ConstantOfShape)) is folded to its indices, but ONNX's inference gives it
    ``[1, ?]``, which left everything after it without a shape: Longformer's attention."""
    if old is not None and old.is_concrete:
        return None
    shape = tuple(int(d) for d in value.shape)
    known = () if old is None or old.shape is None else old.shape
    if known and (
        len(known) != len(shape)
        or any(type(d) is int and d != v for d, v in zip(known, shape, strict=True))
    ):
        return None
    try:
        elem = helper.np_dtype_to_tensor_dtype(value.dtype)
    except (KeyError, TypeError, ValueError):
        return None
    if old is not None and old.elem_type and old.elem_type != elem:
        return None
    return TensorInfo(name, elem, shape)


def typed_outputs(
    typed: tuple[tuple[int, TensorInfo], ...],
    values: Sequence[np.ndarray | None],
    names: Sequence[str],
) -> tuple[tuple[int, TensorInfo], ...]:
    """``typed`` ((output index, type) pairs, as inference gave them), with the type each
    folded value gives an output that inference left without a concrete one
    (``typed_by_value``)."""
    if not any(v is not None for v in values):
        return typed
    found = dict(typed)
    for index, value in enumerate(values):
        if value is not None and index < len(names) and names[index]:
            by_value = typed_by_value("", found.get(index), value)
            if by_value is not None:
                found[index] = by_value
    return tuple(sorted(found.items()))


def _fold_node(
    node: onnx.NodeProto,
    types: MutableMapping[str, TensorInfo],
    values: KnownValues,
    opset: int | None = None,
) -> None:
    """Evaluate ``node`` with numpy if it computes small values from known values."""
    if node.op_type not in _FOLDS or not node.output or node.output[0] in values:
        return
    for name, value in zip(node.output, _fold_values(node, types, values, opset), strict=False):
        if name and value is not None:
            values[name] = value
            typed = typed_by_value(name, types.get(name), value)
            if typed is not None:
                types[name] = typed


def _fold_values(
    node: onnx.NodeProto,
    types: Mapping[str, TensorInfo],
    values: KnownValues,
    opset: int | None = None,
) -> tuple[np.ndarray | None, ...]:
    """The values of ``node``'s outputs, in order, each None unless it is a small one
    computed from known values; () when none is."""
    op_type = node.op_type
    if op_type not in _FOLDS or node.domain not in ("", "ai.onnx"):
        return ()
    results: tuple[np.ndarray | None, ...]
    if op_type == "Shape":
        try:
            results = (_shape_value(node, types),)
        except (TypeError, ValueError, OverflowError):  # start or end not an int
            return ()
    elif op_type == "Size":
        info = types.get(node.input[0]) if node.input else None
        results = (
            np.array(info.numel, dtype=np.int64) if info is not None and info.is_concrete else None,
        )
    else:
        args = [values.get(i) if i else None for i in node.input]
        if any(a is None for a, name in zip(args, node.input, strict=True) if name):
            return ()
        try:
            size = _fold_size(node, args)
            if size is None or size > FOLD_MAX_ELEMENTS:
                return ()  # never materialise what the limit would then throw away
            fast = _FOLD.get(op_type)
            results = (
                (np.asarray(fast(node, args)),) if fast else _reference_fold(node, args, opset)
            )
        except Exception:  # a value we cannot evaluate stays unknown
            return ()
    results = tuple(r if r is not None and r.size <= FOLD_MAX_ELEMENTS else None for r in results)
    return results if any(r is not None for r in results) else ()
