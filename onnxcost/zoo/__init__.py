"""Built-in reference models, written directly as ONNX (no torch needed).

Each model copies a published architecture closely enough that its parameter
count and multiply-accumulates match the published figures, so analyses can be
checked against them::

    model = zoo.build("resnet18", dtype="fp16", params={"image_size": 160})
    zoo.save("llama", "llama7b.onnx", weights=False)  # graph plus a sparse weights file

``weights=False`` writes no weight data: every initializer refers to a 4 KiB-aligned
range of one external file, ``<stem>.weights``, which :func:`save` creates sparse.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

import onnx

from onnxcost.errors import OutputError, UsageError
from onnxcost.zoo._builder import OPSET_DEFAULT, Dim, Options, check_dim, check_options, require
from onnxcost.zoo.llama import llama
from onnxcost.zoo.text import bert_base, gpt2
from onnxcost.zoo.vision import mlp, mobilenet_v2, resnet18, resnet20_cifar, resnet50, vit_b_16

__all__ = ["MODELS", "ZooModel", "build", "names", "save"]

EXTERNAL_DATA_THRESHOLD = 1_800_000_000
"""Weight bytes above which ``save`` writes weights to an external file (protobuf stops at 2 GiB)."""

Builder = Callable[..., onnx.ModelProto]

BF16_DEFAULT_OPSET = 22
"""Default opset of convolutional models in bf16: Conv and pooling gain bfloat16 in opset 22."""
_CONV_MODELS = frozenset({"resnet20_cifar", "resnet18", "resnet50", "mobilenet_v2", "vit_b_16"})


@dataclass(frozen=True)
class ZooModel:
    """One built-in model: its name, a one-line summary, default parameters and inputs."""

    name: str
    summary: str
    params: dict[str, int | str | bool]
    """Builder keyword arguments and their defaults; a str default is a symbolic dimension,
    a bool one a switch."""
    inputs: str
    builder: Builder


def _entry(name: str, summary: str, inputs: str, builder: Builder) -> ZooModel:
    defaults: dict[str, int | str | bool] = {
        p.name: p.default
        for p in inspect.signature(builder).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name != "opts"
    }
    return ZooModel(name=name, summary=summary, params=defaults, inputs=inputs, builder=builder)


MODELS: dict[str, ZooModel] = {
    m.name: m
    for m in (
        _entry("mlp", "MLP 784-128-32-10 with ReLU (Gemm)", "input: float [batch, 784]", mlp),
        _entry(
            "resnet20_cifar",
            "ResNet-20 for CIFAR-10, option-A shortcuts (0.27M params)",
            "input: float [batch, 3, 32, 32]",
            resnet20_cifar,
        ),
        _entry(
            "resnet18",
            "torchvision ResNet-18, BatchNorm kept (11.7M params, 1.81 GMACs)",
            "input: float [batch, 3, image_size, image_size]",
            resnet18,
        ),
        _entry(
            "resnet50",
            "torchvision ResNet-50 v1.5, BatchNorm kept (25.6M params, 4.09 GMACs)",
            "input: float [batch, 3, image_size, image_size]",
            resnet50,
        ),
        _entry(
            "mobilenet_v2",
            "torchvision MobileNetV2, BatchNorm kept (3.5M params, 0.30 GMACs)",
            "input: float [batch, 3, image_size, image_size]",
            mobilenet_v2,
        ),
        _entry(
            "vit_b_16",
            "torchvision ViT-B/16 (86.6M params, 17.56 GMACs)",
            "input: float [batch, 3, image_size, image_size]",
            vit_b_16,
        ),
        _entry(
            "bert_base",
            "BERT-base encoder with pooler (109.5M params)",
            "input_ids, attention_mask, token_type_ids: int64 [batch, seq]",
            bert_base,
        ),
        _entry(
            "gpt2",
            "GPT-2 small with causal-mask buffer and tied LM head (124.4M params)",
            "input_ids: int64 [batch, seq]; kv_cache=true adds past_key_values.{i}.key/value",
            gpt2,
        ),
        _entry(
            "llama",
            "LLaMA-style decoder: RMSNorm, rotary, GQA, SwiGLU (7B shape by default)",
            "input_ids, attention_mask: int64 [batch, seq]; kv_cache=true: input_ids and "
            "past_key_values.{i}.key/value",
            llama,
        ),
    )
}


def names() -> list[str]:
    """Names of the built-in models, in catalogue order."""
    return list(MODELS)


def _lookup(name: str) -> ZooModel:
    try:
        return MODELS[name]
    except KeyError:
        raise UsageError(f"unknown zoo model {name!r}: pass one of {', '.join(MODELS)}") from None


_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def _flag(key: str, value: object) -> bool:
    """A switch such as ``kv_cache``: a bool, 0/1, or true/false written out."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    require(text in _TRUE + _FALSE, f"{key}={value!r}: pass true or false")
    return text in _TRUE


def _coerce(
    model: ZooModel, params: Mapping[str, str | int | bool] | None
) -> dict[str, Dim | bool]:
    """Check keys and values; CLI strings become ints, a symbolic dimension may stay a name.

    Every size is a positive integer; ``batch`` and ``seq`` (str defaults) may also be symbols;
    a switch (bool default, such as ``kv_cache``) takes true or false.
    """
    out: dict[str, Dim | bool] = {}
    for key, value in (params or {}).items():
        if key not in model.params:
            raise UsageError(
                f"{model.name} has no parameter {key!r}: pass one of {', '.join(model.params)}"
            )
        if isinstance(model.params[key], bool):
            out[key] = _flag(key, value)
            continue
        symbolic_ok = isinstance(model.params[key], str)
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise UsageError(f"{key}={value!r}: pass an integer")
        coerced: Dim = value
        if isinstance(value, str):
            try:
                coerced = int(value)
            except ValueError:
                coerced = value.strip()
        if symbolic_ok:
            check_dim(key, coerced)
        elif isinstance(coerced, str):
            raise UsageError(f"{key}={value!r}: pass an integer")
        else:
            require(coerced > 0, f"{key}={coerced}: pass a positive integer")
        if isinstance(coerced, int):
            limit = MAX_LAYERS if key == "layers" else MAX_SIZE
            require(coerced <= limit, f"{key}={coerced} is too large: pass at most {limit:,}")
        out[key] = coerced
    return out


MAX_LAYERS = 1024
"""The most layers a zoo model is built with: every layer adds nodes held in memory."""
MAX_SIZE = 2**31 - 1
"""The largest size any other zoo parameter takes (a dim of the graph)."""
MAX_WEIGHT_BYTES = 2**40
"""The most weight bytes a saved model may describe (1 TiB), even as a sparse file."""
MAX_MATERIALISED_BYTES = 2**32
"""The most weight bytes built in memory with random values (4 GiB): --no-weights above."""


def _check_weight_bytes(name: str, nbytes: int, weights: bool) -> None:
    require(
        nbytes <= MAX_WEIGHT_BYTES,
        f"{name} with these parameters has {nbytes:,} bytes of weights, more than any file "
        f"onnxcost writes ({MAX_WEIGHT_BYTES:,}); pass smaller parameters",
    )
    require(
        not weights or nbytes <= MAX_MATERIALISED_BYTES,
        f"{name} with these parameters has {nbytes:,} bytes of weights, too many to build in "
        f"memory ({MAX_MATERIALISED_BYTES:,} at most); pass --no-weights (weights=False)",
    )


def _build(
    name: str,
    dtype: str,
    opset: int | None,
    weights: bool,
    params: Mapping[str, str | int] | None,
    seed: int,
    location: str,
) -> onnx.ModelProto:
    model = _lookup(name)
    if opset is None:
        opset = BF16_DEFAULT_OPSET if dtype == "bf16" and name in _CONV_MODELS else OPSET_DEFAULT
    opts = Options(
        dtype=dtype,
        opset=opset,
        weights=weights,
        seed=seed,
        location=location,
    )
    check_options(opts)
    overrides = _coerce(model, params)
    # Size the weights from a build without their data (cheap) before making any.
    skeleton = model.builder(opts=replace(opts, weights=False), **overrides)
    _check_weight_bytes(name, _external_size(skeleton), weights)
    proto = skeleton if not weights else model.builder(opts=opts, **overrides)
    entry = proto.metadata_props.add()
    entry.key = "onnxcost.zoo.params"
    entry.value = ",".join(f"{k}={v}" for k, v in {**model.params, **overrides}.items())
    return proto


def build(
    name: str,
    *,
    dtype: str = "fp32",
    opset: int | None = None,
    weights: bool = True,
    params: Mapping[str, str | int] | None = None,
    seed: int = 0,
) -> onnx.ModelProto:
    """Build zoo model ``name`` in memory.

    ``dtype``: fp32, fp16 or bf16 for weights, float inputs and activations.
    ``opset``: 13 to 23 (default 17, or 22 for convolutional models in bf16;
    LayerNormalization is decomposed below 17).
    ``weights``: seeded random weights, or (False) external references to
    ``<name>.weights`` with no data. ``params``: overrides of ``MODELS[name].params``
    (strings are parsed as ints; ``batch``/``seq`` may also be symbol names).
    """
    return _build(name, dtype, opset, weights, params, seed, location=f"{name}.weights")


def _external_size(model: onnx.ModelProto) -> int:
    """End of the last external tensor: the size the weights file must have."""
    end = 0
    for t in model.graph.initializer:
        entries = {e.key: e.value for e in t.external_data}
        end = max(end, int(entries.get("offset", 0)) + int(entries.get("length", 0)))
    return end


def save(
    name: str,
    path: str | Path,
    *,
    dtype: str = "fp32",
    opset: int | None = None,
    weights: bool = True,
    params: Mapping[str, str | int] | None = None,
    seed: int = 0,
    force: bool = False,
) -> Path:
    """Build zoo model ``name`` and write it to ``path``; returns ``path``.

    Without weights, ``<stem>.weights`` beside it is created sparse (its size set
    by truncation), so nothing is materialised in memory or on disk. With weights,
    models over 1.8 GB keep their weights in ``<stem>.weights``. An existing model or
    weights file is replaced only with ``force``; each file is written to a temporary
    file and renamed into place when complete (``onnxcost.load.outputs``).
    """
    from onnxcost.load.outputs import check_output, replacing

    path = Path(path)
    if path.suffix == ".weights":
        raise UsageError(
            f"{path}: the .weights suffix is reserved for weight data; pass a .onnx path"
        )
    check_output(path, force=force, writes_model=True, flag="FILE")
    data_name = f"{path.stem}.weights"
    data_path = path.with_name(data_name)
    if data_path.exists() and not force:
        raise OutputError(
            f"FILE {path}: its weights file {data_path} already exists; pass --force to "
            f"replace it, or choose another name"
        )
    model = _build(name, dtype, opset, weights, params, seed, location=data_name)
    external = not weights or (
        sum(len(t.raw_data) for t in model.graph.initializer) > EXTERNAL_DATA_THRESHOLD
    )
    if not external:
        with replacing(path) as tmp:
            onnx.save_model(model, tmp)
        data_path.unlink(missing_ok=True)  # an older save's weights would only mislead
        return path
    with replacing(data_path) as data_tmp, replacing(path) as model_tmp:
        with open(data_tmp, "wb") as f:
            if weights:
                _move_weights_out(model, f, data_name)
            else:
                os.truncate(f.fileno(), _external_size(model))
        model_tmp.write_bytes(model.SerializeToString())
    return path


_INLINE_MAX_BYTES = 1024
"""Weights up to this size stay inline when the rest go to the weights file (onnx's default)."""


def _move_weights_out(model: onnx.ModelProto, f: BinaryIO, location: str) -> None:
    """Write each initializer's raw data above 1 KiB to ``f`` and point the tensor at it."""
    offset = 0
    for t in model.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL or len(t.raw_data) <= _INLINE_MAX_BYTES:
            continue
        f.write(t.raw_data)
        length = len(t.raw_data)
        t.ClearField("raw_data")
        t.data_location = onnx.TensorProto.EXTERNAL
        del t.external_data[:]
        for key, value in (("location", location), ("offset", offset), ("length", length)):
            entry = t.external_data.add()
            entry.key, entry.value = key, str(value)
        offset += length
