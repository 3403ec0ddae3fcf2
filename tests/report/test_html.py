"""The HTML report as text: escaping, no network, size, and the CLI's --format html."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hostile import CLOSE_SCRIPT, IMG, SVG, hostile_model
from typer.testing import CliRunner

import onnxcost
from onnxcost import zoo
from onnxcost.cli.app import app
from onnxcost.compare import compare
from onnxcost.report.html import analysis_html, compare_html, script_json, vega_bundle

pytest.importorskip("jinja2")
pytest.importorskip("vl_convert")


def _data(page: str) -> object:
    m = re.search(r'<script type="application/json" id="onnxcost-data">(.*?)</script>', page, re.S)
    assert m is not None
    return json.loads(m.group(1))


def test_script_json_cannot_close_the_script() -> None:
    value = {"name": CLOSE_SCRIPT + "<!--" + "\u2028"}
    text = script_json(value)
    assert "</" not in text
    assert "<!--" not in text
    assert "\u2028" not in text
    assert json.loads(text) == value


def test_hostile_names_are_text() -> None:
    full = analysis_html(onnxcost.analyze(hostile_model()))
    # The page less the charting library (whose code holds "<svg" of its own).
    page = full.replace(vega_bundle(), "")
    # Nothing a model named survives as markup: only its escaped form is in the page.
    for raw in (IMG, CLOSE_SCRIPT, SVG, "<img", "<svg"):
        assert raw not in page, raw
    assert full.count("</script>") == 3  # the data, the vega bundle, the report's script
    assert "&lt;img src=x onerror=alert(1)&gt;" in page  # the tree's leaf, as text
    data = _data(page)
    assert isinstance(data, dict)
    names = [row[0] for row in data["tables"][0]["rows"]]
    assert IMG in names
    assert f"/blk{CLOSE_SCRIPT}/Relu" in names


def test_page_loads_nothing_from_the_network() -> None:
    page = analysis_html(onnxcost.analyze("resnet18"))
    assert "default-src 'none'" in page
    for pattern in (
        r'src=["\']?https?:',
        r'href=["\']?https?:',
        r"url\(\s*['\"]?https?:",
        "@import",
    ):
        assert not re.search(pattern, page), pattern


def test_page_holds_totals_tree_and_every_node() -> None:
    a = onnxcost.analyze("resnet18")
    page = analysis_html(a)
    assert "1,814,073,344" in page  # ResNet-18's MACs (torchvision: 1.814 GMACs)
    assert "layer1.0 … layer1.1" in page
    data = _data(page)
    assert isinstance(data, dict)
    rows = data["tables"][0]["rows"]
    assert [r[0] for r in rows] == [n.name for n in a.nodes]
    assert sum(r[6] for r in rows) == a.totals.macs
    assert set(data["charts"]) == {"chart-optype"}


def test_ten_thousand_nodes_under_five_megabytes(tmp_path: Path) -> None:
    path = zoo.save("llama", tmp_path / "llama.onnx", weights=False, params={"layers": 58})
    a = onnxcost.analyze(path)
    assert len(a.nodes) >= 10_000
    size = len(analysis_html(a).encode())
    assert size < 5_000_000, size


def test_compare_page_has_findings_and_alignment() -> None:
    c = compare(["resnet18", "resnet50"])
    page = compare_html(c)
    # "A and B: MACs 1,814,073,344 vs 4,089,184,256 (+125.41%) ..." (torchvision: 1.814 / 4.089 G)
    assert "MACs 1,814,073,344 vs 4,089,184,256" in page
    data = _data(page)
    assert isinstance(data, dict)
    assert [t["id"] for t in data["tables"]] == ["align-0"]
    assert len(data["tables"][0]["rows"]) == len(c.alignments[0].pairs)


def test_compare_page_heads_each_section_once() -> None:
    # Keras writes a dense layer as MatMul+Add, torch as Gemm: the extra Adds are listed
    # under one heading, not under the section's heading and again the table's.
    page = compare_html(compare(["models/mlp_keras.onnx", "models/mlp_torch_script.onnx"]))
    assert page.count("Other op types whose counts differ") == 1
    assert 'id="only-in"' in page


def test_cli_html_writes_a_file(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = CliRunner().invoke(app, ["analyze", "mlp", "--format", "html", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("<!DOCTYPE html>")


@pytest.mark.ort
def test_bench_page_has_latency_time_cost_and_roofline() -> None:
    from onnxcost.bench import BenchOptions, run_bench
    from onnxcost.report.html import bench_html

    r = run_bench("mlp", BenchOptions(runs=5, warmup=1, min_seconds=0.0, profile=True))
    assert r.profile is not None
    data = _data(bench_html(r))
    assert isinstance(data, dict)
    assert set(data["charts"]) == {
        "chart-latency",
        "chart-optype",
        "chart-time-cost",
        "chart-roofline",
    }
    latency = data["charts"]["chart-latency"]["data"]["values"]
    assert latency[0] == {"statistic": "min", "ms": r.latency.min_ms}
    (table,) = data["tables"]
    assert [row[0] for row in table["rows"]] == [n.name for n in r.profile.nodes]
    # Each roofline point: FLOPs / bytes and FLOPs / time of its node.
    points = {p["name"]: p for p in data["charts"]["chart-roofline"]["layer"][0]["data"]["values"]}
    for n in r.profile.nodes:
        if n.name in points and n.bytes_total:
            assert points[n.name]["ai"] == n.flops / n.bytes_total


def test_a_page_is_never_written_onto_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from onnxcost.cli.render import emit_page
    from onnxcost.errors import UsageError

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    with pytest.raises(UsageError, match=r"--output report\.html"):
        emit_page(lambda: "<html>", None)


def test_llm_page(tmp_path: Path) -> None:
    out = tmp_path / "llm.html"
    args = ["llm", "gpt2", "-p", "kv_cache=true", "--prompt", "16", "--generate", "4"]
    args += ["--peak-tflops", "1", "--bandwidth-gbs", "50", "-f", "html", "-o", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    page = out.read_text()
    # GPT-2 small's KV cache per token in fp32: 12 layers x 2 x 12 heads x 64 x 4 B = 73,728 B.
    assert "72.00 KiB (73,728 B)" in page
    data = _data(page)
    assert isinstance(data, dict)
    chart = data["charts"]["chart-phases"]
    assert [v["phase"] for v in chart["data"]["values"]] == [
        "prefill",
        "first decode step",
        "last decode step",
    ]
    # The ridge point: 1 TFLOP/s / 50 GB/s = 20 FLOPs per byte.
    assert [layer["data"]["values"] for layer in chart["layer"] if "data" in layer] == [
        [{"ridge": 20.0}]
    ]
    # Drawn, one dot per phase (bars on the log scale drew nothing: they start at 0).
    import vl_convert

    assert vl_convert.vegalite_to_svg(chart).count('aria-roledescription="circle"') == 3


def test_a_symbolic_analysis_page_has_its_formulas() -> None:
    from onnxcost.report.html import analysis_html

    a = onnxcost.analyze("mlp", symbolic=True)
    page = analysis_html(a)
    assert "<h2>Formulas</h2>" in page
    # 784 -> 128 -> 32 -> 10 by default: (784·128 + 128·32 + 32·10)·batch
    # = (100,352 + 4,096 + 320)·batch = 104,768·batch MACs
    assert '<tr><th>MACs</th><td class="formula">104,768·batch</td></tr>' in page
    assert "<h2>Formulas</h2>" not in analysis_html(onnxcost.analyze("mlp"))
