"""Execution providers: which exist, which really load, and why one did not.

onnxruntime drops a provider it cannot load (a missing CUDA library, no GPU) with a log line
and carries on with the CPU. We never report numbers under a provider that did not run, so
every session's ``get_providers()`` is compared with what was asked, and the cause is read
from what onnxruntime wrote while creating it.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnxcost.bench._ort import (
    INSTALL_CPU,
    INSTALL_CUDA,
    capture_output,
    clean_message,
    import_ort,
    ort_error_types,
)
from onnxcost.errors import ProviderError, UsageError

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
TENSORRT = "TensorrtExecutionProvider"
CUDA_LIKE = frozenset({CUDA, TENSORRT})
"""Providers whose tensors live on an NVIDIA GPU (IO binding on device 'cuda')."""

ALIASES: Mapping[str, str] = {
    "cpu": CPU,
    "cuda": CUDA,
    "gpu": CUDA,
    "tensorrt": TENSORRT,
    "trt": TENSORRT,
    "dml": "DmlExecutionProvider",
    "directml": "DmlExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "rocm": "ROCMExecutionProvider",
    "migraphx": "MIGraphXExecutionProvider",
    "webgpu": "WebGpuExecutionProvider",
    "xnnpack": "XnnpackExecutionProvider",
}


@dataclass(frozen=True, slots=True)
class ProviderStatus:
    """One execution provider: in this build (``available``), and really loading (``loads``)."""

    name: str
    available: bool
    loads: bool
    detail: str


def no_nvidia_driver() -> str | None:
    """Why this machine has no NVIDIA driver to run CUDA on (its library does not load), or
    None where it loads. Without it no onnxruntime package can use a GPU: installing one is
    not the fix."""
    if sys.platform == "darwin":
        return "macOS has no CUDA"
    name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
    try:
        ctypes.CDLL(name)
    except OSError as e:
        return f"{name} cannot be loaded: {clean_message(e).removeprefix(name + ': ')}"
    return None


def no_driver_error(provider: str) -> ProviderError | None:
    """The error for a CUDA provider on a machine without the NVIDIA driver, or None."""
    if provider not in CUDA_LIKE:
        return None
    why = no_nvidia_driver()
    if why is None:
        return None
    return ProviderError(
        f"{provider} cannot run here: there is no NVIDIA driver or GPU on this machine ({why}); "
        f"run on a machine with an NVIDIA GPU and its driver, or use --provider cpu"
    )


def install_hint(provider: str) -> str:
    """The command that installs a build of onnxruntime with ``provider``."""
    if provider in CUDA_LIKE:
        hint = INSTALL_CUDA
        if provider == TENSORRT:
            hint += " plus TensorRT (pip install tensorrt)"
        return hint
    if provider == CPU:
        return INSTALL_CPU
    package = {
        "DmlExecutionProvider": "onnxruntime-directml",
        "OpenVINOExecutionProvider": "onnxruntime-openvino",
        "ROCMExecutionProvider": "onnxruntime-rocm",
        "MIGraphXExecutionProvider": "onnxruntime-migraphx",
    }.get(provider)
    return f"pip install {package}" if package else "install an onnxruntime build that includes it"


def resolve_provider(name: str) -> str:
    """``'cuda'`` -> ``'CUDAExecutionProvider'``; full names pass (any case); unknown -> UsageError."""
    key = name.strip()
    if key.lower() in ALIASES:
        return ALIASES[key.lower()]
    known = list(import_ort().get_all_providers())
    for full in known:
        if full.lower() == key.lower() or full.lower() == f"{key.lower()}executionprovider":
            return str(full)
    raise UsageError(
        f"unknown execution provider {name!r}; use one of {', '.join(sorted(ALIASES))} "
        f"or a full name such as {CUDA} (`onnxcost providers` lists what loads here)"
    )


def parse_provider_options(options: Iterable[str] | Mapping[str, object] | None) -> dict[str, str]:
    """``['device_id=0', 'arena_extend_strategy=kSameAsRequested']`` (or one such string) -> a dict."""
    if options is None:
        return {}
    if isinstance(options, str):
        options = [options]
    if isinstance(options, Mapping):
        return {str(k): _option_value(v) for k, v in options.items()}
    out: dict[str, str] = {}
    for item in options:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(
                f"provider option {item!r} is not KEY=VALUE; write it like device_id=0"
            )
        out[key.strip()] = value.strip()
    return out


def _option_value(v: object) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


_LIB_FAIL = re.compile(r"Failed to load library (\S+) with error: ([^\n]+)")
_MISSING_SO = re.compile(r"(\S+\.so[.\d]*|\S+\.dll): cannot open shared object file")
_REQUIRE = re.compile(r"Require (cuDNN \d+(?:\.(?:\d+|\*))* and CUDA \d+(?:\.(?:\d+|\*))*)")


def diagnose(provider: str, log: str) -> str:
    """Why ``provider`` did not load, read from what onnxruntime logged (one clause, no hint)."""
    reasons: list[str] = []
    for lib, err in _LIB_FAIL.findall(log):
        missing = _MISSING_SO.search(err)
        base = os.path.basename(lib)
        reasons.append(
            f"{base} needs {missing.group(1)}, which was not found"
            if missing
            else f"{base}: {err.strip()}"
        )
    reasons = list(dict.fromkeys(reasons))
    require = _REQUIRE.search(log)
    if require:
        reasons.append(f"this onnxruntime needs {require.group(1)}")
    low = log.lower()
    if "no cuda-capable device" in low or "cudaerrornodevice" in low:
        reasons.append("no CUDA-capable GPU is visible")
    if "driver version is insufficient" in low:
        reasons.append("the NVIDIA driver is older than this CUDA needs; update the driver")
    if "please install tensorrt" in low:
        reasons.append("the TensorRT libraries were not found")
    if "unknown provider type" in low:
        reasons.append("this onnxruntime build does not know it")
    if not reasons:
        errors = [
            clean_message(ln.split("]", 2)[-1])
            for ln in log.splitlines()
            if "[E:" in ln or "EP Error" in ln
        ]
        reasons.append(errors[-1] if errors else "onnxruntime dropped it without logging why")
    return "; ".join(reasons)


def provider_dropped(provider: str, got: Iterable[str], log: str) -> ProviderError:
    """The error for a session that silently runs on ``got`` instead of ``provider``."""
    no_driver = no_driver_error(provider)
    if no_driver is not None:
        return no_driver
    fallback = ", ".join(got) or "nothing"
    return ProviderError(
        f"{provider} did not load ({diagnose(provider, log)}); onnxruntime fell back to {fallback}, "
        f"so nothing was measured; install with: {install_hint(provider)}"
    )


def preload_gpu_libraries(provider: str) -> str:
    """Load CUDA/cuDNN from the nvidia-* pip packages (``onnxruntime.preload_dlls``); returns its log.

    onnxruntime-gpu[cuda,cudnn] installs those packages but onnxruntime only finds them on Linux
    after this call (or with LD_LIBRARY_PATH). Failing here is not an error: the session that
    follows says whether the provider loads.
    """
    if provider not in CUDA_LIKE:
        return ""
    ort = import_ort()
    preload = getattr(ort, "preload_dlls", None)
    if preload is None:
        return ""
    with capture_output() as cap:
        try:
            preload()
        except (OSError, RuntimeError) as e:
            cap.lines.append(str(e))
    return cap.text


def tiny_model() -> bytes:
    """Y = X + X on float32[1, 8]: the smallest model every provider should run."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["X", "X"], ["Y"], name="add")],
        "probe",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 8])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString())


def probe_provider(provider: str, options: Mapping[str, str] | None = None) -> ProviderStatus:
    """Create and run a tiny session on ``provider`` and say whether it really loaded."""
    ort = import_ort()
    available = provider in ort.get_available_providers()
    no_driver = no_driver_error(provider)
    if no_driver is not None:
        return ProviderStatus(provider, available, False, str(no_driver))
    if not available:
        return ProviderStatus(
            provider,
            False,
            False,
            f"not in this onnxruntime build; install with: {install_hint(provider)}",
        )
    log = preload_gpu_libraries(provider)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    providers: list[object] = [(provider, dict(options or {}))]
    if provider != CPU:
        providers.append(CPU)
    with capture_output() as cap:
        try:
            session = ort.InferenceSession(tiny_model(), so, providers=providers)
            got = [str(p) for p in session.get_providers()]
            if provider in got:
                session.run(None, {"X": np.ones((1, 8), dtype=np.float32)})
            error = ""
        except ort_error_types() as e:
            got, error = [], clean_message(e)
    log += cap.text
    if error:
        return ProviderStatus(provider, True, False, f"{error}; {install_hint(provider)}")
    if provider not in got:
        return ProviderStatus(
            provider,
            True,
            False,
            f"{diagnose(provider, log)}; install with: {install_hint(provider)}",
        )
    return ProviderStatus(provider, True, True, "loads and runs")


def available_providers() -> list[ProviderStatus]:
    """Every provider this onnxruntime build has, plus CUDA, each tried with a tiny session."""
    ort = import_ort()
    names = list(dict.fromkeys([*ort.get_available_providers(), CUDA]))
    return [probe_provider(str(n)) for n in names]
