"""onnxcost check: budget parsing, pass and fail, exit codes (0 ok, 1 over budget, 2 usage)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from onnxcost.analysis.budget import budget, check, parse_bytes, parse_count, parse_ms
from onnxcost.analysis.records import Totals
from onnxcost.cli.app import app
from onnxcost.errors import UsageError

MODELS = Path(__file__).resolve().parents[1] / "models"
RESNET = str(MODELS / "resnet20_keras.onnx")
MLP = str(MODELS / "mlp_keras.onnx")
runner = CliRunner()

# resnet20 (models/README.md): 40,813,184 MACs, 271,690 params. Its peak activation is three
# 1x16x32x32 float32 tensors live at once in a stage-1 block (the block input kept for the
# residual Add, the conv input, the conv output): 3 * 16*32*32 * 4 = 196,608 bytes.
RESNET_MACS = 40_813_184
RESNET_PARAMS = 271_690
RESNET_PEAK = 196_608


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2G", 2_000_000_000),
        ("12M", 12_000_000),
        ("12.5M", 12_500_000),
        ("350K", 350_000),
        ("1T", 1_000_000_000_000),
        ("7", 7),
        ("1_000", 1_000),
        ("3g", 3_000_000_000),
    ],
)
def test_parse_count(text: str, value: int) -> None:
    assert parse_count(text) == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("64MB", 64_000_000),
        ("64MiB", 67_108_864),  # 64 * 1024 * 1024
        ("1GB", 1_000_000_000),
        ("1GiB", 1_073_741_824),  # 1024 ** 3
        ("512KiB", 524_288),
        ("2KB", 2_000),
        ("4096", 4_096),
        ("100B", 100),
    ],
)
def test_parse_bytes(text: str, value: int) -> None:
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text", ["", "G", "2X", "-1M", "1.5", "64MB", "1e9", "two"])
def test_parse_count_rejects(text: str) -> None:
    with pytest.raises(UsageError, match="--max-macs"):
        parse_count(text, "--max-macs")


@pytest.mark.parametrize("text", ["64M", "64mbit", "1.0000001KB", "MiB"])
def test_parse_bytes_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        parse_bytes(text)


def test_parse_ms() -> None:
    assert parse_ms("5") == 5.0
    assert parse_ms("2.5ms") == 2.5
    for bad in ("0", "-1", "fast", "inf"):
        with pytest.raises(UsageError):
            parse_ms(bad)


def test_check_lines() -> None:
    totals = Totals(
        macs=1_500,
        flops=3_000,
        params=10,
        param_bytes=40,
        stat_params=0,
        bytes_read=0,
        bytes_written=0,
        peak_activation_bytes=2_048,
    )
    over, within, at_limit = check(
        totals,
        (
            budget("macs", 1_000),
            budget("params", 20),
            budget("peak_activation_bytes", 2_048),
        ),
    )
    # 1,500 - 1,000 = 500 over, 50% of the budget
    assert over.exceeded
    assert over.line() == "MACs 1,500 exceeds the budget 1,000 by 500 (+50.00%)"
    assert not within.exceeded
    assert within.usage() == "params 10 of 20 (50.00%)"
    assert not at_limit.exceeded  # a budget is inclusive
    with pytest.raises(UsageError, match="--bench"):
        check(totals, (budget("latency_ms", 5.0),))
    with pytest.raises(UsageError, match="no budget metric"):
        budget("speed", 1)


def test_cli_within_budgets() -> None:
    r = runner.invoke(
        app,
        ["check", RESNET, "--max-macs", "41M", "--max-params", "272K", "--max-peak-activation",
         "192KiB"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    # 40,813,184 / 41,000,000 = 99.54%; 271,690 / 272,000 = 99.89%; 196,608 = 192 KiB exactly
    assert r.stdout.strip() == (
        f"ok: {RESNET} is within 3 budgets: MACs 40,813,184 of 41,000,000 (99.54%); "
        "params 271,690 of 272,000 (99.89%); "
        "peak activation 196,608 bytes of 196,608 bytes (100.00%)"
    )


def test_cli_over_budget_one_line_each() -> None:
    r = runner.invoke(
        app,
        ["check", RESNET, "--max-macs", "40M", "--max-params", "270K", "--max-flops", "1G",
         "--max-peak-activation", "196607"],
    )  # fmt: skip
    assert r.exit_code == 1
    assert r.stdout == ""
    # 40,813,184 - 40,000,000 = 813,184 (2.03%); 271,690 - 270,000 = 1,690 (0.63%);
    # peak 196,608 - 196,607 = 1 byte; FLOPs are within 1G.
    assert r.stderr.splitlines() == [
        "onnxcost: over budget: MACs 40,813,184 exceeds the budget 40,000,000 by 813,184 (+2.03%)",
        "onnxcost: over budget: params 271,690 exceeds the budget 270,000 by 1,690 (+0.63%)",
        "onnxcost: over budget: peak activation 196,608 bytes exceeds the budget 196,607 bytes "
        "by 1 byte (+<0.01%)",
    ]


def test_cli_param_bytes_budget() -> None:
    # 104,938 float32 params = 419,752 bytes; 400 KiB = 409,600: over by 10,152 (2.48%)
    r = runner.invoke(app, ["check", MLP, "--max-param-bytes", "400KiB"])
    assert r.exit_code == 1
    assert (
        "param bytes 419,752 bytes exceeds the budget 409,600 bytes by 10,152 bytes (+2.48%)"
        in (r.stderr)
    )
    assert runner.invoke(app, ["check", MLP, "--max-param-bytes", "420KB"]).exit_code == 0


def test_cli_dim_scales_the_budgeted_numbers() -> None:
    # batch 2: 2 * 40,813,184 = 81,626,368 MACs, over an 80M budget
    r = runner.invoke(app, ["check", RESNET, "--max-macs", "80M", "--dim", "batch=2"])
    assert r.exit_code == 1
    assert "MACs 81,626,368 exceeds the budget 80,000,000" in r.stderr


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["check", RESNET], 2, "no budget given"),
        (["check", RESNET, "--max-macs", "2X"], 2, "--max-macs '2X'"),
        (["check", RESNET, "--max-peak-activation", "64M"], 2, "--max-peak-activation '64M'"),
        (["check", RESNET, "--max-latency-ms", "5"], 2, "add --bench"),
        (["check", RESNET, "--max-macs", "1G", "--runs", "5"], 2, "only apply with --bench"),
        (["check", "missing.onnx", "--max-macs", "1G"], 1, "missing.onnx: no such file"),
    ],
)
def test_cli_errors(args: list[str], code: int, message: str) -> None:
    r = runner.invoke(app, args)
    assert r.exit_code == code
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.ort
def test_cli_latency_budget() -> None:
    args = ["check", MLP, "--bench", "--runs", "3", "--warmup", "1", "--max-macs", "1G"]
    r = runner.invoke(app, [*args, "--max-latency-ms", "10000"])
    assert r.exit_code == 0, r.output
    assert "latency (median)" in r.stdout
    r = runner.invoke(app, [*args, "--max-latency-ms", "0.000001"])
    assert r.exit_code == 1
    assert "latency (median)" in r.stderr
    assert "exceeds the budget 1e-06 ms" in r.stderr
