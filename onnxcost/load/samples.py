"""A few elements of a stored weight, read where its data lives, never the whole tensor.

``elements`` reads a tensor's elements at given flat positions, as unsigned integers of its
element size (bit patterns: equal values compare equal, NaNs included): from the tensor's
inline ``raw_data``, from a payload the loader left in the model file (``load.model``:
``onnxcost-virtual:inline``, at its offset), or from an external data file (checked by the
loader to lie inside the model's folder and to be long enough). A file is memory-mapped, so
only the pages that hold the positions asked for are read. Where the data cannot be had (a
built-in model without weights, a typed ``*_data`` field, a sub-byte element type, a model
not read from a file) the answer is None.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Set
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from onnxcost.load.graph import GraphView
from onnxcost.load.model import VIRTUAL_LOCATION_PREFIX
from onnxcost.load.tensors import element_bits

_INLINE = VIRTUAL_LOCATION_PREFIX + "inline"
_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def elements(
    tensor: onnx.TensorProto, positions: np.ndarray, model_path: Path | None
) -> np.ndarray | None:
    """``tensor``'s elements at the flat ``positions`` (each below its element count), as
    unsigned integers of its element size; None where its data cannot be read here."""
    bits = element_bits(tensor.data_type)
    if bits % 8 or bits // 8 not in _UNSIGNED:
        return None
    dtype = np.dtype(_UNSIGNED[bits // 8]).newbyteorder("<")
    numel = 1
    for d in tensor.dims:
        numel *= d
    if tensor.data_location != onnx.TensorProto.EXTERNAL:
        if not tensor.HasField("raw_data") or len(tensor.raw_data) != numel * dtype.itemsize:
            return None
        return np.array(np.frombuffer(tensor.raw_data, dtype=dtype)[positions])
    info = {e.key: e.value for e in tensor.external_data}
    location = info.get("location", "")
    offset, length = info.get("offset", "0"), info.get("length", "")
    if model_path is None or not offset.isdigit():
        return None
    if length and length != str(numel * dtype.itemsize):
        return None  # not the elements one after another (a typed field's varints)
    if location == _INLINE:
        file = model_path
    elif location.startswith(VIRTUAL_LOCATION_PREFIX) or not location:
        return None  # a built-in model's weights, which exist nowhere
    else:
        file = model_path.parent / location
    try:
        data = np.memmap(file, dtype=dtype, mode="r", offset=int(offset), shape=(numel,))
        return np.array(data[positions])
    except (OSError, ValueError):  # gone or shrunk since it was loaded: nothing to compare
        return None


def as_floats(bits: np.ndarray, elem_type: int) -> np.ndarray:
    """Bit patterns (``elements``) of a FLOAT, FLOAT16, BFLOAT16 or DOUBLE tensor as the float
    values they hold."""
    if elem_type == onnx.TensorProto.BFLOAT16:
        return (bits.astype(np.uint32) << 16).view(np.float32)
    floats: dict[int, type[np.floating[Any]]] = {
        onnx.TensorProto.FLOAT: np.float32,
        onnx.TensorProto.FLOAT16: np.float16,
        onnx.TensorProto.DOUBLE: np.float64,
    }
    return bits.view(floats[elem_type])


def stored_tensors(
    proto: onnx.ModelProto, view: GraphView, names: Set[str]
) -> Iterator[tuple[str, onnx.TensorProto]]:
    """The tensors of ``names`` that ``proto``'s main graph (indexed by ``view``) stores:
    initializers, then Constants' values under their outputs' names."""
    for t in proto.graph.initializer:
        if t.name in names:
            yield t.name, t
    for name in names:
        value = view.constant_value(name)
        if value is not None:
            yield name, value


def all_alike(tensor: onnx.TensorProto, model_path: Path | None, samples: int = 4096) -> bool:
    """Whether every element of ``tensor`` holds one value (+0 and -0 as one: a weight a zero
    scale was folded into), read whole up to ``samples`` elements, else ``samples`` of them
    spread over it; False where its data cannot be read here."""
    numel = math.prod(tensor.dims)
    if numel <= samples:
        positions = np.arange(numel)
    else:
        positions = np.linspace(0, numel - 1, samples).astype(np.int64)
    got = elements(tensor, positions, model_path)
    if got is None or not got.size:
        return False
    got = np.where(got << 1 == 0, 0, got)  # (the sign bit alone is -0)
    return bool((got == got[0]).all())


def distinct(values: np.ndarray, most: int) -> int:
    """How many distinct values ``values`` holds, counted up to ``most`` (np.unique would sort
    or hash them all)."""
    rest = values.ravel()
    for seen in range(most):
        if not rest.size:
            return seen
        rest = rest[rest != rest[0]]
    return most


__all__ = ["all_alike", "as_floats", "distinct", "elements", "stored_tensors"]
