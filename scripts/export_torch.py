"""Export the MLP, ResNet-20 and Transformer encoder layer from PyTorch to ONNX.

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
        choices=[a.name for a in arch.ARCHITECTURES],
        default=[a.name for a in arch.ARCHITECTURES],
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
