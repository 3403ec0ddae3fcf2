"""Export the MLP, ResNet-20, Transformer encoder layer and a small GPT-2-style decoder with a
KV cache from PyTorch to ONNX.

Builds each architecture in PyTorch, loads the seeded weights of ``_architectures``,
and exports it in eval mode with both ``torch.onnx.export`` exporters: the
dynamo-based one (``dynamo=True``, file ``<arch>_torch_dynamo.onnx``) and the
TorchScript-based one (``dynamo=False``, file ``<arch>_torch_script.onnx``). Each
export is run in onnxruntime on the reference input and compared with eager PyTorch.

Needs torch, onnx, onnxscript and onnxruntime (the ``/work/venv-torch`` environment)::

    python scripts/export_torch.py --out models/
"""

from __future__ import annotations

import argparse
import sys
import warnings
from importlib.metadata import version
from pathlib import Path

import _architectures as arch
import numpy as np
import onnx
import onnxruntime as ort
import torch
from torch import nn

EXPORTERS = ("dynamo", "script")
REQUESTED_OPSET = 17
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "models"


class MLP(nn.Module):
    """784-128-32-10 with ReLU between layers."""

    def __init__(self) -> None:
        super().__init__()
        s = arch.MLP_SIZES
        self.fc1 = nn.Linear(s[0], s[1])
        self.fc2 = nn.Linear(s[1], s[2])
        self.fc3 = nn.Linear(s[2], s[3])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class BasicBlock(nn.Module):
    """conv3x3(stride)-BN-ReLU-conv3x3-BN, plus identity or 1x1-conv-BN shortcut, then ReLU."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        eps = arch.BN_EPS
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out, eps=eps)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out, eps=eps)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False),
                nn.BatchNorm2d(c_out, eps=eps),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + self.shortcut(x))


class ResNet20(nn.Module):
    """CIFAR-10 ResNet-20: conv-BN-ReLU, 3 stages x 3 BasicBlocks (16/32/64), avg pool, FC."""

    def __init__(self) -> None:
        super().__init__()
        c0 = arch.RESNET_STAGES[0]
        self.conv1 = nn.Conv2d(3, c0, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c0, eps=arch.BN_EPS)
        blocks: dict[str, list[BasicBlock]] = {}
        for prefix, c_in, c_out, stride in arch.resnet20_blocks():
            blocks.setdefault(prefix.split(".")[0], []).append(BasicBlock(c_in, c_out, stride))
        self.layer1 = nn.Sequential(*blocks["layer1"])
        self.layer2 = nn.Sequential(*blocks["layer2"])
        self.layer3 = nn.Sequential(*blocks["layer3"])
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(arch.RESNET_STAGES[-1], arch.RESNET_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


class EncoderLayer(nn.TransformerEncoderLayer):
    """Post-norm encoder layer: d_model 256, 4 heads, ff 1024, ReLU, batch-first, no dropout.

    ``forward`` takes only ``src``: the TorchScript exporter fills unspecified optional
    arguments from the signature and turns ``is_causal=False`` into a tensor, which
    ``scaled_dot_product_attention`` then rejects.
    """

    def __init__(self) -> None:
        super().__init__(
            d_model=arch.ENCODER_D_MODEL,
            nhead=arch.ENCODER_HEADS,
            dim_feedforward=arch.ENCODER_FF,
            dropout=0.0,
            activation="relu",
            layer_norm_eps=arch.LN_EPS,
            batch_first=True,
            norm_first=False,
        )

    def forward(self, src: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return super().forward(src)


BUILDERS = {arch.MLP.name: MLP, arch.RESNET20.name: ResNet20, arch.ENCODER.name: EncoderLayer}

# --- a GPT-2-style decoder with a KV cache ------------------------------------------------------

DECODER = "decoder"
DECODER_DYNAMO_OPSET = 18
DECODER_SIZES = {"vocab": 32, "positions": 32, "d_model": 8, "heads": 2, "layers": 2}
"""Tiny on purpose: two files of it must fit in models/ (under 10 MB in all)."""


class DecoderBlock(nn.Module):
    """GPT-2's block: pre-LN attention (fused QKV, causal mask sliced from a bias buffer,
    past keys and values concatenated before the new ones) and a GELU MLP."""

    def __init__(self, d: int, heads: int, positions: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)
        bias = torch.tril(torch.ones(positions, positions, dtype=torch.bool))
        self.register_buffer("bias", bias.view(1, 1, positions, positions), persistent=False)

    def forward(
        self, x: torch.Tensor, past_k: torch.Tensor, past_v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, s, d = x.shape
        hd = d // self.heads
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q, k, v = (t.view(b, s, self.heads, hd).transpose(1, 2) for t in (q, k, v))
        k = torch.cat([past_k, k], dim=-2)
        v = torch.cat([past_v, v], dim=-2)
        scores = q @ k.transpose(-1, -2) / (hd**0.5)
        q_len, k_len = q.size(-2), k.size(-2)
        mask = self.bias[:, :, k_len - q_len : k_len, :k_len]
        scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
        y = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.c_proj(y)
        x = x + self.mlp_proj(nn.functional.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
        return x, k, v


class Decoder(nn.Module):
    """GPT-2-style LM: token and position embeddings (positions start at the past length),
    blocks, final LayerNorm, LM head tied to the token embedding. Takes and returns the cache
    flat: forward(input_ids, past_key_0, past_value_0, ...) -> (logits, present_key_0, ...)."""

    def __init__(self) -> None:
        super().__init__()
        z = DECODER_SIZES
        self.wte = nn.Embedding(z["vocab"], z["d_model"])
        self.wpe = nn.Embedding(z["positions"], z["d_model"])
        self.h = nn.ModuleList(
            DecoderBlock(z["d_model"], z["heads"], z["positions"]) for _ in range(z["layers"])
        )
        self.ln_f = nn.LayerNorm(z["d_model"])

    def forward(self, input_ids: torch.Tensor, *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
        past_len = past[0].size(-2)
        positions = torch.arange(past_len, past_len + input_ids.size(1)).unsqueeze(0)
        x = self.wte(input_ids) + self.wpe(positions)
        presents: list[torch.Tensor] = []
        for i, block in enumerate(self.h):
            x, k, v = block(x, past[2 * i], past[2 * i + 1])
            presents += [k, v]
        logits = self.ln_f(x) @ self.wte.weight.T
        return (logits, *presents)


def decoder_names() -> tuple[list[str], list[str]]:
    """Input and output names in optimum's naming."""
    layers = range(DECODER_SIZES["layers"])
    ins = ["input_ids"] + [f"past_key_values.{i}.{kv}" for i in layers for kv in ("key", "value")]
    outs = ["logits"] + [f"present.{i}.{kv}" for i in layers for kv in ("key", "value")]
    return ins, outs


def decoder_inputs(batch: int, seq: int, past: int, seed: int) -> tuple[torch.Tensor, ...]:
    z = DECODER_SIZES
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, z["vocab"], (batch, seq), generator=g)
    hd = z["d_model"] // z["heads"]
    cache = [torch.randn(batch, z["heads"], past, hd, generator=g) for _ in range(2 * z["layers"])]
    return (ids, *cache)


def export_decoder(model: nn.Module, exporter: str, path: Path) -> None:
    """Both exporters, with dims batch, seq (new tokens) and past_seq symbolic."""
    ins, outs = decoder_names()
    example = decoder_inputs(2, 3, 4, seed=arch.INPUT_SEED)  # no dim at 0 or 1: none specialised
    if exporter == "script":
        axes = {"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
        axes.update({n: {0: "batch", 2: "past_seq"} for n in ins[1:]})
        axes.update({n: {0: "batch", 2: "total_seq"} for n in outs[1:]})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                model,
                example,
                str(path),
                dynamo=False,
                opset_version=REQUESTED_OPSET,
                input_names=ins,
                output_names=outs,
                dynamic_axes=axes,
                do_constant_folding=True,
            )
        return
    limit = DECODER_SIZES["positions"] // 2
    batch = torch.export.Dim("batch", min=1, max=64)
    seq = torch.export.Dim("seq", min=1, max=limit)
    past = torch.export.Dim("past_seq", min=0, max=limit)
    # forward(input_ids, *past): the cache is one varargs tuple
    shapes = ({0: batch, 1: seq}, tuple({0: batch, 2: past} for _ in ins[1:]))
    program = torch.onnx.export(
        model,
        example,
        dynamo=True,
        # 18, the dynamo exporter's own: converted down to 17, Split keeps opset 18's
        # num_outputs attribute and the model fails onnx.checker
        opset_version=DECODER_DYNAMO_OPSET,
        input_names=ins,
        output_names=outs,
        dynamic_shapes=shapes,
        optimize=True,
        verify=False,
    )
    if program is None:
        raise RuntimeError("torch.onnx.export(dynamo=True) returned no ONNXProgram")
    program.save(str(path), external_data=False)
    # Each node's metadata_props (module path, class hierarchy, rewrite rules) is two thirds of
    # the file; dropped so both decoders fit in models/. The graph itself is left as written.
    saved = onnx.load(str(path))
    for node in saved.graph.node:
        del node.metadata_props[:]
    onnx.save(saved, str(path))


def check_decoder(model: nn.Module, path: Path) -> float:
    """Prefill (empty cache) then two cached decode steps in onnxruntime against eager PyTorch;
    returns the largest difference of logits and presents."""
    ins, outs = decoder_names()
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = decoder_inputs(2, 5, 0, seed=arch.INPUT_SEED + 1)
    worst = 0.0
    for step in range(3):
        with torch.no_grad():
            want = [t.numpy() for t in model(*feed)]
        got = sess.run(outs, {n: t.numpy() for n, t in zip(ins, feed, strict=True)})
        for w, g in zip(want, got, strict=True):
            if w.shape != g.shape:
                raise SystemExit(f"{path.name}: shape {g.shape} where eager gives {w.shape}")
            worst = max(worst, float(np.abs(w - g).max()))
        token = torch.from_numpy(want[0][:, -1].argmax(-1)).reshape(2, 1)
        feed = (token, *(torch.from_numpy(t) for t in want[1:]))
        del step
    return worst


def export_decoders(out: Path, exporters: list[str]) -> None:
    torch.manual_seed(arch.WEIGHT_SEED)
    model = Decoder().eval()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{DECODER}: {n_params} parameters ({DECODER_SIZES})")
    for exporter in exporters:
        path = out / f"{DECODER}_kv_torch_{exporter}.onnx"
        export_decoder(model, exporter, path)
        onnx.checker.check_model(onnx.load(str(path)), full_check=True)
        diff = check_decoder(model, path)
        print(f"{path.name}: {path.stat().st_size} bytes; max |onnxruntime - eager| = {diff:.3g}")
        print(arch.describe(path))
        if diff > 1e-4:
            raise SystemExit(f"{path.name} disagrees with eager PyTorch (max diff {diff})")


def build(a: arch.Architecture) -> nn.Module:
    """The architecture in eval mode with the shared seeded weights loaded (strictly)."""
    model = BUILDERS[a.name]()
    state = {k: torch.from_numpy(v) for k, v in arch.WEIGHTS[a.name]().items()}
    for k in model.state_dict():
        if k.endswith("num_batches_tracked"):
            state[k] = torch.tensor(0, dtype=torch.long)
    model.load_state_dict(state, strict=True)
    return model.eval()


def export_dynamo(model: nn.Module, x: torch.Tensor, path: Path) -> None:
    """``torch.onnx.export(dynamo=True)`` with a dynamic batch dimension."""
    batch = torch.export.Dim("batch", min=1, max=1024)
    program = torch.onnx.export(
        model,
        (x,),
        dynamo=True,
        opset_version=REQUESTED_OPSET,
        input_names=["input"],
        output_names=["output"],
        dynamic_shapes=({0: batch},),
        optimize=True,
        verify=False,
    )
    if program is None:
        raise RuntimeError("torch.onnx.export(dynamo=True) returned no ONNXProgram")
    program.save(str(path), external_data=False)


def export_script(model: nn.Module, x: torch.Tensor, path: Path) -> None:
    """``torch.onnx.export(dynamo=False)`` (TorchScript tracing) with a dynamic batch dimension."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            model,
            (x,),
            str(path),
            dynamo=False,
            opset_version=REQUESTED_OPSET,
            input_names=["input"],
            output_names=["output"],
            dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
            do_constant_folding=True,
        )


def run_onnx(path: Path, x: np.ndarray) -> np.ndarray:
    """Run the model on CPU in onnxruntime and return its only output."""
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (out,) = sess.run(None, {sess.get_inputs()[0].name: x})
    return np.asarray(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
    parser.add_argument(
        "--arch",
        nargs="+",
        choices=[*(a.name for a in arch.ARCHITECTURES), DECODER],
        default=[*(a.name for a in arch.ARCHITECTURES), DECODER],
    )
    parser.add_argument("--exporter", nargs="+", choices=EXPORTERS, default=list(EXPORTERS))
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)

    print(
        f"python {sys.version.split()[0]} torch {torch.__version__} onnx {onnx.__version__} "
        f"onnxscript {version('onnxscript')} onnxruntime {ort.__version__} numpy {np.__version__}"
    )
    print(f"weight seed {arch.WEIGHT_SEED}, input seed {arch.INPUT_SEED}")
    torch.manual_seed(arch.WEIGHT_SEED)
    # The fused fast path of nn.TransformerEncoderLayer is an inference-only kernel;
    # keep the exported graph the plain composition of ops.
    torch.backends.mha.set_fastpath_enabled(False)

    if DECODER in args.arch:
        export_decoders(out, args.exporter)
    for a in arch.ARCHITECTURES:
        if a.name not in args.arch:
            continue
        model = build(a)
        x1 = arch.reference_input(a)
        with torch.no_grad():
            ref = model(torch.from_numpy(x1)).numpy()
        assert ref.shape == a.output_shape, (a.name, ref.shape)
        n_params = arch.parameter_count(arch.WEIGHTS[a.name]())
        print(f"{a.name}: {n_params} parameters, eager output |max| {np.abs(ref).max():.4g}")
        # Export with batch 2 so that no exporter specialises the batch dimension to 1.
        x2 = torch.from_numpy(np.concatenate([x1, x1]))
        for exporter in args.exporter:
            path = out / f"{a.name}_torch_{exporter}.onnx"
            (export_dynamo if exporter == "dynamo" else export_script)(model, x2, path)
            got = run_onnx(path, x1)
            diff = float(np.abs(got - ref).max())
            print(
                f"{path.name}: opset {REQUESTED_OPSET} requested; max |onnxruntime - eager| = {diff:.3g}"
            )
            print(arch.describe(path))
            if got.shape != ref.shape or not np.allclose(got, ref, rtol=1e-4, atol=1e-4):
                raise SystemExit(f"{path.name} disagrees with eager PyTorch (max diff {diff})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
