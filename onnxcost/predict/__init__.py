"""Predicted latency on a device: a device file (calibrated here or built in) and a per-node
time model over an analysis.

``device``: the device file (schema ``onnxcost.device/1``) and the built-in devices;
``calibrate``: the measurements that make one (onnxruntime imported inside its functions);
``estimate``: per node max(compute time, memory time) + overhead; ``result``: the
``Prediction`` record (schema ``onnxcost.predict/1``).
"""

from __future__ import annotations
