"""The README is the front door (issue 21): at most 400 lines, its links resolve, and the
output it shows is what the commands print now; docs/ is an MkDocs site whose API page
covers the public API. (`mkdocs build --strict` itself runs in .ci/run.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import onnxcost

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"

# A Markdown link to a local file: [text](path) or [text](path#anchor), not a URL.
LINK = re.compile(r"\]\((?!https?://|mailto:|#)([^)\s]+?)(?:#([^)\s]+))?\)")
# A command shown with its real output: "(`COLUMNS=100 onnxcost ...`):" then a fenced block.
SHOWN = re.compile(r"\(`COLUMNS=100 (onnxcost [^`]+)`\):\n\n```\n(.*?)\n```", re.DOTALL)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading (MkDocs' agrees on plain ones; `mkdocs build --strict`
    checks the anchors inside docs/, this test the README's, as GitHub shows it)."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    lines = page.read_text(encoding="utf-8").splitlines()
    return {_slug(line.lstrip("#")) for line in lines if re.match(r"#{1,6} ", line)}


def test_readme_is_at_most_400_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 400, f"README.md has {len(lines)} lines; move detail into docs/"


@pytest.mark.parametrize("page", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_local_links_resolve(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    broken = []
    for target, anchor in LINK.findall(text):
        path = (page.parent / target).resolve()
        if not path.exists():
            broken.append(target)
        elif anchor and page == README and anchor not in _anchors(path):
            broken.append(f"{target}#{anchor}")
    assert broken == []


# A path in the repository named in the text: `onnxcost/shapes/rules.py`, `tests/zoo/`, ...
NAMED_PATH = re.compile(r"(?<![\w/.~-])((?:onnxcost|tests|scripts|models)/[\w./*-]*[\w/*])")


@pytest.mark.parametrize("page", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_named_paths_exist(page: Path) -> None:
    # Modules move (issue 21): a page that names a file names one that is there.
    missing = []
    for named in sorted(set(NAMED_PATH.findall(page.read_text(encoding="utf-8")))):
        path = named.split("::")[0]  # tests/test_x.py::test_name
        found = any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()
        if not found:
            missing.append(named)
    assert missing == []


def test_readme_links_every_docs_page() -> None:
    linked = {Path(t).name for t, _ in LINK.findall(README.read_text(encoding="utf-8"))}
    pages = {p.name for p in DOCS.glob("*.md")}
    assert sorted(pages - linked) == []


def test_mkdocs_nav_lists_every_page() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    listed = set(re.findall(r":\s*([\w-]+\.md)\s*$", config, re.MULTILINE))
    assert sorted(p.name for p in DOCS.glob("*.md")) == sorted(listed)


def test_api_page_documents_every_public_name() -> None:
    blocks = set(re.findall(r"^::: onnxcost\.(\w+)", (DOCS / "api.md").read_text(), re.M))
    public = {name for name in onnxcost.__all__ if not name.startswith("__")}
    assert sorted(public) == sorted(blocks)


def _shown() -> list[tuple[str, str]]:
    return [(" ".join(c.split()), out) for c, out in SHOWN.findall(README.read_text("utf-8"))]


def test_readme_shows_analyze_bench_and_compare() -> None:
    # bench is shown too, but its figures are measured: only these two are replayed below.
    commands = [c.split()[1] for c, _ in _shown()]
    assert commands == ["analyze", "bench", "compare"]


@pytest.mark.parametrize(
    ("command", "shown"),
    [pytest.param(c, out, id=c.split()[1]) for c, out in _shown() if c.split()[1] != "bench"],
)
def test_readme_output_is_current(command: str, shown: str) -> None:
    # As the README's block was made: a pipe 100 columns wide, no colour forced on.
    forced = {"FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"}
    env = {**{k: v for k, v in os.environ.items() if k not in forced}, "COLUMNS": "100"}
    done = subprocess.run(
        [sys.executable, "-m", *command.split()],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    printed = (done.stdout + done.stderr).splitlines()
    assert [line.rstrip() for line in printed] == shown.splitlines()
