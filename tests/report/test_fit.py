"""Tables at any terminal width: identifying columns kept, every row on one line."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import pytest
from console_text import table_rows
from rich.console import Console
from typer.testing import CliRunner

from onnxcost.cli.app import app, main
from onnxcost.report.fit import distinct_trims, layout, middle_trim, table_width

runner = CliRunner()
RESNET18_OPS = {"Conv", "BatchNormalization", "Relu", "MaxPool", "Add", "GlobalAveragePool", "Gemm", "Flatten"}  # fmt: skip


@pytest.mark.parametrize(
    ("width", "expected"),
    [
        (27, "/layer1/layer1.0/conv1/Conv"),  # fits as it is
        (20, "/layer1/…/conv1/Conv"),  # first part, then the last two
        (19, "…/conv1/Conv"),  # only one last part fits after /layer1/…/: keep two instead
        (8, "…/Conv"),
    ],
)
def test_middle_trim_keeps_the_ends_of_a_path(width: int, expected: str) -> None:
    assert middle_trim("/layer1/layer1.0/conv1/Conv", width) == expected


def test_middle_trim_without_slashes_keeps_both_ends() -> None:
    # 10 characters: 5 from the front, the ellipsis, 4 from the back.
    assert middle_trim("abcdefghijklmnopqrstuvwxyz", 10) == "abcde…wxyz"


def test_layout_drops_listed_columns_first_then_trims() -> None:
    headers = ["name", "op", "MACs", "read"]
    rows = [["/a/very/long/scope/name/Conv", "Conv", "118 M", "3.06 MiB"]]
    # Natural widths 28, 4, 5, 8: 45 + 3 * 4 + 1 = 58 characters.
    assert table_width([28, 4, 5, 8]) == 58
    assert layout(headers, rows, 58, drop=[3], trim=[0]).shown == (0, 1, 2, 3)
    fit = layout(headers, rows, 50, drop=[3], trim=[0])
    # Without "read": 28 + 4 + 5 + 3 * 3 + 1 = 47 <= 50, nothing trimmed.
    assert fit.shown == (0, 1, 2)
    assert fit.limits == {}
    fit = layout(headers, rows, 40, drop=[3], trim=[0])
    # 40 - (4 + 5 + 10) = 21 left for the name.
    assert fit.limits == {0: 21}


@pytest.mark.parametrize("width", [60, 80, 200])
def test_analyze_fits_the_width(width: int) -> None:
    result = runner.invoke(app, ["analyze", "resnet18", "--top", "8"], env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert max(len(line) for line in out.splitlines()) <= width
    header, rows = table_rows(out, "Summary by op type")
    assert "op type" in header
    assert len(rows) == len(RESNET18_OPS)  # one line per op type, none wrapped
    header, rows = table_rows(out, "Nodes")
    assert header.split()[:2] == ["name", "op"]
    assert len(rows) == 8
    for row in rows:
        assert row.split()[1] in RESNET18_OPS


@pytest.mark.parametrize("width", [60, 80])
def test_bytes_read_by_role_break_between_roles(width: int) -> None:
    # A decoder with a KV cache reads three roles: the line is longer than 80 columns, and it
    # broke in the middle of a figure ("weights 16.00 K…tions 7.64 KiB").
    path = Path(__file__).resolve().parents[1] / "data" / "exports" / "tiny_gpt2_kv_script.onnx"
    result = runner.invoke(app, ["analyze", str(path), "--top", "0"], env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("        memory read "))
    block = " ".join(line.strip() for line in lines[start : start + 4])
    assert "…" not in block
    for part in ("(weights ", "activations ", "KV cache ", "written ", "peak activations "):
        assert part in block
    assert max(len(line) for line in lines[start : start + 4]) <= width


def test_eighty_columns_trim_names_in_the_middle() -> None:
    result = runner.invoke(app, ["analyze", "resnet18", "--top", "0"], env={"COLUMNS": "60"})
    _header, rows = table_rows(result.stdout, "Nodes")
    names = [row.split()[0] for row in rows]
    assert len(rows) == 69
    assert any("…" in n for n in names)
    assert "/fc/Gemm" in names


def test_wide_keeps_every_column() -> None:
    result = runner.invoke(
        app, ["analyze", "resnet18", "--top", "3", "--wide"], env={"COLUMNS": "80"}
    )
    header, _rows = table_rows(result.stdout, "Nodes")
    assert header.split() == ["name", "op", "in", "shapes", "out", "shapes", "params", "MACs", "FLOPs", "read", "written", "status"]  # fmt: skip


def test_pipe_without_columns_is_120(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    result = runner.invoke(app, ["analyze", "resnet18", "--top", "0"])
    assert max(len(line) for line in result.stdout.splitlines()) <= 120


@pytest.mark.parametrize("width", [60, 80, 200])
def test_compare_fits_the_width(width: int) -> None:
    result = runner.invoke(app, ["compare", "resnet18", "resnet50"], env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.stdout.splitlines()) <= width
    header, rows = table_rows(result.stdout, "By op type")
    assert header.split()[:2] == ["op", "type"]
    assert [r.split()[0] for r in rows][:2] == ["Conv", "BatchNormalization"]


@pytest.fixture(scope="module")
def bench_result() -> object:
    from onnxcost.bench import BenchOptions, run_bench

    return run_bench(
        "resnet20_cifar", BenchOptions(runs=2, warmup=0, min_seconds=0.0, profile=True)
    )


@pytest.mark.ort
@pytest.mark.parametrize("width", [60, 80, 200])
def test_bench_fits_the_width(width: int, bench_result: Any) -> None:
    from onnxcost.report.bench import render_table

    r = bench_result
    buf = io.StringIO()
    render_table(r, Console(file=buf, width=width, highlight=False), top=10)
    out = buf.getvalue()
    assert max(len(line) for line in out.splitlines()) <= width
    header, rows = table_rows(out, "Per node")
    assert header.split()[:3] == ["node", "op", "type"]
    assert len(rows) == 10


@pytest.mark.parametrize("args", [["--help"], ["analyze", "--help"], ["bench", "--help"], ["zoo", "save", "--help"]])  # fmt: skip
def test_help_has_no_type_labels(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # main() as the installed command runs it (the labels are removed there, not in `app`).
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setattr(sys, "argv", ["onnxcost", *args])
    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "Usage" in out
    for noise in ("<bool>", "<str>", "<int", "<list", "<float", "<path"):
        assert noise not in out, noise
    if args == ["--help"]:
        assert "--install-completion" in out


def test_distinct_trims_keep_the_part_that_differs() -> None:
    names = [f"/layer{k}/layer{k}.0/downsample/downsample.0/Conv" for k in (2, 3, 4)]
    # middle_trim at 30 keeps the last three parts of each: the same 30 characters three times.
    assert {middle_trim(n, 30) for n in names} == {"…/downsample/downsample.0/Conv"}
    # Here each keeps /layerK (the first part where they differ), then the last parts that fit:
    # "/layer2/" 8 + "…/" 2 + "downsample.0/Conv" 17 = 27 <= 30 (one more part: 38).
    assert distinct_trims(names, 30) == [
        "/layer2/…/downsample.0/Conv",
        "/layer3/…/downsample.0/Conv",
        "/layer4/…/downsample.0/Conv",
    ]
    # Two blocks differ in their third part: its common head is cut instead,
    # "…/" 2 + "layer1.0/" 9 + "bn1/BatchNormalization" 22 = 33 <= 34.
    bns = [f"/layer1/layer1.{k}/bn1/BatchNormalization" for k in (0, 1)]
    assert distinct_trims(bns, 34) == [
        "…/layer1.0/bn1/BatchNormalization",
        "…/layer1.1/bn1/BatchNormalization",
    ]
    # Equal names stay equal, and names that trim apart keep middle_trim's cut.
    assert distinct_trims(["/a/b/c/d/e/Conv"] * 2 + ["/x/Relu"], 10) == [
        middle_trim("/a/b/c/d/e/Conv", 10)
    ] * 2 + ["/x/Relu"]


@pytest.mark.parametrize("args", [[], ["--tree"]])
def test_resnet18_at_80_columns_names_stay_apart(args: list[str]) -> None:
    # At 80 columns the name column is 34 wide: middle_trim made three rows of
    # …/downsample/downsample.0/Conv and two of each /layerK/…/bnJ/BatchNormalization.
    result = runner.invoke(app, ["analyze", "resnet18", "--top", "0", *args], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    if args:
        # The tree's labels fit whole, the fold's note with them.
        assert "    layer1.0 … layer1.1 (2 x; below: 1 block)  " in result.stdout
        return
    rows = table_rows(result.stdout, "Nodes")[1]
    names = [r.split()[0] for r in rows]
    assert len(names) == 69  # 69 nodes
    assert len(set(names)) == 69
    assert "/layer2/…/downsample.0/Conv" in names
