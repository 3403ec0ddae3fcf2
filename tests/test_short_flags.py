"""Every short flag means one thing in every command (``-p`` was --provider in bench and
--param in llm and zoo save)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import typer

from onnxcost.cli.app import app


def _commands(command: Any, path: str = "onnxcost") -> list[tuple[str, Any]]:
    """Every command under ``command`` (typer bundles its own click: read by duck typing)."""
    out = [(path, command)]
    if hasattr(command, "list_commands"):
        ctx = command.make_context(path, [], resilient_parsing=True)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None
            out += _commands(sub, f"{path} {name}")
    return out


def _short_flags() -> dict[str, dict[str, list[str]]]:
    """Short flag -> the long names it stands for -> the commands where it does."""
    meaning: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path, command in _commands(typer.main.get_command(app)):
        for param in command.params:
            if param.param_type_name != "option":
                continue
            flags = [*param.opts, *param.secondary_opts]
            longs = sorted(f for f in flags if f.startswith("--"))
            for short in (f for f in flags if not f.startswith("--")):
                meaning[short][" / ".join(longs)].append(path)
    return meaning


def test_every_short_flag_has_one_meaning() -> None:
    meaning = _short_flags()
    clashes = {short: dict(longs) for short, longs in meaning.items() if len(longs) > 1}
    assert not clashes


def test_the_short_flags_users_rely_on() -> None:
    meaning = _short_flags()
    assert set(meaning["-p"]) == {"--param"}
    assert set(meaning["-e"]) == {"--provider"}
    assert len(meaning["-p"]["--param"]) == 2  # zoo save and llm
    assert "onnxcost bench" in meaning["-e"]["--provider"]
    for short, long in {"-f": "--format", "-o": "--output", "-s": "--input-shape"}.items():
        assert set(meaning[short]) == {long}
