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

_LOCATION_ENTRY = b"\x0a\x08location\x12"
"""How an external-data reference's location is serialized: key 'location', then its value."""

_MODEL_FIELD_TAGS = frozenset({0x12, 0x1A, 0x22, 0x28, 0x32, 0x3A, 0x42, 0x72, 0x7A, 0x8A})
"""Tags that follow a ModelProto's leading ir_version: producer, domain, doc, graph, opsets, ..."""


def _read_varint(data: bytes | mmap.mmap, pos: int) -> tuple[int, int]:
    value = shift = 0
    while pos < len(data) and shift < 64:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return value, pos
        shift += 7
    return -1, pos


def _external_locations(path: Path) -> set[str]:
    """The external-data locations a model file names, found without parsing the model.

    A scan of the file for serialized ``location`` entries: cheap on any size of file. A match
    inside weight bytes only adds a name to protect, which costs nothing.
    """
    locations: set[str] = set()
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return locations
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                pos = data.find(_LOCATION_ENTRY)
                while pos >= 0:
                    length, start = _read_varint(data, pos + len(_LOCATION_ENTRY))
                    if 0 < length <= 4096 and start + length <= size:
                        with contextlib.suppress(UnicodeDecodeError):
                            locations.add(data[start : start + length].decode("utf-8"))
                    pos = data.find(_LOCATION_ENTRY, pos + 1)
    except (OSError, ValueError):
        pass  # not readable as a file: nothing more to protect than the path itself
    return locations


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
    """Whether an existing file holds an ONNX model (by its first bytes, as written by onnx).

    ``onnx.save`` writes fields in number order, so a model starts with its ir_version
    (field 1, a small varint) followed by another ModelProto field."""
    try:
        with path.open("rb") as f:
            head = f.read(3)
    except OSError:
        return False
    return (
        len(head) == 3 and head[0] == 0x08 and 0 < head[1] < 0x80 and head[2] in _MODEL_FIELD_TAGS
    )


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
