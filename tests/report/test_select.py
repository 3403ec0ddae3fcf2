"""One node selection for every format: the same nodes in the same order, computed once."""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxcost.analysis.records import NodeRecord
from onnxcost.cli.app import app
from onnxcost.report import select as selection
from onnxcost.report.select import DEFAULT_CUT, select

N_RELU = 60
NAME = re.compile(r"\b(?:relu|add)_\d\d\b")


def model_file(tmp_path: Path) -> Path:
    """relu_00..relu_59: Relu over [1, i + 1] elements, so relu_i costs i + 1 FLOPs (one per
    element); add_00..add_04: x_i + x_i over [1, 2], 2 FLOPs each."""
    nodes, inputs, outputs = [], [], []
    for i in range(N_RELU):
        inputs.append(helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [1, i + 1]))
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [1, i + 1]))
        nodes.append(helper.make_node("Relu", [f"x{i}"], [f"y{i}"], name=f"relu_{i:02d}"))
    for i in range(5):
        outputs.append(helper.make_tensor_value_info(f"s{i}", TensorProto.FLOAT, [1, 2]))
        nodes.append(helper.make_node("Add", ["x1", "x1"], [f"s{i}"], name=f"add_{i:02d}"))
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def listed(tmp_path: Path, model: Path, fmt: str, flags: list[str]) -> list[str]:
    """Node names as the report in ``fmt`` lists them, in order."""
    out = tmp_path / f"out_{fmt}_{len(list(tmp_path.iterdir()))}.txt"
    result = CliRunner().invoke(
        app, ["analyze", str(model), "--format", fmt, "--output", str(out), *flags]
    )
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    if fmt == "json":
        return [n["name"] for n in json.loads(text)["nodes"]]
    if fmt == "csv":
        return [row["name"] for row in csv.DictReader(io.StringIO(text))]
    # the node list only (the totals name the nodes live at the peak activation)
    nodes = text.split("## Nodes" if fmt == "markdown" else "\nNodes")[-1]
    return NAME.findall(nodes)


def by_flops(names: list[str]) -> list[str]:
    """relu_i costs i + 1 FLOPs, add_i 2: costliest first, ties in graph order."""
    order = {n: k for k, n in enumerate([f"relu_{i:02d}" for i in range(N_RELU)])}
    order.update({f"add_{i:02d}": N_RELU + i for i in range(5)})

    def flops(n: str) -> int:
        return 2 if n.startswith("add") else int(n[-2:]) + 1

    return sorted(names, key=lambda n: (-flops(n), order[n]))


GRAPH = [f"relu_{i:02d}" for i in range(N_RELU)] + [f"add_{i:02d}" for i in range(5)]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--top", "5"], by_flops(GRAPH)[:5]),
        (["--top", "5", "--sort-by", "order"], GRAPH[:5]),
        (["--top", "0"], GRAPH),
        (["--op-type", "Add", "--top", "3"], ["add_00", "add_01", "add_02"]),
        (["--op-type", "Relu|Add", "--top", "7", "--sort-by", "params"], GRAPH[:7]),
    ],
)
def test_every_format_lists_the_same_nodes_in_the_same_order(
    tmp_path: Path, flags: list[str], expected: list[str]
) -> None:
    model = model_file(tmp_path)
    for fmt in ("json", "csv", "markdown", "table"):
        assert listed(tmp_path, model, fmt, flags) == expected, fmt


def test_default_order_is_the_same_with_and_without_top(tmp_path: Path) -> None:
    """65 nodes: table and Markdown cut to the 30 costliest by default, listed costliest
    first, exactly as --top 30; JSON and CSV list all 65 in graph order."""
    model = model_file(tmp_path)
    for fmt in ("table", "markdown"):
        default = listed(tmp_path, model, fmt, [])
        assert default == by_flops(GRAPH)[:DEFAULT_CUT]
        assert default == listed(tmp_path, model, fmt, ["--top", str(DEFAULT_CUT)])
    for fmt in ("json", "csv"):
        assert listed(tmp_path, model, fmt, []) == GRAPH


def record(i: int) -> NodeRecord:
    op = "Add" if i % 2 else "Relu"
    return NodeRecord(f"n{i}", op, "", "ok", 0, i % 97, 0, 0, 0, (), (), (), ())


def test_selection_is_one_filter_pass_and_one_sort(monkeypatch: pytest.MonkeyPatch) -> None:
    """5,000 nodes: the regex runs once per node and the sort key once per kept node."""
    calls: Counter[str] = Counter()
    flops = selection.COST_KEYS["flops"]
    compile_regex = re.compile

    def key(n: NodeRecord) -> int:
        calls["key"] += 1
        return flops(n)

    class Pattern:
        def __init__(self, text: str) -> None:
            self.pattern = compile_regex(text)

        def fullmatch(self, s: str) -> Any:
            calls["match"] += 1
            return self.pattern.fullmatch(s)

    monkeypatch.setitem(selection.COST_KEYS, "flops", key)
    monkeypatch.setattr(selection.re, "compile", Pattern)
    nodes = [record(i) for i in range(5_000)]
    chosen = select(nodes, top=2_400, op_type="Add|Relu")
    assert calls == Counter({"match": 5_000, "key": 5_000})
    assert len(chosen.nodes) == 2_400
    assert chosen.hidden == 2_600


def test_json_top_selects_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--format json --top N`` asks for the selection once and keeps the nodes it gives."""
    model = model_file(tmp_path)
    calls = []
    real = selection.select

    def counted(*args: Any, **kwargs: Any) -> selection.Selection:
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(selection, "select", counted)
    assert listed(tmp_path, model, "json", ["--top", "50"]) == by_flops(GRAPH)[:50]
    assert len(calls) == 1
