"""Roofline: the machine's ceilings measured with onnxruntime itself, and each node against them.

Peak FLOP/s comes from a large square MatMul (2 N^3 FLOPs), bandwidth from a large Add
(reads two tensors, writes one: 3 x 4 x numel bytes), each the best of several runs with
inputs and outputs bound in place so no copy is timed. Results are cached per provider and
device in ``$XDG_CACHE_HOME/onnxcost/ceilings.json`` (``~/.cache/onnxcost``).

Per node: floor time = max(flops / peak, bytes / bandwidth); the larger term names the bound
(compute or memory); efficiency = floor / measured.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from onnx import TensorProto, helper

from onnxcost.analysis.records import Layout, NodeRecord, to_jsonable
from onnxcost.bench._ort import import_ort, ort_error_types, run_error
from onnxcost.bench.join import NodeProfile
from onnxcost.bench.progress import BenchProgress, ProgressFn
from onnxcost.bench.providers import CPU, CUDA_LIKE
from onnxcost.bench.session import SessionConfig, session_options
from onnxcost.bench.system import cpu_name, gpu_info
from onnxcost.errors import BenchError, ProviderError

Bound = Literal["compute", "memory"]


@dataclass(frozen=True, slots=True)
class Ceilings:
    """What the device can do at best, as onnxruntime measured it."""

    peak_flops_per_s: float
    bandwidth_bytes_per_s: float
    provider: str
    device: str
    dtype: str = "float32"
    onnxruntime_version: str = ""
    measured_at: str = ""

    @property
    def ridge_flops_per_byte(self) -> float:
        """Arithmetic intensity where the roofs meet: peak / bandwidth."""
        return self.peak_flops_per_s / self.bandwidth_bytes_per_s

    def as_dict(self) -> dict[str, Any]:
        return to_jsonable(self)  # type: ignore[no-any-return]


def floor_s(flops: int, bytes_moved: int, ceilings: Ceilings) -> tuple[float, Bound]:
    """max(flops / peak, bytes / bandwidth) in seconds, and which term is larger."""
    compute = flops / ceilings.peak_flops_per_s
    memory = bytes_moved / ceilings.bandwidth_bytes_per_s
    return (compute, "compute") if compute >= memory else (memory, "memory")


def with_roofline(rows: Sequence[NodeProfile], ceilings: Ceilings) -> tuple[NodeProfile, ...]:
    """Rows with ``floor_us`` and ``bound`` set (rows without costs keep None)."""
    out = []
    for r in rows:
        if r.flops == 0 and r.bytes_total == 0:
            out.append(r)
            continue
        seconds, bound = floor_s(r.flops, r.bytes_total, ceilings)
        out.append(replace(r, floor_us=seconds * 1e6, bound=bound))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ModelRoofline:
    """The whole model against the ceilings: measured latency vs the sum of node floors."""

    ceilings: Ceilings
    floor_ms: float
    measured_ms: float
    from_cache: bool = False
    """The ceilings were read from ``cache_path``, measured earlier (at ``ceilings.measured_at``)."""
    cache_path: str | None = None
    """The cache file the ceilings were read from or stored in (None: not cached)."""

    @property
    def efficiency(self) -> float:
        """Sum of floors / measured latency (1.0 = every node at its roof)."""
        return self.floor_ms / self.measured_ms if self.measured_ms > 0 else 0.0

    @property
    def efficiency_suspect(self) -> bool:
        """Above 100%: the ceilings are too low for this run, not a real efficiency."""
        return self.efficiency > 1.0

    JSON_LAYOUT: ClassVar[Layout] = (
        "ceilings",
        "floor_ms",
        "measured_ms",
        "efficiency",
        "efficiency_suspect",
        ("ceilings_from_cache", "from_cache"),
        "cache_path",
    )
    """The ``roofline`` object of ``onnxcost.bench/1``."""


def model_roofline(
    nodes: Sequence[NodeRecord],
    measured_ms: float,
    ceilings: Ceilings,
    *,
    from_cache: bool = False,
    cache_path: str | None = None,
) -> ModelRoofline:
    """Sum of per-node floors over the main graph's nodes, against ``measured_ms``."""
    total = sum(floor_s(n.flops, n.bytes_total, ceilings)[0] for n in nodes if n.graph == "")
    return ModelRoofline(ceilings, total * 1e3, measured_ms, from_cache, cache_path)


def cache_path() -> Path:
    """``$XDG_CACHE_HOME/onnxcost/ceilings.json``, defaulting to ``~/.cache``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "onnxcost" / "ceilings.json"


def device_name(config: SessionConfig) -> str:
    """CPU model, or GPU name from NVML (``cuda:<id>`` when NVML is missing)."""
    if config.provider in CUDA_LIKE:
        name, _driver = gpu_info(config.device_id)
        return name or f"cuda:{config.device_id}"
    return cpu_name()


def cache_key(config: SessionConfig, dtype: str) -> str:
    threads = config.intra_op_threads if config.intra_op_threads is not None else "default"
    return f"{config.provider}|{device_name(config)}|{dtype}|threads={threads}|{platform.machine()}"


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def cached_ceilings(
    config: SessionConfig, dtype: str = "float32", path: Path | None = None
) -> Ceilings | None:
    """The cached ceilings for this provider and device, if any."""
    entry = _read_cache(path or cache_path()).get(cache_key(config, dtype))
    if not isinstance(entry, dict):
        return None
    try:
        return Ceilings(**entry)
    except TypeError:
        return None


def store_ceilings(
    config: SessionConfig, ceilings: Ceilings, path: Path | None = None
) -> str | None:
    """Write to the cache; returns a warning instead of failing when it cannot."""
    target = path or cache_path()
    data = _read_cache(target)
    data[cache_key(config, ceilings.dtype)] = ceilings.as_dict()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        tmp.replace(target)
    except OSError as e:
        return f"could not cache the ceilings in {target} ({e.strerror}); they will be measured again next time"
    return None


def _matmul_model(n: int, elem: int) -> bytes:
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["A", "B"], ["C"], name="matmul")],
        "peak",
        [
            helper.make_tensor_value_info("A", elem, [n, n]),
            helper.make_tensor_value_info("B", elem, [n, n]),
        ],
        [helper.make_tensor_value_info("C", elem, [n, n])],
    )
    return bytes(
        helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7
        ).SerializeToString()
    )


def _add_model(numel: int, elem: int) -> bytes:
    graph = helper.make_graph(
        [helper.make_node("Add", ["A", "B"], ["C"], name="add")],
        "bandwidth",
        [
            helper.make_tensor_value_info("A", elem, [numel]),
            helper.make_tensor_value_info("B", elem, [numel]),
        ],
        [helper.make_tensor_value_info("C", elem, [numel])],
    )
    return bytes(
        helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7
        ).SerializeToString()
    )


def _best_seconds(
    model: bytes, shape: tuple[int, ...], dtype: str, config: SessionConfig, repeats: int
) -> float:
    """Fastest of ``repeats`` runs (after one warm-up) with inputs/outputs bound in place."""
    ort = import_ort()
    device = "cuda" if config.provider in CUDA_LIKE else "cpu"
    device_id = config.device_id if device == "cuda" else 0
    providers: list[object] = [(config.provider, config.options)]
    if config.provider != CPU:
        providers.append(CPU)
    rng = np.random.default_rng(0)
    try:
        session = ort.InferenceSession(model, session_options(config), providers=providers)
        if config.provider not in session.get_providers():
            raise ProviderError(
                f"{config.provider} did not load for calibration; run `onnxcost providers` to see why"
            )
        binding = session.io_binding()
        keep = []
        for name in ("A", "B"):
            value = ort.OrtValue.ortvalue_from_numpy(
                rng.standard_normal(shape).astype(dtype), device, device_id
            )
            keep.append(value)
            binding.bind_ortvalue_input(name, value)
        out = ort.OrtValue.ortvalue_from_shape_and_type(
            list(shape), np.dtype(dtype), device, device_id
        )
        keep.append(out)
        binding.bind_ortvalue_output("C", out)
        session.run_with_iobinding(binding)
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter_ns()
            session.run_with_iobinding(binding)
            best = min(best, (time.perf_counter_ns() - t0) / 1e9)
    except ort_error_types() as e:
        raise run_error(e, config.provider, "the calibration model") from e
    return best


_DEFAULT_SIZES = {"cpu": (1024, 1 << 24), "cuda": (8192, 1 << 28)}
"""(MatMul N, Add elements) per device kind: past every cache, a few tens of ms per run."""


def calibrate(
    provider: str = CPU,
    *,
    provider_options: dict[str, str] | None = None,
    threads: int | None = None,
    dtype: str = "float32",
    refresh: bool = False,
    cache: Path | None = None,
    progress: ProgressFn | None = None,
) -> Ceilings:
    """Measure (or read from the cache) peak FLOP/s and memory bandwidth for ``provider``.

    ``dtype`` float32 or float16. The MatMul is 1024^2 and the Add 16 Mi elements on CPU,
    8192^2 and 256 Mi on GPU. ``refresh`` measures again even when cached. A cache that
    cannot be written is not an error (the ceilings are returned all the same).
    """
    config = SessionConfig(
        provider=provider,
        provider_options=tuple(sorted((provider_options or {}).items())),
        intra_op_threads=threads,
    )
    ceilings, _warning = calibrate_ceilings(
        config, dtype=dtype, refresh=refresh, cache=cache, progress=progress
    )
    return ceilings


def calibrate_ceilings(
    config: SessionConfig,
    *,
    dtype: str = "float32",
    matmul_n: int | None = None,
    add_numel: int | None = None,
    repeats: int = 5,
    refresh: bool = False,
    cache: Path | None = None,
    progress: ProgressFn | None = None,
) -> tuple[Ceilings, str | None]:
    """``calibrate`` for a session config, with explicit sizes; returns a cache warning if any.

    ``cached_ceilings`` tells beforehand whether the cache will answer (without ``refresh``).
    """
    if dtype not in ("float32", "float16"):
        raise BenchError(f"calibration dtype must be float32 or float16, not {dtype!r}")
    if not refresh:
        hit = cached_ceilings(config, dtype, cache)
        if hit is not None:
            return hit, None
    kind = "cuda" if config.provider in CUDA_LIKE else "cpu"
    n = matmul_n or _DEFAULT_SIZES[kind][0]
    numel = add_numel or _DEFAULT_SIZES[kind][1]
    elem = TensorProto.FLOAT if dtype == "float32" else TensorProto.FLOAT16
    if progress is not None:
        progress(BenchProgress("calibrate", 0, 2, f"MatMul {n}x{n} on {config.provider}"))
    t_mm = _best_seconds(_matmul_model(n, elem), (n, n), dtype, config, repeats)
    if progress is not None:
        progress(BenchProgress("calibrate", 1, 2, f"Add of {numel} elements on {config.provider}"))
    t_add = _best_seconds(_add_model(numel, elem), (numel,), dtype, config, repeats)
    ceilings = Ceilings(
        peak_flops_per_s=2 * n**3 / t_mm,
        bandwidth_bytes_per_s=3 * np.dtype(dtype).itemsize * numel / t_add,
        provider=config.provider,
        device=device_name(config),
        dtype=dtype,
        onnxruntime_version=str(import_ort().__version__),
        measured_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    )
    if progress is not None:
        progress(BenchProgress("calibrate", 2, 2, "done"))
    return ceilings, store_ceilings(config, ceilings, cache)
