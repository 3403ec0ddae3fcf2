"""--format html without the html extra: one line saying what to install, no traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from onnxcost.cli.app import app
from onnxcost.report.html import page as html


def test_html_without_jinja2_says_which_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A base install (pip install onnxcost) has neither jinja2 nor its markupsafe.
    monkeypatch.setitem(sys.modules, "jinja2", None)
    monkeypatch.setitem(sys.modules, "markupsafe", None)
    html.jinja_env.cache_clear()
    try:
        r = CliRunner().invoke(
            app, ["analyze", "mlp", "-f", "html", "-o", str(tmp_path / "r.html")]
        )
    finally:
        html.jinja_env.cache_clear()
    assert r.exit_code == 1
    assert "pip install 'onnxcost[html]'" in r.output
    assert "Traceback" not in r.output
    assert not (tmp_path / "r.html").exists()
