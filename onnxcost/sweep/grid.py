"""GRID.toml: which command, which models, which option values; checked before anything runs.

A grid file holds ``command`` (analyze, bench, predict or llm), ``models`` (paths, globs or
built-in names), a ``[grid]`` table mapping the command's long option names to lists of values,
and optionally ``timeout_s``, ``repeat``, ``exclusive`` and ``[resources]`` (``cpu``, ``gpu``,
``accelerator_type``). Every problem (a typo'd key, an option the command does not have, an
empty axis, a value the option refuses) is one ``GridError`` naming the key.

The options a command has come from the caller (``Option``: the CLI reads them off the typer
app), so this module knows nothing of the command line above it.
"""

from __future__ import annotations

import difflib
import glob
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onnxcost.errors import OnnxcostError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

COMMANDS = ("analyze", "bench", "predict", "llm")
"""The commands a sweep may run."""

KEYS = ("command", "models", "grid", "timeout_s", "repeat", "exclusive", "resources")
"""The top-level keys of a grid file."""

RESOURCE_KEYS = ("cpu", "gpu", "accelerator_type")

RESERVED = ("format", "output", "debug", "force", "help")
"""Options the sweep sets itself (``-f json``, stdout captured) or that make no sense in a cell."""

Value = str | int | float | bool
"""One grid value as TOML gives it."""


class GridError(OnnxcostError):
    """The grid file is unreadable or names a key, option or value that cannot run."""


@dataclass(frozen=True)
class Option:
    """One long option of the command: ``name`` without its dashes (``input-shape``), whether it
    is a flag (``true`` passes it, ``false`` leaves it out), whether it repeats (``--dim``), and
    ``check``: the command's own parsing of one value, raising ValueError with the reason."""

    name: str
    flag: bool = False
    multiple: bool = False
    check: Callable[[str], None] | None = None


@dataclass(frozen=True)
class Resources:
    """What one cell needs: CPU threads, GPUs, and a GPU kind (Ray's ``accelerator_type``)."""

    cpu: float = 1.0
    gpu: float = 0.0
    accelerator_type: str | None = None


@dataclass(frozen=True)
class Grid:
    """A checked grid file. ``axes``: option name -> values, in the file's order."""

    command: str
    models: tuple[str, ...]
    axes: tuple[tuple[str, tuple[Value | tuple[str, ...], ...]], ...]
    flags: Mapping[str, Option] = field(default_factory=dict)
    timeout_s: float | None = None
    repeat: int = 1
    exclusive: bool = True
    resources: Resources = Resources()
    base: Path = Path()
    """The grid file's folder: models are found, and cells run, from there."""


def _suggest(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word.replace("_", "-"), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def read(path: Path) -> dict[str, Any]:
    """The TOML table of ``path``."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise GridError(f"cannot read grid file {path}: {e.strerror or e}") from e
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise GridError(f"{path} is not a TOML file: {e}") from e


def parse(
    table: Mapping[str, Any],
    options: Mapping[str, Mapping[str, Option]],
    *,
    base: Path = Path(),
    builtins: Sequence[str] = (),
) -> Grid:
    """Check a grid file's ``table`` against ``options`` (command -> its long options) and the
    built-in model names; return the ``Grid`` or raise ``GridError`` naming the key."""
    for key in table:
        if key not in KEYS:
            raise GridError(
                f"unknown key {key!r}{_suggest(key, KEYS)}; a grid file has {', '.join(KEYS)}"
            )
    command = table.get("command")
    if command is None:
        raise GridError(f"'command' is missing: one of {', '.join(COMMANDS)}")
    if command not in COMMANDS or command not in options:
        have = [c for c in COMMANDS if c in options]
        raise GridError(f"command {command!r} cannot be swept; one of {', '.join(have)}")
    models = _models(table.get("models"), base, builtins)
    opts = options[command]
    axes = tuple(_axis(command, name, values, opts) for name, values in _grid(table).items())
    return Grid(
        command=command,
        models=models,
        axes=axes,
        flags={name: opts[name] for name, _ in axes if opts[name].flag},
        timeout_s=_timeout(table.get("timeout_s")),
        repeat=_repeat(table.get("repeat", 1)),
        exclusive=_bool("exclusive", table.get("exclusive", True)),
        resources=_resources(table.get("resources", {})),
        base=base,
    )


def _models(models: object, base: Path, builtins: Sequence[str]) -> tuple[str, ...]:
    if not isinstance(models, list) or not models:
        raise GridError("'models' must be a non-empty list of paths, globs or built-in names")
    out: list[str] = []
    for m in models:
        if not isinstance(m, str) or not m:
            raise GridError(f"models: {m!r} is not a path, glob or built-in name")
        if any(c in m for c in "*?["):
            found = sorted(p for p in glob.glob(m, root_dir=base) if (base / p).is_file())
            if not found:
                raise GridError(f"models: {m!r} matches no file (from {base.resolve()})")
            out.extend(found)
        elif m in builtins or (base / m).exists():
            out.append(m)
        else:
            raise GridError(
                f"models: {m!r} is neither a file (from {base.resolve()}) nor a built-in model "
                f"(onnxcost zoo list){_suggest(m, builtins)}"
            )
    return tuple(out)


def _grid(table: Mapping[str, Any]) -> dict[str, Any]:
    grid = table.get("grid", {})
    if not isinstance(grid, dict):
        raise GridError("'grid' must be a table: [grid] then option = [values]")
    return grid


def _axis(
    command: str, name: str, values: object, opts: Mapping[str, Option]
) -> tuple[str, tuple[Value | tuple[str, ...], ...]]:
    where = f"grid.{name}"
    if name in RESERVED:
        raise GridError(f"{where}: the sweep sets --{name} itself; remove it from [grid]")
    if name not in opts:
        raise GridError(
            f"{where}: onnxcost {command} has no option --{name}"
            f"{_suggest(name, list(opts))} (see onnxcost {command} --help)"
        )
    if not isinstance(values, list):
        raise GridError(f"{where} must be a list of values, e.g. {name} = [{values!r}]")
    if not values:
        raise GridError(f"{where} is empty: give it at least one value, or remove it")
    opt = opts[name]
    checked = tuple(_value(where, opt, v) for v in values)
    seen: set[str] = set()
    for v in checked:
        if repr(v) in seen:
            raise GridError(f"{where}: {v!r} is listed twice")
        seen.add(repr(v))
    return name, checked


def _value(where: str, opt: Option, value: object) -> Value | tuple[str, ...]:
    if opt.flag:
        if not isinstance(value, bool):
            raise GridError(f"{where}: --{opt.name} is a flag: its values are true or false")
        return value
    if isinstance(value, list):
        if not opt.multiple:
            raise GridError(f"{where}: --{opt.name} takes one value per cell, not {value!r}")
        items = tuple(_scalar(where, opt, v) for v in value)
        if not items:
            raise GridError(f"{where}: an empty list in the values; remove it")
        return tuple(str(v) for v in items)
    return _scalar(where, opt, value)


def _scalar(where: str, opt: Option, value: object) -> Value:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise GridError(f"{where}: {value!r} is not a value of --{opt.name} (a string or number)")
    if isinstance(value, float) and not math.isfinite(value):
        raise GridError(f"{where}: {value!r} is not a finite number")
    if opt.check is not None:
        try:
            opt.check(str(value))
        except (ValueError, OnnxcostError) as e:
            raise GridError(f"{where}: {value!r}: {e}") from e
    return value


def _timeout(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise GridError(f"timeout_s must be a number of seconds > 0, not {value!r}")
    return float(value)


def _repeat(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise GridError(f"repeat must be a whole number >= 1, not {value!r}")
    return value


def _bool(key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise GridError(f"{key} must be true or false, not {value!r}")
    return value


def _resources(table: object) -> Resources:
    if not isinstance(table, dict):
        raise GridError("'resources' must be a table: [resources] then cpu = 1, gpu = 1, ...")
    for key in table:
        if key not in RESOURCE_KEYS:
            raise GridError(
                f"unknown key resources.{key}{_suggest(key, RESOURCE_KEYS)}; "
                f"[resources] has {', '.join(RESOURCE_KEYS)}"
            )
    amounts: dict[str, float] = {}
    for key in ("cpu", "gpu"):
        v = table.get(key, 1 if key == "cpu" else 0)
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0 or not math.isfinite(v):
            raise GridError(f"resources.{key} must be a number >= 0, not {v!r}")
        amounts[key] = float(v)
    kind = table.get("accelerator_type")
    if kind is not None and (not isinstance(kind, str) or not kind.strip()):
        raise GridError(
            f"resources.accelerator_type must be a GPU kind such as 'H100', not {kind!r}"
        )
    return Resources(cpu=amounts["cpu"], gpu=amounts["gpu"], accelerator_type=kind)


def load(
    path: Path, options: Mapping[str, Mapping[str, Option]], builtins: Sequence[str] = ()
) -> Grid:
    """Read and check the grid file at ``path`` (models found from its folder)."""
    try:
        return parse(read(path), options, base=path.parent, builtins=builtins)
    except GridError as e:
        message = str(e)
        raise GridError(message if message.startswith(str(path)) else f"{path}: {message}") from e


__all__ = ["COMMANDS", "Grid", "GridError", "Option", "Resources", "Value", "load", "parse", "read"]
