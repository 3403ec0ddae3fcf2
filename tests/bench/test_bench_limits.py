"""Bounded work in bench: a per-run --timeout, --threads checked against the machine,
finite --min-seconds, and onnxruntime's own log kept out of the terminal (issue 11, item 5)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxcost.bench import BenchOptions
from onnxcost.bench.run import thread_limit
from onnxcost.bench.watchdog import check_timeout
from onnxcost.cli.app import app
from onnxcost.errors import BenchError, UsageError

pytestmark = pytest.mark.ort


def endless_loop() -> onnx.ModelProto:
    """y = x + 1, 10**12 times: a Loop that never finishes in practice."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
            helper.make_node("Add", ["x_in", "one"], ["x_out"], name="add_one"),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [1]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [1]),
        ],
        [helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["trips", "cond", "x"], ["y"], body=body, name="loop")],
        "endless",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        [
            helper.make_tensor("trips", TensorProto.INT64, [], [10**12]),
            helper.make_tensor("cond", TensorProto.BOOL, [], [True]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def failing_reshape() -> onnx.ModelProto:
    """Reshape of 6 elements to [5]: onnxruntime fails while running it."""
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "s"], ["y"], name="r")],
        "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("s", TensorProto.INT64, [1], [5])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.fixture
def loop_path(tmp_path: Path) -> str:
    path = tmp_path / "endless.onnx"
    onnx.save(endless_loop(), path)
    return str(path)


def test_a_run_past_the_timeout_is_stopped(loop_path: str, fast: BenchOptions) -> None:
    from onnxcost.bench import run_bench

    start = time.monotonic()
    with pytest.raises(BenchError, match=r"longer than --timeout 0\.3 s"):
        run_bench(loop_path, replace(fast, timeout_s=0.3))
    # stopped within a poll (0.03 s) of the limit plus session set-up, not after 10**12 trips.
    assert time.monotonic() - start < 20


def test_cli_timeout_is_one_line_and_exit_1(loop_path: str) -> None:
    out = CliRunner().invoke(
        app, ["bench", loop_path, "--timeout", "0.3", "--warmup", "0", "--min-seconds", "0"]
    )
    assert out.exit_code == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("onnxcost: error: ")
    assert "--timeout" in lines[0]


def test_timeout_values() -> None:
    assert check_timeout(None) is None
    assert check_timeout(0) is None  # 0: no limit
    assert check_timeout(2.5) == 2.5
    for bad in (float("inf"), float("nan"), -1.0):
        with pytest.raises(UsageError, match="--timeout"):
            check_timeout(bad)


def test_default_timeout_is_on(mm_path: str, fast: BenchOptions) -> None:
    from onnxcost.bench import run_bench
    from onnxcost.bench.watchdog import DEFAULT_TIMEOUT_S

    assert BenchOptions().timeout_s == DEFAULT_TIMEOUT_S
    # a normal run is not disturbed by the watchdog.
    r = run_bench(mm_path, replace(fast, dims={"N": 1}))
    assert r.runs == 5


def test_threads_are_checked_against_the_machine(mm_path: str, fast: BenchOptions) -> None:
    from onnxcost.bench import run_bench

    cpus = os.cpu_count() or 1
    # at most 4 x the logical CPUs, and never above 1024.
    assert thread_limit() == min(4 * cpus, 1024)
    with pytest.raises(UsageError, match=f"at most {thread_limit()}"):
        run_bench(mm_path, replace(fast, threads=100_000))
    with pytest.raises(UsageError, match="--inter-threads"):
        run_bench(mm_path, replace(fast, inter_threads=thread_limit() + 1))
    out = CliRunner().invoke(app, ["bench", mm_path, "--threads", "100000"])
    assert out.exit_code == 2
    assert f"at most {thread_limit()}" in out.stderr


@pytest.mark.parametrize("value", ["inf", "-inf"])
def test_min_seconds_must_be_finite(mm_path: str, value: str) -> None:
    out = CliRunner().invoke(app, ["bench", mm_path, "--min-seconds", value])
    assert out.exit_code == 2
    assert "--min-seconds" in out.stderr
    assert "Traceback" not in out.output


def test_min_seconds_nan_in_the_library(mm_path: str) -> None:
    from onnxcost.bench import run_bench

    with pytest.raises(UsageError, match="--min-seconds"):
        run_bench(mm_path, BenchOptions(min_seconds=float("nan")))


def test_onnxruntime_log_stays_out_of_the_terminal(tmp_path: Path) -> None:
    path = tmp_path / "bad.onnx"
    onnx.save(failing_reshape(), path)
    # onnxruntime writes its log to file descriptor 2 itself: only a real process shows it.
    proc = subprocess.run(
        [sys.executable, "-m", "onnxcost", "bench", str(path), "--warmup", "0", "--runs", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("onnxcost: error: onnxruntime failed running the model")
    assert "\x1b[" not in proc.stderr
