"""Loading models: a path, bytes or a ModelProto, never reading external weight data.

External data is checked (exists, large enough, inside the model's folder) but not read:
sizes come from each initializer's ``dims``, so a model with many GB of weights
loads as fast as its graph.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from onnxcost.errors import ModelLoadError

ModelSource = str | os.PathLike[str] | bytes | onnx.ModelProto

VIRTUAL_LOCATION_PREFIX = "onnxcost-virtual:"
"""External-data locations with this prefix name no file: weights of a built-in model built
without data. They are never checked or read."""


@dataclass(frozen=True, slots=True)
class LoadedModel:
    """A parsed model the analyzer owns (a private copy, safe to modify)."""

    proto: onnx.ModelProto
    path: Path | None
    model_bytes: int
    """File size plus external data files' sizes; the serialized size for in-memory models."""


def _parse(data: bytes, what: str) -> onnx.ModelProto:
    if not data:
        raise ModelLoadError(f"{what} is empty (0 bytes): re-export or re-download the model")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except DecodeError as e:
        raise ModelLoadError(
            f"{what} is not a valid ONNX model (protobuf parse failed: the file is truncated, "
            f"corrupt or of another format); re-export it or check the download"
        ) from e
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise ModelLoadError(
            f"{what} is not an ONNX model (no IR version or graph); pass a .onnx file exported "
            f"with torch.onnx.export, tf2onnx or similar"
        )
    if model.ir_version > onnx.IR_VERSION:
        raise ModelLoadError(
            f"{what} has IR version {model.ir_version}, newer than this onnx ({onnx.__version__}, "
            f"IR {onnx.IR_VERSION}) understands; upgrade with: pip install -U onnx"
        )
    return model


_LOCATION_KEY = b"\x0a\x08location"
"""How every external-data reference starts in a serialized model: its key 'location'."""


def _external_tensors(model: onnx.ModelProto, data: bytes | None = None) -> list[onnx.TensorProto]:
    """Initializers and Constant-node tensors that keep their data in external files.

    Given the serialized model ``data`` of a model with external initializers (so a small
    file: its weights are elsewhere), Constant nodes are scanned only if the file holds more
    location keys than the initializers account for. The scan reads every Constant's tensor,
    about a microsecond each, and large exports have thousands of small ones.
    """
    tensors = [t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    if data is not None and tensors and data.count(_LOCATION_KEY) <= len(tensors):
        return tensors
    for node in model.graph.node:
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.HasField("t") and a.t.data_location == onnx.TensorProto.EXTERNAL:
                    tensors.append(a.t)
    return tensors


def _check_external(
    model: onnx.ModelProto, base: Path | None, what: str, data: bytes | None = None
) -> int:
    """Validate every external reference without reading it; return the files' total size.

    ``data``: the serialized model, if there is one (it lets the check skip a scan)."""
    sizes: dict[Path, int] = {}
    targets: dict[str, Path] = {}  # location -> its checked file: most tensors share one
    root = base.resolve() if base is not None else None
    for tensor in _external_tensors(model, data):
        info = {e.key: e.value for e in tensor.external_data}
        location = info.get("location", "")
        if location.startswith(VIRTUAL_LOCATION_PREFIX):
            continue
        if root is None:
            raise ModelLoadError(
                f"{what}: tensor {tensor.name!r} keeps its data in external file {location!r}, "
                f"which cannot be found for an in-memory model; pass the model's path instead"
            )
        target = targets.get(location)
        if target is None:
            target = (root / location).resolve()
            if Path(location).is_absolute() or not target.is_relative_to(root):
                raise ModelLoadError(
                    f"{what}: tensor {tensor.name!r} points its external data outside the model's "
                    f"folder ({location!r}); refusing to follow it (path traversal). Move the data "
                    f"file beside the model and fix its location"
                )
            targets[location] = target
        if target not in sizes:
            try:
                sizes[target] = target.stat().st_size
            except OSError:
                raise ModelLoadError(
                    f"{what}: external data file {location!r} (for tensor {tensor.name!r}) is "
                    f"missing; copy it into {root} beside the model"
                ) from None
        end = int(info.get("offset", 0) or 0) + int(info.get("length", 0) or 0)
        if end > sizes[target]:
            raise ModelLoadError(
                f"{what}: external data file {location!r} is {sizes[target]} bytes but tensor "
                f"{tensor.name!r} needs bytes up to {end}; the data file is truncated, copy it again"
            )
    return sum(sizes.values())


def build_builtin(name: str, *, weights: bool) -> onnx.ModelProto | None:
    """The built-in model ``name`` (a path that exists always wins), or None if there is none.

    Built without weights, its external-data locations are marked virtual: nothing to check.
    """
    if os.sep in name or name.endswith(".onnx"):
        return None
    from onnxcost import zoo

    if name not in zoo.MODELS:
        return None
    proto = zoo.build(name, weights=weights)
    if not weights:
        for tensor in _external_tensors(proto):
            for entry in tensor.external_data:
                if entry.key == "location" and not entry.value.startswith(VIRTUAL_LOCATION_PREFIX):
                    entry.value = VIRTUAL_LOCATION_PREFIX + entry.value
    return proto


def load_model(source: ModelSource) -> LoadedModel:
    """Parse ``source`` into a private ModelProto, validating (never reading) external data.

    Raises ModelLoadError with a one-line message that says what to do.
    """
    if isinstance(source, onnx.ModelProto):
        proto = onnx.ModelProto()
        proto.CopyFrom(source)
        if proto.ir_version <= 0 or not proto.HasField("graph"):
            raise ModelLoadError("the ModelProto has no graph or IR version: it is not a model")
        _check_external(proto, None, "model")
        return LoadedModel(proto, None, proto.ByteSize())
    if isinstance(source, bytes | bytearray):
        data = bytes(source)
        proto = _parse(data, "the model bytes")
        _check_external(proto, None, "model", data)
        return LoadedModel(proto, None, len(source))
    path = Path(os.fspath(source))
    what = str(path)
    if not path.exists():
        builtin = build_builtin(str(source), weights=False)
        if builtin is not None:
            return LoadedModel(builtin, None, 0)
        raise ModelLoadError(
            f"{what}: no such file; check the path (or name a built-in model: onnxcost zoo list)"
        )
    if path.is_dir():
        raise ModelLoadError(f"{what} is a directory; pass the .onnx file inside it")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ModelLoadError(
            f"{what}: cannot read the file ({e.strerror}); check its permissions"
        ) from e
    proto = _parse(data, what)
    external = _check_external(proto, path.parent, what, data)
    return LoadedModel(proto, path, len(data) + external)
