"""The HTML page builder: the Jinja environment, the inline assets and vega bundle, the data
scripts read, and the charts and snippets every page view shares (``report.html``)."""

from __future__ import annotations

import functools
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onnxcost import units
from onnxcost._version import __version__
from onnxcost.analysis.records import jsonable
from onnxcost.errors import OnnxcostError
from onnxcost.report.writers.html import to_html

if TYPE_CHECKING:
    import jinja2


VEGA_LITE_SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"
"""Names the Vega-Lite version of each spec; vega-embed reads it and never fetches it."""

_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_GLOBALS = "window.vegaEmbed = vegaEmbed; window.vega = vega; window.vegaLite = vegaLite;"
"""The bundle's entry point: the three libraries as globals for the report's own script."""


class HtmlUnavailableError(OnnxcostError):
    """The optional packages for --format html are not installed."""


def script_json(data: object) -> str:
    """``data`` as JSON safe inside ``<script>``: no ``</script>``, ``<!--`` or line separators."""
    try:
        text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    except TypeError:  # bytes: a name that is not UTF-8, written escaped
        text = json.dumps(jsonable(data), separators=(",", ":"), allow_nan=False)
    for raw, escaped in _JSON_ESCAPES.items():
        text = text.replace(raw, escaped)
    return text


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "onnxcost"


@functools.cache
def vega_bundle() -> str:
    """vega, vega-lite and vega-embed as one script (from vl-convert-python), cached on disk."""
    try:
        import vl_convert
    except ImportError as e:
        raise HtmlUnavailableError(
            "--format html needs vl-convert-python and jinja2: pip install 'onnxcost[html]'"
        ) from e
    versions = f"vega{vl_convert.get_vega_version()}-embed{vl_convert.get_vega_embed_version()}"
    path = _cache_dir() / f"vega-bundle-{versions}.js"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        pass
    text: str = vl_convert.javascript_bundle(_GLOBALS)
    # A "</script" inside the bundle would end the inline script; in JavaScript "<\/" is "</".
    text = text.replace("</script", "<\\/script").replace("<!--", "<\\!--")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "w", dir=path.parent, delete=False, suffix=".tmp", encoding="utf-8"
        ) as f:
            f.write(text)
        os.replace(f.name, path)
    except OSError:
        pass  # no cache: the next report bundles again
    return text


@functools.cache
def jinja_env() -> jinja2.Environment:
    try:
        import jinja2
    except ImportError as e:
        raise HtmlUnavailableError(
            "--format html needs jinja2 and vl-convert-python: pip install 'onnxcost[html]'"
        ) from e
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("onnxcost.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["count"] = units.count
    env.filters["nbytes"] = units.nbytes
    env.filters["html_table"] = to_html
    return env


def asset(name: str) -> str:
    return (resources.files("onnxcost.report") / "templates" / name).read_text(encoding="utf-8")


def page(template: str, *, title: str, what: str, data: Mapping[str, Any], **context: Any) -> str:
    env = jinja_env()  # first: it says which extra to install when jinja2 is missing
    from markupsafe import Markup  # jinja2's own dependency

    return env.get_template(template).render(
        title=title,
        what=what,
        version=__version__,
        css=Markup(asset("report.css")),
        js=Markup(asset("report.js")),
        vega=Markup(vega_bundle()),
        data=Markup(script_json(data)),
        **context,
    )


def op_label(op_type: str, domain: str) -> str:
    return op_type if not domain else f"{domain}::{op_type}"


def op_type_chart(rows: Sequence[Mapping[str, Any]], metrics: Sequence[str]) -> dict[str, Any]:
    """A horizontal bar per op type, the metric chosen from a drop-down (Vega-Lite)."""
    return {
        "$schema": VEGA_LITE_SCHEMA,
        "width": "container",
        "data": {"values": list(rows)},
        "params": [
            {
                "name": "show",
                "value": metrics[0],
                "bind": {"input": "select", "options": list(metrics), "name": "metric "},
            }
        ],
        "transform": [
            {"fold": list(metrics), "as": ["metric", "value"]},
            {"filter": "datum.metric == show && datum.value > 0"},
            {"joinaggregate": [{"op": "sum", "field": "value", "as": "total"}]},
            {"calculate": "datum.total ? datum.value / datum.total : 0", "as": "share"},
        ],
        "height": {"step": 18},
        "mark": {"type": "bar", "tooltip": True},
        "encoding": {
            "y": {"field": "op", "type": "nominal", "sort": "-x", "title": None},
            "x": {
                "field": "value",
                "type": "quantitative",
                "title": None,
                "axis": {"format": "~s", "tickCount": 6},
            },
            "tooltip": [
                {"field": "op", "title": "op type"},
                {"field": "metric"},
                {"field": "value", "format": ",d"},
                {"field": "share", "format": ".2%"},
            ],
        },
    }


def static_svg(spec: dict[str, Any]) -> str:
    """A static SVG of a Vega-Lite spec (vl-convert; its text is escaped by Vega's renderer)."""
    try:
        import vl_convert
    except ImportError as e:
        raise HtmlUnavailableError(
            "charts need vl-convert-python: pip install 'onnxcost[html]'"
        ) from e
    svg: str = vl_convert.vegalite_to_svg(spec)
    return svg


def bars(rows: Sequence[Mapping[str, Any]], value: str, title: str, color: str = "") -> str:
    """A static horizontal bar chart of ``rows`` ({"op", value[, "model"]}), largest first."""
    spec: dict[str, Any] = {
        "$schema": VEGA_LITE_SCHEMA,
        "width": 520,
        "height": {"step": 16},
        "data": {"values": [r for r in rows if r[value]]},
        "mark": "bar",
        "encoding": {
            "y": {"field": "op", "type": "nominal", "sort": "-x", "title": None},
            "x": {
                "field": value,
                "type": "quantitative",
                "title": title,
                "axis": {"format": "~s", "tickCount": 6},
            },
        },
    }
    if color:
        spec["encoding"]["yOffset"] = {"field": color}
        spec["encoding"]["color"] = {"field": color, "title": None}
        spec["encoding"]["y"]["sort"] = None
    return static_svg(spec)


def snippet_page(
    heading: str, rows: Sequence[tuple[str, str, str]], svg: str, note: str = ""
) -> str:
    from markupsafe import Markup

    return (
        jinja_env()
        .get_template("snippet.html.j2")
        .render(heading=heading, rows=rows, svg=Markup(svg) if svg else "", note=note)
    )
