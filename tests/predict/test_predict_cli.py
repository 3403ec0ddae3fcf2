"""`onnxcost calibrate`, `onnxcost predict`, `llm --device` and `bench --predict`: exit codes,
one-line refusals, and the JSON each writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from onnxcost.bench.session import SessionConfig
from onnxcost.cli.app import app
from onnxcost.predict import calibrate as calibrate_module
from onnxcost.predict.device import read_device

runner = CliRunner()
MODELS = Path(__file__).resolve().parents[2] / "models"


def test_predict_json_on_a_built_in_device() -> None:
    r = runner.invoke(app, ["predict", "mlp", "--device", "a100", "-d", "batch=4", "-f", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["schema"] == "onnxcost.predict/1"
    assert data["model"] == "mlp"
    assert data["batch"] == 4
    assert data["latency_ms"] > 0
    assert {n["bound"] for n in data["nodes"]} <= {"compute", "memory", "overhead", "free"}
    assert all(n["predicted_us"] >= 0 for n in data["nodes"])


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_predict_table_and_markdown(fmt: str) -> None:
    r = runner.invoke(app, ["predict", "mlp", "--device", "H100", "-d", "batch=1", "-f", fmt])
    assert r.exit_code == 0, r.output
    assert "latency" in r.stdout
    assert "/fc1/Gemm" in r.stdout


def test_predict_refuses_a_device_for_another_provider(tmp_path: Path) -> None:
    r = runner.invoke(app, ["predict", "mlp", "--device", "H100", "--provider", "cpu"])
    assert r.exit_code == 1
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith(
        "onnxcost: error: device 'H100' was made for CUDAExecutionProvider, not "
        "CPUExecutionProvider"
    )


def test_predict_refuses_a_corrupt_device_file(tmp_path: Path) -> None:
    bad = tmp_path / "d.json"
    bad.write_text('{"schema": "onnxcost.device/1", "provider": ', encoding="utf-8")
    r = runner.invoke(app, ["predict", "mlp", "--device", str(bad)])
    assert r.exit_code == 1
    assert r.stderr.count("\n") == 1
    assert f"device file {bad} is corrupt (not JSON: " in r.stderr
    assert "Traceback" not in r.output


def test_llm_device_adds_predicted_times() -> None:
    args = ["llm", "gpt2", "-p", "kv_cache=true", "-p", "layers=1", "-p", "hidden=64"]
    args += ["-p", "heads=2", "-p", "vocab=100", "--prompt", "8", "--generate", "3"]
    r = runner.invoke(app, [*args, "--device", "H200", "-f", "json"])
    assert r.exit_code == 0, r.output
    predicted = json.loads(r.stdout)["predicted"]
    assert predicted["device"] == "H200"
    assert predicted["roofline_bound"] is True
    first, last = predicted["decode_first_ms"], predicted["decode_last_ms"]
    # The mean step is (first + last) / 2; tokens/s batch x 1000 / that; the generation the
    # prefill plus M - 1 = 2 mean steps.
    assert predicted["decode_step_ms"] == pytest.approx((first + last) / 2)
    assert predicted["tokens_per_s"] == pytest.approx(1000 / predicted["decode_step_ms"])
    assert predicted["generation_ms"] == pytest.approx(
        predicted["time_to_first_token_ms"] + 2 * predicted["decode_step_ms"]
    )


def test_calibrate_writes_a_device_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = calibrate_module.calibrate_device

    def quick(config: SessionConfig, **kwargs: Any) -> Any:
        # The CLI's wiring on a calibration of a few seconds (the full one: test_predict_calibrate).
        return real(
            config, seconds_per_point=0.003, scale=0.25, ceilings_sizes=(64, 1 << 14), **kwargs
        )

    monkeypatch.setattr(calibrate_module, "calibrate_device", quick)
    out = tmp_path / "dev.json"
    r = runner.invoke(app, ["calibrate", "--threads", "1", "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    assert f"wrote {out}" in r.stderr
    device = read_device(out)
    assert device.provider == "CPUExecutionProvider"
    assert device.threads == 1
    r = runner.invoke(app, ["predict", "mlp", "--device", str(out), "-f", "json"])
    assert r.exit_code == 0, r.output


def test_calibrate_refuses_to_overwrite_a_model(tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes((MODELS / "mlp_torch_dynamo.onnx").read_bytes())
    r = runner.invoke(app, ["calibrate", "-o", str(model)])
    assert r.exit_code == 1
    assert model.read_bytes() == (MODELS / "mlp_torch_dynamo.onnx").read_bytes()


@pytest.mark.ort
def test_bench_predict_puts_predicted_beside_measured(tmp_path: Path) -> None:
    args = ["bench", str(MODELS / "mlp_torch_dynamo.onnx"), "-d", "batch=1", "--threads", "1"]
    args += ["--runs", "5", "--warmup", "1", "--min-seconds", "0", "--profile-runs", "3"]
    r = runner.invoke(app, [*args, "--predict", "A100", "--provider", "cpu", "-f", "json"])
    assert r.exit_code == 1  # the A100 is a CUDA device: refused before any run
    assert "was made for CUDAExecutionProvider, not CPUExecutionProvider" in r.stderr
    from onnxcost.predict.device import BUILTIN

    cpu = BUILTIN["A100"].to_dict()
    cpu["provider"] = "CPUExecutionProvider"
    path = tmp_path / "cpu_a100.json"
    path.write_text(json.dumps(cpu), encoding="utf-8")
    r = runner.invoke(app, [*args, "--predict", str(path), "-f", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    predicted = data["predicted"]
    assert predicted["measured_ms"] == data["latency_ms"]["median"]
    misses = [abs(n["miss_us"]) for n in predicted["nodes"]]
    assert misses == sorted(misses, reverse=True)
    assert misses


def test_a_latency_under_a_microsecond_is_not_printed_as_zero() -> None:
    # paddle2onnx's tiny LSTM (4 -> 8, one step) on the A100's datasheet roofline: its 2,760
    # bytes moved (2,304 read, 456 written) at 2,039 GB/s take 2,760 / 2.039e12 s = 1.35e-06
    # ms, which 4 decimals printed as "0.0000 ms" in the summary and the sweep's table
    path = str(Path(__file__).resolve().parents[1] / "data" / "exports" / "paddle_lstm_op11.onnx")
    r = runner.invoke(app, ["predict", path, "--device", "a100", "-f", "json"])
    latency = json.loads(r.stdout)["latency_ms"]
    assert latency == pytest.approx(2_760 / 2.039e12 * 1e3, rel=1e-9)
    r = runner.invoke(app, ["predict", path, "--device", "a100"], env={"COLUMNS": "100"})
    assert r.exit_code == 0, r.output
    assert f"{latency:.3g} ms" in r.stdout
    assert "0.0000 ms" not in r.stdout
    # every node is memory-bound: their time together is the latency, 0.00135 us, not 0.00
    assert f"memory-bound     18 nodes, {latency * 1e3:.3g} us" in r.stdout
    args = ["predict", path, "--device", "a100", "--sweep", "DynamicDimension.0=1,8"]
    r = runner.invoke(app, args, env={"COLUMNS": "100"})
    assert r.exit_code == 0, r.output
    assert f"{latency:.3g}" in r.stdout  # batch 1, time 1: the point above
