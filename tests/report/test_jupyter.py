"""What a notebook shows: a one-line repr, and a summary with an op-type chart as HTML."""

from __future__ import annotations

import pytest
from hostile import IMG, hostile_model

import onnxcost
from onnxcost.compare import compare

pytest.importorskip("vl_convert")


def test_analysis_repr_is_one_short_line() -> None:
    a = onnxcost.analyze("resnet18")
    text = repr(a)
    assert "\n" not in text
    assert len(text) < 200
    # torchvision's ResNet-18: 1,814,073,344 MACs, 11,689,512 params, 69 nodes in this export.
    assert text == (
        "Analysis('resnet18', nodes=69, macs=1814073344, flops=3642762152, params=11689512, "
        "warnings=1)"
    )


def test_analysis_html_has_totals_and_chart() -> None:
    html = onnxcost.analyze("resnet18")._repr_html_()
    assert "1,814,073,344" in html
    assert "<svg" in html
    assert "FLOPs by op type" in html


def test_hostile_names_are_escaped_in_the_notebook() -> None:
    html = onnxcost.analyze(hostile_model())._repr_html_()
    assert IMG not in html
    assert "<img" not in html


def test_comparison_repr_and_html() -> None:
    c = compare(["resnet18", "resnet50"])
    assert repr(c) == f"Comparison(A='resnet18', B='resnet50', findings={len(c.findings)})"
    html = c._repr_html_()
    # MACs side by side: 1.81 G (torchvision 1.814) | 4.09 G (torchvision 4.089).
    assert "1.81 G | 4.09 G" in html
    assert "<svg" in html


@pytest.mark.ort
def test_bench_repr_and_html() -> None:
    from onnxcost.bench import BenchOptions, run_bench

    r = run_bench("mlp", BenchOptions(runs=3, warmup=0, min_seconds=0.0, profile=True))
    text = repr(r)
    assert "\n" not in text
    assert text.startswith("BenchResult('mlp', provider='CPUExecutionProvider', median_ms=")
    html = r._repr_html_()
    assert f"{r.latency.median_ms:.3f} ms" in html
    assert "<svg" in html
