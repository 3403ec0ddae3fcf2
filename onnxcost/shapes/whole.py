"""ONNX's shape inference of a whole model (``infer``'s route for models with subgraphs or
local functions): what it needs before (weights detached, last inference cleared), the types
it leaves in a graph, and where it left one unknown."""

from __future__ import annotations

import math
from collections.abc import Mapping, MutableMapping

import onnx
from onnx import TensorProto

from onnxcost.load.graph import iter_graphs
from onnxcost.load.model import VIRTUAL_LOCATION_PREFIX
from onnxcost.load.tensors import TensorInfo, is_tensor_type
from onnxcost.load.wire import FOLD_MAX_ELEMENTS
from onnxcost.shapes.overrides import shape_of

_STRIP_BYTES = 4096
"""Embedded initializers above this size are detached before inference (only dims matter)."""

_FOLDABLE_TYPES = frozenset({TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL})
"""Integer tensors that may carry shapes; their data is kept for folding whatever its size."""


def _detach_large_initializers(graph: onnx.GraphProto) -> None:
    """Drop embedded weight bytes (inference needs dims only) so inference copies less.

    Integer and bool tensors small enough to fold keep their data: they may be shapes.
    """
    for t in graph.initializer:
        if t.data_location == TensorProto.EXTERNAL or t.ByteSize() <= _STRIP_BYTES:
            continue
        if t.data_type in _FOLDABLE_TYPES and math.prod(t.dims) <= FOLD_MAX_ELEMENTS:
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


def _clear_inferred(graph: onnx.GraphProto) -> None:
    for _scope, g in iter_graphs(graph):
        g.ClearField("value_info")
    for vi in graph.output:
        if vi.type.HasField("tensor_type"):
            vi.type.tensor_type.ClearField("shape")


def _collect_types(
    g: onnx.GraphProto, types: MutableMapping[str, TensorInfo], *, inferred: bool = True
) -> None:
    """The types ``g`` declares and inference wrote into it (inputs, outputs, value_info),
    its initializers' and its Constants', its subgraphs left out. Without ``inferred``, its
    inputs', initializers' and Constants' only: ONNX's inference inside a body is not read
    (``_propagate_bodies``)."""
    # Many tensors share a type (every layer's [1, 128, 4096] fp16): parse each type once.
    parsed: dict[bytes, TensorInfo] = {}
    for vi in (*g.input, *g.output, *g.value_info) if inferred else g.input:
        if not is_tensor_type(vi.type):
            continue  # a sequence or map: no tensor's shape or bytes
        key = vi.type.SerializeToString()
        info = parsed.get(key)
        if info is None:
            info = parsed[key] = TensorInfo("", *shape_of(vi.type))
        name = vi.name
        old = types.get(name)
        if old is None or (info.shape is not None and (old.shape is None or not old.is_concrete)):
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
