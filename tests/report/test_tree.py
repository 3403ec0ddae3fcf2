"""The scope tree: subtotals, folding of repeated blocks, the (other) scope."""

from __future__ import annotations

import re

from console_text import table_rows
from typer.testing import CliRunner

import onnxcost
from onnxcost.cli import app
from onnxcost.report.tree import OTHER, scope_tree

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
