"""The HTML report in a real headless Chromium: what a reader sees, and what it may not run."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hostile import CLOSE_SCRIPT, IMG, MARKUP, hostile_model

import onnxcost
from onnxcost.compare import compare
from onnxcost.llm.cost import llm_report
from onnxcost.report.html import analysis_html, compare_html, llm_html

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api")
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH (apt-get install chromium)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"],
        )
        yield b
        b.close()


class Page:
    """An opened report, with every request, dialog and console error it caused."""

    def __init__(self, browser: Any, html: str, path: Path) -> None:
        path.write_text(html, encoding="utf-8")
        self.url = path.as_uri()
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.page = browser.new_page()
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(self.url)
        self.page.wait_for_selector("body[data-ready='1']", timeout=20_000)


@pytest.fixture(scope="module")
def r18(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> Page:
    """ResNet-18's report, opened once for the tests below (each leaves it as it found it)."""
    html = analysis_html(onnxcost.analyze("resnet18"))
    return Page(browser, html, tmp_path_factory.mktemp("r18") / "r.html")


def test_resnet18_shows_macs_nodes_and_charts(r18: Page) -> None:
    p = r18
    text = p.page.inner_text("body")
    assert "1,814,073,344" in text  # ResNet-18's MACs (torchvision: 1.814 GMACs)
    assert "1.81 G" in text
    assert "/layer1/layer1.0/conv1/Conv" in p.page.inner_text("#node-table")
    # The op-type chart is drawn: an SVG with one bar per op type that has FLOPs.
    assert p.page.locator("#chart-optype svg").count() == 1
    assert p.requests == [p.url]  # nothing but the page itself
    assert p.errors == []


def test_tree_expands(r18: Page) -> None:
    p = r18
    block = p.page.locator('#scope-tree details[data-path="/layer2/layer2.0"]')
    inner = p.page.locator('#scope-tree details[data-path="/layer2/layer2.0/conv1"] > summary')
    assert not inner.is_visible()
    assert not block.evaluate("d => d.open")
    block.locator("summary").first.click()
    assert block.evaluate("d => d.open")
    assert inner.is_visible()
    assert "57.8" in inner.inner_text()  # its MACs: 28 * 28 * 128 * 64 * 9 = 57,802,752
    block.locator("summary").first.click()
    assert not inner.is_visible()


def test_node_table_sorts_and_filters(r18: Page) -> None:
    p = r18
    p.page.fill("#node-table input", "Gemm")
    rows = p.page.locator("#node-table tbody tr")
    assert rows.count() == 1
    assert "/fc/Gemm" in rows.first.inner_text()
    p.page.fill("#node-table input", "")
    p.page.click("#node-table th >> text=MACs")
    first = p.page.locator("#node-table tbody tr").first.inner_text()
    # The 7x7 stem conv, the most MACs of any node: 112 * 112 * 64 * 3 * 49 = 118,013,952.
    assert first.startswith("/conv1/Conv")
    p.page.click("#node-table th >> text=name")  # back to a text order


def test_hostile_names_create_no_element(browser: Any, tmp_path: Path) -> None:
    p = Page(browser, analysis_html(onnxcost.analyze(hostile_model())), tmp_path / "h.html")
    assert p.page.locator("img").count() == 0
    assert p.page.locator("main svg").count() == p.page.locator(".chart svg").count()
    assert p.page.evaluate("window.pwned === undefined")
    assert p.dialogs == []
    assert p.errors == []
    table = p.page.inner_text("#node-table")
    for name in (IMG, f"/blk{CLOSE_SCRIPT}/Relu", MARKUP):
        assert name in table


def test_compare_page_renders(browser: Any, tmp_path: Path) -> None:
    p = Page(browser, compare_html(compare(["resnet18", "resnet50"])), tmp_path / "c.html")
    assert p.page.locator("#chart-optype svg").count() == 1
    assert "only in B" in p.page.inner_text("#align-0")
    assert p.requests == [p.url]
    assert p.errors == []


def test_llm_page_draws_a_dot_per_phase(browser: Any, tmp_path: Path) -> None:
    report = llm_report("gpt2", prompt=16, generate=4, params={"kv_cache": "true", "layers": 2})
    p = Page(browser, llm_html(report), tmp_path / "l.html")
    # prefill, the first and the last decode step: three dots on the log axis
    assert p.page.locator("#chart-phases svg path[aria-roledescription='circle']").count() == 3
    assert p.requests == [p.url]
    assert p.errors == []
