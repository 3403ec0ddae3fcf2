"""The device file: what a machine does per op class, as ``onnxcost calibrate`` measured it.

Schema ``onnxcost.device/1`` (JSON). The ceilings (peak FLOP/s from a large MatMul, bandwidth
from a large Add: ``onnxcost.bench.roofline.Ceilings``), the per-node and per-run overheads,
and per op class a curve of efficiencies against size: ``[size, efficiency]`` points in
increasing size, where size is the node's FLOPs (``basis`` "flops": efficiency = achieved
FLOP/s / peak) or its bytes read + written (``basis`` "bytes": achieved bytes/s / bandwidth).
Efficiency is read between points by linear interpolation in log(size), held at the end
points beyond them. Keys this version does not know are ignored, so a file of a later
onnxcost with the same schema reads; a file of another schema version is refused.

Built-in devices (``BUILTIN``): H100 from the project's own H100 measurements (docs/gpu.md);
A100, H200 and L4 from their datasheets, which makes their figures a roofline bound (no
overhead, every op at the peak), not a calibration.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from onnxcost.analysis.records import Const, Layout, to_jsonable
from onnxcost.bench.providers import ALIASES, CPU, CUDA
from onnxcost.bench.roofline import Ceilings
from onnxcost.errors import OnnxcostError

SCHEMA = "onnxcost.device/1"
"""The device file's schema name and version; another version is refused."""

_SCHEMA_PREFIX = "onnxcost.device/"

Basis = Literal["flops", "bytes"]
Source = Literal["calibrated", "measured", "datasheet"]


class DeviceError(OnnxcostError):
    """A device file is missing, corrupt, of another schema version or for another provider."""


@dataclass(frozen=True, slots=True)
class Curve:
    """Efficiency of one op class against size (see the module docstring)."""

    basis: Basis
    points: tuple[tuple[float, float], ...]
    """``(size, efficiency)`` in increasing size, efficiency above 0; none: efficiency 1."""
    overhead_us: float | None = None
    """This class's per-node overhead, where it differs from the device's ``node_overhead_us``."""

    def efficiency(self, size: float) -> float:
        """Efficiency at ``size``: linear in log(size) between points; beyond the largest, the
        largest's; below the smallest, what keeps the smallest's time (an op's time does not
        fall below that of the smallest size measured)."""
        pts = self.points
        if not pts:
            return 1.0
        if size <= pts[0][0]:
            return pts[0][1] * size / pts[0][0]
        if size >= pts[-1][0]:
            return pts[-1][1]
        x = math.log(size)
        for (s0, e0), (s1, e1) in itertools.pairwise(pts):
            if size <= s1:
                x0, x1 = math.log(s0), math.log(s1)
                t = (x - x0) / (x1 - x0) if x1 > x0 else 1.0
                return e0 + t * (e1 - e0)
        return pts[-1][1]  # pragma: no cover - the loop always returns


@dataclass(frozen=True, slots=True)
class Device:
    """A device file in memory."""

    name: str
    ceilings: Ceilings
    node_overhead_us: float
    """Time each node costs beyond its work: the runtime's dispatch, a kernel launch."""
    run_overhead_us: float
    """Time each run of a model of one input and one output costs beyond its nodes."""
    threads: int | None
    """Intra-op threads the calibration ran with (None: onnxruntime's default)."""
    source: Source
    curves: Mapping[str, Curve] = field(default_factory=dict)
    opt_level: str = "all"
    host: Mapping[str, str] = field(default_factory=dict)
    versions: Mapping[str, str] = field(default_factory=dict)
    note: str = ""
    calibration_s: float | None = None
    timing: str = "wall"
    """How calibration timed a run: "wall" clock, or the calling "thread"'s CPU time."""
    input_overhead_us: float = 0.0
    """Time each further input adds to a run."""
    output_overhead_us: float = 0.0
    """Time each further output adds to a run."""
    cache_bytes: int = 0
    """The last-level cache: a model whose weights are larger reads them from memory on
    every run, at ``weight_bandwidth_bytes_per_s`` (0: unknown, weights read as activations)."""
    weight_bandwidth_bytes_per_s: float = 0.0
    """Rate of reading weights that are not in the cache (0: the ceilings' bandwidth)."""
    core_cache_bytes: int = 0
    """The largest cache one core has to itself (a CPU's L2): a model whose weights are
    larger streams each MatMul's and Conv's weights in again on every run, at
    ``weight_bandwidth_bytes_per_s`` (0: unknown, only weights beyond half ``cache_bytes``
    stream)."""

    @property
    def roofline_bound(self) -> bool:
        """The figures are datasheet peaks: a prediction from them is a lower bound on time."""
        return self.source == "datasheet"

    @property
    def provider(self) -> str:
        return self.ceilings.provider

    JSON_LAYOUT: ClassVar[Layout] = (
        ("schema", Const(SCHEMA)),
        "name",
        "source",
        "roofline_bound",
        "note",
        ("provider", "ceilings.provider"),
        "threads",
        "opt_level",
        ("dtype", "ceilings.dtype"),
        ("device", "ceilings.device"),
        "host",
        "versions",
        ("measured_at", "ceilings.measured_at"),
        "calibration_s",
        "timing",
        ("peak_flops_per_s", "ceilings.peak_flops_per_s"),
        ("bandwidth_bytes_per_s", "ceilings.bandwidth_bytes_per_s"),
        "node_overhead_us",
        "run_overhead_us",
        "input_overhead_us",
        "output_overhead_us",
        "cache_bytes",
        "weight_bandwidth_bytes_per_s",
        "core_cache_bytes",
        ("classes", "classes_json"),
    )
    """The ``onnxcost.device/1`` object."""

    @property
    def classes_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, c in sorted(self.curves.items()):
            out[k] = {"basis": c.basis, "points": [list(p) for p in c.points]}
            if c.overhead_us is not None:
                out[k]["overhead_us"] = c.overhead_us
        return out

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)  # type: ignore[no-any-return]

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1) + "\n"


def _corrupt(where: str, why: str) -> DeviceError:
    return DeviceError(
        f"device file {where} is corrupt ({why}); make a new one with `onnxcost calibrate -o FILE`"
    )


def _number(data: Mapping[str, Any], key: str, where: str, *, positive: bool = True) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _corrupt(where, f"{key} is not a number")
    if value < 0 or (positive and value == 0):
        raise _corrupt(where, f"{key} is {value}, not above 0")
    return float(value)


def _optional(data: Mapping[str, Any], key: str, where: str) -> float:
    """A number at or above 0 that an older file may lack (then 0)."""
    return _number(data, key, where, positive=False) if key in data else 0.0


def _curve(name: str, data: Any, where: str) -> Curve:
    if not isinstance(data, Mapping) or data.get("basis") not in ("flops", "bytes"):
        raise _corrupt(where, f"class {name!r} has no basis 'flops' or 'bytes'")
    raw = data.get("points")
    overhead = data.get("overhead_us")
    if overhead is not None:
        overhead = _number(data, "overhead_us", where, positive=False)
    if not isinstance(raw, list) or (not raw and overhead is None):
        raise _corrupt(where, f"class {name!r} has no points")
    points: list[tuple[float, float]] = []
    for p in raw:
        ok = (
            isinstance(p, list)
            and len(p) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in p)
            and all(math.isfinite(v) and v > 0 for v in p)
        )
        if not ok:
            raise _corrupt(where, f"class {name!r} has a point that is not [size, efficiency] > 0")
        points.append((float(p[0]), float(p[1])))
    if any(b[0] <= a[0] for a, b in itertools.pairwise(points)):
        raise _corrupt(where, f"class {name!r} has points out of size order")
    return Curve(data["basis"], tuple(points), overhead)


def _texts(data: Any) -> dict[str, str]:
    if not isinstance(data, Mapping):
        return {}
    return {str(k): str(v) for k, v in data.items()}


def from_dict(data: Any, where: str = "<memory>") -> Device:
    """A device from its JSON object, or DeviceError saying why not (one line)."""
    if not isinstance(data, Mapping):
        raise _corrupt(where, "not a JSON object")
    schema = data.get("schema")
    if not isinstance(schema, str) or not schema.startswith(_SCHEMA_PREFIX):
        raise _corrupt(where, f"no {SCHEMA} schema")
    if schema != SCHEMA:
        raise DeviceError(
            f"device file {where} has schema {schema}; this onnxcost reads {SCHEMA}: calibrate "
            f"again with this onnxcost (`onnxcost calibrate -o FILE`) or use the onnxcost that wrote it"
        )
    provider = data.get("provider")
    if not isinstance(provider, str) or not provider:
        raise _corrupt(where, "no provider")
    source = data.get("source")
    if source not in ("calibrated", "measured", "datasheet"):
        raise _corrupt(where, "source is not calibrated, measured or datasheet")
    threads = data.get("threads")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)):
        raise _corrupt(where, "threads is not an integer or null")
    classes = data.get("classes", {})
    if not isinstance(classes, Mapping):
        raise _corrupt(where, "classes is not an object")
    curves = {str(k): _curve(str(k), v, where) for k, v in classes.items()}
    ceilings = Ceilings(
        peak_flops_per_s=_number(data, "peak_flops_per_s", where),
        bandwidth_bytes_per_s=_number(data, "bandwidth_bytes_per_s", where),
        provider=provider,
        device=str(data.get("device", "")),
        dtype=str(data.get("dtype", "float32")),
        onnxruntime_version=_texts(data.get("versions")).get("onnxruntime", ""),
        measured_at=str(data.get("measured_at") or ""),
    )
    calibration_s = data.get("calibration_s")
    return Device(
        name=str(data.get("name") or ceilings.device or provider),
        ceilings=ceilings,
        node_overhead_us=_number(data, "node_overhead_us", where, positive=False),
        run_overhead_us=_number(data, "run_overhead_us", where, positive=False),
        threads=threads,
        source=source,
        curves=curves,
        opt_level=str(data.get("opt_level", "all")),
        host=_texts(data.get("host")),
        versions=_texts(data.get("versions")),
        note=str(data.get("note", "")),
        calibration_s=float(calibration_s) if isinstance(calibration_s, int | float) else None,
        timing="thread" if data.get("timing") == "thread" else "wall",
        input_overhead_us=_optional(data, "input_overhead_us", where),
        output_overhead_us=_optional(data, "output_overhead_us", where),
        cache_bytes=int(_number(data, "cache_bytes", where, positive=False))
        if "cache_bytes" in data
        else 0,
        weight_bandwidth_bytes_per_s=_number(
            data, "weight_bandwidth_bytes_per_s", where, positive=False
        )
        if "weight_bandwidth_bytes_per_s" in data
        else 0.0,
        core_cache_bytes=int(_number(data, "core_cache_bytes", where, positive=False))
        if "core_cache_bytes" in data
        else 0,
    )


def read_device(path: str | os.PathLike[str]) -> Device:
    """The device file at ``path``, or DeviceError in one line."""
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise DeviceError(
            f"no device file {where}; make one with `onnxcost calibrate -o {where}` or name a "
            f"built-in device ({', '.join(BUILTIN)})"
        ) from e
    except (OSError, UnicodeDecodeError) as e:
        raise _corrupt(where, f"unreadable: {getattr(e, 'strerror', None) or e}") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise _corrupt(where, f"not JSON: {e.msg} at line {e.lineno}") from e
    return from_dict(data, where)


def load_device(spec: str | os.PathLike[str] | Device, provider: str | None = None) -> Device:
    """A device by built-in name (any case) or file path; with ``provider`` (a full name or an
    alias such as ``cpu``), refused unless the device was made for that provider."""
    if isinstance(spec, Device):
        device = spec
    else:
        key = str(spec).strip().lower()
        builtin = {k.lower(): v for k, v in BUILTIN.items()}.get(key)
        device = builtin if builtin is not None else read_device(spec)
    if provider is not None:
        asked = ALIASES.get(provider.strip().lower(), provider)
        if asked.lower() != device.provider.lower():
            raise DeviceError(
                f"device {device.name!r} was made for {device.provider}, not {asked}: calibrate "
                f"with `onnxcost calibrate --provider {provider} -o FILE`, or ask for "
                f"--provider {device.provider}"
            )
    return device


def _datasheet(
    name: str, peak_fp32: float, peak_fp16: float, bandwidth: float, dtype: str
) -> Device:
    peak = peak_fp16 if dtype == "float16" else peak_fp32
    return Device(
        name=name,
        ceilings=Ceilings(peak, bandwidth, CUDA, f"NVIDIA {name} (datasheet)", dtype),
        node_overhead_us=0.0,
        run_overhead_us=0.0,
        threads=None,
        source="datasheet",
        note=(
            f"{name} datasheet figures ({peak / 1e12:g} TFLOP/s {dtype}, {bandwidth / 1e9:g} GB/s): "
            "a roofline bound (no overhead, every op at the peak), not a calibration"
        ),
    )


_H100_NOTE = (
    "measured by onnxcost on one H100 80GB HBM3 with onnxruntime-gpu 1.31.1 (docs/gpu.md): "
    "MatMul 8192^3 in TF32 412.2 TFLOP/s, Add of 256 Mi float32 2,925 GB/s; per node run "
    "30.66 us for a convolution and 1.86 us for any other, fitted to the batch-1 fp32 "
    "latencies of resnet18, resnet50, vit_b_16, bert_base and gpt2 there (host-bound: the "
    "GPU waits for launches); no per-op sweep ran there, so every op at those ceilings "
    "(leave-one-out: median error 34%, scripts/bench_predict.py --h100-loo)"
)
_H100_CONV = Curve("flops", (), overhead_us=30.66)

BUILTIN: dict[str, Device] = {
    "H100": Device(
        name="H100",
        ceilings=Ceilings(
            412.2e12, 2925e9, CUDA, "NVIDIA H100 80GB HBM3", "float32", "1.31.1", "2026-11-23"
        ),
        node_overhead_us=1.86,
        run_overhead_us=0.0,
        threads=None,
        source="measured",
        curves=dict.fromkeys(("conv", "conv_1x1", "conv_depthwise", "conv_grouped"), _H100_CONV),
        note=_H100_NOTE,
    ),
    "A100": _datasheet("A100", 156e12, 312e12, 2039e9, "float32"),
    "H200": _datasheet("H200", 495e12, 989e12, 4800e9, "float32"),
    "L4": _datasheet("L4", 60e12, 121e12, 300e9, "float32"),
}
"""Built-in devices by name. Datasheet fp32 peaks are the dense TF32 tensor-core figures
(onnxruntime's default for float32 MatMul on these GPUs): A100 SXM 156 TFLOP/s and 2,039 GB/s
(80 GB), H200 SXM 495 TFLOP/s and 4,800 GB/s, L4 60 TFLOP/s (120 with sparsity) and 300 GB/s."""


def check_provider_name(provider: str) -> str:
    """``cpu`` -> CPUExecutionProvider (aliases only; full names pass as they are)."""
    return ALIASES.get(provider.strip().lower(), provider)


def summary_lines(device: Device) -> Sequence[str]:
    """What a report says about the device it predicts for."""
    threads = "default" if device.threads is None else str(device.threads)
    lines = [
        f"device {device.name} ({device.source}): {device.provider}, threads {threads}, "
        f"{device.ceilings.dtype}; peak {device.ceilings.peak_flops_per_s / 1e9:,.1f} GFLOP/s, "
        f"bandwidth {device.ceilings.bandwidth_bytes_per_s / 1e9:,.1f} GB/s, "
        f"node overhead {device.node_overhead_us:.2f} us"
    ]
    if device.roofline_bound:
        lines.append(f"{device.note}")
    return lines


__all__ = [
    "BUILTIN",
    "CPU",
    "SCHEMA",
    "Curve",
    "Device",
    "DeviceError",
    "from_dict",
    "load_device",
    "read_device",
]
