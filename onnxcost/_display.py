"""Jupyter's rich display of results, through a hook.

Results (``Analysis``, ``BenchResult``, ``Comparison``) sit in layers below the reports that
draw them, so a result's ``_repr_html_`` asks this module, and the package's ``__init__``,
which stands above every layer, installs the renderer (``onnxcost.report.html.snippet``,
imported on first use). Nothing in the layers imports a report.
"""

from __future__ import annotations

from collections.abc import Callable

_renderer: Callable[[object], str] | None = None


def install(renderer: Callable[[object], str]) -> None:
    """Make ``renderer`` draw every result's ``_repr_html_``."""
    global _renderer
    _renderer = renderer


def html(result: object) -> str:
    """The HTML a notebook shows for ``result``."""
    if _renderer is None:  # only when onnxcost's __init__ did not run, which Python prevents
        raise RuntimeError("onnxcost's display hook is not installed")
    return _renderer(result)
