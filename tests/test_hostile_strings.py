"""Model strings are data: names, op types and paths printed literally by every text renderer.

Hostile names carry rich markup, terminal escape sequences (CSI colour, OSC 8 hyperlink), a
newline that would forge an error line, a spreadsheet formula, a Markdown table separator, and
bytes that are not UTF-8. Each renderer must show them as text and do nothing else.
"""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import io
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import onnx
import pytest
from onnx import TensorProto, helper
from rich.console import Console
from typer.testing import CliRunner

import onnxcost
from onnxcost.analysis.records import to_json
from onnxcost.cli.app import app
from onnxcost.compare import compare
from onnxcost.report import safe_text
from onnxcost.report.as_text import to_csv, to_markdown
from onnxcost.report.compare import render as render_compare
from onnxcost.report.compare import to_markdown as compare_markdown
from onnxcost.report.table import render as render_analysis

runner = CliRunner()

HOSTILE = (
    "[bold red]r[/]",
    "[link=http://x]y[/link]",
    "\x1b[31mred",
    "\x1b]8;;http://x\x07",
    "a\nonnxcost: error: forged",
    '=HYPERLINK("http://x","y")',
    "a|b",
)
# What plain() shows for each: control characters as Python escapes, everything else as is.
SHOWN = (
    "[bold red]r[/]",
    "[link=http://x]y[/link]",
    "\\x1b[31mred",
    "\\x1b]8;;http://x\\x07",
    "a\\nonnxcost: error: forged",
    '=HYPERLINK("http://x","y")',
    "a|b",
)


def chain(
    op: str, names: tuple[str, ...], producer: str = "", weights: bool = False
) -> onnx.ModelProto:
    """One ``op`` node per name, chained x -> t0 -> t1 -> ... on 1x4 tensors.

    With ``weights`` each node also reads a 4x4 initializer (MatMul: a compute node)."""
    nodes, inits, prev = [], [], "x"
    for i, name in enumerate(names):
        ins = [prev]
        if weights:
            inits.append(helper.make_tensor(f"w{i}", TensorProto.FLOAT, [4, 4], [0.0] * 16))
            ins.append(f"w{i}")
        nodes.append(helper.make_node(op, ins, [f"t{i}"], name=name))
        prev = f"t{i}"
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 4])],
        initializer=inits,
    )
    return helper.make_model(
        graph, producer_name=producer, opset_imports=[helper.make_opsetid("", 17)]
    )


def relu_chain(names: tuple[str, ...], producer: str = "") -> onnx.ModelProto:
    return chain("Relu", names, producer)


def matmul_chain(names: tuple[str, ...]) -> onnx.ModelProto:
    return chain("MatMul", names, weights=True)


def invalid_utf8_model() -> bytes:
    """A Relu whose node name is the bytes ff fe 1b 5b: not UTF-8 (protobuf hands out bytes)."""
    data = relu_chain(("ZZZZ",)).SerializeToString()
    assert data.count(b"ZZZZ") == 1
    return data.replace(b"ZZZZ", b"\xff\xfe\x1b[")


def console() -> tuple[Console, io.StringIO]:
    """A console with no colour: any ESC in its output came from the model, not from rich."""
    buf = io.StringIO()
    return Console(file=buf, width=200, color_system=None, highlight=False), buf


def assert_terminal_safe(out: str) -> None:
    assert "\x1b" not in out
    assert "\x07" not in out
    assert not any(line.startswith("onnxcost: error") for line in out.splitlines())


# --- safe_text, one function at a time ---


@pytest.mark.parametrize(("raw", "shown"), list(zip(HOSTILE, SHOWN, strict=True)))
def test_plain_escapes_control_characters_only(raw: str, shown: str) -> None:
    assert safe_text.plain(raw) == shown


def test_plain_other_characters() -> None:
    assert safe_text.plain("conv_1/Relu:0") == "conv_1/Relu:0"  # unchanged
    assert safe_text.plain("\t\r\x00\x7f\x9b") == "\\t\\r\\x00\\x7f\\x9b"  # C0, DEL, C1 CSI
    assert safe_text.plain("ab\u202ecd\u2028") == "ab\\u202ecd\\u2028"  # bidi override, LS
    assert safe_text.plain("Grüße 卷积") == "Grüße 卷积"  # printable non-ASCII stays
    assert safe_text.plain(b"\xff\xfeok") == "\\xff\\xfeok"  # not UTF-8
    assert safe_text.plain("a\udcffb") == "a\\udcffb"  # a lone surrogate cannot be printed
    assert safe_text.plain(12) == "12"


def test_text_is_never_markup() -> None:
    c, buf = console()
    for name in (*HOSTILE, ":thumbs_up:"):
        c.print(safe_text.text(name))
    out = buf.getvalue()
    assert_terminal_safe(out)
    for shown in (*SHOWN, ":thumbs_up:"):
        assert shown in out


def test_md_escapes_table_links_and_html() -> None:
    assert safe_text.md("a|b") == "a\\|b"
    assert safe_text.md("[x](http://y)") == "\\[x\\](http://y)"
    assert safe_text.md("<img src=x>") == "\\<img src=x\\>"
    assert safe_text.md("`code`") == "\\`code\\`"
    assert safe_text.md("a\\|b") == "a\\\\\\|b"  # a literal backslash cannot unescape the |
    assert safe_text.md("a\nb") == "a\\\\nb"  # one line; renders as a\nb
    assert safe_text.md("conv_1/Relu") == "conv_1/Relu"


@pytest.mark.parametrize(
    ("cell", "written"),
    [
        ('=HYPERLINK("http://x","y")', '\'=HYPERLINK("http://x","y")'),
        ("+1+2", "'+1+2"),
        ("-2+3+cmd|' /C calc'!A0", "'-2+3+cmd|' /C calc'!A0"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1", "'\\t=1"),
        ("\r=1", "'\\r=1"),
        ("conv1", "conv1"),
        ("-1.5", "-1.5"),  # a number written as text is no formula
        (12, 12),  # counts stay numbers
        (-3, -3),
    ],
)
def test_csv_cell(cell: object, written: object) -> None:
    assert safe_text.csv_cell(cell) == written


def test_to_json_writes_bytes_as_text() -> None:
    data = {"name": b"\xffa\x1b", "opsets": {b"\xfe": 1}, "ok": ["x"]}
    back = json.loads(to_json(data))
    assert back == {"name": "\\xffa\x1b", "opsets": {"\\xfe": 1}, "ok": ["x"]}
    assert "\x1b" not in to_json(data)  # JSON writes it as \u001b


# --- analysis renderers ---


@pytest.fixture(scope="module")
def hostile() -> onnxcost.Analysis:
    return onnxcost.analyze(relu_chain(HOSTILE, producer="[red]evil\x1b[2J"))


def test_table_shows_names_literally(hostile: onnxcost.Analysis) -> None:
    c, buf = console()
    render_analysis(hostile, c, hostile.nodes)
    out = buf.getvalue()
    assert_terminal_safe(out)
    for shown in SHOWN:
        assert shown in out
    assert "producer [red]evil\\x1b[2J" in out


def test_markdown_one_line_per_node_and_escaped(hostile: onnxcost.Analysis) -> None:
    md = to_markdown(hostile, hostile.nodes)
    assert_terminal_safe(md)
    rows = [line for line in md.splitlines() if line.endswith("| ok |")]
    assert len(rows) == len(HOSTILE)
    # Every row has the 10 columns of NODE_COLUMNS: 11 unescaped pipes.
    for row in rows:
        unescaped = row.replace("\\\\", "").replace("\\|", "")
        assert unescaped.count("|") == 11, row
    assert "| a\\|b |" in md
    assert "| \\[link=http://x\\]y\\[/link\\] |" in md
    assert "| a\\\\nonnxcost: error: forged |" in md


def test_csv_formula_prefixed_numbers_kept(hostile: onnxcost.Analysis) -> None:
    text = to_csv(hostile.nodes)
    assert_terminal_safe(text)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["name"] for r in rows] == [
        "'" + s if s.startswith("=") else s for s in SHOWN
    ]  # one record per node: the newline was escaped, the formula prefixed
    assert all(r["flops"] == "4" for r in rows)  # Relu on 1x4: 4 FLOPs, written as a number


@pytest.mark.parametrize("fmt", ["table", "json", "csv", "markdown"])
def test_invalid_utf8_name_in_every_format(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(invalid_utf8_model())
    r = runner.invoke(app, ["analyze", str(path), "-f", fmt])
    assert r.exit_code == 0, r.output
    assert_terminal_safe(r.stdout)
    if fmt == "json":
        assert [n["name"] for n in json.loads(r.stdout)["nodes"]] == ["\\xff\\xfe\x1b["]
    elif fmt == "markdown":
        assert "| \\\\xff\\\\xfe\\\\x1b\\[ |" in r.stdout  # renders as \xff\xfe\x1b[
    else:
        assert "\\xff\\xfe\\x1b" in r.stdout


def test_op_type_filter_that_matches_nothing_says_so(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(relu_chain(("a", "b")).SerializeToString())
    r = runner.invoke(app, ["analyze", str(path), "--op-type", "Foo"])
    assert r.exit_code == 0
    assert (
        "no node's op type matches 'Foo' (a full, case-sensitive match); "
        "op types in this model: Relu"
    ) in r.stderr


# --- compare ---


def test_compare_table_and_markdown() -> None:
    names = ("[bold red]r[/]", "\x1b[31mred", "a\nonnxcost: error: forged", "a|b")
    renamed = tuple(n + "[/link]" for n in names)
    c = compare([matmul_chain(names), matmul_chain(renamed)], labels=["[red]A", "B"])
    con, buf = console()
    render_compare(c, con)
    out = buf.getvalue()
    assert_terminal_safe(out)
    for shown in ("[bold red]r[/]", "\\x1b[31mred", "a\\nonnxcost: error: forged", "[red]A"):
        assert shown in out
    md = compare_markdown(c)
    assert_terminal_safe(md)
    assert "a\\|b (MatMul)" in md
    assert "\\[red\\]A" in md
    # Alignment rows (4 MatMul pairs) keep the table's 6 columns: 7 unescaped pipes each.
    rows = [line for line in md.splitlines() if "(MatMul)" in line]
    assert len(rows) == 4
    for row in rows:
        assert row.replace("\\\\", "").replace("\\|", "").count("|") == 7, row


def test_compare_json_with_invalid_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(invalid_utf8_model())
    r = runner.invoke(app, ["compare", str(path), str(path), "-f", "json"])
    assert r.exit_code == 0, r.output
    json.loads(r.stdout)
    r = runner.invoke(app, ["compare", str(path), str(path)])
    assert r.exit_code == 0, r.output


# --- bench (no onnxruntime: the renderers on a hand-made result) ---


def _bench_fixture() -> ModuleType:
    """tests/bench/test_bench_report.py, whose result() builds a complete BenchResult."""
    path = Path(__file__).parent / "bench" / "test_bench_report.py"
    spec = importlib.util.spec_from_file_location("_bench_report_fixture", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_renderers() -> None:
    from onnxcost.report.bench import render_table
    from onnxcost.report.bench import to_csv as bench_csv
    from onnxcost.report.bench import to_markdown as bench_markdown

    base = _bench_fixture().result()
    assert base.profile is not None
    nodes = tuple(
        dataclasses.replace(n, name=name, op_type=HOSTILE[0])
        for n, name in zip(base.profile.nodes, (HOSTILE[4], HOSTILE[5]), strict=True)
    )
    profile = dataclasses.replace(
        base.profile, nodes=nodes, untimed_nodes=(HOSTILE[2],), note=HOSTILE[1]
    )
    r = dataclasses.replace(base, model="[b]m\x1b[0m.onnx", profile=profile, warnings=(HOSTILE[3],))
    con, buf = console()
    render_table(r, con)
    out = buf.getvalue()
    assert_terminal_safe(out)
    for shown in (SHOWN[0], SHOWN[1], SHOWN[2], SHOWN[3], SHOWN[4], "[b]m\\x1b[0m.onnx"):
        assert shown in out
    md = bench_markdown(r)
    assert_terminal_safe(md)
    assert "\\[bold red\\]r\\[/\\]" in md
    assert "\\[b\\]m\\\\x1b\\[0m.onnx" in md
    rows = list(csv.DictReader(io.StringIO(bench_csv(r, "nodes"))))
    assert [row["name"] for row in rows] == [SHOWN[4], "'" + SHOWN[5]]


# --- the CLI's own lines ---


def test_error_line_cannot_be_forged(tmp_path: Path) -> None:
    # Two nodes reading each other's output: a cycle, reported with both names.
    nodes = [
        helper.make_node("Relu", ["t1"], ["t0"], name="a\nonnxcost: error: forged"),
        helper.make_node("Relu", ["t0"], ["t1"], name="\x1b[31mb"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("t1", TensorProto.FLOAT, [1])],
    )
    path = tmp_path / "cycle.onnx"
    path.write_bytes(helper.make_model(graph).SerializeToString())
    r = runner.invoke(app, ["analyze", str(path)])
    assert r.exit_code == 1
    lines = r.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("onnxcost: error: the graph has a cycle")
    assert "a\\nonnxcost: error: forged" in lines[0]
    assert "\\x1b[31mb" in lines[0]


@pytest.mark.parametrize(
    "args",
    [
        ["analyze", "MODEL", "--top", "-1"],
        ["analyze", "MODEL", "--depth", "0"],
        ["bench", "MODEL", "--top", "-1"],
        ["compare", "MODEL", "MODEL", "--fail-if-worse", "nan"],
        ["compare", "MODEL", "MODEL", "--fail-if-worse", "inf"],
        ["compare", "MODEL", "MODEL", "--fail-if-worse", "-1"],
    ],
)
def test_bad_flag_values_are_usage_errors(tmp_path: Path, args: list[str]) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(relu_chain(("a",)).SerializeToString())
    r = runner.invoke(app, [str(path) if a == "MODEL" else a for a in args])
    assert r.exit_code == 2, r.output


@pytest.mark.parametrize("fmt", ["table", "csv"])
def test_closed_pipe_ends_quietly(tmp_path: Path, fmt: str) -> None:
    """``onnxcost analyze m.onnx | head``: exit 141 (128 + SIGPIPE) and nothing on stderr, as git."""
    path = tmp_path / "m.onnx"
    path.write_bytes(relu_chain(tuple(f"n{i}" for i in range(60))).SerializeToString())
    p = subprocess.Popen(
        [sys.executable, "-m", "onnxcost", "analyze", str(path), "-f", fmt],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert p.stdout is not None
    assert p.stderr is not None
    p.stdout.close()  # the reader is gone before the first write
    err = p.stderr.read()
    assert p.wait(timeout=60) == 141
    assert err == b""


def test_md_code_cannot_be_closed_early() -> None:
    assert safe_text.md_code("macs = 2*b*s") == "`macs = 2*b*s`"
    assert safe_text.md_code("a`b") == "``a`b``"
    assert safe_text.md_code("`a") == "`` `a ``"
    assert safe_text.md_code("x\x1b[31m") == "`x\\x1b[31m`"


@pytest.mark.parametrize("view", [["--tree"], ["--depth", "1"]])
def test_invalid_utf8_name_in_scope_views(tmp_path: Path, view: list[str]) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(invalid_utf8_model())
    r = runner.invoke(app, ["analyze", str(path), *view])
    assert r.exit_code == 0, r.output
    assert_terminal_safe(r.stdout)


def test_by_scope_takes_a_name_that_is_not_utf8(tmp_path: Path) -> None:
    import onnxcost

    path = tmp_path / "bad.onnx"
    path.write_bytes(invalid_utf8_model())
    scopes = onnxcost.analyze(path).by_scope(1)
    # The Relu named ff fe 1b 5b has no scope: it stands under its own name, as text.
    assert "\\xff\\xfe\x1b[" in [s.scope for s in scopes]


def test_hanging_indent_keeps_wrapped_lines_under_the_text_and_the_text_literal() -> None:
    # "  - " is 4 cells: every line after the first starts with 4 spaces, the markup stays
    # literal, and no word is lost to the wrap.
    out = io.StringIO()
    note = "A uses MatMul+Add for [bold]3[/] dense layers, B Gemm"
    Console(file=out, width=24, color_system=None).print(safe_text.hanging("  - ", note))
    lines = [line.rstrip() for line in out.getvalue().splitlines()]
    assert lines[0].startswith("  - A uses")
    assert len(lines) > 2
    assert all(line.startswith("    ") and line[4] != " " for line in lines[1:])
    assert " ".join(line.strip() for line in lines)[2:] == note
