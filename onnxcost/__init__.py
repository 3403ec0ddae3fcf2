"""onnxcost: what an ONNX model costs, counted and measured.

``analyze`` and ``Analysis`` are imported on first use (a module ``__getattr__``), so that
``import onnxcost`` (and ``onnxcost --version``) does not load onnx and numpy.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from onnxcost.errors import OnnxcostError

__version__ = "0.1.0"

if TYPE_CHECKING:
    from onnxcost.analyze import Analysis, analyze

__all__ = ["Analysis", "OnnxcostError", "__version__", "analyze"]

_LAZY = {"Analysis": "onnxcost.analyze", "analyze": "onnxcost.analyze"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'onnxcost' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """Importing the submodule ``onnxcost.analyze`` sets the package's attribute ``analyze``
    to that module; the public name is the function, as when it was imported eagerly."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "analyze" and isinstance(value, types.ModuleType):
            value = value.analyze
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
