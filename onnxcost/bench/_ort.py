"""The one door to onnxruntime: importing it, capturing what it writes, and turning its errors into ours.

onnxruntime is imported here lazily, so ``import onnxcost.bench`` works (and the trace parser
can be used offline) on a machine where onnxruntime is missing or cannot load.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from types import ModuleType

from onnxcost.errors import BenchError, ModelLoadError, OnnxcostError, ProviderError

INSTALL_CPU = "pip install onnxruntime"
INSTALL_CUDA = "pip install 'onnxcost[cuda]' (that is: pip install 'onnxruntime-gpu[cuda,cudnn]')"

_OOM_PATTERNS = (
    "out of memory",
    "failed to allocate memory",
    "bad_alloc",
    "cudaerrormemoryallocation",
    "cuda failure 2:",
    "cublas_status_alloc_failed",
    "cudnn_status_alloc_failed",
)


ORT_PACKAGES = (
    "onnxruntime",
    "onnxruntime-gpu",
    "onnxruntime-directml",
    "onnxruntime-openvino",
    "onnxruntime-rocm",
    "onnxruntime-migraphx",
    "onnxruntime-qnn",
)
"""The pip packages that each install the one ``onnxruntime`` module: two of them in one
environment write over each other's files, and the mix fails in ways neither does alone."""


@functools.cache
def installed_ort_packages() -> tuple[str, ...]:
    """The onnxruntime packages installed where this Python looks (``importlib.metadata``)."""
    names = set()
    for dist in metadata.distributions():
        name = re.sub(r"[-_.]+", "-", (dist.metadata["Name"] or "").lower())
        if name in ORT_PACKAGES:
            names.add(name)
    return tuple(n for n in ORT_PACKAGES if n in names)


def _mixed_install() -> ProviderError | None:
    """The error for an environment holding two onnxruntime packages, or None."""
    packages = installed_ort_packages()
    if len(packages) < 2:
        return None
    keep = next(p for p in packages if p != "onnxruntime")  # the accelerator's build
    return ProviderError(
        f"{' and '.join(packages)} are both installed here, in the same folder, and break each "
        f"other; keep one: pip uninstall -y {' '.join(packages)} && pip install {keep}"
    )


def import_ort() -> ModuleType:
    """``import onnxruntime``, or a ProviderError that says how to install it (or, where two
    onnxruntime packages share the environment, which one to keep)."""
    mixed = _mixed_install()
    if mixed is not None:
        raise mixed
    try:
        import onnxruntime as ort
    except (ImportError, OSError) as e:
        raise ProviderError(
            f"onnxruntime cannot be imported ({e}); install it with `{INSTALL_CPU}` "
            f"or, for CUDA, `{INSTALL_CUDA}` (`onnxcost analyze` works without it)"
        ) from e
    module: ModuleType = ort
    return module


def ort_error_types() -> tuple[type[BaseException], ...]:
    """The exception classes onnxruntime's Python binding raises (all derive from Exception)."""
    ort = import_ort()
    state = ort.capi.onnxruntime_pybind11_state
    names = (
        "Fail",
        "InvalidArgument",
        "NoSuchFile",
        "NoModel",
        "EngineError",
        "RuntimeException",
        "InvalidProtobuf",
        "ModelLoaded",
        "NotImplemented",
        "InvalidGraph",
        "EPFail",
    )
    found: list[type[BaseException]] = [getattr(state, n) for n in names if hasattr(state, n)]
    return (*found, RuntimeError, ValueError, MemoryError)


def _cut_signature(text: str) -> str:
    """Drop a leading C++ function signature (``void f(const T&, int) const``) from ``text``."""
    start = text.find("(")
    if start < 0 or start > 400:
        return text
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                rest = text[i + 1 :].lstrip()
                return rest.removeprefix("const").lstrip()
    return text


def clean_message(error: BaseException | str) -> str:
    """One readable line from an onnxruntime error: no status prefix, source path or C++ signature."""
    text = str(error).strip()
    text = re.sub(r"^\[ONNXRuntimeError\]\s*:\s*\d+\s*:\s*[A-Z_]+\s*:\s*", "", text)
    text = re.sub(r"^(Fatal error|Load model from \S+ failed)\s*:\s*", "", text)
    location = re.match(r"^\S+\.(?:cc|h|cpp|cu|cuh):\d+\s+", text)
    if location:
        text = _cut_signature(text[location.end() :])
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    line = " ".join(lines[:3]) if lines else str(error).strip()
    return line if len(line) <= 300 else line[:297] + "..."


def is_oom(error: BaseException | str) -> bool:
    """Whether an onnxruntime error reads as running out of (host or device) memory."""
    if isinstance(error, MemoryError):
        return True
    text = str(error).lower()
    return any(p in text for p in _OOM_PATTERNS)


def load_error(error: BaseException, provider: str) -> OnnxcostError:
    """Map an error raised while onnxruntime created a session to the onnxcost error that fits."""
    ort = import_ort()
    msg = clean_message(error)
    low = msg.lower()
    version = ort.__version__
    if is_oom(error):
        return BenchError(
            f"out of memory while creating the session on {provider}: {msg}; "
            f"try smaller input shapes (--input-shape / --dim) or another provider"
        )
    if "cuda graph" in low:
        return BenchError(
            f"onnxruntime cannot use a CUDA graph for this model: {msg}; drop --cuda-graph"
        )
    if "ir version" in low:
        return ModelLoadError(
            f"onnxruntime {version} cannot load the model: {msg}; upgrade onnxruntime "
            f"(pip install -U onnxruntime) or re-save the model with a lower ir_version"
        )
    if "opset" in low:
        return ModelLoadError(
            f"onnxruntime {version} does not support the model's opset: {msg}; upgrade onnxruntime "
            f"or re-export the model with an older opset"
        )
    if "not a registered function/op" in low or "could not find an implementation" in low:
        return ModelLoadError(
            f"onnxruntime {version} has no kernel for an op of this model on {provider}: {msg}; "
            f"upgrade onnxruntime, try another provider, or re-export without that op"
        )
    if "protobuf" in low:
        return ModelLoadError(
            f"onnxruntime cannot parse the model: {msg}; re-export or re-download it"
        )
    if "external data" in low or "no such file" in low:
        return ModelLoadError(
            f"onnxruntime cannot read the model's external data: {msg}; keep the data files next to the .onnx file"
        )
    return ModelLoadError(
        f"onnxruntime {version} cannot load the model on {provider}: {msg}; "
        f"`onnxcost analyze` still works on it, and `onnxcost providers` shows what loads here"
    )


def run_error(
    error: BaseException, provider: str, what: str, unset: Sequence[str] = ()
) -> OnnxcostError:
    """Map an error raised while onnxruntime ran the model. ``unset``: the symbolic dims no
    flag set, which ran at 1 (a waveform of 1 sample is too short for a Conv): named in a
    failure that does not say what else went wrong."""
    msg = clean_message(error)
    if unset:
        given = " ".join(f"--dim {d}=N" for d in unset[:3])
        dims = f"dim {unset[0]} was" if len(unset) == 1 else f"dims {', '.join(unset)} were"
        msg += f" (the {dims} unset and ran at 1: set them with {given})"
    if is_oom(error):
        return BenchError(
            f"out of memory while running {what} on {provider}: {msg}; try a smaller batch or input shape"
        )
    if "invalid dimensions" in msg.lower() or "invalid rank" in msg.lower():
        return BenchError(
            f"the inputs do not fit the model ({msg}); fix them with --input-shape NAME=DIMS or --dim SYMBOL=N"
        )
    if "data type" in msg.lower():
        return BenchError(
            f"an input has the wrong dtype ({msg}); give it the dtype the model declares"
        )
    return BenchError(f"onnxruntime failed running {what} on {provider}: {msg}")


@dataclass(slots=True)
class Captured:
    """What native code and Python wrote to stdout/stderr inside ``capture_output``."""

    text: str = ""
    lines: list[str] = field(default_factory=list)


@contextlib.contextmanager
def capture_output() -> Iterator[Captured]:
    """Capture stdout and stderr at the file-descriptor level (onnxruntime's C++ log included).

    The library never prints; onnxruntime does (its logger writes to stderr and its Python
    fallback code prints to stdout). What it wrote is returned for diagnosis instead. Output of
    other threads during the block is captured too, so keep the block short.
    """
    out = Captured()
    buffer = io.StringIO()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = (os.dup(1), os.dup(2))
    except (OSError, ValueError, AttributeError):
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            yield out
        out.text = buffer.getvalue()
        out.lines = out.text.splitlines()
        return
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 1)
        os.dup2(tmp.fileno(), 2)
        try:
            with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
                yield out
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.flush()
                sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            tmp.seek(0)
            native = tmp.read().decode("utf-8", errors="replace")
            text = re.sub(r"\x1b\[[0-9;]*m", "", native + buffer.getvalue())
            out.text = text
            out.lines = [ln for ln in text.splitlines() if ln.strip()]
