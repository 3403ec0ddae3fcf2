"""``sweep --report results.jsonl -f html``: a chart per metric above its table, the values the
rows hold; and in a real headless Chromium, each chart drawn (skipped without one)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import cli

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _analysis(macs: int, flops: int) -> dict[str, Any]:
    return {"schema": "onnxcost.analysis/1", "totals": {"macs": macs, "flops": flops}}


# Hand-made rows: MLP 784-128-32-10 has 784*128 + 128*32 + 32*10 = 104,768 MACs per sample
# (x8 = 838,144); the FLOPs here are 2 x MACs, a figure of the test's, not the tool's.
ROWS = [
    {"cell": {"model": "mlp", "dim": "batch=1"}, "status": "ok", "result": _analysis(104_768, 209_536)},
    {"cell": {"model": "mlp", "dim": "batch=8"}, "status": "ok", "result": _analysis(838_144, 1_676_288)},
    {"cell": {"model": "big", "dim": "batch=1"}, "status": "ok", "result": _analysis(7, 14)},
    {"cell": {"model": "big", "dim": "batch=8"}, "status": "timeout", "result": None,
     "reason": "still running after timeout_s=1: killed"},
]  # fmt: skip


def _page(tmp_path: Path) -> Path:
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    r = cli("sweep", "--report", "r.jsonl", "-f", "html", "-o", "sweep.html",
            "--metric", "macs", "--metric", "flops", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return tmp_path / "sweep.html"


def test_html_has_one_chart_per_metric_with_the_rows_values(tmp_path: Path) -> None:
    html = _page(tmp_path).read_text(encoding="utf-8")
    assert re.findall(r'<div class="chart" id="([^"]+)"></div>', html) == ["chart-0", "chart-1"]
    data = re.search(r'<script type="application/json" id="onnxcost-data">(.*?)</script>', html)
    assert data is not None
    charts = json.loads(data.group(1))["charts"]
    assert sorted(charts) == ["chart-0", "chart-1"]

    def bars(spec: dict[str, Any]) -> list[tuple[str, str, int]]:
        return [(v["model"], v["point"], v["value"]) for v in spec["data"]["values"]]

    # The timed-out cell has no bar; the table shows its status, the failures its reason.
    assert charts["chart-0"]["encoding"]["x"]["title"] == "macs"
    assert bars(charts["chart-0"]) == [
        ("big", "batch=1", 7), ("mlp", "batch=1", 104_768), ("mlp", "batch=8", 838_144)
    ]  # fmt: skip
    assert charts["chart-1"]["encoding"]["x"]["title"] == "flops"
    assert bars(charts["chart-1"]) == [
        ("big", "batch=1", 14), ("mlp", "batch=1", 209_536), ("mlp", "batch=8", 1_676_288)
    ]  # fmt: skip
    assert "Cells that did not finish" in html
    assert "still running after timeout_s=1: killed" in html


@pytest.mark.browser
def test_html_charts_are_drawn_in_chromium(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH (apt-get install chromium)")
    url = _page(tmp_path).as_uri()
    requests: list[str] = []
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"],
        )
        try:
            page = browser.new_page()
            page.on("request", lambda r: requests.append(r.url))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url)
            page.wait_for_selector("body[data-ready='1']", timeout=20_000)
            # One SVG per chart; 3 bars in each (the timed-out cell has none).
            for chart in ("#chart-0", "#chart-1"):
                assert page.locator(f"{chart} svg").count() == 1
                assert page.locator(f"{chart} svg .mark-rect path").count() == 3
        finally:
            browser.close()
    assert requests == [url]  # nothing but the page itself
    assert errors == []
