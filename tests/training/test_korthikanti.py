"""One GPT layer against Korthikanti et al., "Reducing Activation Recomputation in Large
Transformer Models" (arXiv 2205.05198, section 4.1): the activations one transformer layer
keeps for backward are s·b·h·(34 + 5·a·s/h) bytes with fp16 activations and 1-byte dropout
masks. The layer (scripts/export_training.py, GPTLayer) is exported by TorchScript twice: in
training mode (its three Dropouts kept, masks output) and in eval mode, where a torch export
has no Dropout at all. docs/training.md "Against Korthikanti et al." explains the terms."""

from __future__ import annotations

import json
from pathlib import Path

import onnxcost

DATA = Path(__file__).resolve().parents[1] / "data" / "training"
FIGURES = json.loads((DATA / "torch_figures.json").read_text())["gpt_layer"]

# s 16, b 2, h 32, a 4: sbh = 1,024, as²b = 4 x 256 x 2 = 2,048.
# Korthikanti: sbh (34 + 5 a s / h) = 1,024 x (34 + 5 x 4 x 16 / 32 = 10) = 45,056 bytes.
KORTHIKANTI = 45_056
# Their terms, each a tensor onnxcost keeps (fp16: 2 bytes, masks bool: 1):
#   LayerNorm 1 input 2sbh, QKV input (LN 1 output) 2sbh, Q and K 4sbh   = 8sbh
#   softmax output 2as²b, attention dropout mask as²b, its output 2as²b = 5as²b
#   V 2sbh, projection input 2sbh, dropout mask sbh                      = 5sbh
#   LayerNorm 2 input 2sbh, fc1 input 2sbh, GELU input 8sbh,
#   fc2 input (GELU output) 8sbh, dropout mask sbh                       = 21sbh
# 34sbh + 5as²b = 34,816 + 10,240 = 45,056. onnxcost adds what the formula leaves out: the two
# LayerNorms' statistics, mean and 1/std in fp32 per row: 2 x 2 x (s b = 32) x 4 = 512 bytes.
LAYERNORM_STATISTICS = 512


def saved(kind: str, **kw: str) -> int:
    a = onnxcost.analyze(str(DATA / f"gpt_layer_{kind}.onnx"), training=True, **kw)
    assert a.totals.training is not None
    assert a.warnings == ()
    return a.totals.training.training_memory.saved_activation_bytes


def test_sizes_are_the_fixtures() -> None:
    assert (FIGURES["s"], FIGURES["b"], FIGURES["h"], FIGURES["a"]) == (16, 2, 32, 4)


def test_training_export_is_korthikanti_plus_layernorm_statistics() -> None:
    # The Dropout masks count only because Dropout keeps its mask output for its backward.
    assert saved("train", mixed_precision="fp16") == KORTHIKANTI + LAYERNORM_STATISTICS


def test_eval_export_has_no_dropout_terms() -> None:
    # No Dropout node: no masks (as²b + sbh + sbh = 4,096), and the softmax output is what
    # @V keeps, once (the dropout output's 2as²b = 4,096 goes): 45,056 - 8,192 = 36,864,
    # that is 32sbh + 2as²b; plus the statistics.
    assert saved("eval", mixed_precision="fp16") == 36_864 + LAYERNORM_STATISTICS


def test_fp32_training_export_against_autograd_on_cpu() -> None:
    # fp32: the float tensors above double, (45,056 - 4,096 masks) x 2 = 81,920, the bool
    # masks stay 4,096, plus the statistics 512: 86,528. torch measured 98,816 on CPU: there
    # dropout is x * noise with a float32 noise tensor (MulBackward0 keeps it), not
    # native_dropout's bool mask, so its masks are (2,048 + 1,024 + 1,024) x 4 = 16,384 bytes:
    # 86,528 - 4,096 + 16,384 = 98,816. onnxcost counts the graph's bool mask: -12.4%.
    ours = saved("train")
    assert ours == 86_528
    assert FIGURES["saved_bytes"] == 98_816
    assert abs(ours - FIGURES["saved_bytes"]) <= 0.25 * FIGURES["saved_bytes"]


def test_training_flops_equal_torch_in_both_exports() -> None:
    # FlopCounterMode on the layer in training mode, forward and loss.backward(). Dropout and
    # the elementwise ops count nothing under the torch convention, so both exports agree.
    for kind in ("train", "eval"):
        a = onnxcost.analyze(
            str(DATA / f"gpt_layer_{kind}.onnx"), training=True, convention="torch"
        )
        assert a.totals.training is not None
        assert a.totals.training.training_flops == (
            FIGURES["forward_flops"] + FIGURES["backward_flops"]
        )
