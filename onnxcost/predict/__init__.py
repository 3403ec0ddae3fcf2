"""Predicted latency on a device: a device file (calibrated here or built in) and a per-node
time model over an analysis.

``device``: the device file (schema ``onnxcost.device/1``) and the built-in devices;
``calibrate``: the measurements that make one (onnxruntime imported inside its functions);
``estimate``: per node max(compute time, memory time) + overhead; ``result``: the
``Prediction`` record (schema ``onnxcost.predict/1``).
"""

from __future__ import annotations

from onnxcost.predict.calibrate import calibrate_device
from onnxcost.predict.device import BUILTIN, Curve, Device, DeviceError, load_device, read_device
from onnxcost.predict.llm import LlmPrediction, predict_llm
from onnxcost.predict.result import Prediction
from onnxcost.predict.run import predict, predict_analysis

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
