"""cli.render: one ``render`` and one ``Format`` for every command; each command offers its
subset of the formats, refused with click's own message (the same as before the enum was one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from onnxcost.cli.app import COMMANDS, app, build, invoked
from onnxcost.cli.render import Format, Views, render

runner = CliRunner()

LIST = "'table', 'json', 'csv', 'markdown'"
PAGE = "'table', 'json', 'markdown', 'html'"
REPORT = "'table', 'json', 'csv', 'markdown', 'html', 'netron'"


@pytest.mark.parametrize(
    ("args", "offered"),
    [
        (["ops", "-f", "html"], LIST),
        (["zoo", "list", "-f", "netron"], LIST),
        (["providers", "-f", "html"], LIST),
        (["llm", "mlp", "--prompt", "3", "--generate", "2", "-f", "csv"], PAGE),
        (["compare", "mlp", "mlp", "-f", "netron"], PAGE),
        (["analyze", "mlp", "-f", "pdf"], REPORT),
        (["bench", "mlp", "-f", "pdf"], REPORT),
    ],
)
def test_a_format_the_command_does_not_offer_is_a_usage_error(
    args: list[str], offered: str
) -> None:
    r = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert r.exit_code == 2
    bad = args[-1]
    assert f"'{bad}' is not one of {offered}." in " ".join(r.output.split())


def _format_choices(command: Any, path: str = "onnxcost") -> dict[str, list[str]]:
    """--format's choices per command (typer bundles its own click: read by duck typing)."""
    out: dict[str, list[str]] = {}
    if hasattr(command, "list_commands"):
        ctx = command.make_context(path, [], resilient_parsing=True)
        for name in command.list_commands(ctx):
            out.update(_format_choices(command.get_command(ctx, name), f"{path} {name}"))
    for param in command.params:
        if "--format" in param.opts:
            out[path] = list(param.type.choices)
    return out


def test_every_offered_format_is_one_of_the_one_enum() -> None:
    choices = _format_choices(typer.main.get_command(app))
    # analyze, bench, compare, llm, ops, predict, providers, sweep, zoo list
    assert len(choices) == 9
    for path, offered in choices.items():
        assert offered[0] == "table", path
        assert {Format(c) for c in offered} <= set(Format), path


def _views(drawn: list[int]) -> Views:
    return Views(table=lambda console: drawn.append(console.width), json=lambda: '{"a": 1}')


def test_a_format_without_a_writer_is_drawn_as_the_table(tmp_path: Path) -> None:
    drawn: list[int] = []
    out = tmp_path / "t.txt"
    render(_views(drawn), Format.csv, out)
    # into a file, a table is laid out 200 columns wide (render_rich), without --wide
    assert drawn == [200]
    render(_views(drawn), Format.markdown, out, wide=True)
    assert drawn == [200, 10_000]


def test_json_ends_with_one_newline(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    render(_views([]), Format.json, out)
    assert out.read_text() == '{"a": 1}\n'
    assert json.loads(out.read_text()) == {"a": 1}


def test_a_result_without_views_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="no views of int"):
        render(3, Format.table, None)


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_analyze_loads_no_other_command_s_results(fmt: str) -> None:
    # render tells the result types apart without importing bench, compare or llm: importing
    # them to test an analysis took 0.2 s of a 1.5 s `onnxcost analyze`.
    import subprocess
    import sys

    code = (
        "import sys\nfrom onnxcost.cli.app import main\n"
        f"sys.argv = ['onnxcost', 'analyze', 'mlp', '-f', '{fmt}']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    modules = set(done.stdout.strip().splitlines()[-1].split())
    assert "onnxcost.cli.render" in modules
    assert (
        sorted(
            m
            for m in modules
            if m.split(".")[:2]
            in (["onnxcost", "bench"], ["onnxcost", "compare"], ["onnxcost", "llm"])
        )
        == []
    )
    # main builds the command it runs alone (cli.app.build), and the table and JSON need
    # neither the HTML pages nor the other text formats: 17 ms of a 0.28 s start together.
    commands = {m for m in modules if m.startswith("onnxcost.cli.") and m[13:] in COMMANDS}
    assert commands == {"onnxcost.cli.analyze"}
    assert not modules & {"onnxcost.report.html", "onnxcost.report.as_text"}


# --- the listing commands: every offered format is that format ------------------------------


def _csv_rows(text: str) -> list[list[str]]:
    import csv
    import io

    return list(csv.reader(io.StringIO(text)))


def _markdown_cells(text: str) -> list[list[str]]:
    """The cells of a GitHub table, split at the pipes that are not escaped (``\\|``)."""
    import re

    lines = text.splitlines()
    assert lines, "no Markdown"
    for line in lines:
        assert line.startswith(("| ", "|-")), line
        assert line.endswith((" |", "-|")), line
    return [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]


def _listing(args: list[str], fmt: str) -> str:
    r = runner.invoke(app, [*args, "-f", fmt], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    return r.stdout


def _zoo_expected() -> tuple[list[str], list[str]]:
    from onnxcost import zoo

    return ["name", "model", "inputs", "parameters (--param)"], list(zoo.MODELS)


def _providers_expected() -> tuple[list[str], list[str]]:
    from onnxcost.bench import available_providers

    return ["provider", "state", "detail"], [p.name for p in available_providers()]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["zoo", "list"], _zoo_expected),
        pytest.param(["providers"], _providers_expected, marks=pytest.mark.ort),
    ],
)
def test_listings_write_csv_and_markdown_not_the_terminal_table(
    args: list[str], expected: Any
) -> None:
    # Both printed the terminal table for -f csv and -f markdown: csv.reader then read one
    # cell per line, and no line was a Markdown row.
    header, names = expected()
    rows = _csv_rows(_listing(args, "csv"))
    assert rows[0] == header
    assert [r[0] for r in rows[1:]] == names
    assert {len(r) for r in rows} == {len(header)}
    head, rule, *body = _markdown_cells(_listing(args, "markdown"))
    assert head == header
    assert rule == ["---"] * len(header)
    assert [r[0] for r in body] == names
    assert {len(r) for r in body} == {len(header)}


def test_ops_csv_keeps_the_formula_s_commas() -> None:
    # ops wrote its CSV by hand with each ',' in a formula made ';'; the CSV writer quotes it.
    from onnxcost.costs.catalog import known_unsupported, supported

    every = [*supported(), *known_unsupported()]
    rows = _csv_rows(_listing(["ops"], "csv"))
    assert rows[0] == ["domain", "op_type", "opsets", "status", "formula", "backward"]
    assert [tuple(r) for r in rows[1:]] == [tuple(r) for r in every]
    assert any("," in r.formula for r in every)  # the case the old CSV altered
    head, _rule, *body = _markdown_cells(_listing(["ops"], "markdown"))
    assert head == rows[0]
    assert len(body) == len(every)
    assert {len(r) for r in body} == {6}


def test_main_builds_the_command_it_runs_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("_ONNXCOST_COMPLETE", raising=False)
    assert invoked(["analyze", "m.onnx", "--top", "3"]) == "analyze"
    assert invoked(["zoo", "list"]) == "zoo"
    # the root's own flags, no command, and a name that is none need every command: --help
    # lists them, and click's "No such command" error is the whole app's
    assert invoked(["--help"]) is None
    assert invoked(["--version"]) is None
    assert invoked([]) is None
    assert invoked(["analyse", "m.onnx"]) is None
    assert invoked(["sweep", "grid.toml"]) is None  # it reads every command's options
    monkeypatch.setenv("_ONNXCOST_COMPLETE", "complete_bash")
    assert invoked(["analyze"]) is None  # shell completion offers every command
    one = typer.main.get_command(build("llm"))
    assert list(one.commands) == ["llm"]  # type: ignore[attr-defined]
    every = typer.main.get_command(build())
    assert list(every.commands) == list(COMMANDS)  # type: ignore[attr-defined]


def test_one_command_s_app_gives_the_whole_app_s_help() -> None:
    whole = runner.invoke(app, ["analyze", "--help"], env={"COLUMNS": "120"})
    alone = runner.invoke(build("analyze"), ["analyze", "--help"], env={"COLUMNS": "120"})
    assert whole.exit_code == alone.exit_code == 0
    assert "Usage: onnxcost analyze [OPTIONS]" in whole.output
    assert alone.output == whole.output
