"""Shapes: user overrides, ONNX shape inference, and concrete evaluation (numpy) of
shape-computing sub-graphs (Shape, Gather, Concat, Slice, Range, Where, ...).

The per-op shape logic is always ONNX's own; we feed it the values it cannot compute
itself (a folded ``Where``, ``Range`` or ``Equal`` on shapes). Two routes, same shapes:

- a graph without subgraphs is walked once in topological order: each node is folded and
  inferred by ONNX's per-node inference, once per distinct (op, attributes, input types,
  input values), so the repeated layers of a model cost a lookup each (``_per_node``);
- a model with If/Loop/Scan bodies goes through ONNX's whole-graph inference with data
  propagation, then the same per-node pass wherever a shape is still unknown.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxcost.errors import ShapeError, UsageError
from onnxcost.load.graph import DEFAULT_DOMAINS, GraphView, iter_graphs
from onnxcost.load.model import VIRTUAL_LOCATION_PREFIX
from onnxcost.load.tensors import SUBGRAPH_OPS, Shape, TensorInfo, name_text
from onnxcost.shapes.rules import has_rule, rule_outputs
from onnxcost.units import shape_text

_STRIP_BYTES = 4096
"""Embedded initializers above this size are detached before inference (only dims matter)."""
_FOLD_MAX_ELEMENTS = 1 << 16
"""Shape sub-graphs fold only values at most this large: shapes, not activations."""

_FOLDABLE_TYPES = frozenset({TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL})
"""Integer tensors that may carry shapes; their data is kept for folding whatever its size."""

_DIMS_RE = re.compile(r"^\s*([0-9]+\s*(?:[x,]\s*[0-9]+\s*)*)?$")
_MAX_DIM = 2**62
"""The largest dim a flag may set: ONNX stores dims as int64, and products must stay sane."""


def parse_input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``'input=1x3x224x224'`` (or ``input:1,3,224,224``) -> ``('input', (1, 3, 224, 224))``."""
    name, sep, dims = text.rpartition("=") if "=" in text else text.rpartition(":")
    if not sep or not name or not _DIMS_RE.match(dims):
        raise UsageError(
            f"--input-shape {text!r} is not NAME=DIMS; write it like input=1x3x224x224 (a scalar: NAME=)"
        )
    parts = re.split(r"[x,]", dims.replace(" ", "")) if dims.strip() else []
    if any(len(d) > 19 for d in parts):  # int() of thousands of digits is slow, then refused
        shown = text if len(text) <= 60 else text[:60] + "..."
        raise UsageError(f"--input-shape {shown!r}: a dim is larger than 2**62; pass a real size")
    values = tuple(int(d) for d in parts)
    if any(v < 0 for v in values):
        raise UsageError(f"--input-shape {text!r}: every dim must be an integer >= 0")
    if any(v > _MAX_DIM for v in values):
        raise UsageError(f"--input-shape {text!r}: a dim is larger than 2**62; pass a real size")
    return name.strip(), values


def parse_dim(text: str) -> tuple[str, int]:
    """``'batch=8'`` -> ``('batch', 8)``. N may be 0: ``past_seq=0`` is an empty KV cache."""
    name, sep, value = text.partition("=")
    # [0-9], not str.isdigit: that accepts superscripts such as '²', which int() refuses.
    if not sep or not name.strip() or not re.fullmatch(r"[0-9]+", value.strip()):
        raise UsageError(
            f"--dim {text!r} is not SYMBOL=N with N an integer >= 0; e.g. --dim batch=8"
        )
    if len(value.strip()) > 19 or int(value) > _MAX_DIM:
        raise UsageError(f"--dim {text!r}: N must be between 0 and 2**62; e.g. --dim batch=8")
    return name.strip(), int(value)


def shape_of(t: onnx.TypeProto) -> tuple[int, Shape | None]:
    """(elem_type, shape) of a tensor type; shape None when the rank is unknown."""
    if not t.HasField("tensor_type"):
        return 0, None
    tt = t.tensor_type
    if not tt.HasField("shape"):
        return tt.elem_type, None
    dims: list[int | str | None] = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            dims.append(d.dim_value)
        elif d.HasField("dim_param"):
            dims.append(dim_param(d))
        else:
            dims.append(None)
    return tt.elem_type, tuple(dims)


def dim_param(d: onnx.TensorShapeProto.Dimension) -> str:
    """A dim's symbol as text: protobuf hands out one that is not UTF-8 as bytes (shown \\xff)."""
    name: str | bytes = d.dim_param
    return name.decode("utf-8", "backslashreplace") if isinstance(name, bytes) else name


@dataclass
class ShapeResult:
    model: onnx.ModelProto
    """The model inferred: a copy with value_info (whole-graph route), or the model itself
    (per-node route). Its nodes are the input model's, in the same order."""
    types: dict[str, TensorInfo]
    """Every tensor of the model and its subgraphs: name -> element type and shape."""
    values: KnownValues
    """Small tensors whose values are known (shape sub-graphs, int constants)."""
    warnings: list[str] = field(default_factory=list)
    kinds: tuple[int, ...] = ()
    """Per node of the view's order, on the per-node route: a number shared by the nodes
    with the same op, attributes, and input and output types, which therefore cost the
    same; -1 where no such sharing is known. Empty on the whole-graph route."""


def _set_dims(vi: onnx.ValueInfoProto, dims: Sequence[int]) -> None:
    shape = vi.type.tensor_type.shape
    shape.ClearField("dim")
    for d in dims:
        shape.dim.add().dim_value = d


def _check_dim_value(value: object, flag: str) -> None:
    """ShapeError unless ``value`` is an integer from 0 to 2**62 (what a flag may set: ONNX
    stores dims as int64). The API takes any mapping, so its values are checked here."""
    try:
        if isinstance(value, bool):
            raise TypeError
        v = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ShapeError(
            f"{flag}: dim {value!r:.40} is not an integer; pass whole numbers from 0 to 2**62"
        ) from None
    if not 0 <= v <= _MAX_DIM:
        shown = v if v.bit_length() <= 64 else "past int64"
        raise ShapeError(
            f"{flag}: dim {shown} is out of range; every dim must be an integer from 0 to 2**62 "
            f"(ONNX stores dims as int64): pass a real size"
        )


def _apply_overrides(
    graph: onnx.GraphProto,
    input_shapes: Mapping[str, Sequence[int]],
    dims: Mapping[str, int],
    warnings: list[str],
    allow_reshape: bool = False,
) -> dict[str, int]:
    """Fix every input dim; returns the value each symbolic dim name was given.

    An ``input_shapes`` entry must keep the input's rank, and (unless ``allow_reshape``) every
    dim the model fixes (a dim_value > 0); symbolic and unknown dims take any value. A symbol
    an ``input_shapes`` entry sets (``input_ids=2x16`` on [batch, seq]) is given that value as
    ``--dim`` would give it, where no ``--dim`` names it and no other entry gives it another:
    the model's declared shapes in those symbols then resolve alike, whichever flag said it."""
    for name, shape in input_shapes.items():
        for v in shape:
            _check_dim_value(v, f"--input-shape {name_text(name)}=...")
    for sym, v in dims.items():
        _check_dim_value(v, f"--dim {sym}=...")
    init_names = {t.name for t in graph.initializer}
    inputs = [vi for vi in graph.input if vi.name not in init_names]
    names = [vi.name for vi in inputs]
    for name in input_shapes:
        if name not in names:
            raise ShapeError(
                f"--input-shape names {name!r}, but the model's inputs are: {', '.join(names) or '(none)'}"
            )
    symbols = {
        dim_param(d)
        for vi in inputs
        for d in vi.type.tensor_type.shape.dim
        if d.HasField("dim_param")
    }
    for sym in dims:
        if sym not in symbols:
            raise ShapeError(
                f"--dim {sym}=... matches no symbolic dim of the inputs; the model's symbols are: "
                f"{', '.join(sorted(symbols)) or '(none: every dim is fixed; use --input-shape)'}"
            )
    defaulted: dict[str, list[str]] = {}
    applied: dict[str, int] = {}
    stated: dict[str, set[int]] = {}
    """Symbol -> the values ``input_shapes`` entries give it."""
    for vi in inputs:
        if not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        name = name_text(vi.name)  # bytes where it is not UTF-8: messages and sorting need text
        if vi.name in input_shapes:
            new = list(input_shapes[vi.name])
            if tt.HasField("shape") and len(tt.shape.dim) != len(new):
                raise ShapeError(
                    f"--input-shape {name}=... gives {len(new)} dims but input {name!r} has rank "
                    f"{len(tt.shape.dim)} ({_fmt_dims(tt.shape)}); pass {len(tt.shape.dim)} dims"
                )
            if tt.HasField("shape") and not allow_reshape:
                _check_fixed_dims(name, tt.shape, new)
            if tt.HasField("shape"):
                for d, v in zip(tt.shape.dim, new, strict=True):
                    if d.HasField("dim_param"):
                        stated.setdefault(dim_param(d), set()).add(v)
            _set_dims(vi, new)
            continue
        if not tt.HasField("shape"):
            raise ShapeError(
                f"input {name!r} has no shape in the model; pass --input-shape {name}=D1xD2x..."
            )
        for i, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                continue
            sym = dim_param(d) if d.HasField("dim_param") else ""
            if sym and sym in dims:
                d.dim_value = dims[sym]
            else:
                d.dim_value = 1
                defaulted.setdefault(sym or f"{name}[{i}]", []).append(name)
            if sym:
                applied[sym] = d.dim_value
    for sym, values in stated.items():
        if sym not in dims and len(values) == 1:
            if sym in defaulted:
                # Another input also has this symbol, unset: it defaulted to 1 above, so the
                # symbol means two values; the declared shapes in it stay unresolved.
                continue
            applied[sym] = values.pop()
    for sym, users in defaulted.items():
        where = ", ".join(dict.fromkeys(users))
        if sym.endswith("]"):
            warnings.append(
                f"dim {sym} of input '{where}' is unknown; using 1 (set it with --input-shape {where}=...)"
            )
        else:
            warnings.append(
                f"symbolic dim {sym!r} (input {where}) is unset; using 1 (set it with --dim {sym}=N)"
            )
    return applied


def _check_fixed_dims(name: str, declared: onnx.TensorShapeProto, new: Sequence[int]) -> None:
    """Raise if ``new`` changes a dim that ``declared`` fixes (a dim_value > 0)."""
    changed = [
        (i, d.dim_value, v)
        for i, (d, v) in enumerate(zip(declared.dim, new, strict=True))
        if d.HasField("dim_value") and d.dim_value > 0 and d.dim_value != v
    ]
    if not changed:
        return
    listed = "; ".join(f"dim {i}: model {m}, yours {v}" for i, m, v in changed)
    fitting = list(new)
    for i, m, _v in changed:
        fitting[i] = m
    raise ShapeError(
        f"--input-shape {name}={'x'.join(map(str, new))} changes dims that the model fixes for "
        f"input {name!r} ({_fmt_dims(declared)}): {listed}; pass --input-shape "
        f"{name}={'x'.join(map(str, fitting))}, or add --allow-reshape to insist"
    )


def _fmt_dims(shape: onnx.TensorShapeProto) -> str:
    return "x".join(
        str(d.dim_value) if d.HasField("dim_value") else (dim_param(d) or "?") for d in shape.dim
    )


def _detach_large_initializers(graph: onnx.GraphProto) -> None:
    """Drop embedded weight bytes (inference needs dims only) so inference copies less.

    Integer and bool tensors small enough to fold keep their data: they may be shapes.
    """
    for t in graph.initializer:
        if t.data_location == TensorProto.EXTERNAL or t.ByteSize() <= _STRIP_BYTES:
            continue
        if t.data_type in _FOLDABLE_TYPES and math.prod(t.dims) <= _FOLD_MAX_ELEMENTS:
            continue
        for f in (
            "raw_data",
            "float_data",
            "int32_data",
            "int64_data",
            "double_data",
            "uint64_data",
        ):
            t.ClearField(f)
        t.data_location = TensorProto.EXTERNAL
        del t.external_data[:]
        e = t.external_data.add()
        e.key, e.value = "location", VIRTUAL_LOCATION_PREFIX + "detached"


def _declared(graph: onnx.GraphProto) -> dict[str, tuple[int, Shape | None]]:
    """Shapes the model itself declares (value_info, outputs), before inference replaces them."""
    out: dict[str, tuple[int, Shape | None]] = {}
    for _scope, g in iter_graphs(graph):
        out.update(_declared_in(g))
    return out


def _declared_in(graph: onnx.GraphProto) -> dict[str, tuple[int, Shape | None]]:
    """What ``_declared`` gives for one graph, its subgraphs left out."""
    return {vi.name: shape_of(vi.type) for vi in (*graph.value_info, *graph.output)}


def _use_declared(
    types: dict[str, TensorInfo],
    declared: Mapping[str, tuple[int, Shape | None]],
    symbols: Mapping[str, int],
) -> None:
    """Where inference knows nothing (ops onnx has no schema for: com.microsoft, custom), take the
    model's own declared shape, its symbolic dims given the values the inputs were given."""
    for name, (elem, shape) in declared.items():
        old = types.get(name)
        if shape is None or (old is not None and old.is_concrete):
            continue
        dims = tuple(symbols.get(d, d) if isinstance(d, str) else d for d in shape)
        info = TensorInfo(name, elem or (old.elem_type if old is not None else 0), dims)
        if info.is_concrete:
            types[name] = info


def _clear_inferred(graph: onnx.GraphProto) -> None:
    for _scope, g in iter_graphs(graph):
        g.ClearField("value_info")
    for vi in graph.output:
        if vi.type.HasField("tensor_type"):
            vi.type.tensor_type.ClearField("shape")


def _collect_types(model: onnx.ModelProto, types: dict[str, TensorInfo]) -> None:
    # Many tensors share a type (every layer's [1, 128, 4096] fp16): parse each type once.
    parsed: dict[bytes, TensorInfo] = {}
    for _scope, g in iter_graphs(model.graph):
        for vi in (*g.input, *g.output, *g.value_info):
            key = vi.type.SerializeToString()
            info = parsed.get(key)
            if info is None:
                info = parsed[key] = TensorInfo("", *shape_of(vi.type))
            name = vi.name
            old = types.get(name)
            if old is None or (
                info.shape is not None and (old.shape is None or not old.is_concrete)
            ):
                types[name] = info.renamed(name)
        for t in g.initializer:
            types[t.name] = TensorInfo(t.name, t.data_type, tuple(t.dims))
        for node in g.node:
            # Inference types Constant outputs; read the attribute only where it did not.
            if node.op_type == "Constant" and node.output:
                old = types.get(node.output[0])
                if old is None or not old.is_concrete:
                    constant = _constant_info(node)
                    if constant is not None:
                        types[node.output[0]] = constant


def _constant_info(node: onnx.NodeProto) -> TensorInfo | None:
    for a in node.attribute:
        if a.name == "value":
            return TensorInfo(node.output[0], a.t.data_type, tuple(a.t.dims))
        if a.name in ("value_float", "value_int"):
            elem = TensorProto.FLOAT if a.name == "value_float" else TensorProto.INT64
            return TensorInfo(node.output[0], elem, ())
        if a.name in ("value_floats", "value_ints"):
            elem = TensorProto.FLOAT if a.name == "value_floats" else TensorProto.INT64
            n = len(a.floats) if a.name == "value_floats" else len(a.ints)
            return TensorInfo(node.output[0], elem, (n,))
    return None


def _infer(model: onnx.ModelProto, warnings: list[str]) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(
            model, check_type=False, strict_mode=False, data_prop=True
        )
    except Exception as e:  # inference is best effort: unresolved nodes become unknown_shape
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        warnings.append(
            f"ONNX shape inference stopped early ({first}); some nodes may be unknown_shape"
        )
        return model


def _unknown_outputs(graph: onnx.GraphProto, types: Mapping[str, TensorInfo]) -> bool:
    for node in graph.node:
        for o in node.output:
            if o and (o not in types or not types[o].is_concrete):
                return True
    return False


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
) -> np.ndarray:
    """The first output of ``node`` by onnx's reference implementation (``_REFERENCE_FOLDS``)."""
    from onnx.reference.ops import load_op  # imports every reference op: only when needed

    op = load_op("", node.op_type, opset)(
        node, {"log": lambda *_a: None, "opsets": {"": opset}, "verbose": 0, "new_ops": None}
    )
    return np.asarray(op.run(*x)[0])


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


def _attribute_key(node: onnx.NodeProto) -> bytes:
    """A node's attributes as bytes: equal for nodes that differ only in name and tensors."""
    attrs = node.attribute
    if len(attrs) == 1:  # most nodes: half the time of the general join
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
    if math.prod(dims) > _FOLD_MAX_ELEMENTS:
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
    if flat.size != math.prod(dims) or any(d < 0 or d > _FOLD_MAX_ELEMENTS for d in dims):
        return None  # data that does not fill its dims (or dims numpy refuses): unknown
    return flat.reshape(dims)


_VALUE_DTYPES: dict[int, np.dtype[Any]] = {
    TensorProto.INT64: np.dtype(np.int64),
    TensorProto.INT32: np.dtype(np.int32),
    TensorProto.BOOL: np.dtype(np.bool_),
    TensorProto.FLOAT: np.dtype(np.float32),
}


_FLOAT_VALUE_MAX_ELEMENTS = 64
"""A float initializer is a known value up to this many elements. A shape never comes from a
larger one (scales, Range bounds and pads are a scalar or one per axis); the per-channel
weights exporters keep inline (LayerNorm scales, biases) are larger, and reading them made
every layer a node kind of its own (GPT-2 saved with its weights: 154 kinds, not 86)."""


def _known_values(graph: onnx.GraphProto, constants: bool = True) -> KnownValues:
    """Where the value of each initializer and (with ``constants``) Constant output can be
    read, if it is needed. Without, the caller registers Constants as it meets them."""
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
    return KnownValues(sources)


_FOLDS_WITH_TYPES = frozenset({"Shape", "Size"})
_FOLDS = frozenset(_FOLD) | _FOLDS_WITH_TYPES | _REFERENCE_FOLDS


def _fold_node(
    node: onnx.NodeProto,
    types: Mapping[str, TensorInfo],
    values: KnownValues,
    opset: int | None = None,
) -> None:
    """Evaluate ``node`` with numpy if it computes a small value from known values."""
    if node.op_type not in _FOLDS or not node.output or node.output[0] in values:
        return
    result = _fold_value(node, types, values, opset)
    if result is not None:
        values[node.output[0]] = result


def _fold_value(
    node: onnx.NodeProto,
    types: Mapping[str, TensorInfo],
    values: KnownValues,
    opset: int | None = None,
) -> np.ndarray | None:
    """The value of ``node``'s first output, if it is a small one computed from known values."""
    op_type = node.op_type
    if op_type not in _FOLDS or node.domain not in ("", "ai.onnx"):
        return None
    result: np.ndarray | None = None
    if op_type == "Shape":
        try:
            result = _shape_value(node, types)
        except (TypeError, ValueError, OverflowError):  # start or end not an int
            return None
    elif op_type == "Size":
        info = types.get(node.input[0]) if node.input else None
        result = (
            np.array(info.numel, dtype=np.int64) if info is not None and info.is_concrete else None
        )
    else:
        args = [values.get(i) if i else None for i in node.input]
        if any(a is None for a, name in zip(args, node.input, strict=True) if name):
            return None
        try:
            size = _fold_size(node, args)
            if size is None or size > _FOLD_MAX_ELEMENTS:
                return None  # never materialise what the limit would then throw away
            fast = _FOLD.get(op_type)
            result = np.asarray(fast(node, args)) if fast else _reference_fold(node, args, opset)
        except Exception:  # a value we cannot evaluate stays unknown
            return None
    if result is None or result.size > _FOLD_MAX_ELEMENTS:
        return None
    return result


def _type_proto(info: TensorInfo) -> onnx.TypeProto:
    return helper.make_tensor_type_proto(info.elem_type, info.shape)


_Inferred = tuple[tuple[int, int, Shape | None], ...]
"""What per-node inference gave: (output index, element type, shape) per output."""


@dataclass
class _Propagation:
    model: onnx.ModelProto
    types: dict[str, TensorInfo]
    values: KnownValues
    opsets: dict[str, int]
    memo: dict[tuple[object, ...], _Inferred | None] = field(default_factory=dict)
    """Per-node inference results by what determines them (op, attributes, input types and
    values): the repeated layers of a model re-infer once, not once per layer."""
    schemas: dict[tuple[str, int, str], onnx.defs.OpSchema | None] = field(default_factory=dict)
    """(op type, opset, domain) -> its schema, or None where onnx has none."""
    opset_imports: list[onnx.OperatorSetIdProto] = field(default_factory=list)
    failures: list[_NodeFailure] = field(default_factory=list)
    """Nodes whose input shapes, all concrete, contradict each other (ONNX's inference raised)."""

    def __post_init__(self) -> None:
        self.opset_imports = list(self.model.opset_import)

    def schema(self, op_type: str, opset: int, domain: str) -> onnx.defs.OpSchema | None:
        key = (op_type, opset, domain)
        if key not in self.schemas:
            try:
                self.schemas[key] = onnx.defs.get_schema(op_type, opset, domain)
            except (onnx.defs.SchemaError, TypeError):  # TypeError: an opset past int32
                self.schemas[key] = None  # an op onnx does not know (contrib, custom)
        return self.schemas[key]


def _propagate(
    model: onnx.ModelProto,
    types: dict[str, TensorInfo],
    values: KnownValues,
    failures: list[_NodeFailure],
) -> None:
    """One forward pass over the main graph: fold shape values, and re-run ONNX's own
    per-node inference, fed those values, wherever a node's outputs are still unknown.

    A pass in topological order resolves chains that whole-graph inference cannot (each
    GPT-2 layer's mask slice depends on the previous layer's shapes). Nodes whose inference
    fails on concrete shapes are added to ``failures``.
    """
    run = _Propagation(
        model,
        types,
        values,
        {(o.domain or ""): o.version for o in model.opset_import},
        failures=failures,
    )
    for node in model.graph.node:
        op_type = node.op_type
        if op_type in SUBGRAPH_OPS:
            continue
        for o in node.output:
            if o:
                info = types.get(o)
                if info is None or info.known_numel < 0:
                    _infer_node(node, run)
                    break
        _fold_node(node, types, values, run.opsets.get(""))


def _inference_failures(
    model: onnx.ModelProto,
    types: Mapping[str, TensorInfo],
    values: KnownValues,
    failures: list[_NodeFailure],
) -> None:
    """Whole-graph inference drops a node it fails on without a word: ask ONNX's per-node
    inference again, before declared shapes fill the gap, for each main-graph node with an
    untyped output and concrete inputs, and add the nodes whose inputs disagree to ``failures``."""
    run = _Propagation(
        model,
        dict(types),
        values,
        {(o.domain or ""): o.version for o in model.opset_import},
        failures=failures,
    )
    for node in model.graph.node:
        if node.op_type in SUBGRAPH_OPS:
            continue
        outs = [types.get(o) for o in node.output if o]
        if all(t is not None and t.is_concrete for t in outs):
            continue
        ins = [types.get(i) for i in node.input if i]
        if all(t is not None and t.is_concrete for t in ins):
            domain = "" if node.domain == "ai.onnx" else node.domain
            opset = run.opsets.get(domain)
            if opset is not None:
                known = {i: v for i in node.input if i and (v := values.get(i)) is not None}
                _infer_with_onnx(node, domain, opset, known, run)


def _infer_node(node: onnx.NodeProto, run: _Propagation) -> None:
    signature = _signature(
        node, node.op_type, node.domain, node.input, node.output, run.types, run.values
    )
    if signature is not None:
        _apply_inferred(node.output, _inferred(node, signature, run), run.types)


def _signature(
    node: onnx.NodeProto,
    op_type: str,
    domain: str,
    ins: Sequence[str],
    outs: Sequence[str],
    types: Mapping[str, TensorInfo],
    values: KnownValues,
) -> tuple[object, ...] | None:
    """What ONNX's inference of ``node`` and its folding depend on: domain, op, which
    outputs it writes, the type of each input and its value where known, attributes.
    None when an input's rank is unknown."""
    # Optional outputs ('' where omitted) change what inference types.
    key: list[object] = [
        domain,
        op_type,
        tuple([o != "" for o in outs]) if "" in outs else len(outs),
    ]
    folded, sources = values._values, values._sources  # values.get, without a call per input
    for name in ins:
        if not name:
            key.append(None)
            continue
        info = types.get(name)
        if info is None or info.shape is None:
            return None
        value = folded.get(name)
        if value is None and name in sources:
            value = values.get(name)
        key.append(  # the dtype itself, not its .str, which is built anew at each call
            (info.elem_type, info.shape)
            if value is None
            else (info.elem_type, info.shape, value.dtype, value.tobytes())
        )
    key.append(_attribute_key(node))
    return tuple(key)


def _inferred(
    node: onnx.NodeProto, signature: tuple[object, ...], run: _Propagation
) -> _Inferred | None:
    """ONNX's inference of ``node``, run once per signature."""
    if signature in run.memo:
        return run.memo[signature]
    domain = "" if node.domain == "ai.onnx" else node.domain
    opset = run.opsets.get(domain)
    inferred = None
    if opset is not None:
        known = {}
        for name in node.input:
            value = run.values.get(name) if name else None
            if value is not None:
                known[name] = value
        inferred = _infer_with_onnx(node, domain, opset, known, run)
        inferred = _with_rules(node, domain, opset, inferred, run.types)
    run.memo[signature] = inferred
    return inferred


def _with_rules(
    node: onnx.NodeProto,
    domain: str,
    opset: int,
    inferred: _Inferred | None,
    types: Mapping[str, TensorInfo],
) -> _Inferred | None:
    """ONNX's result, completed by onnxcost's own rule (``shape_rules``) for the outputs
    it left untyped: ops ONNX has no schema for, and outputs a schema does not type."""
    if not has_rule(domain, node.op_type):
        return inferred
    done = {index for index, _elem, shape in inferred or () if shape is not None}
    if len(done) == sum(1 for o in node.output if o):
        return inferred
    ins = [types.get(name) if name else None for name in node.input]
    extra = tuple(t for t in rule_outputs(node, domain, opset, ins) if t[0] not in done)
    if not extra:
        return inferred
    kept = tuple(t for t in inferred or () if t[0] in done)
    return kept + extra


def _apply_inferred(
    outs: Sequence[str], inferred: _Inferred | None, types: dict[str, TensorInfo]
) -> None:
    """Type ``outs`` from an inference result, never replacing a concrete type."""
    if inferred is None:
        return
    for index, elem, shape in inferred:
        name = outs[index]
        old = types.get(name)
        if shape is None:
            if old is None and elem:
                types[name] = TensorInfo(name, elem, None)  # its type, of unknown rank
            continue
        if old is not None and old.is_concrete:
            continue
        new = TensorInfo(name, elem or (old.elem_type if old is not None else 0), shape)
        if new.is_concrete or old is None or old.shape is None:
            types[name] = new


@dataclass(frozen=True, slots=True)
class _Seen:
    """What every node of one signature gets: its outputs' types, and its folded value."""

    outputs: tuple[tuple[int, TensorInfo], ...]
    """(output index, type) of each output inference typed, its name left empty."""
    value: np.ndarray | None
    kind: int
    """The signature's number (the position of its first node): ``ShapeResult.kinds``."""
    complete: bool
    """Whether inference typed every output the node writes."""

    @classmethod
    def of(
        cls, node: onnx.NodeProto, signature: tuple[object, ...], run: _Propagation, kind: int
    ) -> _Seen:
        outputs = tuple(
            (index, TensorInfo("", elem, shape))
            for index, elem, shape in _inferred(node, signature, run) or ()
            if shape is not None or elem
        )
        value = (
            _fold_value(node, run.types, run.values, run.opsets.get("")) if node.output else None
        )
        if value is not None:
            value.flags.writeable = False  # shared by every node of this signature
        complete = len(outputs) == sum(1 for o in node.output if o)
        return cls(outputs, value, kind, complete)


def _per_node(
    model: onnx.ModelProto,
    view: GraphView,
    declared: Mapping[str, tuple[int, Shape | None]],
    symbols: Mapping[str, int],
    failures: list[_NodeFailure],
) -> tuple[dict[str, TensorInfo], KnownValues, list[int]]:
    """Infer a graph without subgraphs node by node, in topological order, with ONNX's own
    per-node inference fed every value folded so far.

    Whole-graph inference treats each of a model's 10,000 nodes anew; here a node whose
    op, attributes, input types and input values were all seen before takes the result
    and the folded value of the first such node: a 32-layer decoder infers one layer.
    Constants are typed from their attribute, each distinct attribute read once.

    Also returns each node's kind (``ShapeResult.kinds``): nodes of one kind have the same
    op, attributes, and input and output types, so the same costs.
    """
    graph = model.graph
    types: dict[str, TensorInfo] = {}
    for vi in graph.input:
        types[vi.name] = TensorInfo(vi.name, *shape_of(vi.type))
    for t in graph.initializer:
        types[t.name] = TensorInfo(t.name, t.data_type, tuple(t.dims))
    values = _known_values(graph, constants=False)  # Constants: added as the walk meets them
    run = _Propagation(
        model,
        types,
        values,
        {(o.domain or ""): o.version for o in model.opset_import},
        failures=failures,
    )
    constants: dict[bytes, tuple[TensorInfo | None, int]] = {}
    seen: dict[tuple[object, ...], _Seen] = {}
    kinds: list[int] = []
    # The walk writes the tables of ``values`` directly: a method call per node would cost
    # as much as the rest of the node's bookkeeping.
    folded, sources = values._values, values._sources
    declared_names = declared.keys()
    for node, op_type, domain, ins, outs in zip(
        view.order, view.op_types, view.domains, view.inputs, view.outputs, strict=True
    ):
        kind = -1
        if op_type == "Constant" and len(outs) == 1 and domain in DEFAULT_DOMAINS:
            attrs = _attribute_key(node)
            found_constant = constants.get(attrs)
            if found_constant is None:
                info = _constant_info(node)
                found_constant = constants[attrs] = (info, -1 if info is None else len(kinds))
            info, kind = found_constant
            if info is not None:
                out = outs[0]
                types[out] = info.renamed(out)
                values.add_constant(out, node, attrs)
                kinds.append(kind)
                continue
        signature = _signature(node, op_type, domain, ins, outs, types, values)
        if signature is None:
            _fold_node(node, types, values, run.opsets.get(""))
        else:
            found = seen.get(signature)
            if found is None:
                found = seen[signature] = _Seen.of(node, signature, run, len(kinds))
            if found.complete:
                kind = found.kind
            for index, template in found.outputs:
                name = outs[index]
                if name in types:  # also an input or initializer: the careful merge
                    _apply_inferred(outs, ((index, template.elem_type, template.shape),), types)
                    kind = -1
                else:
                    types[name] = template.renamed(name)
            if found.value is not None and outs[0] not in folded and outs[0] not in sources:
                folded[outs[0]] = found.value
        if not declared_names.isdisjoint(outs):
            for o in outs:
                if o in declared:
                    info = types.get(o)
                    if info is None or not info.is_concrete:
                        _use_declared(types, {o: declared[o]}, symbols)
                        kind = -1
        kinds.append(kind)
    for vi in graph.output:
        if vi.name not in types:  # written by a node nothing could infer: its type only
            types[vi.name] = TensorInfo(vi.name, shape_of(vi.type)[0], None)
    return types, values, kinds


def _infer_with_onnx(
    node: onnx.NodeProto,
    domain: str,
    opset: int,
    known: Mapping[str, np.ndarray],
    run: _Propagation,
) -> _Inferred | None:
    """ONNX's own inference of one node, fed the input values ``known``."""
    schema = run.schema(node.op_type, opset, domain)
    if schema is None:
        return None  # nothing to infer with
    inputs = [i for i in node.input if i]
    in_types = {i: _type_proto(run.types[i]) for i in inputs}
    in_data = {name: numpy_helper.from_array(value, name) for name, value in known.items()}
    try:
        out = onnx.shape_inference.infer_node_outputs(
            schema,
            node,
            in_types,
            in_data,
            opset_imports=run.opset_imports,
            ir_version=run.model.ir_version,
        )
    except onnx.shape_inference.InferenceError as e:
        # Concrete input shapes that ONNX's own rule rejects contradict each other: a fact
        # about the shapes, which ``infer`` reports. Otherwise the node stays unknown_shape.
        why = str(e).strip()
        if why.startswith(_SHAPE_ERROR) and all(run.types[i].is_concrete for i in inputs):
            run.failures.append(
                _NodeFailure(
                    node.name,
                    _op_label(domain, node.op_type),
                    why[len(_SHAPE_ERROR) :].strip(),
                    tuple(shape_text(run.types[i].shape) for i in node.input if i),
                )
            )
        return None
    except Exception:  # best effort: the node stays unknown_shape
        return None
    index = {name: k for k, name in enumerate(node.output) if name}
    return tuple((index[name], *shape_of(tp)) for name, tp in out.items() if name in index)


def infer(
    model: onnx.ModelProto,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    view: GraphView | None = None,
    *,
    allow_reshape: bool = False,
) -> ShapeResult:
    """Resolve every tensor's shape. Modifies ``model`` (the caller's private copy) in place.

    Given ``view``, the main graph's index in topological order, a model without subgraphs
    is inferred node by node (``_per_node``), with ONNX's per-node inference run once per
    distinct node; other models go through ONNX's whole-graph inference, then the same
    per-node inference and folding wherever it left a shape unknown. Both give the same
    shapes (a test checks it); the first is several times faster on repeated layers.

    ``input_shapes`` may not change a dim the model fixes unless ``allow_reshape``. Where the
    shapes given make a main-graph node's concrete input shapes disagree (ONNX's inference
    of the node fails, or a Conv's input channels differ from its weight's), ShapeError names
    the node and the flags, unless the node disagrees as much without any flag (each
    symbolic dim at 1) on the same input shapes: that, like any disagreement without flags,
    is the model's own, and a warning.
    """
    input_shapes, dims = dict(input_shapes or {}), dict(dims or {})
    given = bool(input_shapes or dims)
    pristine = [_copy(vi) for vi in model.graph.input] if given else []
    result, failures = _infer_all(model, input_shapes, dims, view, allow_reshape)
    if not failures:
        return result
    if given:
        own = _own_failures(model, pristine, view)
        caused = [f for f in failures if own.get(f.node) != f.inputs]
        if caused:
            message = _blame(caused, input_shapes, dims, allow_reshape, pristine)
            raise ShapeError(message, node=caused[0].text())
    listed = "; ".join(f.text() for f in failures[:3])
    more = f"; and {len(failures) - 3} more" if len(failures) > 3 else ""
    result.warnings.append(
        f"input shapes disagree at {listed}{more}: the model's declared shapes (with symbolic "
        f"dims left at 1) do not fit there, so counts there and after may be wrong or "
        f"unknown_shape; set the dims with --input-shape/--dim, or check the model"
    )
    return result


def _infer_all(
    model: onnx.ModelProto,
    input_shapes: Mapping[str, Sequence[int]],
    dims: Mapping[str, int],
    view: GraphView | None,
    allow_reshape: bool,
) -> tuple[ShapeResult, list[_NodeFailure]]:
    """``infer``'s two routes; also the nodes whose concrete input shapes disagree."""
    warnings: list[str] = []
    failures: list[_NodeFailure] = []
    symbols = _apply_overrides(model.graph, input_shapes, dims, warnings, allow_reshape)
    if view is not None and not view.outer_reads and not model.functions:
        declared = _declared_in(model.graph)
        types, values, kinds = _per_node(model, view, declared, symbols, failures)
        checked = [k for k, op_type in enumerate(view.op_types) if op_type in _STATIC_CHECKED]
        nodes = (
            (view.order[k], view.op_types[k], view.domains[k], view.inputs[k]) for k in checked
        )
        failures += _static_failures(nodes, types)
        return ShapeResult(model, types, values, warnings, tuple(kinds)), failures
    declared = _declared(model.graph)
    _detach_large_initializers(model.graph)
    _clear_inferred(model.graph)
    inferred = _infer(model, warnings)
    values = _known_values(inferred.graph)
    types = {}
    _collect_types(inferred, types)
    if _unknown_outputs(inferred.graph, types):
        _inference_failures(inferred, types, values, failures)
        _use_declared(types, declared, symbols)
        _propagate(inferred, types, values, failures)
    main = ((n, n.op_type, n.domain, n.input) for n in inferred.graph.node)
    failures += _static_failures(main, types)
    return ShapeResult(inferred, types, values, warnings), failures


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


def _copy(vi: onnx.ValueInfoProto) -> onnx.ValueInfoProto:
    out = onnx.ValueInfoProto()
    out.CopyFrom(vi)
    return out


def _own_failures(
    model: onnx.ModelProto, pristine: Sequence[onnx.ValueInfoProto], view: GraphView | None
) -> dict[str, tuple[str, ...]]:
    """The nodes that disagree with no shape flag at all (each symbolic dim at 1), and their
    input shapes then. A node that disagrees with the flags is the flags' doing unless it
    disagrees without them on the very same input shapes (the flags do not reach it).
    Run only when some node disagrees with the flags, on a copy."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.graph.input[:]
    copy.graph.input.extend(pristine)
    try:
        _result, failures = _infer_all(copy, {}, {}, view, allow_reshape=False)
    except ShapeError:  # an input the model leaves unshaped: only the flags shape it
        return {}
    return {f.node: f.inputs for f in failures}


def _blame(
    failures: Sequence[_NodeFailure],
    input_shapes: Mapping[str, Sequence[int]],
    dims: Mapping[str, int],
    allow_reshape: bool,
    pristine: Sequence[onnx.ValueInfoProto],
) -> str:
    """The ShapeError message: the first node the flags broke, the flags, what the model says."""
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
    return (
        f"the shapes from {', '.join(flags)} do not fit the model: {failures[0].text()}{more}; "
        f"fix the flags to match the model's inputs"
    )
