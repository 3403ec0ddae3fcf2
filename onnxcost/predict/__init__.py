"""Predicted latency on a device: a device file (calibrated here or built in) and a per-node
time model over an analysis.

``device``: the device file (schema ``onnxcost.device/1``) and the built-in devices;
``calibrate``: the measurements that make one (onnxruntime imported inside its functions);
``estimate``: per node max(compute time, memory time) + overhead; ``result``: the
``Prediction`` record (schema ``onnxcost.predict/1``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onnxcost.predict.calibrate import calibrate_device
    from onnxcost.predict.device import (
        BUILTIN,
        Curve,
        Device,
        DeviceError,
        load_device,
        read_device,
    )
    from onnxcost.predict.llm import LlmPrediction, predict_llm
    from onnxcost.predict.result import Prediction
    from onnxcost.predict.run import predict, predict_analysis

_WHERE = {
    "calibrate_device": "calibrate",
    "BUILTIN": "device",
    "Curve": "device",
    "Device": "device",
    "DeviceError": "device",
    "load_device": "device",
    "read_device": "device",
    "LlmPrediction": "llm",
    "predict_llm": "llm",
    "Prediction": "result",
    "predict": "run",
    "predict_analysis": "run",
}
"""Each public name's module, imported at first use: ``onnxcost predict`` loads neither the
calibration nor the llm and bench companions."""


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'onnxcost.predict' has no attribute {name!r}")
    return getattr(importlib.import_module(f"onnxcost.predict.{module}"), name)


__all__ = [
    "BUILTIN",
    "Curve",
    "Device",
    "DeviceError",
    "LlmPrediction",
    "Prediction",
    "calibrate_device",
    "load_device",
    "predict",
    "predict_analysis",
    "predict_llm",
    "read_device",
]
