"""The rest of the report at any width: zoo list, ops, providers, bench's summary, analyze's
header lines. No line longer than the width, a row on one line, the naming column whole."""

from __future__ import annotations

import io
from typing import Any

import pytest
from console_text import table_rows
from rich.console import Console
from typer.testing import CliRunner

from onnxcost import zoo
from onnxcost.cli.app import app
from onnxcost.costs.catalog import known_unsupported, supported
from onnxcost.report.fit import ELLIPSIS, tail_trim, wrap_items
from onnxcost.report.table import formula_rows

runner = CliRunner()
WIDTHS = [60, 80, 200]


def lines_of(out: str) -> list[str]:
    return out.splitlines()


def test_tail_trim_keeps_the_start_and_cuts_at_a_space() -> None:
    s = "FLOPs = numel(Y): one primitive per output element"
    assert tail_trim(s, len(s)) == s
    # 20 characters: the first 19 are "FLOPs = numel(Y): o"; the last space within them is at
    # 17 >= 2 x 19 // 3 = 12, so the cut goes back to it: "FLOPs = numel(Y):" less its ":"
    # and an ellipsis, 17 characters.
    assert tail_trim(s, 20) == "FLOPs = numel(Y)…"
    # No space in the last third: a plain cut, 7 characters and the ellipsis.
    assert tail_trim("abcdefghijklmnop", 8) == "abcdefg…"


def test_wrap_items_breaks_between_items_with_a_hanging_indent() -> None:
    items = ["Conv x20", "BatchNormalization x20", "Relu x17", "Add x8"]
    # "  ops    " is 9 wide. Line 1: 9 + "Conv x20, BatchNormalization x20," (33) = 42 <= 45;
    # adding " Relu x17," would make 52.
    assert wrap_items("  ops    ", items, 45) == [
        "  ops    Conv x20, BatchNormalization x20,",
        "         Relu x17, Add x8",
    ]
    assert wrap_items("  ops    ", items, None) == [
        "  ops    Conv x20, BatchNormalization x20, Relu x17, Add x8"
    ]


def test_wrap_items_ends_a_long_list_with_how_many_more() -> None:
    items = [f"Op{i} x1" for i in range(20)]
    lines = wrap_items("  ops    ", items, 30, max_lines=2)
    assert len(lines) == 2
    assert all(len(line) <= 30 for line in lines)
    shown = sum(line.count(" x1") for line in lines)
    assert lines[-1].endswith(f"{ELLIPSIS} {20 - shown} more")


def test_wrap_items_moves_a_long_first_item_below_a_long_lead() -> None:
    lead = "live at /a/very/long/node/name: "  # 32 wide
    item = "/a/very/long/node/name_output_0 (from x) 1 KiB"  # 46 wide
    # 32 + 46 = 78 > 60; on its own line at indent 10: 56 <= 60, so whole there.
    assert wrap_items(lead, [item], 60, indent=10) == [lead.rstrip(), " " * 10 + item]


@pytest.mark.parametrize("width", WIDTHS)
def test_zoo_list_fits_and_keeps_every_name(width: int) -> None:
    r = runner.invoke(app, ["zoo", "list"], env={"COLUMNS": str(width)})
    assert r.exit_code == 0, r.output
    assert max(map(len, lines_of(r.stdout))) <= width
    header, rows = table_rows("\n" + r.stdout, "")
    assert header.split()[0] == "name"
    assert [row.split()[0] for row in rows] == list(zoo.MODELS)  # one line each, names whole


def test_zoo_list_wide_keeps_every_column() -> None:
    r = runner.invoke(app, ["zoo", "list", "--wide"], env={"COLUMNS": "60"})
    header, rows = table_rows("\n" + r.stdout, "")
    assert "inputs" in header
    assert ELLIPSIS not in r.stdout
    assert len(rows) == len(zoo.MODELS)


@pytest.mark.parametrize("width", WIDTHS)
def test_ops_fits_and_keeps_the_op_type(width: int) -> None:
    r = runner.invoke(app, ["ops"], env={"COLUMNS": str(width)})
    assert r.exit_code == 0, r.output
    assert max(map(len, lines_of(r.stdout))) <= width
    everything = [*supported(None), *known_unsupported(None)]
    domains = list(dict.fromkeys(o.domain for o in everything))
    assert domains[:3] == ["ai.onnx", "ai.onnx.ml", "com.microsoft"]
    rows: list[str] = []
    for domain in domains:  # one table per domain, titled with its counts
        header, body = table_rows(r.stdout, f"{domain}: ")
        assert header.split()[0] == "op"
        assert "status" in header.split()  # the opset range goes first where it does not fit
        members = [o for o in everything if o.domain == domain]
        unsupported = sum(1 for o in members if o.status == "unsupported")
        title = f"{domain}: {len(members) - unsupported} with a formula, {unsupported} without"
        assert title in r.stdout
        assert len(body) == len(members)  # no row wrapped onto a second line
        rows += body
    assert len(rows) == len(everything)
    # Op types are kept whole where they fit their trimmed column (all but the longest few).
    ops = [row.split()[0] for row in rows]
    assert ops[:3] == ["Abs", "Acos", "Acosh"]
    assert "Conv" in ops


def test_ops_wide_shows_each_formula_whole() -> None:
    r = runner.invoke(app, ["ops", "--wide"], env={"COLUMNS": "60"})
    conv = next(o for o in supported("") if o.op_type == "Conv")
    assert conv.formula in r.stdout


@pytest.mark.ort
@pytest.mark.parametrize("width", WIDTHS)
def test_providers_fits_and_keeps_the_names(width: int) -> None:
    from onnxcost.bench import available_providers

    r = runner.invoke(app, ["providers"], env={"COLUMNS": str(width)})
    assert r.exit_code == 0, r.output
    assert max(map(len, lines_of(r.stdout))) <= width
    header, rows = table_rows(r.stdout, "")
    assert header.split()[0] == "provider"
    assert [row.split()[0] for row in rows] == [p.name for p in available_providers()]


@pytest.fixture(scope="module")
def bench_result() -> object:
    from onnxcost.bench import BenchOptions, run_bench

    return run_bench("resnet20_cifar", BenchOptions(runs=2, warmup=0, min_seconds=0.0))


@pytest.mark.ort
@pytest.mark.parametrize("width", WIDTHS)
def test_bench_summary_rows_stay_on_one_line(width: int, bench_result: Any) -> None:
    from onnxcost.report.bench import render_table, summary_rows

    buf = io.StringIO()
    render_table(bench_result, Console(file=buf, width=width, highlight=False), top=5)
    out = buf.getvalue()
    assert max(map(len, lines_of(out))) <= width
    for label, value in summary_rows(bench_result):
        line = next(ln for ln in lines_of(out) if ln.startswith(f"  {label}  "))
        shown = line[len(f"  {label}") :].strip()
        # The value on the label's line: whole, or its start then an ellipsis.
        assert shown == value or (shown.endswith(ELLIPSIS) and value.startswith(shown[:-1]))
    if width == 200:
        assert ELLIPSIS not in out.split("Memory")[0]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize(
    "model", [["resnet18", "--top", "3"], ["models/encoder_torch_dynamo.onnx", "--top", "3"]]
)
def test_analyze_header_wraps_between_items(width: int, model: list[str]) -> None:
    r = runner.invoke(app, ["analyze", *model], env={"COLUMNS": str(width)})
    assert r.exit_code == 0, r.output
    out = lines_of(r.stdout)
    assert max(map(len, out)) <= width
    head = out[: out.index(next(ln for ln in out if ln.startswith("Summary by op type")))]
    # A header line is a labelled line or a continuation indented under its label: never a
    # line broken in mid-word starting at column 0 (rich's soft wrap did that).
    for line in head[1:]:
        assert line == "" or line.startswith(("  ", "Totals")), line
    text = " ".join(" ".join(head).split())
    if model[0] == "resnet18":
        assert "size built in (no file)" in text
        # resnet18's op types, in count order, each whole: 8 op types, 4 lines at most.
        for item in ("Conv x20", "BatchNormalization x20", "Relu x17", "Flatten x1"):
            assert item in text
        assert "(11,689,512 + 9,600 BatchNorm statistics), 44.59 MiB" in text
    else:
        assert "live at node_linear_2:" in text
        assert "layer_norm (from node_layer_norm) 128.00 KiB" in text


def test_analyze_header_at_200_is_one_line_per_item() -> None:
    r = runner.invoke(app, ["analyze", "resnet18", "--top", "3"], env={"COLUMNS": "200"})
    out = lines_of(r.stdout)
    producer = next(ln for ln in out if ln.startswith("  producer"))
    assert producer.endswith("| 69 nodes | size built in (no file)")
    ops = next(ln for ln in out if ln.startswith("  ops"))
    assert ops.endswith("Gemm x1, Flatten x1")


def formulas_block(out: str) -> list[str]:
    lines = lines_of(out)
    start = next(i for i, ln in enumerate(lines) if ln.startswith("Formulas in"))
    end = next(i for i, ln in enumerate(lines) if ln.startswith("Summary by op type"))
    return lines[start:end]


@pytest.fixture(scope="module")
def bert_formulas_wide() -> list[str]:
    r = runner.invoke(app, ["analyze", "bert_base", "--symbolic", "--top", "1", "--wide"])
    return formulas_block(r.stdout)


@pytest.mark.parametrize("width", [60, 80])
def test_symbolic_formulas_break_between_terms(width: int, bert_formulas_wide: list[str]) -> None:
    r = runner.invoke(
        app, ["analyze", "bert_base", "--symbolic", "--top", "1"], env={"COLUMNS": str(width)}
    )
    assert r.exit_code == 0, r.output
    assert max(map(len, lines_of(r.stdout))) <= width
    block = formulas_block(r.stdout)
    assert len(block) > len(bert_formulas_wide)  # some formula did need a second line
    # The same text, only broken at spaces: nothing trimmed, no term cut.
    assert " ".join(" ".join(block).split()) == " ".join(" ".join(bert_formulas_wide).split())
    for line in block[1:]:
        assert line.startswith("  "), line


def compare_head(width: str | None) -> list[str]:
    args = ["compare", "models/encoder_torch_dynamo.onnx", "resnet18"]
    r = runner.invoke(
        app, [*args, *(["--wide"] if width is None else [])], env={"COLUMNS": width or "80"}
    )
    assert r.exit_code == 0, r.output
    out = lines_of(r.stdout)
    return out[1 : out.index(next(ln for ln in out if ln.startswith("Totals")))]


@pytest.mark.parametrize("width", [60, 80])
def test_compare_header_breaks_between_items(width: int) -> None:
    head, wide = compare_head(str(width)), compare_head(None)
    assert max(map(len, head)) <= width
    assert len(wide) == 2  # one line per model with --wide
    assert all(line.startswith("  ") for line in head)  # "  A: ..." or indented under it
    # A's line at 60: "  A: models/encoder_torch_dynamo.onnx |" (39) plus
    # " inputs input float32[1x128x256] |" (34) is 73 > 60: the inputs go on the next line.
    if width == 60:
        assert head[0] == "  A: models/encoder_torch_dynamo.onnx |"
    # The same text, only broken at the separators: nothing trimmed.
    assert " ".join(" ".join(head).split()) == " ".join(" ".join(wide).split())


@pytest.mark.parametrize("width", [60, 80, 200])
def test_a_long_max_breaks_one_argument_a_line(width: int) -> None:
    # A training peak over three steps: the max too long for a line is opened, each argument
    # on its own line under the first; broken at spaces only, so the text is the same.
    rhs = (
        "1,991,036,928 + max(3,080·seq + 6,152·batch·seq, "
        "24 + 1,032·seq + 961,728·batch·seq + 11·seq² + 576·batch·seq², "
        "8·seq + 1,242,644·batch·seq + 12·seq² + 576·batch·seq²) + 7·seq"
    )
    lead = "  training peak bytes = "
    rows = formula_rows(lead, rhs, width)
    assert max(map(len, rows)) <= width
    assert " ".join(" ".join(rows).split()) == " ".join((lead + rhs).split())
    if width == 200:
        assert rows == [lead + rhs]  # it fits: one line
        return
    # the max opens on a line of its own, its arguments aligned under the first
    opening = next(i for i, row in enumerate(rows) if row.strip().startswith("max("))
    column = rows[opening].index("max(") + len("max(")
    args = [row for row in rows[opening + 1 :] if len(row) - len(row.lstrip()) == column]
    assert [row.strip()[:2] for row in args] == ["24", "8·"]
    assert rows[-1].strip() == "7·seq"  # after the max's ") +"
