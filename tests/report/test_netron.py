"""Netron's attachment, checked against the rules of Netron's reader (metadata.Attachment)."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from test_hostile_strings import chain
from typer.testing import CliRunner

import onnxcost
from onnxcost.cli.app import app
from onnxcost.prepare import prepare
from onnxcost.report.netron import NODE_METRICS, attachment, check, node_names

runner = CliRunner()


def _by_target(data: dict[str, object]) -> dict[tuple[str, str], dict[str, object]]:
    out: dict[tuple[str, str], dict[str, object]] = {}
    for e in data["metrics"]:  # type: ignore[attr-defined]
        out.setdefault((e["kind"], e["target"]), {})[e["name"]] = e["value"]
    return out


def test_resnet18_every_node_once_with_numbers() -> None:
    a = onnxcost.analyze("resnet18")
    proto = prepare("resnet18").proto
    names = node_names(proto)
    att = attachment(a, names, graph_name=proto.graph.name)
    assert check(att.data, names) == []
    assert att.left_out == 0
    got = _by_target(att.data)
    nodes = {t: m for (k, t), m in got.items() if k == "node"}
    # Every node of the file, once, with every metric.
    assert sorted(nodes) == sorted(names)
    assert all(set(m) == set(NODE_METRICS) for m in nodes.values())
    # The stem conv: 112 * 112 output pixels * 64 channels * 3 * 7 * 7 = 118,013,952 MACs,
    # and 64 * 3 * 7 * 7 = 9,408 weights.
    assert nodes["/conv1/Conv"]["macs"] == 118_013_952
    assert nodes["/conv1/Conv"]["params"] == 9_408
    assert nodes["/conv1/Conv"]["status"] == "ok"
    # Model and graph totals: torchvision's ResNet-18 has 11,689,512 params, 1.814 GMACs.
    assert got[("model", "")]["macs"] == 1_814_073_344
    assert got[("model", "")]["params"] == 11_689_512
    assert got[("graph", proto.graph.name)]["macs"] == 1_814_073_344


def _named(*names: str) -> onnx.ModelProto:
    model = chain("Relu", names)
    model.graph.name = "main\nsecond line"
    return model


def test_names_netron_cannot_tell_apart_are_left_out() -> None:
    # Netron keys a node by its name up to the first newline: "" matches nothing, "dup" twice
    # and "a\nb" / "a\nc" (both "a") name two nodes each; "ok\nmore" is "ok", one node.
    model = _named("", "dup", "dup", "a\nb", "a\nc", "ok\nmore", "plain")
    names = node_names(model)
    att = attachment(onnxcost.analyze(model), names, graph_name=model.graph.name)
    assert check(att.data, names) == []
    assert att.left_out == 5
    targets = {t for k, t in _by_target(att.data) if k == "node"}
    assert targets == {"ok", "plain"}
    # The graph is keyed by its name to the first newline too.
    assert ("graph", "main") in _by_target(att.data)


def test_check_finds_what_netron_would_drop_or_overwrite() -> None:
    names = ["n1", "n2"]
    bad = {
        "signature": "netron",
        "metrics": [
            {"kind": "node", "target": "n1", "name": "macs", "value": 1},
            {"kind": "node", "target": "n1", "name": "macs", "value": 2},
            {"kind": "node", "target": "n3", "name": "macs", "value": 1},
            {"kind": "node", "target": "n2", "name": "flops", "value": "7"},
            {"target": "n2", "name": "params", "value": 1},
        ],
    }
    problems = check(bad, names)
    assert len(problems) == 5, problems


@pytest.mark.ort
def test_bench_times_join_the_nodes() -> None:
    from onnxcost.bench import BenchOptions, run_bench

    r = run_bench("mlp", BenchOptions(runs=3, warmup=1, min_seconds=0.0, profile=True))
    assert r.profile is not None
    proto = prepare("mlp").proto
    names = node_names(proto)
    att = attachment(onnxcost.analyze("mlp"), names, graph_name=proto.graph.name, bench=r)
    assert check(att.data, names) == []
    nodes = {t: m for (k, t), m in _by_target(att.data).items() if k == "node"}
    timed = {s: row for row in r.profile.nodes for s in row.sources}
    assert timed
    for name, row in timed.items():
        assert nodes[name]["time_us"] == row.median_us
        assert nodes[name]["share"] == row.share


def test_cli_writes_json_and_refuses_other_suffixes(tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    result = runner.invoke(app, ["analyze", "resnet18", "-f", "netron", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["signature"] == "netron:attachment"
    result = runner.invoke(
        app, ["analyze", "resnet18", "-f", "netron", "-o", str(tmp_path / "m.txt")]
    )
    assert result.exit_code == 2
    assert "m.json" in result.output


@pytest.mark.ort
def test_cli_bench_netron_has_costs_and_times(tmp_path: Path) -> None:
    out = tmp_path / "mlp.json"
    args = ["bench", "mlp", "--profile", "--runs", "3", "--warmup", "0", "--min-seconds", "0"]
    result = runner.invoke(app, [*args, "-q", "-f", "netron", "-o", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert check(data, node_names(prepare("mlp").proto)) == []
    fc1 = _by_target(data)[("node", "/fc1/Gemm")]
    # fc1: 784 -> 128, MACs 784 * 128 = 100,352; params 100,352 weights + 128 biases = 100,480.
    assert fc1["macs"] == 100_352
    assert fc1["params"] == 100_480
    assert isinstance(fc1["time_us"], float)
    assert fc1["time_us"] > 0
    assert 0 < fc1["share"] <= 1
