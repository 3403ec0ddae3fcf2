"""Calibration: measure this machine once, per op class, with onnxruntime (imported inside).

1. The ceilings: peak FLOP/s (a large MatMul) and bandwidth (a large Add), as
   ``onnxcost.bench.roofline.calibrate_ceilings`` measures them.
2. The overheads: chains of k tiny Relu nodes (k = 1 .. 64); the least-squares slope of the
   median run time against k is the per-node overhead, the intercept the per-run overhead.
3. Per op class (``estimate.CLASSES``), single-node models over a range of sizes, each run
   in a session with the calibration's settings; a node's work time is its median run time
   less both overheads, and its efficiency its FLOPs (or bytes, by the class's basis, as
   onnxcost's analysis counts them) / (work time x peak or bandwidth).

Each point is timed for ``seconds_per_point`` (at least 5 runs after 2 warm-up runs).
"""

from __future__ import annotations

import datetime as _dt
import math
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxcost._version import __version__
from onnxcost.bench.progress import BenchProgress, ProgressFn
from onnxcost.bench.roofline import Ceilings
from onnxcost.bench.session import SessionConfig
from onnxcost.errors import BenchError
from onnxcost.predict.device import Curve, Device
from onnxcost.predict.estimate import BASIS

ROUNDS = 5
"""Each point is timed in this many rounds and the least round median kept: another process
that takes the caches or the core for a while slows one round, not all."""

MIN_WORK_US = 0.05
"""A work time below this (noise can make it 0 or less) is taken as this."""

_DTYPES = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}


@dataclass(frozen=True, slots=True)
class Probe:
    """One single-node model of an op class at one size."""

    op_class: str
    label: str
    model: onnx.ModelProto


def _model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[tuple[str, Sequence[int]]],
    output: tuple[str, Sequence[int] | None],
    elem: int,
    initializers: Sequence[onnx.TensorProto] = (),
) -> onnx.ModelProto:
    graph = helper.make_graph(
        list(nodes),
        "probe",
        [helper.make_tensor_value_info(n, elem, list(s)) for n, s in inputs],
        [helper.make_tensor_value_info(output[0], elem, output[1])],
        initializer=list(initializers),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _weight(name: str, shape: Sequence[int], dtype: str, rng: np.random.Generator) -> Any:
    data = (rng.standard_normal(tuple(shape)) * 0.1).astype(dtype)
    return numpy_helper.from_array(data, name)


def probes(dtype: str = "float32", scale: float = 1.0) -> list[Probe]:
    """The single-node models of every class; ``scale`` < 1 keeps fewer, smaller sizes."""
    elem = _DTYPES[dtype]
    rng = np.random.default_rng(0)
    out: list[Probe] = []

    def keep(sizes: Sequence[Any]) -> Sequence[Any]:
        if scale >= 1:
            return sizes
        n = max(2, round(len(sizes) * scale))
        return sizes[:n:1] if n >= len(sizes) else sizes[:: max(1, len(sizes) // n)][:n]

    matmuls = (
        (8, 8, 8), (16, 16, 16), (32, 32, 32), (64, 64, 64), (128, 128, 128), (256, 256, 256),
        (512, 512, 512), (16, 256, 256), (32, 256, 1024), (64, 1024, 256), (64, 256, 256),
        (128, 768, 768), (64, 768, 3072), (128, 3072, 768), (196, 768, 768), (32, 64, 32),
    )  # fmt: skip
    for m, k, n in keep(matmuls):
        w = _weight("W", (k, n), dtype, rng)
        node = helper.make_node("MatMul", ["X", "W"], ["Y"])
        out.append(
            Probe("matmul", f"{m}x{k}x{n}", _model([node], [("X", (m, k))], ("Y", None), elem, [w]))
        )
    for h, s, d in keep(((4, 32, 64), (12, 64, 64), (12, 128, 64))):
        node = helper.make_node("MatMul", ["Q", "K"], ["Y"])
        model = _model([node], [("Q", (1, h, s, d)), ("K", (1, h, d, s))], ("Y", None), elem)
        out.append(Probe("matmul", f"attention {h}x{s}x{d}", model))
    for m, k, n in keep(
        ((1, 16, 16), (1, 64, 64), (1, 256, 256), (1, 512, 512), (1, 1024, 1024), (4, 768, 3072))
    ):
        w = _weight("W", (k, n), dtype, rng)
        node = helper.make_node("MatMul", ["X", "W"], ["Y"])
        out.append(
            Probe("gemv", f"{m}x{k}x{n}", _model([node], [("X", (m, k))], ("Y", None), elem, [w]))
        )
    conv_shapes = {
        # (C_in, C_out, H=W, kernel, groups)
        "conv": ((3, 16, 32, 3, 1), (16, 16, 8, 3, 1), (16, 16, 32, 3, 1), (32, 32, 16, 3, 1),
                 (64, 64, 8, 3, 1), (64, 64, 28, 3, 1), (128, 128, 14, 3, 1), (3, 64, 112, 7, 1),
                 (256, 256, 14, 3, 1), (256, 256, 4, 3, 1), (512, 512, 2, 3, 1),
                 (128, 128, 7, 3, 1), (64, 192, 28, 5, 1), (96, 256, 27, 5, 1)),
        "conv_1x1": ((16, 16, 8, 1, 1), (32, 64, 16, 1, 1), (64, 256, 14, 1, 1),
                     (256, 64, 28, 1, 1), (512, 512, 7, 1, 1), (256, 1024, 14, 1, 1),
                     (512, 2048, 2, 1, 1), (1024, 256, 4, 1, 1), (96, 24, 24, 1, 1)),
        "conv_grouped": ((96, 256, 27, 5, 2), (240, 240, 28, 1, 3), (480, 480, 14, 1, 3),
                         (960, 960, 7, 1, 3), (60, 60, 28, 1, 3), (24, 24, 14, 1, 3),
                         (64, 64, 56, 3, 4)),
        "conv_depthwise": ((16, 16, 8, 3, 16), (32, 32, 32, 3, 32), (96, 96, 56, 3, 96),
                           (144, 144, 28, 3, 144), (384, 384, 14, 3, 384), (960, 960, 7, 3, 960), (960, 960, 3, 3, 960),
                           (144, 144, 12, 3, 144)),
    }  # fmt: skip
    for cls, shapes in conv_shapes.items():
        for cin, cout, hw, k, g in keep(shapes):
            w = _weight("W", (cout, cin // g, k, k), dtype, rng)
            b = _weight("B", (cout,), dtype, rng)
            node = helper.make_node(
                "Conv", ["X", "W", "B"], ["Y"], kernel_shape=[k, k], pads=[k // 2] * 4, group=g
            )
            model = _model([node], [("X", (1, cin, hw, hw))], ("Y", None), elem, [w, b])
            out.append(Probe(cls, f"{cin}->{cout}@{hw} k{k} g{g}", model))
    numels = keep((16, 64, 512, 4096, 32768, 262144, 1 << 20, 1 << 22))
    for numel in numels:
        shape = (max(1, numel // 64), min(numel, 64))
        add = helper.make_node("Add", ["A", "B"], ["Y"])
        out.append(
            Probe(
                "elementwise",
                f"Add {numel}",
                _model([add], [("A", shape), ("B", shape)], ("Y", None), elem),
            )
        )
        tanh = helper.make_node("Tanh", ["A"], ["Y"])
        out.append(
            Probe(
                "transcendental", f"Tanh {numel}", _model([tanh], [("A", shape)], ("Y", None), elem)
            )
        )
        cols = min(numel, 64) if numel < 4096 else 256
        rows_shape = (max(1, numel // cols), cols)
        red = helper.make_node("ReduceMean", ["A"], ["Y"], axes=[-1], keepdims=1)
        out.append(
            Probe(
                "reduction",
                f"ReduceMean {numel}",
                _model([red], [("A", rows_shape)], ("Y", None), elem),
            )
        )
        soft = helper.make_node("Softmax", ["A"], ["Y"], axis=-1)
        out.append(
            Probe(
                "softmax",
                f"Softmax {numel}",
                _model([soft], [("A", rows_shape)], ("Y", None), elem),
            )
        )
        scale_w = _weight("S", (cols,), dtype, rng)
        bias_w = _weight("Bn", (cols,), dtype, rng)
        norm = helper.make_node("LayerNormalization", ["A", "S", "Bn"], ["Y"], axis=-1)
        out.append(
            Probe(
                "normalization",
                f"LayerNorm {numel}",
                _model([norm], [("A", rows_shape)], ("Y", None), elem, [scale_w, bias_w]),
            )
        )
        four = (1, max(1, numel // 1024), 16, 64) if numel >= 1024 else (1, 1, shape[0], shape[1])
        tr = helper.make_node("Transpose", ["A"], ["Y"], perm=[0, 2, 1, 3])
        out.append(
            Probe("transpose", f"Transpose {numel}", _model([tr], [("A", four)], ("Y", None), elem))
        )
        cat = helper.make_node("Concat", ["A", "B"], ["Y"], axis=1)
        out.append(
            Probe(
                "copy",
                f"Concat {numel}",
                _model([cat], [("A", shape), ("B", shape)], ("Y", None), elem),
            )
        )
    for numel in (16, 4096):
        target = helper.make_tensor("shape", TensorProto.INT64, [2], [numel // 16, 16])
        view = helper.make_node("Reshape", ["A", "shape"], ["Y"])
        out.append(
            Probe(
                "view",
                f"Reshape {numel}",
                _model([view], [("A", (numel,))], ("Y", None), elem, [target]),
            )
        )
    for c, hw in keep(((16, 8), (64, 28), (192, 28))):
        lrn = helper.make_node("LRN", ["X"], ["Y"], size=5, alpha=1e-4, beta=0.75, bias=1.0)
        out.append(
            Probe("lrn", f"LRN {c}@{hw}", _model([lrn], [("X", (1, c, hw, hw))], ("Y", None), elem))
        )
    for c, hw in keep(((16, 16), (64, 56), (64, 112), (256, 14))):
        pool = helper.make_node(
            "MaxPool", ["X"], ["Y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]
        )
        out.append(
            Probe(
                "pool",
                f"MaxPool {c}@{hw}",
                _model([pool], [("X", (1, c, hw, hw))], ("Y", None), elem),
            )
        )
    return out


def _chain(k: int, elem: int, inputs: int = 1, outputs: int = 1) -> onnx.ModelProto:
    """k Relu nodes in a row on [1, 16]; ``inputs`` - 1 unused inputs more, ``outputs`` - 1
    intermediate tensors also given as outputs (k >= outputs)."""
    names = ["X"] + [f"t{i}" for i in range(1, k)] + ["Y"]
    nodes = [helper.make_node("Relu", [names[i]], [names[i + 1]]) for i in range(k)]
    model = _model(
        nodes, [("X", (1, 16))] + [(f"U{i}", (1, 16)) for i in range(1, inputs)], ("Y", None), elem
    )
    for i in range(1, outputs):
        model.graph.output.append(helper.make_tensor_value_info(names[i], elem, None))
    return model


class _Timer:
    """Sessions with the calibration's settings and the median run time of one."""

    def __init__(self, config: SessionConfig, seconds: float, timing: str = "wall") -> None:
        from onnxcost.bench._ort import import_ort
        from onnxcost.bench.session import session_options

        self.ort = import_ort()
        self.options = session_options(config)
        self.config = config
        self.seconds = seconds
        self.now = time.thread_time_ns if timing == "thread" else time.perf_counter_ns
        providers: list[object] = [(config.provider, config.options)]
        if config.provider != "CPUExecutionProvider":
            providers.append("CPUExecutionProvider")
        self.providers = providers

    def median_s(self, model: onnx.ModelProto, label: str) -> float:
        from onnxcost.bench._ort import ort_error_types, run_error

        rng = np.random.default_rng(1)
        try:
            session = self.ort.InferenceSession(
                model.SerializeToString(), self.options, providers=self.providers
            )
            if self.config.provider not in session.get_providers():
                raise BenchError(
                    f"{self.config.provider} did not load for calibration; run `onnxcost providers`"
                )
            feeds = {}
            for i in session.get_inputs():
                shape = [int(d) for d in i.shape]
                dt = np.float16 if "float16" in i.type else np.float32
                feeds[i.name] = rng.standard_normal(shape).astype(dt)
            run = session.run
            run(None, feeds)
            run(None, feeds)
            now = self.now
            medians = []
            for _ in range(ROUNDS):
                samples: list[int] = []
                start = time.perf_counter_ns()
                limit = int(self.seconds * 1e9 / ROUNDS)
                while len(samples) < 5 or time.perf_counter_ns() - start < limit:
                    t0 = now()
                    run(None, feeds)
                    samples.append(now() - t0)
                    if len(samples) >= 1000:
                        break
                medians.append(float(np.median(samples)))
        except ort_error_types() as e:
            raise run_error(e, self.config.provider, f"the calibration model {label}") from e
        return min(medians) / 1e9


def _overheads(timer: _Timer, elem: int) -> tuple[float, float, float, float]:
    """(per-node, per-run, per-input, per-output) overheads in seconds: least squares over
    chains of k Relu nodes; then a chain with a second input, and with a second output, less
    the chain without."""
    ks = (1, 8, 16, 32, 48, 64)
    ts = [timer.median_s(_chain(k, elem), f"chain of {k} Relu") for k in ks]
    base = timer.median_s(_chain(4, elem), "chain of 4 Relu")
    per_input = timer.median_s(_chain(4, elem, inputs=3), "chain with 3 inputs") - base
    per_output = timer.median_s(_chain(4, elem, outputs=3), "chain with 3 outputs") - base
    k_mean = sum(ks) / len(ks)
    t_mean = sum(ts) / len(ts)
    slope = sum((k - k_mean) * (t - t_mean) for k, t in zip(ks, ts, strict=True)) / sum(
        (k - k_mean) ** 2 for k in ks
    )
    slope = max(slope, 0.0)
    return (
        slope,
        max(t_mean - slope * k_mean, 0.0),
        max(per_input / 2, 0.0),
        max(per_output / 2, 0.0),
    )


def _weight_chain(n: int, k: int, dtype: str) -> onnx.ModelProto:
    """``n`` matrix-vector products [1, k] x [k, k], each with its own weights."""
    rng = np.random.default_rng(2)
    names = ["X"] + [f"t{i}" for i in range(1, n)] + ["Y"]
    weights = [_weight(f"W{i}", (k, k), dtype, rng) for i in range(n)]
    nodes = [helper.make_node("MatMul", [names[i], f"W{i}"], [names[i + 1]]) for i in range(n)]
    return _model(nodes, [("X", (1, k))], ("Y", None), _DTYPES[dtype], weights)


def cache_bytes(
    level: int | None = None, folder: Path = Path("/sys/devices/system/cpu/cpu0/cache")
) -> int:
    """The largest CPU cache (Linux sysfs), or the largest of ``level`` (2: the cache a core
    has to itself on x86 and Arm servers); 0 when unknown."""
    best = 0
    for index in folder.glob("index*"):
        try:
            text = (index / "size").read_text().strip().upper()
            if level is not None and (index / "level").read_text().strip() != str(level):
                continue
        except OSError:
            continue
        unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            best = max(best, int(digits) * unit)
    return best


def _cpu_ceilings(timer: _Timer, dtype: str, sizes: tuple[int, int]) -> Ceilings:
    """Peak FLOP/s from an N x N MatMul (2 N^3 FLOPs) and bandwidth from an Add of M
    elements (3 x M x element size bytes), timed as every other point (the calibration's
    clock, the least round median)."""
    from onnxcost.bench.system import cpu_name

    n, numel = sizes
    elem = _DTYPES[dtype]
    matmul = helper.make_node("MatMul", ["A", "B"], ["C"])
    add = helper.make_node("Add", ["A", "B"], ["C"])
    t_mm = timer.median_s(
        _model([matmul], [("A", (n, n)), ("B", (n, n))], ("C", None), elem), "peak"
    )
    t_add = timer.median_s(
        _model([add], [("A", (numel,)), ("B", (numel,))], ("C", None), elem), "bandwidth"
    )
    return Ceilings(
        peak_flops_per_s=2 * n**3 / t_mm,
        bandwidth_bytes_per_s=3 * np.dtype(dtype).itemsize * numel / t_add,
        provider="CPUExecutionProvider",
        device=cpu_name(),
        dtype=dtype,
        onnxruntime_version=str(timer.ort.__version__),
        measured_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    )


def _measured_size(model: onnx.ModelProto, basis: str) -> int:
    """The probe node's FLOPs or bytes read + written, as onnxcost's analysis counts them."""
    from onnxcost.api import analyze

    node = max(analyze(model).nodes, key=lambda n: (n.flops, n.bytes_total))
    return node.flops if basis == "flops" else node.bytes_total


def calibrate_device(
    config: SessionConfig | None = None,
    *,
    dtype: str = "float32",
    name: str = "",
    seconds_per_point: float = 0.15,
    scale: float = 1.0,
    ceilings_sizes: tuple[int, int] | None = None,
    timing: str = "wall",
    progress: ProgressFn | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Device:
    """Measure this machine for ``config`` (default: CPU, onnxruntime's threads, level all).

    ``timing`` "wall" times each run by the wall clock; "thread" by the calling thread's CPU
    time, which leaves out what other processes take on a shared machine (one intra-op
    thread on CPU only: onnxruntime then runs every kernel on the calling thread).

    ``scale`` < 1 and smaller ``seconds_per_point`` / ``ceilings_sizes`` (MatMul N, Add
    elements) make a quick, rougher calibration (tests).
    """
    from onnxcost.bench._ort import import_ort
    from onnxcost.bench.roofline import calibrate_ceilings
    from onnxcost.bench.system import cpu_name

    if timing not in ("wall", "thread"):
        raise BenchError(f"timing must be wall or thread, not {timing!r}")
    if timing == "thread" and (
        config is None or config.intra_op_threads != 1 or config.provider != "CPUExecutionProvider"
    ):
        raise BenchError("thread timing needs the CPU provider and one intra-op thread")
    if dtype not in _DTYPES:
        raise BenchError(f"calibration dtype must be float32 or float16, not {dtype!r}")
    config = config or SessionConfig()
    started = clock()
    elem = _DTYPES[dtype]
    work = probes(dtype, scale)
    total = len(work) + 2

    def say(done: int, message: str) -> None:
        if progress is not None:
            progress(BenchProgress("calibrate", done, total, message))

    say(0, "peak compute and bandwidth")
    timer = _Timer(config, seconds_per_point, timing)
    if config.provider == "CPUExecutionProvider":
        ceilings = _cpu_ceilings(timer, dtype, ceilings_sizes or (1024, 1 << 24))
    else:  # inputs and outputs bound on the device: bench's own calibration
        with tempfile.TemporaryDirectory(prefix="onnxcost-calibrate-") as folder:
            n, numel = ceilings_sizes or (None, None)
            ceilings, _ = calibrate_ceilings(
                config,
                dtype=dtype,
                matmul_n=n,
                add_numel=numel,
                refresh=True,
                cache=Path(folder) / "ceilings.json",
            )
    say(1, "per-node overhead")
    node_s, run_s, input_s, output_s = _overheads(timer, elem)
    say(1, "weights read from memory")
    llc = cache_bytes()
    k = 2048 if dtype == "float32" else 2896
    chain = max(4, math.ceil(4 * max(llc, 32 << 20) / (k * k * np.dtype(dtype).itemsize)))
    if scale < 1:
        chain, k = 2, 256
    t_chain = timer.median_s(_weight_chain(chain, k, dtype), "weight stream") - run_s
    per_node = max(t_chain / chain - node_s, MIN_WORK_US * 1e-6)
    weight_bw = k * k * np.dtype(dtype).itemsize / per_node
    points: dict[str, list[tuple[float, float]]] = {}
    for i, probe in enumerate(work):
        say(2 + i, f"{probe.op_class}: {probe.label}")
        basis = BASIS[probe.op_class]
        size = _measured_size(probe.model, basis)
        extra = len(probe.model.graph.input) - 1
        t = timer.median_s(probe.model, probe.label) - run_s - node_s - extra * input_s
        t = max(t, MIN_WORK_US * 1e-6)
        roof = ceilings.peak_flops_per_s if basis == "flops" else ceilings.bandwidth_bytes_per_s
        points.setdefault(probe.op_class, []).append((float(size), size / (roof * t)))
    curves = {cls: Curve(BASIS[cls], binned(pts)) for cls, pts in points.items() if pts}
    say(total, "done")
    ort = import_ort()
    return Device(
        name=name
        or f"{ceilings.device} ({config.provider}, threads {config.intra_op_threads or 'default'})",
        ceilings=ceilings,
        node_overhead_us=round(node_s * 1e6, 4),
        run_overhead_us=round(run_s * 1e6, 4),
        input_overhead_us=round(input_s * 1e6, 4),
        output_overhead_us=round(output_s * 1e6, 4),
        threads=config.intra_op_threads,
        source="calibrated",
        curves=curves,
        opt_level=config.opt_level,
        host={
            "cpu": cpu_name(),
            "machine": platform.machine(),
            "system": f"{platform.system()} {platform.release()}",
            "device": ceilings.device,
        },
        versions={
            "onnxcost": __version__,
            "onnxruntime": str(ort.__version__),
            "onnx": onnx.__version__,
            "numpy": np.__version__,
            "python": sys.version.split()[0],
        },
        timing=timing,
        cache_bytes=llc,
        core_cache_bytes=cache_bytes(level=2),
        weight_bandwidth_bytes_per_s=round(weight_bw),
        note=f"calibrated on this machine at {_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')}",
        calibration_s=round(clock() - started, 2),
    )


def binned(points: Sequence[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    """One point per factor-of-4 range of size: the geometric mean of the sizes in it and the
    median of their efficiencies, so that shapes of one size but unlike efficiency make one
    point, not a zigzag."""
    bins: dict[int, list[tuple[float, float]]] = {}
    for size, eff in points:
        if size > 0:
            bins.setdefault(math.floor(math.log(size, 4)), []).append((size, eff))
    sizes, effs = [], []
    for _, members in sorted(bins.items()):
        sizes.append(math.exp(sum(math.log(s) for s, _ in members) / len(members)))
        effs.append(float(np.median([e for _, e in members])))
    # A smaller size takes no longer than the next larger one (a slow small point is noise).
    for i in range(len(sizes) - 2, -1, -1):
        effs[i] = max(effs[i], effs[i + 1] * sizes[i] / sizes[i + 1])
    return tuple((_round(s), _round(e)) for s, e in zip(sizes, effs, strict=True))


def _round(x: float) -> float:
    """Four significant digits: a device file stays readable."""
    return float(f"{x:.4g}") if math.isfinite(x) else x


__all__ = ["Probe", "calibrate_device", "probes"]
