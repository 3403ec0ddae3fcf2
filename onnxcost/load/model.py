"""Loading models: a path, bytes or a ModelProto, never reading weight data.

External data is checked (exists, large enough, inside the model's folder) but not read:
sizes come from each initializer's ``dims``, so a model with many GB of weights
loads as fast as its graph. Weights stored inline in a large model file are not read either:
the file is memory-mapped and parsed without them (``onnxcost.load.wire``).
"""

from __future__ import annotations

import errno
import mmap
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from onnxcost.errors import ModelLoadError
from onnxcost.load import wire

ModelSource = str | os.PathLike[str] | bytes | onnx.ModelProto

VIRTUAL_LOCATION_PREFIX = "onnxcost-virtual:"
"""External-data locations with this prefix name no file: weights of a built-in model built
without data, or inline weights the loader left in the file. They are never checked or read."""

LAZY_MIN_BYTES = 16 << 20
"""Models at least this large are parsed without their large inline weights (``load_model``).
The walk that finds them costs about 2 us per graph field (node, initializer, ...) and pays
off wherever weights are inline; a small file of many nodes and no weights (an external-data
LLM: 1.7 MB, 9,808 nodes) is parsed in full, as fast as before."""


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
"""Every external-data reference holds this key; a file holding no more of them than its main
graph's external initializers has no other external tensors to look for."""

_DECIMAL = re.compile(r"[0-9]+")


def external_tensors(model: onnx.ModelProto, data: bytes | None = None) -> list[onnx.TensorProto]:
    """Initializers and Constant-node tensors, of the main graph and of every subgraph
    (If/Loop/Scan bodies), that keep their data in external files.

    Given the serialized model ``data``, only the main graph's initializers are listed when
    the file holds no more location keys than they account for: the full scan reads every
    Constant's tensor, about a microsecond each, and large exports have thousands of them.
    """
    tensors = [t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    if data is not None and data.count(_LOCATION_KEY) <= len(tensors):
        return tensors
    from onnxcost.load.graph import iter_graphs

    tensors = []
    for _scope, graph in iter_graphs(model.graph):
        tensors.extend(t for t in graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL)
        for node in graph.node:
            if node.op_type == "Constant":
                for a in node.attribute:
                    if a.HasField("t") and a.t.data_location == onnx.TensorProto.EXTERNAL:
                        tensors.append(a.t)
    return tensors


def _external_info(tensor: onnx.TensorProto, what: str) -> dict[str, str]:
    """The tensor's external-data entries, each key and value checked to be text."""
    info: dict[str, str] = {}
    for e in tensor.external_data:
        key, value = e.key, e.value
        if not isinstance(key, str) or not isinstance(value, str):  # protobuf gives bytes then
            raise ModelLoadError(
                f"{what}: tensor {tensor.name!r} has an external-data entry that is not valid "
                f"UTF-8 text; the model is corrupt: re-export it"
            )
        info[key] = value
    return info


def _external_int(info: dict[str, str], key: str, tensor: onnx.TensorProto, what: str) -> int:
    """``offset`` or ``length`` of an external reference: absent is 0, else decimal digits."""
    text = info.get(key)
    if text is None:
        return 0
    if not _DECIMAL.fullmatch(text):
        raise ModelLoadError(
            f"{what}: tensor {tensor.name!r} has external-data {key} {text!r}, not a non-negative "
            f"whole number of bytes; the model is corrupt: re-export it"
        )
    return int(text)


def _external_target(location: str, root: Path, tensor: onnx.TensorProto, what: str) -> Path:
    """The checked file ``location`` names: a regular file inside ``root``."""
    bad = None
    if location in ("", "."):
        bad = "names no file"
    elif "\x00" in location:
        bad = "holds a NUL character"
    if bad is not None:
        raise ModelLoadError(
            f"{what}: tensor {tensor.name!r} has external-data location {location!r}, which "
            f"{bad}; the model is corrupt: re-export it"
        )
    try:
        target = (root / location).resolve()
    except (OSError, RuntimeError) as e:  # RuntimeError: a symlink loop (Python < 3.13)
        raise ModelLoadError(
            f"{what}: external data file {location!r} (for tensor {tensor.name!r}) cannot be "
            f"resolved ({e}); replace it with the data file itself"
        ) from None
    if Path(location).is_absolute() or not target.is_relative_to(root):
        raise ModelLoadError(
            f"{what}: tensor {tensor.name!r} points its external data outside the model's "
            f"folder ({location!r}); refusing to follow it (path traversal). Move the data "
            f"file beside the model and fix its location"
        )
    return target


def _check_external(
    model: onnx.ModelProto, base: Path | None, what: str, data: bytes | None = None
) -> int:
    """Validate every external reference without reading it; return the files' total size.

    Each reference names a regular file inside the model's folder (``base``), by a location
    that is UTF-8 text without NUL and no symlink loop, with ``offset`` and ``length`` in
    decimal digits, their sum within the file. ``data``: the serialized model, if there is
    one (it lets the check skip a scan).
    """
    sizes: dict[Path, int] = {}
    targets: dict[str, Path] = {}  # location -> its checked file: most tensors share one
    root = base.resolve() if base is not None else None
    for tensor in external_tensors(model, data):
        info = _external_info(tensor, what)
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
            target = targets[location] = _external_target(location, root, tensor, what)
        if target not in sizes:
            try:
                st = target.stat()
            except OSError:
                raise ModelLoadError(
                    f"{what}: external data file {location!r} (for tensor {tensor.name!r}) is "
                    f"missing; copy it into {root} beside the model"
                ) from None
            if not stat.S_ISREG(st.st_mode):
                raise ModelLoadError(
                    f"{what}: external data location {location!r} (for tensor {tensor.name!r}) "
                    f"is not a regular file (a directory, FIFO or device); point it at the data file"
                )
            sizes[target] = st.st_size
        end = _external_int(info, "offset", tensor, what) + _external_int(
            info, "length", tensor, what
        )
        if end > sizes[target]:
            raise ModelLoadError(
                f"{what}: external data file {location!r} is {sizes[target]} bytes but tensor "
                f"{tensor.name!r} needs bytes up to {end}; the data file is truncated, copy it again"
            )
    return sum(sizes.values())


def _read_model_file(path: Path, what: str, weights: bool) -> tuple[bytes, int]:
    """The serialized model in ``path`` (its large payloads cut unless ``weights``, see
    ``_strip``) and the file's size. ``path`` must be a regular file: a FIFO or device
    (``/dev/zero``) is refused before anything is read from it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # opening a FIFO must not wait
    except OSError as e:
        raise ModelLoadError(
            f"{what}: cannot read the file ({e.strerror}); check its permissions"
        ) from e
    mode, size = (st := os.fstat(fd)).st_mode, st.st_size
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise ModelLoadError(f"{what} is a directory; pass the .onnx file inside it")
        raise ModelLoadError(
            f"{what} is not a regular file (a FIFO, socket or device); pass a .onnx model file"
        )
    with os.fdopen(fd, "rb") as f:
        try:
            if weights or size < LAZY_MIN_BYTES:
                return f.read(), size
            try:
                mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError):  # a file that cannot be mapped (or just shrank)
                return f.read(), size
            with mapped:
                return _strip(mapped) or mapped[:], size
        except OSError as e:
            raise ModelLoadError(
                f"{what}: cannot read the file ({e.strerror}); check its permissions"
            ) from e


def _strip(data: wire.Buffer) -> bytes | None:
    """``data`` without its large tensor payloads (``wire.strip_payloads``), or None if it
    has none or is not a message that walk reads (the full parse then says what is wrong)."""
    try:
        return wire.strip_payloads(data, VIRTUAL_LOCATION_PREFIX + "inline")
    except wire.WireError:
        return None


def _exists(path: Path) -> bool:
    """Whether ``path`` exists; ModelLoadError where the system cannot even look it up (a
    name or path longer than it allows, a loop of symbolic links)."""
    try:
        path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as e:
        shown = str(path) if len(str(path)) <= 80 else f"{str(path)[:40]}...{str(path)[-30:]}"
        fix = (
            "pass a shorter path (cd into the model's folder, or link it under a shorter name)"
            if e.errno == errno.ENAMETOOLONG
            else "check the path"
        )
        raise ModelLoadError(f"{shown}: {e.strerror or e}; {fix}") from e
    return True


def load_model(source: ModelSource, *, weights: bool = False) -> LoadedModel:
    """Parse ``source`` into a private ModelProto, validating (never reading) external data.

    Unless ``weights`` (needed only to run the model), a file or bytes of at least
    ``LAZY_MIN_BYTES`` is parsed without its large inline weights: each becomes an external
    reference to the virtual location ``onnxcost-virtual:inline`` (dims, type and name
    kept; ``onnxcost.load.wire``), and a file is read through a memory map, so their bytes are
    never read. Raises ModelLoadError with a one-line message that says what to do.
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
        if not weights and len(data) >= LAZY_MIN_BYTES:
            data = _strip(data) or data
        proto = _parse(data, "the model bytes")
        _check_external(proto, None, "model", data)
        return LoadedModel(proto, None, len(source))
    path = Path(os.fspath(source))
    what = str(path)
    if not _exists(path):
        raise ModelLoadError(
            f"{what}: no such file; check the path (or name a built-in model: onnxcost zoo list)"
        )
    data, size = _read_model_file(path, what, weights)
    proto = _parse(data, what)
    external = _check_external(proto, path.parent, what, data)
    return LoadedModel(proto, path, size + external)
