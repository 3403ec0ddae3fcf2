"""Write hold-out exports of torchvision's models (random weights) as torch.onnx.export writes
them, each beside a JSON of torchvision's published figures for its default weights, for
``scripts/check_torchvision_ops.py`` to compare with onnxcost's.

Needs torch, torchvision, onnx, onnxscript and onnxruntime, and no weight (the figures are
the weight enums' ``meta``). PyPI's torchvision does not import beside the main venv's CPU
torch 2.13 ('operator torchvision::nms does not exist': its build is CUDA's), so use a venv of
its own::

    python3 -m venv /work/tvenv
    /work/tvenv/bin/pip install torch==2.14.1 torchvision==0.29.1 onnx onnxscript onnxruntime
    /work/tvenv/bin/python scripts/export_holdout_torchvision.py --out /tmp/holdout_tv \\
        [--models resnet18,vit_b_16,...] [--exporter script|dynamo|both]

Each model is ``torchvision.models.get_model(name, weights=None, **kwargs)`` in eval mode, its
parameters drawn at random (N(0, 0.02), BatchNorm's statistics too, so that nothing the
exporters fold is equal by chance), with the keyword arguments its default weights' builder
sets (``KWARGS``: inception_v3's ``transform_input``, googlenet's aux classifiers removed, the
segmentation models' aux classifier; no backbone weights are downloaded). The TorchScript
exporter (``NAME_script.onnx``, opset 17, batch dynamic) writes every model, the dynamo
exporter (``NAME_dynamo.onnx``, batch dynamic) the handful in ``DYNAMO`` (``--exporter both``,
the default; its example at batch 2: torch.export fixes a dim of 1). Each file is run in
onnxruntime against torch on a random input at batch 3. ``NAME.json`` holds the default weights' ``_ops`` (GFLOPS: torchvision counts
a multiply-accumulate of a convolution or matmul as one), ``num_params`` and the input the
figures are for (the weights' crop size: 224 for most, 299 for inception_v3, 240 to 384 for
efficientnet_b1 to b7; 520 for segmentation; 16 frames of 112 for video; 320 for the
detectors; 512 x 512 and 12 flow updates for raft, which torch's FlopCounterMode gives as
47.655 G MACs, the published figure, where 520 x 960 gives 94.448). An export that
fails is one printed line, not a stop. Not a test.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import warnings
from pathlib import Path
from typing import Any

OPSET = 17
"""The TorchScript exporter's opset."""

CLASSIFICATION = [
    "resnet18",
    "resnet50",
    "resnext50_32x4d",
    "wide_resnet50_2",
    "mobilenet_v2",
    "mobilenet_v3_small",
    "mobilenet_v3_large",
    "efficientnet_b0",
    "efficientnet_b1",
    "efficientnet_v2_s",
    "regnet_y_400mf",
    "regnet_x_400mf",
    "shufflenet_v2_x1_0",
    "squeezenet1_1",
    "densenet121",
    "googlenet",
    "inception_v3",
    "mnasnet0_5",
    "convnext_tiny",
    "vit_b_16",
    "swin_t",
    "swin_v2_t",
    "maxvit_t",
    "alexnet",
    "vgg11_bn",
]
OTHERS = {
    "fcn_resnet50": "segmentation",
    "deeplabv3_mobilenet_v3_large": "segmentation",
    "lraspp_mobilenet_v3_large": "segmentation",
    "r3d_18": "video",
    "ssdlite320_mobilenet_v3_large": "detection",
    "fasterrcnn_mobilenet_v3_large_320_fpn": "detection",
    "raft_small": "optical_flow",
    "mc3_18": "video",
    "r2plus1d_18": "video",
    "s3d": "video",
    "mvit_v2_s": "video",
    "swin3d_t": "video",
    "deeplabv3_resnet50": "segmentation",
    "ssd300_vgg16": "detection",
    "retinanet_resnet50_fpn": "detection",
    "fcos_resnet50_fpn": "detection",
    "raft_large": "optical_flow",
}
DYNAMO = (
    "resnet18",
    "mobilenet_v3_small",
    "efficientnet_b0",
    "convnext_tiny",
    "vit_b_16",
    "swin_t",
)
"""The models the dynamo exporter writes too (``--exporter both``)."""

KWARGS: dict[str, dict[str, Any]] = {
    "inception_v3": {"transform_input": True, "init_weights": False},
    "googlenet": {"transform_input": True, "aux_logits": False, "init_weights": False},
    "fcn_resnet50": {"aux_loss": True, "weights_backbone": None},
    "deeplabv3_mobilenet_v3_large": {"aux_loss": True, "weights_backbone": None},
    "lraspp_mobilenet_v3_large": {"weights_backbone": None},
    "ssdlite320_mobilenet_v3_large": {"weights_backbone": None},
    "fasterrcnn_mobilenet_v3_large_320_fpn": {"weights_backbone": None},
    "deeplabv3_resnet50": {"aux_loss": True, "weights_backbone": None},
    "ssd300_vgg16": {"weights_backbone": None},
    "retinanet_resnet50_fpn": {"weights_backbone": None},
    "fcos_resnet50_fpn": {"weights_backbone": None},
}
"""What each default weights' builder passes beyond ``weights=None`` (torchvision's
``_ovewrite_named_param`` calls), and no backbone weights to download."""


TINY = {"tiny_swin": [1, 3, 40, 40]}
"""Small models for tests/data/exports, no published figures (tests/data/exports/
tv_tiny_swin_script.onnx: ``--models tiny_swin --exporter script --short-names``): Swin's
two blocks (the second's windows shifted) over 10 x 10 patches, padded to 14 by F.pad as the
TorchScript exporter writes it (Mod, a Slice of step -1), 8 wide, one head, 4 classes."""


def _kind(name: str) -> str:
    return OTHERS.get(name, "classification")


def _input_size(name: str, meta: dict[str, Any], transforms: Any) -> list[int]:
    """The input (batch 1) the published figures are for."""
    kind = _kind(name)
    if kind == "video":
        crop = list(transforms.keywords.get("crop_size", (112, 112)))
        return [1, 3, 16, *crop]
    if kind == "segmentation":
        return [1, 3, 520, 520]
    if kind == "detection":
        side = 320
        return [3, side, side]
    if kind == "optical_flow":  # raft_small's 47.655 is at 512 x 512, 12 updates
        return [1, 3, 512, 512]
    crop = transforms.keywords.get("crop_size", meta.get("min_size", (224, 224))[0])
    crop = crop[0] if isinstance(crop, (list, tuple)) else crop
    return [1, 3, int(crop), int(crop)]


def _module(name: str) -> Any:
    """The model, random, in eval mode, in a module whose forward returns tensors only (a
    segmentation model's dict: aux and out; a detector's first dict: boxes, scores, labels)."""
    import torch
    import torchvision

    if name == "tiny_swin":  # Swin's blocks, small: tests/data/exports (TINY)
        from torchvision.models.swin_transformer import SwinTransformer

        model = SwinTransformer([4, 4], 8, [2], [1], [7, 7], num_classes=4)
    else:
        model = torchvision.models.get_model(name, weights=None, **KWARGS.get(name, {}))
    kind = _kind(name)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02)
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.running_var is not None:
                m.running_mean.normal_(0.0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    model.eval()

    class Wrapped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, *x: Any) -> Any:
            if kind == "detection":
                out = self.m(list(x))[0]
                return out["boxes"], out["scores"], out["labels"]
            if kind == "optical_flow":  # every update's flow, as RAFT returns them: the
                return tuple(self.m(*x, num_flow_updates=12))  # last only drops 11 upsamplings
            y = self.m(*x)
            if isinstance(y, dict):  # segmentation: out and aux
                return tuple(y[k] for k in sorted(y))
            return y

    return Wrapped().eval()


def _inputs(name: str, size: list[int], batch: int) -> tuple[Any, ...]:
    import torch

    kind = _kind(name)
    if kind == "detection":
        return (torch.rand(*size),)
    shape = [batch, *size[1:]]
    if kind == "optical_flow":
        return (torch.rand(*shape) * 2 - 1, torch.rand(*shape) * 2 - 1)
    return (torch.randn(*shape),)


def _names(name: str, count: int) -> tuple[list[str], list[str]]:
    kind = _kind(name)
    inputs = ["image1", "image2"] if kind == "optical_flow" else ["input"]
    if kind == "detection":
        return ["image"], ["boxes", "scores", "labels"]
    if kind == "segmentation":
        return inputs, ["aux", "out"] if count == 2 else ["out"]
    if kind == "optical_flow":
        return inputs, [f"flow_{k}" for k in range(count)]
    return inputs, ["output"]


def _export(module: Any, name: str, args: tuple[Any, ...], dynamo: bool) -> bytes:
    import torch

    with torch.no_grad():
        result = module(*args)
    count = len(result) if isinstance(result, tuple) else 1
    inputs, outputs = _names(name, count)
    batch = _kind(name) != "detection"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporters' deprecation and tracer warnings
        if dynamo:
            dims: Any = None
            if batch:
                b = torch.export.Dim("batch", min=1, max=64)
                dims = (tuple({0: b} for _ in inputs),)  # forward(*x): one group
            program = torch.onnx.export(
                module,
                args,
                input_names=inputs,
                output_names=outputs,
                dynamic_shapes=dims,
                dynamo=True,
                verbose=False,
            )
            assert program is not None
            buffer = io.BytesIO()
            program.save(buffer)
            return buffer.getvalue()
        axes = {n: {0: "batch"} for n in (*inputs, *outputs)} if batch else None
        buffer = io.BytesIO()
        torch.onnx.export(
            module,
            args,
            buffer,
            input_names=inputs,
            output_names=outputs,
            dynamic_axes=axes,
            dynamo=False,
            opset_version=OPSET,
        )
        return buffer.getvalue()


def _max_difference(path: Path, module: Any, name: str, size: list[int], example: Any) -> str:
    """The largest |onnxruntime - torch| over the outputs at batch 3 (the exports' are 1 and
    2); a detector at the image it was traced on and at another: its tracer fixes what it
    met there (a class loop, a count of boxes), so another image may give others."""
    if _kind(name) != "detection":
        return _difference(path, module, _inputs(name, size, 3))
    found = (_difference(path, module, a, scores=True) for a in (example, _inputs(name, size, 1)))
    return "; ".join(found)


def _difference(path: Path, module: Any, args: tuple[Any, ...], scores: bool = False) -> str:
    """``_max_difference`` at ``args``; ``scores``: a detector's scores only, sorted (random
    weights tie many of them: which boxes fill the last places differs by the order of ties)."""
    import numpy as np
    import onnxruntime as ort
    import torch

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = {i.name: a.numpy() for i, a in zip(session.get_inputs(), args, strict=True)}
    with torch.no_grad():
        expected = module(*args)
    expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    at = "x".join(map(str, args[0].shape))
    try:
        got = session.run(None, feed)
    except Exception as e:  # a size the tracer fixed
        return f"onnxruntime fails at {at}: {str(e).splitlines()[0][:120]}"
    if [g.shape for g in got] != [tuple(e.shape) for e in expected]:
        shapes = [list(g.shape) for g in got], [list(e.shape) for e in expected]
        return f"shapes differ at {at}: onnxruntime {shapes[0]}, torch {shapes[1]}"
    pairs = [(g, e.numpy()) for g, e in zip(got, expected, strict=True)]
    if scores:
        pairs = [(np.sort(pairs[1][0]), np.sort(pairs[1][1]))]
    worst = max(float(np.max(np.abs(g.astype(np.float64) - e), initial=0.0)) for g, e in pairs)
    scale = max(float(np.max(np.abs(e), initial=0.0)) for _g, e in pairs)
    what = "sorted scores" if scores else "outputs"
    return f"max |ort - torch| {worst:.1e} at {at} ({what} up to {scale:.1e})"


def _published(name: str) -> dict[str, Any]:
    import torchvision

    weights = torchvision.models.get_model_weights(name).DEFAULT
    meta = weights.meta
    return {
        "model": name,
        "kind": _kind(name),
        "weights": str(weights),
        "gflops": meta.get("_ops"),
        "num_params": meta.get("num_params"),
        "input": _input_size(name, meta, weights.transforms),
        "kwargs": {k: v for k, v in KWARGS.get(name, {}).items() if k != "weights_backbone"},
    }


def _own_counts(module: Any) -> dict[str, int]:
    """What torch counts of the model built here: its parameters (``num_params`` where the
    build is the default weights'), those of modules the export never runs (inception_v3's
    AuxLogits: eval skips it), and the channels of its BatchNorms (each one the TorchScript
    exporter folds into the convolution before it takes 2 x C params away and adds C biases)."""
    import torch

    model = module.m
    aux = getattr(model, "AuxLogits", None)
    bn = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    return {
        "torch_params": sum(p.numel() for p in model.parameters()),
        "unused_params": sum(p.numel() for p in aux.parameters()) if aux is not None else 0,
        "bn_channels": sum(m.num_features for m in bn),
    }


def _short_names(data: bytes) -> bytes:
    """The model with every node named ``nK`` and every tensor but the graph's inputs and
    outputs ``tK`` (the TorchScript exporter's scope paths are most of a tiny file)."""
    import onnx

    proto = onnx.load_from_string(data)
    graph = proto.graph
    kept = {v.name for v in (*graph.input, *graph.output)}
    names: dict[str, str] = {}

    def short(name: str) -> str:
        if not name or name in kept:
            return name
        return names.setdefault(name, f"t{len(names)}")

    for t in graph.initializer:
        t.name = short(t.name)
    for k, node in enumerate(graph.node):
        node.name = f"n{k}"
        node.input[:] = [short(n) for n in node.input]
        node.output[:] = [short(n) for n in node.output]
    for v in graph.value_info:
        v.name = short(v.name)
    return proto.SerializeToString()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the files")
    parser.add_argument("--models", help="comma-separated model names (default: all)")
    parser.add_argument(
        "--exporter", choices=("script", "dynamo", "both"), default="both", help="torch's"
    )
    parser.add_argument(
        "--short-names",
        action="store_true",
        help="name nodes nK and tensors tK (for tests/data/exports: tiny_swin)",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    import torch
    import torchvision

    known = [*CLASSIFICATION, *OTHERS]
    names = args.models.split(",") if args.models else known
    available = set(torchvision.models.list_models())
    for name in names:
        if name in TINY:
            figures: dict[str, Any] = {"input": TINY[name], "kind": "classification"}
        elif name not in available:
            print(f"{name}: not a torchvision model (torchvision {torchvision.__version__})")
            continue
        else:
            try:
                figures = _published(name)
            except Exception as e:
                print(f"{name}: no published figures ({type(e).__name__}: {e})")
                continue
        torch.manual_seed(0)
        try:
            figures |= _own_counts(_module(name))
        except Exception as e:
            print(f"{name}: the model cannot be built ({type(e).__name__}: {e})")
            continue
        if name not in TINY:
            (args.out / f"{name}.json").write_text(json.dumps(figures, indent=1) + "\n")
        exporters = {"script": [False], "dynamo": [True], "both": [False, True]}[args.exporter]
        for dynamo in exporters:
            if dynamo and args.exporter == "both" and name not in DYNAMO:
                continue
            label = f"{name}_{'dynamo' if dynamo else 'script'}"
            torch.manual_seed(0)
            try:
                module = _module(name)
                example = _inputs(name, figures["input"], 2 if dynamo else 1)
                data = _export(module, name, example, dynamo)
            except Exception as e:  # the exporter's failure, not onnxcost's
                line = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
                print(f"{label}: the export failed ({type(e).__name__}: {line})", flush=True)
                continue
            path = args.out / f"{label}.onnx"
            data = _short_names(data) if args.short_names else data
            path.write_bytes(data)
            check = _max_difference(path, module, name, figures["input"], example)
            print(f"{label}: {len(data):,} bytes; {check}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
