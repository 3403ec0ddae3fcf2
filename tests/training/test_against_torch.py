"""Training cost against torch (issue 23): five models exported by both torch exporters
(tests/data/training/, written by scripts/export_training.py), onnxcost's figures checked
against what torch 2.13 measured of the same step, recorded in torch_figures.json so that CI
needs no torch:

* ``training_flops`` under ``convention="torch"`` equals FlopCounterMode's forward count plus
  its count over ``loss.backward()`` (corrected by hand where torch miscounts);
* ``trainable_params`` equals ``sum(p.numel() for p in params if p.requires_grad)``;
* ``gradient_bytes`` equals the bytes of the ``.grad`` tensors backward left;
* ``optimizer_bytes`` equals the state one ``torch.optim`` step leaves (AdamW's moments,
  SGD's momentum buffers, SGD none);
* ``saved_activation_bytes`` is within 25% of what autograd saved (saved_tensors_hooks, each
  storage once, parameters and buffers excluded).

Where torch is importable, the recorded figures are measured again and must not have moved.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import onnxcost
from onnxcost.analysis.records import TrainingTotals

DATA = Path(__file__).resolve().parents[1] / "data" / "training"
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "export_training.py"
FIGURES: dict[str, Any] = json.loads((DATA / "torch_figures.json").read_text())
MODELS = ("mlp", "cnn", "block", "decoder", "lora")
EXPORTERS = ("script", "dynamo")
CASES = [(m, e) for m in MODELS for e in EXPORTERS]

# torch 2.13's FlopCounterMode counts a grouped convolution's weight gradient `groups` times
# (its convolution_backward formula costs the weight gradient as a dense convolution of the
# transposed operands: C_in per output channel instead of C_in / groups). The CNN's input is
# 2x3x8x8, every convolution 3x3 with padding 1 and 8 output channels at 8x8, so a
# convolution's forward is 2 x (N 2 x C_out 8 x 64 pixels = 1,024) x (C_in / groups) x 9
# FLOPs, and each gradient it computes (dX, dW) one forward more:
#   conv 3 -> 8:          2 x 1,024 x 3 x 9 = 55,296; dW only (the image needs no gradient)
#   grouped, groups 2:    2 x 1,024 x 4 x 9 = 73,728; dX + dW = 147,456
#   depthwise, groups 8:  2 x 1,024 x 1 x 9 = 18,432; dX + dW = 36,864
#   fc 8 -> 4, 2 rows:    2 x 2 x 8 x 4     =    128; dX + dW = 256
# forward 147,584 (torch's own count), backward 55,296 + 147,456 + 36,864 + 256 = 239,872.
# torch counts the grouped dW 2 x 73,728 (73,728 too many) and the depthwise dW 8 x 18,432
# (7 x 18,432 = 129,024 too many): 239,872 + 202,752 = 442,624, its recorded figure.
TORCH_GROUPED_CONV_OVERCOUNT = {"cnn": 73_728 + 129_024}


def analysis(name: str, exporter: str, **kw: Any) -> onnxcost.Analysis:
    frozen = FIGURES["models"][name]["frozen"]
    return onnxcost.analyze(
        str(DATA / f"{name}_{exporter}.onnx"), training=True, frozen=frozen, **kw
    )


def training(a: onnxcost.Analysis) -> TrainingTotals:
    assert a.totals.training is not None
    return a.totals.training


def test_fixtures_are_small() -> None:
    # The models stay small enough to commit: < 200 KB each.
    files = sorted(DATA.glob("*.onnx"))
    assert len(files) == 2 * len(MODELS) + 2
    assert all(f.stat().st_size < 200_000 for f in files)


def test_grouped_conv_correction_by_hand() -> None:
    # The CNN's right backward count, worked above: 239,872 FLOPs; torch's raw count carries
    # the grouped and the depthwise weight gradients 2 and 8 times.
    assert FIGURES["models"]["cnn"]["backward_flops"] == 239_872 + 73_728 + 129_024


@pytest.mark.parametrize(("name", "exporter"), CASES)
def test_training_flops_equal_torch(name: str, exporter: str) -> None:
    torch_figures = FIGURES["models"][name]
    a = analysis(name, exporter, convention="torch")
    assert a.totals.flops == torch_figures["forward_flops"]
    right = (
        torch_figures["forward_flops"]
        + torch_figures["backward_flops"]
        - TORCH_GROUPED_CONV_OVERCOUNT.get(name, 0)
    )
    assert training(a).training_flops == right


@pytest.mark.parametrize(("name", "exporter"), CASES)
def test_trainable_params_gradients_and_optimizer_state_exact(name: str, exporter: str) -> None:
    torch_figures = FIGURES["models"][name]
    t = training(analysis(name, exporter))
    assert t.trainable_params == torch_figures["trainable_params"]
    m = t.training_memory
    assert m.gradient_bytes == torch_figures["gradient_bytes"]
    # AdamW (the default): exp_avg and exp_avg_sq. torch also keeps a 4-byte step counter per
    # parameter tensor (adamw_step_bytes), which onnxcost does not count: a few bytes a tensor.
    assert m.optimizer_bytes == torch_figures["adamw_state_bytes"]
    for optimizer, key in (
        ("sgd-momentum", "sgd_momentum_state_bytes"),
        ("sgd", "sgd_state_bytes"),
    ):
        m = training(analysis(name, exporter, optimizer=optimizer)).training_memory
        assert m.optimizer_bytes == torch_figures[key]


@pytest.mark.parametrize(("name", "exporter"), CASES)
def test_saved_activations_within_a_quarter_of_autograd(name: str, exporter: str) -> None:
    saved = training(analysis(name, exporter)).training_memory.saved_activation_bytes
    measured = FIGURES["models"][name]["saved_bytes"]
    assert abs(saved - measured) <= 0.25 * measured


def test_lora_frozen_base_computes_almost_nothing() -> None:
    # LoRA: x [4,32]; base 32 -> 32 frozen; A 32 -> 4, B 4 -> 32 trained; loss = y.sum().
    # Forward (torch convention, 2 x MACs): base 2 x 4 x 32 x 32 = 8,192; A 2 x 4 x 32 x 4 =
    # 1,024; B 2 x 4 x 4 x 32 = 1,024: 10,240. Backward: base nothing (frozen, x needs none);
    # B: dB [32,4]x[4,4] 1,024 and d(xA) 1,024; A: dA only 1,024: 3,072, not 2 x 10,240.
    # Trainable: A 128 + B 128 = 256 of 1,312.
    t = training(analysis("lora", "script", convention="torch"))
    assert (t.backward_flops, t.training_flops, t.trainable_params) == (3_072, 13_312, 256)


@cache
def _script() -> Any:
    spec = importlib.util.spec_from_file_location("export_training", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["export_training"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_recorded_figures_are_torchs(name: str) -> None:
    """With torch installed: measure each model again; the fixture's figures are torch's."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    script = _script()
    make, inp, frozen = script.models()[name]
    torch.manual_seed(0)
    model, x = make(), inp()
    script.distinct(model)
    assert {"frozen": frozen, **script.measure(model, x)} == FIGURES["models"][name]
