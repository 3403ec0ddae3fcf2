"""The one exception family onnxcost raises.

Every message says what went wrong and what to do next; the CLI prints it on one
line and exits with code 1.
"""

from __future__ import annotations


class OnnxcostError(Exception):
    """Base of every error onnxcost raises on purpose."""


class ModelLoadError(OnnxcostError):
    """The model file is missing, unreadable, not ONNX, or its external data is unusable."""


class GraphError(OnnxcostError):
    """The graph is malformed: a cycle, a dangling input, a duplicate output name."""


class ShapeError(OnnxcostError):
    """A shape flag is malformed or does not match the model."""

    def __init__(self, message: str, *, node: str = "") -> None:
        super().__init__(message)
        self.node = node
        """Where the shapes break, when a node's inputs disagree: "node 'X' (Op): why"."""


class RegistryError(OnnxcostError):
    """A cost formula was registered twice for the same operator and opset range."""


class ProviderError(OnnxcostError):
    """An execution provider is unavailable or was silently dropped by onnxruntime."""


class BenchError(OnnxcostError):
    """Running the model failed: bad inputs, out of memory, a runtime error."""


class OutputError(OnnxcostError):
    """An output path would destroy an input or a model, or cannot be written."""


class UsageError(OnnxcostError):
    """A flag value is malformed (the CLI maps this to exit code 2)."""
