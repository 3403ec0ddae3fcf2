"""onnxcost: what an ONNX model costs, counted and measured."""

from __future__ import annotations

__version__ = "0.1.0"

from onnxcost.analyze import Analysis, analyze
from onnxcost.errors import OnnxcostError

__all__ = ["Analysis", "OnnxcostError", "__version__", "analyze"]
