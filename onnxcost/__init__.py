"""onnxcost: what an ONNX model costs, counted and measured.

``analyze`` and ``Analysis`` are imported on first use (a module ``__getattr__``), so that
``import onnxcost`` (and ``onnxcost --version``) does not load onnx and numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from onnxcost import _display
from onnxcost._version import __version__
from onnxcost.errors import OnnxcostError

if TYPE_CHECKING:
    from onnxcost.analysis.result import Analysis
    from onnxcost.api import analyze

__all__ = ["Analysis", "OnnxcostError", "__version__", "analyze"]

_LAZY = {"Analysis": "onnxcost.analysis.result", "analyze": "onnxcost.api"}


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


def _html(result: object) -> str:
    """A result's ``_repr_html_`` (Jupyter), drawn by the HTML report."""
    from onnxcost.report.html import snippet

    return snippet(result)


_display.install(_html)
