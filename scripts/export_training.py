"""Export the training-validation models and record what torch measures of one training step.

Builds five small models (an MLP, a CNN with a grouped and a depthwise convolution, a
transformer block, a 2-layer causal decoder and a frozen-base LoRA-style adapter) and one
GPT layer after Korthikanti et al. (arXiv 2205.05198), exports each with both
``torch.onnx.export`` exporters (``dynamo=False``: TorchScript, ``dynamo=True``: dynamo with
onnxscript) to ``tests/data/training/<model>_<exporter>.onnx``, and writes what torch
measures of one step, loss = ``out.sum()``, to ``tests/data/training/torch_figures.json``:

* ``forward_flops`` and ``backward_flops``: ``torch.utils.flop_counter.FlopCounterMode``
  entered twice, around the forward and around ``loss.backward()`` (raw: torch's count of a
  grouped convolution's weight gradient is ``groups`` times too large; the test corrects it
  by hand);
* ``trainable_params``: ``sum(p.numel() for p in params if p.requires_grad)``;
* ``saved_bytes``: the bytes autograd keeps for backward, by
  ``torch.autograd.graph.saved_tensors_hooks``, each storage once (by its
  ``untyped_storage().data_ptr()``), the parameters' and buffers' storages excluded (weights
  and constants are not activations);
* ``frozen``: the ``--frozen`` regex that freezes in the graph what torch froze.

The GPT layer is exported by TorchScript only, twice: in eval mode (no Dropout node) and in
training mode (``training=TrainingMode.TRAINING``: its three Dropouts kept, masks output).

Needs torch, onnx and onnxscript::

    python scripts/export_training.py            # writes tests/data/training/
    pytest -q tests/training                     # checks onnxcost against the figures
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import warnings
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import onnx
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "training"
OPSET = 20
"""Opset 20 has Gelu: below it both exporters write GELU as Div, Erf, Add, Mul, Mul, whose
backward keeps three tensors of 4h where torch's fused gelu keeps one (docs/training.md)."""
EXPORTERS = ("script", "dynamo")


class MLP(nn.Module):
    """16-32-8 with ReLU, batch 4."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class CNN(nn.Module):
    """conv3x3 3->8, grouped conv3x3 8->8 (groups 2), depthwise conv3x3 (groups 8),
    global average pool, linear 8->4; ReLU between."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.grouped = nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.fc = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x))
        y = torch.relu(self.grouped(y))
        y = torch.relu(self.depthwise(y))
        return self.fc(y.mean(dim=(2, 3)))


class Block(nn.Module):
    """Pre-LN transformer block: LN, attention (QKV, QK^T/sqrt(d), softmax, @V, projection),
    residual, LN, MLP (4x, GELU), residual; attention written out as matmuls so both
    exporters and FlopCounterMode see the same contractions."""

    def __init__(self, d: int, heads: int, causal: bool = False, seq: int = 0) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.causal = causal
        if causal:
            # A bool buffer: a float one would be a float constant in the graph, which
            # onnxcost cannot tell from a weight (it would count as a trainable parameter).
            mask = torch.ones(seq, seq, dtype=torch.bool).triu(diagonal=1)
            self.register_buffer("mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.reshape(b, s, h, d // h).transpose(1, 2)
        k = k.reshape(b, s, h, d // h).transpose(1, 2)
        v = v.reshape(b, s, h, d // h).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // h)
        if self.causal:
            scores = scores.masked_fill(self.mask, float("-inf"))
        att = torch.softmax(scores, dim=-1) @ v
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


class Decoder(nn.Module):
    """Token embedding + learned positions, 2 causal blocks, final LN, LM head (untied)."""

    def __init__(self, vocab: int = 64, d: int = 32, heads: int = 4, seq: int = 8) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)
        self.blocks = nn.ModuleList([Block(d, heads, causal=True, seq=seq) for _ in range(2)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tok(ids) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


class LoRA(nn.Module):
    """y = base(x) + B(A(x)): base Linear 32->32 frozen, rank-4 A (32->4) and B (4->32)."""

    def __init__(self) -> None:
        super().__init__()
        self.base = nn.Linear(32, 32)
        self.lora_A = nn.Linear(32, 4, bias=False)
        self.lora_B = nn.Linear(4, 32, bias=False)
        for p in self.base.parameters():
            p.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.lora_B(self.lora_A(x))


class GPTLayer(nn.Module):
    """One GPT layer as Korthikanti et al. count it: LN, QKV, QK^T, softmax, attention dropout,
    @V, projection, dropout, residual, LN, h->4h, GELU, 4h->h, dropout, residual."""

    def __init__(self, h: int, a: int, p: float = 0.1) -> None:
        super().__init__()
        self.a = a
        self.ln1 = nn.LayerNorm(h)
        self.qkv = nn.Linear(h, 3 * h)
        self.att_drop = nn.Dropout(p)
        self.proj = nn.Linear(h, h)
        self.drop1 = nn.Dropout(p)
        self.ln2 = nn.LayerNorm(h)
        self.fc1 = nn.Linear(h, 4 * h)
        self.fc2 = nn.Linear(4 * h, h)
        self.drop2 = nn.Dropout(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        a = self.a
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
        q = q.reshape(b, s, a, h // a).transpose(1, 2)
        k = k.reshape(b, s, a, h // a).transpose(1, 2)
        v = v.reshape(b, s, a, h // a).transpose(1, 2)
        p = self.att_drop(torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(h // a), dim=-1))
        x = x + self.drop1(self.proj((p @ v).transpose(1, 2).reshape(b, s, h)))
        return x + self.drop2(self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x)))))


GPT_SIZES = {"s": 16, "b": 2, "h": 32, "a": 4}
"""Sequence, batch, hidden size, heads of the Korthikanti layer (tests/training)."""


def models() -> dict[str, tuple[Callable[[], nn.Module], Callable[[], torch.Tensor], str | None]]:
    """name -> (model factory, input factory, the --frozen regex matching what is frozen)."""
    return {
        "mlp": (MLP, lambda: torch.randn(4, 16), None),
        "cnn": (CNN, lambda: torch.randn(2, 3, 8, 8), None),
        "block": (lambda: Block(32, 4), lambda: torch.randn(2, 8, 32), None),
        "decoder": (Decoder, lambda: torch.randint(0, 64, (2, 8)), None),
        "lora": (LoRA, lambda: torch.randn(4, 32), r"^base\."),
    }


def distinct(model: nn.Module) -> None:
    """Give every parameter random values: both exporters store identical initializers once
    (LayerNorm's ones and zeros), and a parameter shared in the graph is counted once."""
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.1)


def measure(model: nn.Module, x: torch.Tensor) -> dict[str, int]:
    """What torch counts and keeps for one step, loss = out.sum()."""
    model.train()
    model.zero_grad(set_to_none=True)
    params = list(model.parameters())
    constants = [*params, *model.buffers()]
    param_storages = {p.untyped_storage().data_ptr() for p in constants}
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in param_storages:
            storages[ptr] = t.untyped_storage().nbytes()
        return t

    with (
        torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t),
        FlopCounterMode(display=False) as fwd,
    ):
        loss = model(x).sum()
    with FlopCounterMode(display=False) as bwd:
        loss.backward()
    return {
        "forward_flops": int(fwd.get_total_flops()),
        "backward_flops": int(bwd.get_total_flops()),
        "trainable_params": sum(p.numel() for p in params if p.requires_grad),
        "saved_bytes": sum(storages.values()),
        "gradient_bytes": sum(p.grad.nbytes for p in params if p.grad is not None),
        **optimizer_state(model),
    }


def optimizer_state(model: nn.Module) -> dict[str, int]:
    """Bytes of the state one step of each optimizer leaves, on copies of the model and its
    gradients: AdamW's moments (exp_avg, exp_avg_sq) apart from its step
    counters (a 4-byte scalar tensor per parameter tensor), SGD's momentum buffers."""
    out: dict[str, int] = {}
    for key, make in (
        ("adamw", lambda ps: torch.optim.AdamW(ps)),
        ("sgd_momentum", lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9)),
        ("sgd", lambda ps: torch.optim.SGD(ps, lr=0.1)),
    ):
        twin = copy.deepcopy(model)
        for p, q in zip(model.parameters(), twin.parameters(), strict=True):
            q.grad = None if p.grad is None else p.grad.clone()
        opt = make([p for p in twin.parameters() if p.requires_grad])
        opt.step()
        moments = steps = 0
        for state in opt.state.values():
            for name, t in state.items():
                if not isinstance(t, torch.Tensor):
                    continue
                if name == "step":
                    steps += t.nbytes
                else:
                    moments += t.nbytes
        out[f"{key}_state_bytes"] = moments
        if key == "adamw":
            out["adamw_step_bytes"] = steps
    return out


def export(model: nn.Module, x: torch.Tensor, path: Path, exporter: str, **kw: Any) -> None:
    model.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            torch.onnx.export(
                model, (x,), str(path), dynamo=True, opset_version=OPSET, external_data=False
            )
        else:
            torch.onnx.export(model, (x,), str(path), dynamo=False, opset_version=OPSET, **kw)
    onnx.checker.check_model(onnx.load(str(path)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Any] = {
        "torch": version("torch"),
        "onnxscript": version("onnxscript"),
        "loss": "out.sum()",
        "models": {},
    }
    for name, (make, inp, frozen) in models().items():
        torch.manual_seed(0)
        model, x = make(), inp()
        distinct(model)
        figures["models"][name] = {"frozen": frozen, **measure(model, x)}
        for exporter in EXPORTERS:
            export(model, x, out / f"{name}_{exporter}.onnx", exporter)
        print(name, figures["models"][name])
    g = GPT_SIZES
    torch.manual_seed(0)
    layer, x = GPTLayer(g["h"], g["a"]), torch.randn(g["b"], g["s"], g["h"])
    distinct(layer)
    figures["gpt_layer"] = {**g, **measure(layer, x)}
    export(layer, x, out / "gpt_layer_eval.onnx", "script")
    export(
        layer,
        x,
        out / "gpt_layer_train.onnx",
        "script",
        training=torch.onnx.TrainingMode.TRAINING,
        do_constant_folding=False,
    )
    (out / "torch_figures.json").write_text(json.dumps(figures, indent=1) + "\n")
    for f in sorted(out.glob("*.onnx")):
        print(f"{f.name}: {f.stat().st_size} bytes")


if __name__ == "__main__":
    main()
