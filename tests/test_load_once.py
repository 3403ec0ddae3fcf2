"""Each command loads its model once: one ``prepare`` handed on, never a second load."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import onnx
import pytest
from typer.testing import CliRunner

import onnxcost.load.model
import onnxcost.prepare
from onnxcost import zoo
from onnxcost.cli.app import app

runner = CliRunner()
MLP = Path(__file__).parent.parent / "models" / "mlp_torch_dynamo.onnx"


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts files and bytes parsed (``load_model``) and built-in models built: a
    ModelProto copied into ``prepare`` is no load and is not counted."""
    counts: Counter[str] = Counter()
    real_load, real_build = onnxcost.load.model.load_model, onnxcost.prepare.build_builtin

    def load_model(source: Any, **kw: Any) -> Any:
        if not isinstance(source, onnx.ModelProto):
            counts["load"] += 1
        return real_load(source, **kw)

    def build_builtin(name: str, **kw: Any) -> Any:
        built = real_build(name, **kw)
        if built is not None:
            counts["build"] += 1
        return built

    monkeypatch.setattr(onnxcost.prepare, "load_model", load_model)
    monkeypatch.setattr(onnxcost.prepare, "build_builtin", build_builtin)
    return counts


def test_analyze_symbolic_loads_once(loads: Counter[str]) -> None:
    r = runner.invoke(app, ["analyze", str(MLP), "--symbolic", "-f", "json"])
    assert r.exit_code == 0, r.output
    assert loads == Counter(load=1)


def test_analyze_netron_loads_once(loads: Counter[str], tmp_path: Path) -> None:
    out = tmp_path / "mlp.json"
    r = runner.invoke(app, ["analyze", str(MLP), "-f", "netron", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert out.stat().st_size > 0
    assert loads == Counter(load=1)


def test_annotate_loads_once(loads: Counter[str], tmp_path: Path) -> None:
    out = tmp_path / "mlp_annotated.onnx"
    r = runner.invoke(app, ["annotate", str(MLP), str(out)])
    assert r.exit_code == 0, r.output
    assert loads == Counter(load=1)


def test_annotate_builtin_builds_once(loads: Counter[str], tmp_path: Path) -> None:
    out = tmp_path / "mlp.onnx"
    r = runner.invoke(app, ["annotate", "mlp", str(out)])
    assert r.exit_code == 0, r.output
    assert loads == Counter(build=1)


def test_llm_loads_once(loads: Counter[str], tmp_path: Path) -> None:
    params = {"layers": 2, "hidden": 32, "heads": 4, "vocab": 64, "max_positions": 32}
    path = zoo.save(
        "gpt2", tmp_path / "gpt2_kv.onnx", weights=False, params={**params, "kv_cache": True}
    )
    loads.clear()
    r = runner.invoke(app, ["llm", str(path), "--prompt", "8", "--generate", "3", "-f", "json"])
    assert r.exit_code == 0, r.output
    assert loads == Counter(load=1)


TINY_DECODER = ["-p", "kv_cache=true", "-p", "layers=2", "-p", "hidden=32", "-p", "heads=4"]
TINY_DECODER += ["-p", "vocab=64", "-p", "max_positions=32"]


def test_llm_builtin_with_params_builds_once(loads: Counter[str]) -> None:
    args = ["llm", "gpt2", *TINY_DECODER, "--prompt", "8", "--generate", "3", "-f", "json"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert loads == Counter(build=1)


@pytest.mark.ort
def test_llm_bench_builds_the_builtin_once(loads: Counter[str]) -> None:
    """The decoder analysed is the one run: built once, with its weights."""
    pytest.importorskip("onnxruntime")
    args = ["llm", "gpt2", *TINY_DECODER, "--prompt", "4", "--generate", "3", "--bench"]
    r = runner.invoke(app, [*args, "--threads", "1", "-f", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["bench"]["decode_steps"] == 2  # M - 1 = 3 - 1
    assert loads == Counter(build=1)


@pytest.mark.ort
def test_llm_bench_loads_the_file_once(loads: Counter[str], tmp_path: Path) -> None:
    params = {"layers": 2, "hidden": 32, "heads": 4, "vocab": 64, "max_positions": 32}
    path = zoo.save("gpt2", tmp_path / "gpt2_kv.onnx", params={**params, "kv_cache": True})
    loads.clear()
    args = ["llm", str(path), "--prompt", "4", "--generate", "3", "--bench", "--threads", "1"]
    r = runner.invoke(app, [*args, "-f", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["bench"]["decode_steps"] == 2
    assert loads == Counter(load=1)


@pytest.mark.ort
def test_bench_netron_loads_once(loads: Counter[str], tmp_path: Path) -> None:
    out = tmp_path / "mlp.json"
    args = ["bench", str(MLP), "--runs", "2", "--warmup", "1", "--min-seconds", "0", "--profile"]
    r = runner.invoke(app, [*args, "-q", "-f", "netron", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert loads == Counter(load=1)
