"""The scope tree: subtotals, folding of repeated blocks, the (other) scope."""

from __future__ import annotations

import math
import re
import tracemalloc
from pathlib import Path

import onnx
import pytest
from console_text import table_rows
from onnx import TensorProto, helper
from typer.testing import CliRunner

import onnxcost
from onnxcost.cli.app import app
from onnxcost.report.html import analysis_html
from onnxcost.report.tree import (
    MAX_DEPTH,
    OTHER,
    OWN,
    Scope,
    scope_rows,
    scope_tree,
    tree_table,
)

# One 3x3 Conv 64->64 on 56x56 (ResNet-18's layer1): 56 * 56 * 64 * 64 * 9 = 115,605,504 MACs.
CONV_3X3_56 = 56 * 56 * 64 * 64 * 9


def test_resnet18_tree_subtotals_and_fold() -> None:
    a = onnxcost.analyze("resnet18")
    root = scope_tree(a.counted_nodes)
    # The root's subtotal is the model's total, and each level adds up to its parent.
    assert root.macs == a.totals.macs == 1_814_073_344
    assert root.flops == a.totals.flops
    for _depth, s in root.walk():
        if s.repeat == 1 and s.children:
            below = sum(c.macs for c in s.children) + sum(n.macs for n in s.nodes)
            assert s.macs == below, s.path
    top = {s.label: s for s in root.children}
    assert list(top)[:5] == ["conv1", "bn1", "relu", "maxpool", "layer1"]
    # layer1.0 and layer1.1 are the same block: folded into one scope, 2 x.
    (block,) = top["layer1"].children
    assert block.label == "layer1.0 … layer1.1"
    assert block.repeat == 2
    # Two blocks x two 3x3 convs each = 4 * 115,605,504 = 462,422,016 MACs.
    assert block.macs == 4 * CONV_3X3_56 == 462_422_016
    # The children shown are one block's: its conv1 is one conv.
    assert {c.label: c.macs for c in block.children}["conv1"] == CONV_3X3_56
    # layer2.0 has a downsample branch and layer2.1 none: different blocks, not folded.
    assert [c.label for c in top["layer2"].children] == ["layer2.0", "layer2.1"]
    # /Flatten has no scope: it sits under (other), the last top-level scope.
    assert list(top)[-1] == OTHER
    assert [n.name for n in top[OTHER].nodes] == ["/Flatten"]


def test_walk_max_depth() -> None:
    root = scope_tree(onnxcost.analyze("resnet18").counted_nodes)
    assert max(d for d, _s in root.walk(1)) == 1
    assert max(d for d, _s in root.walk(2)) == 2
    # layer2/layer2.0/downsample/downsample.0: depth 4 is the deepest.
    assert max(d for d, _s in root.walk()) == 4


def test_no_fold_keeps_every_block() -> None:
    root = scope_tree(onnxcost.analyze("resnet18").counted_nodes, fold=False)
    layer1 = next(s for s in root.children if s.label == "layer1")
    assert [c.label for c in layer1.children] == ["layer1.0", "layer1.1"]
    assert all(c.repeat == 1 for c in layer1.children)


def _label(row: str) -> str:
    """The scope cell of a row: what comes before the first number column."""
    return re.split(r"\s{2,}(?=\d)", row[2:], maxsplit=1)[0]


def test_cli_depth_is_an_indented_tree() -> None:
    result = CliRunner().invoke(
        app, ["analyze", "resnet18", "--depth", "2"], env={"COLUMNS": "100"}
    )
    assert result.exit_code == 0, result.output
    rows = table_rows(result.stdout, "Scope tree")[1]
    labels = [_label(r) for r in rows]
    assert labels[:7] == ["conv1", "bn1", "relu", "maxpool", "layer1", "  layer1.0 … layer1.1 (2 x)", "layer2"]  # fmt: skip
    # The folded pair: 4 x 115,605,504 = 462,422,016 MACs ("462 M"), 14 nodes.
    assert rows[5].split()[5:10] == ["14", "148", "K", "462", "M"]
    # Ungrouped top-level nodes (/Flatten) on one "(other)" line, last.
    assert labels[-1] == "(other)"
    assert max(len(line) for line in result.stdout.splitlines()) <= 100


def test_cli_tree_goes_all_the_way_down() -> None:
    result = CliRunner().invoke(app, ["analyze", "resnet18", "--tree"], env={"COLUMNS": "120"})
    labels = [_label(r) for r in table_rows(result.stdout, "Scope tree")[1]]
    # /layer2/layer2.0/downsample/downsample.0/Conv: a scope four levels down.
    assert "      downsample.0" in labels


def test_markdown_tree() -> None:
    result = CliRunner().invoke(app, ["analyze", "resnet18", "--depth", "1", "-f", "markdown"])
    out = result.stdout
    assert "## Scope tree (depth 1)" in out
    rows = out.split("## Scope tree (depth 1)")[1].strip().splitlines()[2:]
    rows = [r for r in rows if r.startswith("| ")]
    # conv1 bn1 relu maxpool layer1-4 avgpool fc (other): 11 top-level scopes.
    assert len(rows) == 11
    assert rows[4].startswith("| layer1 | 14 |")


def _deep_model(scopes: int) -> tuple[onnx.ModelProto, str]:
    """Relu named /s0/s1/.../s{scopes-1}/Relu, then Relu /a/Relu: a name of ``scopes`` scopes."""
    name = "".join(f"/s{i}" for i in range(scopes)) + "/Relu"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    nodes = [
        helper.make_node("Relu", ["x"], ["t"], name=name),
        helper.make_node("Relu", ["t"], ["y"], name="/a/Relu"),
    ]
    graph = helper.make_graph(nodes, "deep", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), name


def _child_rows(rows: list[tuple[int, str, Scope]], k: int) -> list[Scope]:
    """The rows one level below row ``k``, up to the end of its subtree."""
    depth = rows[k][0]
    out = []
    for d, _label, s in rows[k + 1 :]:
        if d <= depth:
            break
        if d == depth + 1:
            out.append(s)
    return out


def test_gpt2_tree_rows_add_up_and_hold_every_node_once() -> None:
    # gpt2's blocks hold the attention's MatMuls and Softmax directly in /transformer/h.N/attn,
    # beside the scopes c_attn and c_proj: the rows below attn missed them (119 nodes, rows
    # 16 + 16). Now the rows below each scope add up to it (times N for a block folded N x).
    a = onnxcost.analyze("gpt2")
    root = scope_tree(a.counted_nodes)
    rows = scope_rows(root)
    for k, (_d, label, s) in enumerate(rows):
        below = _child_rows(rows, k)
        if below:
            for f in ("count", "macs", "flops", "params", "bytes_read", "bytes_written"):
                assert s.repeat * sum(getattr(c, f) for c in below) == getattr(s, f), (label, f)
    # Each node in exactly one bottom row: the bottom rows' nodes, each row's times the blocks
    # folded above it and in it (12 for a row of h.0 … h.11), are every counted node.
    held, times = 0, []
    for k, (d, _label, s) in enumerate(rows):
        del times[d - 1 :]
        times.append(s.repeat)
        if not _child_rows(rows, k):
            held += len(s.nodes) * math.prod(times)
    assert held == len(a.counted_nodes)
    attn = next(s for _d, label, s in rows if label == OWN and s.path.endswith("/h.0/attn"))
    assert {"MatMul", "Softmax"} <= {n.op_type for n in attn.nodes}


def test_cli_tree_node_counts_add_up_and_label_the_fold() -> None:
    result = CliRunner().invoke(app, ["analyze", "gpt2", "--tree"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    rows = table_rows(result.stdout, "Scope tree")[1]
    labels = [_label(r) for r in rows]
    counts = [int(re.split(r"\s{2,}", r.strip())[1]) for r in rows]
    k = next(i for i, lbl in enumerate(labels) if lbl.strip() == "attn")
    # attn: 119 nodes = c_attn 16 + c_proj 16 + (own nodes) 87, the MatMuls and Softmax among them.
    assert [lbl.strip() for lbl in labels[k : k + 4]] == ["attn", "c_attn", "c_proj", OWN]
    assert counts[k] == counts[k + 1] + counts[k + 2] + counts[k + 3]
    fold = next(i for i, lbl in enumerate(labels) if "h.0 … h.11" in lbl)
    assert labels[fold].strip() == "h.0 … h.11 (12 x; below: 1 block)"
    # The block's rows (one block) times 12 make its figure: 12 x 168 = 2,016 nodes.
    depth = len(labels[fold]) - len(labels[fold].lstrip())
    block = [
        c for lbl, c in zip(labels[fold + 1 :], counts[fold + 1 :], strict=True)
        if len(lbl) - len(lbl.lstrip()) == depth + 2
    ][:5]  # fmt: skip
    assert counts[fold] == 12 * sum(block) == 2016


def test_deep_names_build_in_memory_linear_in_the_name(tmp_path: Path) -> None:
    # 30,000 scopes: every prefix as a path string is 30,000^2 / 2 x 7 chars ~ 3 GB; one
    # recursion per level passes Python's limit (1,000) and Jinja's. The tree keeps MAX_DEPTH
    # levels and folds the rest into one scope that says how many levels it stands for.
    model, name = _deep_model(30_000)
    path = tmp_path / "deep.onnx"
    onnx.save(model, path)
    a = onnxcost.analyze(path)
    tracemalloc.start()
    try:
        root = scope_tree(a.counted_nodes)
        table = tree_table(a, None)
        page = analysis_html(a)
        _size, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # len(name) = 208,895; the page repeats the deepest path a few times.
    assert peak < 200 * len(name), peak
    depth, deepest = max(root.walk(), key=lambda ds: ds[0])
    assert depth == MAX_DEPTH
    assert deepest.levels == 30_000 - MAX_DEPTH + 1
    assert deepest.label.startswith("s31/s32/")
    assert deepest.count == 1
    assert table[MAX_DEPTH - 1][0].endswith("s29999 (29,969 levels)")
    assert page.count("<details") == MAX_DEPTH + 1  # the deep branch and /a


@pytest.mark.parametrize("scopes", [300, 2000])
def test_cli_deep_names_tree_and_html(tmp_path: Path, scopes: int) -> None:
    model, _name = _deep_model(scopes)
    path = tmp_path / "deep.onnx"
    onnx.save(model, path)
    runner = CliRunner()
    result = runner.invoke(app, ["analyze", str(path), "--tree"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    assert f"({scopes - MAX_DEPTH + 1:,} levels)" in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) <= 100
    result = runner.invoke(app, ["analyze", str(path), "--depth", "40"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    out = tmp_path / "deep.html"
    result = runner.invoke(app, ["analyze", str(path), "-f", "html", "-o", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    assert page.count("</details>") == MAX_DEPTH + 1
    # Indented 12 levels at most (a label 32 levels in had no room left); deeper rows say
    # their level instead: the folded row L32, its Relu L33.
    assert max(int(d) for d in re.findall(r'style="--d: (\d+)"', page)) == 12
    assert '<span class="lvl">L32</span>' in page
    assert f"{scopes - MAX_DEPTH + 1:,} levels:</span>s31/s32/" in page
