"""The scale and bias torch's exporters give a norm that has none in torch: no params.

ONNX's InstanceNormalization takes a scale and a bias, one a channel; torch's norms without
an affine transform of their own are written with ones and zeros made up for them:

- ``nn.InstanceNorm2d()`` (``affine=False``, its default: RAFT's feature encoder);
- ``nn.GroupNorm(G, C)``, which both exporters write as an InstanceNormalization over the
  input reshaped to [N, G, -1], scale ones [G] and bias zeros [G], then a Mul by the
  GroupNorm's weight and an Add of its bias, its own params.

So are a LayerNormalization's, for ``nn.LayerNorm(d, bias=False)`` (MPT's, OLMo's: zeros
[d] as its bias, a Constant of each node, from the TorchScript exporter) or
``elementwise_affine=False`` (ones and zeros), where they are Constants: a LayerNorm's own
params are stored, whatever their names.

Counted as stored, they were 2 x C params per InstanceNorm2d and 2 x G per GroupNorm that
torch does not have (a diffusion UNet's GroupNorm(32) layers, RAFT's 1,536 and 2,880), d per
bias-free LayerNorm. Read as no params where the model is torch's (``producer_name``
"pytorch"), a scale is ones or a bias zeros, and it is not named as a param's path (``val_8``,
the dynamo exporter's; a Constant's output, ``/g1/Constant_1_output_0``, the TorchScript
exporter's); an InstanceNormalization's scale and bias both or neither. An
``InstanceNorm2d(affine=True)``'s own ``norm.weight`` and ``norm.bias`` count, ones at init
or not, as does a LayerNorm's. Other producers' norm params count as stored.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import numpy_helper

from onnxcost.load.graph import GraphView
from onnxcost.load.tensors import PARAMETER_PATH

_NORMS = frozenset({"InstanceNormalization", "LayerNormalization"})
_READ = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE})
"""The element types whose ones and zeros are read (torch's norms run in these)."""
_MOST = 1 << 16
"""The most elements read of a scale or bias (a norm's channels)."""


def made_up_norm_params(proto: onnx.ModelProto, view: GraphView) -> frozenset[str]:
    """The stored scales and biases of ``proto``'s main graph (indexed by ``view``) that torch's
    exporter made up for an InstanceNormalization or a LayerNormalization (the module
    docstring)."""
    if proto.producer_name != "pytorch" or _NORMS.isdisjoint(view.op_types):
        return frozenset()
    stored: dict[str, onnx.TensorProto] = {t.name: t for t in proto.graph.initializer}
    found: set[str] = set()
    for k, op in enumerate(view.op_types):
        ins = view.inputs[k]
        if op not in _NORMS or view.domains[k] not in ("", "ai.onnx") or len(ins) < 2:
            continue
        # a LayerNormalization's from a Constant only: its own params are stored, whatever
        # their names (an untrained one's ones and zeros as gamma_1 and beta_2)
        where = {} if op == "LayerNormalization" else stored
        made_up = [  # (scale, bias) where each is one
            len(ins) > i and bool(ins[i]) and not PARAMETER_PATH.match(ins[i])
            and _all(_value(ins[i], where, view), value)
            for i, value in ((1, 1.0), (2, 0.0))
        ]  # fmt: skip
        if op == "InstanceNormalization" and not all(made_up):
            continue  # both or neither: torch's InstanceNorm has both params or none
        found.update(ins[i] for i, yes in zip((1, 2), made_up, strict=True) if yes)
    return frozenset(found)


def _value(
    name: str, stored: dict[str, onnx.TensorProto], view: GraphView
) -> onnx.TensorProto | None:
    """The tensor ``name`` holds: an initializer's, or a Constant's ``value``."""
    return stored[name] if name in stored else view.constant_value(name)


def _all(tensor: onnx.TensorProto | None, value: float) -> bool:
    """Whether ``tensor`` is stored in the file (not as external data), of a float type read,
    and holds ``value`` throughout."""
    if (
        tensor is None
        or tensor.data_type not in _READ
        or tensor.data_location == onnx.TensorProto.EXTERNAL
        or not 0 < math.prod(tensor.dims) <= _MOST
    ):
        return False
    try:
        array = numpy_helper.to_array(tensor)
    except (ValueError, TypeError):  # its data and its dims disagree: a broken file
        return False
    return array.size > 0 and bool(np.all(array == value))


__all__ = ["made_up_norm_params"]
