"""Lines that must not contradict what they sit under (issue 27: small wording)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from onnxcost.bench.run import noisy_warning
from onnxcost.cli.app import app

MLP = Path(__file__).resolve().parent.parent / "models" / "mlp_keras.onnx"
runner = CliRunner()


@pytest.mark.parametrize(
    ("cv", "shown"),
    [
        (0.1004, "CV 10.04% > 10%"),  # printed as 10% it read "CV 10% > 10%"
        (0.10049, "CV 10.05% > 10%"),  # 10.049 to two decimals is 10.05, above 10.00
        (0.1000001, "CV 10.00001% > 10%"),
        (0.1051, "CV 11% > 10%"),  # 10.51 rounds to 11: whole percent is enough
        (0.25, "CV 25% > 10%"),
    ],
)
def test_a_noisy_cv_never_reads_as_the_threshold(cv: float, shown: str) -> None:
    assert shown in noisy_warning(cv)


def _hint(*flags: str) -> str:
    r = runner.invoke(app, ["analyze", str(MLP), "--top", "1", *flags], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    (line,) = [ln for ln in r.output.splitlines() if "more nodes not shown" in ln]
    return line.strip()


def test_sort_by_flops_is_offered_only_where_it_changes_the_list() -> None:
    # mlp_keras has 8 nodes: --top 1 shows one, 7 are hidden.
    assert _hint() == "... 7 more nodes not shown (ranked by FLOPs; --top 0 shows all)"
    assert _hint("--sort-by", "flops") == _hint()
    assert _hint("--sort-by", "macs") == (
        "... 7 more nodes not shown (ranked by MACs; --top 0 shows all)"
    )
    assert _hint("--sort-by", "order") == (
        "... 7 more nodes not shown (--top 0 shows all, --sort-by flops ranks them)"
    )
