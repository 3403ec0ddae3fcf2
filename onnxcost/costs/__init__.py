"""Per-operator cost formulas, one module per op family, all registered in REGISTRY on import."""

from __future__ import annotations

from onnxcost.costs import (  # noqa: F401  (imported for their registrations)
    attention,
    contrib,
    control_flow,
    conv,
    data_movement,
    elementwise,
    matmul,
    ml,
    normalization,
    pooling,
    quantized,
    recurrent,
    reduction,
)
from onnxcost.costs._context import OpContext, TensorInfo, UnknownShapeError
from onnxcost.costs._registry import REGISTRY, Cost, OpSpec, register, register_zero

__all__ = [
    "REGISTRY",
    "Cost",
    "OpContext",
    "OpSpec",
    "TensorInfo",
    "UnknownShapeError",
    "register",
    "register_zero",
]
