"""The command line as a user runs it: exit codes, one-line errors, formats, flags."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from onnxcost_testing import parse
from typer.testing import CliRunner

from onnxcost.cli.app import app

runner = CliRunner()

TEXT = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[batch,3,8,8] x) => (float[batch,4,8,8] y) <float[4,3,3,3] w = {1.0}, float[4] b = {1.0}> {
  c = Conv <pads=[1,1,1,1]> (x, w, b)
  y = Relu (c)
}"""


@pytest.fixture
def model(tmp_path: Path) -> Path:
    p = tmp_path / "m.onnx"
    p.write_bytes(parse(TEXT).SerializeToString())
    return p


def test_version() -> None:
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0
    assert r.output.startswith("onnxcost ")


def test_analyze_table(model: Path) -> None:
    r = runner.invoke(app, ["analyze", str(model), "--dim", "batch=2"])
    assert r.exit_code == 0, r.output
    # Conv: 2x4x8x8 = 512 outputs x 27 = 13,824 MACs
    assert "13,824" in r.output
    assert "Summary by op type" in r.output


def test_analyze_json_has_exact_integers(model: Path) -> None:
    r = runner.invoke(app, ["analyze", str(model), "--format", "json", "--dim", "batch=2"])
    assert r.exit_code == 0
    d = json.loads(r.stdout)
    # Conv 13,824 MACs; FLOPs 2 x 13,824 + bias 512 + Relu 512 = 28,672
    assert (d["totals"]["macs"], d["totals"]["flops"]) == (13_824, 28_672)


def test_analyze_csv_and_filters(model: Path) -> None:
    r = runner.invoke(app, ["analyze", str(model), "-f", "csv", "--op-type", "Conv"])
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert [row["op_type"] for row in rows] == ["Conv"]
    # batch unset -> 1: 256 outputs x 27 = 6,912 MACs
    assert rows[0]["macs"] == "6912"


def test_analyze_markdown_and_output_file(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    r = runner.invoke(
        app, ["analyze", str(model), "-f", "markdown", "-o", str(out), "--depth", "1"]
    )
    assert r.exit_code == 0
    assert out.read_text().startswith("# ")


def test_convention_flag(model: Path) -> None:
    r = runner.invoke(app, ["analyze", str(model), "-f", "json", "--convention", "fvcore"])
    assert json.loads(r.stdout)["totals"]["flops"] == 6_912


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["analyze", "nope.onnx"], "no such file"),
        (["analyze", "{model}", "--input-shape", "x=1x3x8"], "rank 4"),
        (["analyze", "{model}", "--input-shape", "images=1x3x8x8"], "inputs are: x"),
        (["analyze", "{model}", "--dim", "seq=3"], "symbols are: batch"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(model: Path, args: list[str], message: str) -> None:
    r = runner.invoke(app, [a.format(model=model) for a in args])
    assert r.exit_code == 1
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.output


def test_truncated_model_exit_1(tmp_path: Path) -> None:
    p = tmp_path / "t.onnx"
    data = parse(TEXT).SerializeToString()
    p.write_bytes(data[:40])
    r = runner.invoke(app, ["analyze", str(p)])
    assert r.exit_code == 1
    assert "Traceback" not in r.output


def test_usage_error_exit_2(model: Path) -> None:
    r = runner.invoke(app, ["analyze", str(model), "--dim", "batch"])
    assert r.exit_code == 2
    r = runner.invoke(app, ["analyze", str(model), "--sort-by", "speed"])
    assert r.exit_code == 2


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    r = runner.invoke(app, ["analyze", str(tmp_path / "nope.onnx"), "--debug"])
    assert r.exit_code == 1
    assert r.exception is not None


def test_ops_lists_formulas() -> None:
    r = runner.invoke(app, ["ops", "--format", "json"])
    d = json.loads(r.stdout)
    conv = next(o for o in d["supported"] if o["op_type"] == "ConvTranspose")
    assert "numel(X)" in conv["formula"]
    assert any(o["op_type"] == "ImageDecoder" for o in d["unsupported"])


MLP = Path(__file__).parent.parent / "models" / "mlp_torch_dynamo.onnx"
FAST = ["--runs", "5", "--warmup", "1", "--min-seconds", "0", "-q"]


@pytest.mark.ort
def test_bench_json_contract() -> None:
    r = runner.invoke(app, ["bench", str(MLP), "-f", "json", *FAST])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["schema"] == "onnxcost.bench/1"
    assert d["provider"] == "CPUExecutionProvider"
    assert d["runs"] >= 5
    assert {"min", "mean", "median", "p90", "p95", "p99", "max", "std"} <= d["latency_ms"].keys()


@pytest.mark.ort
def test_bench_unavailable_provider_is_one_line() -> None:
    from onnxcost.bench import available_providers

    if any(p.name == "CUDAExecutionProvider" and p.loads for p in available_providers()):
        pytest.skip("CUDA loads on this machine")
    r = runner.invoke(app, ["bench", str(MLP), "--provider", "CUDAExecutionProvider", *FAST])
    assert r.exit_code == 1
    assert len(r.stderr.strip().splitlines()) == 1
    from onnxcost.bench.providers import no_nvidia_driver

    # No driver: no package helps, and the line says so; a driver: the install line.
    assert ("no NVIDIA driver or GPU" if no_nvidia_driver() else "pip install") in r.stderr
    assert "Traceback" not in r.output


def test_bench_bad_flags_are_usage_errors() -> None:
    r = runner.invoke(app, ["bench", str(MLP), "--batch", "1,two"])
    assert r.exit_code == 2
    r = runner.invoke(app, ["bench", str(MLP), "--provider", "NoSuchExecutionProvider"])
    assert r.exit_code == 2
