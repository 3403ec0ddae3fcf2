"""Writing what onnxcost makes (reports, traces, models) without ever destroying an input.

Two rules, checked before any work starts and again when the file is written:

- a path that is one of the command's input models (the same file, also through a symbolic or
  hard link) or one of their external-data files is refused, always;
- an existing file that holds an ONNX model, or is named ``*.onnx``, is refused: a report never
  replaces a model. A command that writes a model (``zoo save``, ``annotate``) may replace one
  with ``force``, and ``force`` lets any command replace a ``*.onnx`` file that is not a model.
  Any other existing file (last run's report) is replaced.

Every write goes to a temporary file in the target's folder, which is renamed over the target
only once it is complete: a failed or interrupted write leaves the old file as it was.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from onnxcost.errors import OutputError
from onnxcost.load import wire

_LOCATION_ENTRY = b"\x0a\x08location\x12"
"""How ``onnx.save`` serializes an external-data reference's location: key 'location', then
its value. Only the fallback scan (``_scanned_locations``) looks for these bytes."""

_VARINT, _LEN = wire.VARINT, wire.LEN

_MODEL_FIELDS = {
    1: _VARINT,  # ir_version
    2: _LEN,  # producer_name
    3: _LEN,  # producer_version
    4: _LEN,  # domain
    5: _VARINT,  # model_version
    6: _LEN,  # doc_string
    7: _LEN,  # graph
    8: _LEN,  # opset_import
    14: _LEN,  # metadata_props
    20: _LEN,  # training_info
    25: _LEN,  # functions
    26: _LEN,  # configuration
}
"""ModelProto's fields (onnx.proto) and their wire types."""

_MAX_FIELDS = 5_000_000
"""Fields the guard reads before it stops parsing a file (seconds, not minutes, of Python):
past it, a file is taken for a model and its locations are found by the byte scan."""

# Where a TensorProto (or SparseTensorProto) can sit, by message: field -> message type.
_TENSOR_HOLDERS: dict[str, dict[int, str]] = {
    "model": {7: "graph", 20: "training", 25: "function"},
    "training": {1: "graph", 2: "graph"},
    "graph": {1: "node", 5: "tensor", 15: "sparse"},  # node, initializer, sparse_initializer
    "function": {7: "node"},
    "node": {5: "attribute"},
    # t, g, tensors, graphs, sparse_tensor, sparse_tensors
    "attribute": {5: "tensor", 6: "graph", 10: "tensor", 11: "graph", 22: "sparse", 23: "sparse"},
    "sparse": {1: "tensor", 2: "tensor"},  # values, indices
}
_EXTERNAL_DATA = 13  # TensorProto.external_data: StringStringEntryProto (key = 1, value = 2)


class _TooLongError(Exception):
    """The file has more fields than the guard reads."""


class _Walk:
    """A payload-free walk of a serialized ModelProto (``onnxcost.load.wire``'s reader): only keys
    and lengths are read, so the pages of inline weights are never touched."""

    def __init__(self, buf: wire.Buffer) -> None:
        self.buf = buf
        self.fields = 0

    def each(self, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
        for number, wire_type, _key, value_start, value_end in wire.fields(self.buf, start, end):
            self.fields += 1
            if self.fields > _MAX_FIELDS:
                raise _TooLongError
            yield number, wire_type, value_start, value_end

    def locations(self, start: int, end: int, kind: str, out: set[str], depth: int = 0) -> None:
        if depth > wire.MAX_DEPTH:
            raise wire.WireError("messages nested deeper than protobuf parses")
        if kind == "tensor":
            for number, wire_type, value_start, value_end in self.each(start, end):
                if number == _EXTERNAL_DATA and wire_type == _LEN:
                    key = value = b""
                    for n, w, a, b in self.each(value_start, value_end):
                        if w == _LEN and n == 1:
                            key = self.buf[a:b]
                        elif w == _LEN and n == 2:
                            value = self.buf[a:b]
                    if key == b"location" and value:
                        with contextlib.suppress(UnicodeDecodeError):
                            out.add(value.decode("utf-8"))
            return
        children = _TENSOR_HOLDERS[kind]
        for number, wire_type, value_start, value_end in self.each(start, end):
            if wire_type == _LEN and number in children:
                self.locations(value_start, value_end, children[number], out, depth + 1)


def _mapped(path: Path) -> contextlib.AbstractContextManager[mmap.mmap | bytes]:
    """The file's bytes through a read-only memory map (empty bytes for an empty file)."""
    with path.open("rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return contextlib.nullcontext(b"")
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def _is_model(buf: wire.Buffer) -> bool:
    """Whether ``buf`` parses as a ModelProto with a graph: every top-level field one of the
    model's with its wire type, the file read to its end, and the graph's fields well formed.
    Fields may come in any order (protobuf allows it; ``onnx.load`` reads such a model)."""
    walk = _Walk(buf)
    seen: set[int] = set()
    graph: tuple[int, int] | None = None
    try:
        for number, wire_type, value_start, value_end in walk.each(0, len(buf)):
            if _MODEL_FIELDS.get(number) != wire_type:
                return False
            seen.add(number)
            if number == 7:
                graph = (value_start, value_end)
        if graph is None or not seen & {1, 8}:
            return False
        for _field in walk.each(*graph):
            pass
    except wire.WireError:
        return False
    except _TooLongError:
        return True  # well formed as far as read: a model, to be safe
    return True


def _scanned_locations(buf: wire.Buffer) -> set[str]:
    """The locations serialized as ``onnx.save`` writes them, found by a scan of the bytes:
    the fallback for a file the walk does not read. A match inside weight bytes only adds a
    name to protect, which costs nothing."""
    locations: set[str] = set()
    size = len(buf)
    pos = buf.find(_LOCATION_ENTRY)
    while pos >= 0:
        try:
            length, start = wire.varint(buf, pos + len(_LOCATION_ENTRY), size)
        except wire.WireError:
            break
        if 0 < length <= 4096 and start + length <= size:
            with contextlib.suppress(UnicodeDecodeError):
                locations.add(bytes(buf[start : start + length]).decode("utf-8"))
        pos = buf.find(_LOCATION_ENTRY, pos + 1)
    return locations


def _external_locations(path: Path) -> set[str]:
    """The external-data locations a model file names, wherever its fields sit: found by
    parsing the model's messages (keys and lengths only), or by a scan of the bytes where
    the file does not parse or is too long to walk."""
    try:
        with _mapped(path) as buf:
            found: set[str] = set()
            try:
                _Walk(buf).locations(0, len(buf), "model", found)
            except (wire.WireError, _TooLongError):
                return _scanned_locations(buf)
            return found
    except (OSError, ValueError):
        return set()  # not readable as a file: nothing more to protect than the path itself


def model_files(source: str | os.PathLike[str]) -> list[Path]:
    """The files a model source consists of: the model file and its external-data files.

    Empty for anything that is not an existing regular file (a built-in model's name)."""
    path = Path(os.fspath(source))
    try:
        if not path.is_file():
            return []
    except OSError:
        return []
    files = [path]
    for location in sorted(_external_locations(path)):
        if "\x00" in location:
            continue
        files.append(path.parent / location)
    return files


def looks_like_model(path: Path) -> bool:
    """Whether an existing file holds an ONNX model: it parses as a ModelProto (``_is_model``),
    whatever the order of its fields."""
    try:
        if not path.is_file():
            return False
        with _mapped(path) as buf:
            return _is_model(buf)
    except (OSError, ValueError):
        return False


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def check_output(
    path: str | os.PathLike[str],
    *,
    inputs: Iterable[str | os.PathLike[str]] = (),
    force: bool = False,
    writes_model: bool = False,
    flag: str = "--output",
) -> Path:
    """Refuse ``path`` if writing it would destroy an input or a model; return it as a Path.

    ``inputs``: the command's model sources (paths or built-in names); each one's file and
    external-data files are protected. ``writes_model``: the output is itself a model, which
    ``force`` may write over an existing one. Raises OutputError with a one-line message.
    """
    out = Path(os.fspath(path))
    shown = os.fspath(path)
    for source in inputs:
        for protected in model_files(source):
            if _same_file(out, protected):
                what = (
                    "the input model"
                    if protected == Path(os.fspath(source))
                    else f"external data of the input model {os.fspath(source)}"
                )
                raise OutputError(
                    f"{flag} {shown} is {what}; refusing to overwrite it: choose another {flag} path"
                )
    try:
        mode = out.stat().st_mode  # through a symbolic link: what would be written
    except FileNotFoundError:
        mode = None
    except OSError as e:
        raise OutputError(f"{flag} {shown}: {e.strerror or e}; choose another path") from e
    if mode is not None and stat.S_ISDIR(mode):
        raise OutputError(f"{flag} {shown} is a directory; name a file inside it")
    if mode is not None and not stat.S_ISREG(mode):
        # A FIFO would block the run, a device be replaced by a file: never write either.
        raise OutputError(
            f"{flag} {shown} is not a regular file (a pipe, device or socket); name a file, "
            f"or leave out {flag} to print to standard output"
        )
    if mode is None:
        parent = out.parent
        if not parent.is_dir():
            raise OutputError(
                f"{flag} {shown}: folder {os.fspath(parent)} does not exist; create it first"
            )
        return out
    if looks_like_model(out):
        if not (writes_model and force):
            fix = (
                "pass --force to replace it, or choose another path"
                if writes_model
                else "a report never replaces a model: choose another path"
            )
            raise OutputError(f"{flag} {shown} is an existing ONNX model; {fix}")
    elif out.suffix.lower() == ".onnx" and not force:
        raise OutputError(
            f"{flag} {shown} exists and is named like a model; pass --force to replace it, "
            f"or choose another path"
        )
    return out


@contextlib.contextmanager
def replacing(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary file beside ``path`` that is renamed over it when the block completes.

    If the block raises, the temporary file is removed and ``path`` is left as it was. The
    new file keeps the permissions of the one it replaces (or the umask's default). A
    symbolic link is written through: the file it points to is replaced, the link kept.
    """
    target = Path(os.path.realpath(os.fspath(path)))
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as e:
        raise OutputError(
            f"cannot write {os.fspath(path)} ({e.strerror or e}); choose a writable path"
        ) from e
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        try:
            mode = stat.S_IMODE(target.stat().st_mode)
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise OutputError(
            f"cannot write {os.fspath(path)} ({e.strerror or e}); the old file, if any, is "
            f"unchanged: choose a writable path with enough space"
        ) from e
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` all at once, or not at all."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    with replacing(path) as tmp, tmp.open("wb") as f:
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())
