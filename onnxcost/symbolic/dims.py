"""A model's symbols: the free dim_params of its graph inputs, and the derived dims
(``past_sequence_length + sequence_length``) computed from them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import onnx

from onnxcost.shapes.derived import (
    _derived_names,
    _dim_params,
    _input_dim_params,
    _standalone,
    derived_value,
)
from onnxcost.shapes.overrides import stated_dims


def model_symbols(
    proto: onnx.ModelProto,
    input_shapes: Mapping[str, Sequence[int]],
    dims: Mapping[str, int],
) -> tuple[str, ...]:
    """The dim_params of the graph inputs, in order of first use, less those fixed by
    ``dims`` or by an ``input_shapes`` entry (``stated_dims``: on every input)."""
    dims = stated_dims(proto.graph, input_shapes, dims)
    out: dict[str, None] = {}
    standalone = _standalone(proto)
    for owner, param in _input_dim_params(proto, input_shapes):
        if param in dims:
            continue
        if param.isidentifier():
            out[param] = None
        else:  # a derived dim such as 'past_seq + seq': the names in it are symbols
            names = _derived_names(param, standalone, owner) or ()
            out.update(dict.fromkeys(n for n in names if n not in dims))
    return tuple(out)


__all__ = [
    "_derived_names",
    "_dim_params",
    "_standalone",
    "derived_value",
    "model_symbols",
    "with_derived",
]


def with_derived(
    proto: onnx.ModelProto,
    input_shapes: Mapping[str, Sequence[int]],
    dims: Mapping[str, int],
) -> dict[str, int]:
    """``dims`` plus the value of every derived input dim whose names they all bind: an
    optimum decoder's attention_mask [batch, 'past_sequence_length + sequence_length'] gets
    the sum, not the default 1. ShapeError where one divides by 0 or leaves a dim's range.
    The symbols an ``input_shapes`` entry sets bind as ``dims`` do (``stated_dims``)."""
    out = dict(dims)
    dims = stated_dims(proto.graph, input_shapes, dims)
    standalone = _standalone(proto)
    for name, param in _input_dim_params(proto, input_shapes):
        if param in out or param.isidentifier():
            continue
        names = _derived_names(param, standalone, name)
        if names is not None and all(n in dims for n in names):
            out[param] = derived_value(name, param, names, dims)
    return out
