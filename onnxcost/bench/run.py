"""``run_bench``: measure a model's latency and throughput, and optionally where its time goes.

Order of work: load and analyse the model (costs, resolved input shapes); create the session
(timed, and its memory measured); first run (timed apart); warm-up; timed loop; optional batch
sweep; optional calibration (cached ceilings); optional profile in a separate session, so
profiling never distorts the latency numbers; optional max-batch search in subprocesses.
Every run has a time limit (``timeout_s``), enforced by a watchdog thread.
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from onnxcost.analysis.records import NodeRecord, TensorRecord, Totals
from onnxcost.bench._ort import import_ort, ort_error_types, run_error
from onnxcost.bench.cupti import Activity, CuptiCollector, CuptiUnavailableError, merge_activity
from onnxcost.bench.fit import batch_formula, estimate, free_memory
from onnxcost.bench.inputs import InputSpec, input_specs, load_inputs_file, make_inputs
from onnxcost.bench.join import (
    by_op_type,
    join,
    load_graph_nodes,
    map_kernels,
    untimed_sources,
)
from onnxcost.bench.memory import (
    MemoryUse,
    PeakWindow,
    growth,
    release_free_memory,
    rss_bytes,
)
from onnxcost.bench.options import BenchOptions
from onnxcost.bench.profile import kernel_stats, parse_trace, read_trace, write_chrome_trace
from onnxcost.bench.progress import BenchProgress, ProgressFn
from onnxcost.bench.providers import CPU, CUDA, CUDA_LIKE, parse_provider_options, resolve_provider
from onnxcost.bench.result import (
    BenchResult,
    Environment,
    Memory,
    Phases,
    ProfileResult,
    Settings,
)
from onnxcost.bench.roofline import (
    Ceilings,
    ModelRoofline,
    cache_path,
    cached_ceilings,
    calibrate_ceilings,
    model_roofline,
    with_roofline,
)
from onnxcost.bench.session import (
    OrtModel,
    Runner,
    SessionConfig,
    make_runner,
    open_session,
    prepare_model,
    warm_up_onnxruntime,
)
from onnxcost.bench.session import opt_level as as_opt_level
from onnxcost.bench.sweep import (
    BatchAxis,
    BatchPoint,
    MaxBatch,
    Probe,
    ProbeSetup,
    batch_axis,
    batch_of,
    search_max_batch,
    subprocess_probe,
    unbatched,
    with_batch,
)
from onnxcost.bench.system import GpuMemory, cpu_name, gpu_info, host_peak_rss_mb, logical_cpus
from onnxcost.bench.timing import NOISY_CV, LoopResult, run_loop
from onnxcost.bench.watchdog import QUIET, VERBOSE, Watchdog, check_timeout
from onnxcost.errors import ModelLoadError, UsageError
from onnxcost.load.kv import cache_branch_symbol
from onnxcost.load.model import ModelSource
from onnxcost.prepare import PreparedModel
from onnxcost.shapes.overrides import defaulted_dims

PROFILE_WARMUP_MAX = 10
"""Profiled warm-up runs are capped: onnxruntime keeps at most about a million trace events."""
PROBE_TIMEOUT_S = 300.0
MAX_THREADS_PER_CPU = 4
MAX_THREADS = 1024
"""--threads above min(4 x logical CPUs, 1024) is refused: onnxruntime would try to start
them all (100000 threads end in SIGSEGV)."""


class AnalysisLike(Protocol):
    """What the bench needs from ``onnxcost.analyze``'s result."""

    @property
    def inputs(self) -> tuple[TensorRecord, ...]: ...
    @property
    def outputs(self) -> tuple[TensorRecord, ...]: ...
    @property
    def nodes(self) -> tuple[NodeRecord, ...]: ...
    @property
    def totals(self) -> Totals: ...
    @property
    def warnings(self) -> tuple[str, ...]: ...


@dataclass(frozen=True, slots=True)
class _Plan:
    """Validated arguments of one run."""

    config: SessionConfig
    warmup: int
    min_warmup_s: float
    runs: int
    min_seconds: float
    include_copies: bool
    profile: bool
    profile_runs: int
    batches: tuple[int, ...]
    max_batch: int | None
    timeout_s: float | None
    log_severity: int


def _check_counts(
    warmup: int,
    min_warmup_s: float,
    runs: int,
    min_seconds: float,
    profile_runs: int,
    threads: int | None,
    inter: int | None,
) -> None:
    if runs < 1:
        raise UsageError(f"--runs must be 1 or more, not {runs}")
    if warmup < 0:
        raise UsageError(f"--warmup must be 0 or more, not {warmup}")
    for flag, seconds in (("--min-seconds", min_seconds), ("the minimum warm-up", min_warmup_s)):
        if not math.isfinite(seconds) or seconds < 0:
            raise UsageError(f"{flag} must be a finite number of seconds, 0 or more, not {seconds}")
    if profile_runs < 1:
        raise UsageError(f"--profile-runs must be 1 or more, not {profile_runs}")
    limit = thread_limit()
    for flag, value in (("--threads", threads), ("--inter-threads", inter)):
        if value is not None and value < 1:
            raise UsageError(
                f"{flag} must be 1 or more (leave it out for onnxruntime's default), not {value}"
            )
        if value is not None and value > limit:
            raise UsageError(
                f"{flag} {value} is more than this machine can use: at most {limit} "
                f"({MAX_THREADS_PER_CPU} x {logical_cpus()} logical CPUs, never above {MAX_THREADS})"
            )


def thread_limit() -> int:
    """The most threads --threads accepts: min(4 x logical CPUs, 1024)."""
    return min(MAX_THREADS_PER_CPU * logical_cpus(), MAX_THREADS)


def _plan(
    provider: str,
    provider_options: Mapping[str, object] | Sequence[str] | None,
    threads: int | None,
    inter_threads: int | None,
    opt_level: str,
    cuda_graph: bool,
    include_copies: bool,
) -> SessionConfig:
    name = resolve_provider(provider)
    options = parse_provider_options(provider_options)
    if cuda_graph:
        if name != CUDA:
            raise UsageError(f"--cuda-graph needs the CUDA provider, not {name}")
        if include_copies:
            raise UsageError(
                "--cuda-graph replays device buffers; it cannot include host copies (drop --include-copies)"
            )
        options["enable_cuda_graph"] = "1"
    level = as_opt_level(opt_level)
    return SessionConfig(name, tuple(sorted(options.items())), threads, inter_threads, level)


def _environment(config: SessionConfig) -> Environment:
    ort = import_ort()
    gpu, driver = gpu_info(config.device_id) if config.provider in CUDA_LIKE else (None, None)
    return Environment(
        onnxruntime_version=str(ort.__version__),
        providers_available=tuple(str(p) for p in ort.get_available_providers()),
        cpu=cpu_name(),
        gpu=gpu,
        gpu_driver=driver,
        intra_op_threads=config.intra_op_threads,
        inter_op_threads=config.inter_op_threads,
        logical_cpus=logical_cpus(),
        python=platform.python_version(),
        platform=platform.platform(terse=True),
    )


def _say(
    progress: ProgressFn | None, phase: str, done: int, total: int | None, message: str
) -> None:
    if progress is not None:
        progress(BenchProgress(phase, done, total, message))


def _merge_shapes(
    given: Mapping[str, Sequence[int]] | None, arrays: Mapping[str, np.ndarray] | None
) -> dict[str, tuple[int, ...]] | None:
    if arrays is None:
        return {k: tuple(v) for k, v in given.items()} if given else None
    merged = {k: tuple(v) for k, v in (given or {}).items()}
    for name, arr in arrays.items():
        if name in merged and merged[name] != tuple(arr.shape):
            raise UsageError(
                f"--input-shape {name} says {merged[name]} but --inputs holds shape {tuple(arr.shape)}; drop one"
            )
        merged[name] = tuple(arr.shape)
    return merged


def _timed(
    runner: Runner,
    plan: _Plan,
    provider: str,
    what: str,
    progress: ProgressFn | None,
    watchdog: Watchdog,
    unset: Sequence[str] = (),
) -> tuple[float, LoopResult, LoopResult]:
    """First run, warm-up, timed loop; onnxruntime errors become onnxcost errors (``unset``:
    the dims that ran at 1, named in them)."""
    with _run_errors(watchdog, provider, what, unset):
        t0 = time.perf_counter_ns()
        runner()
        first_ms = (time.perf_counter_ns() - t0) / 1e6
        _say(progress, "first_run", 1, 1, f"first run {first_ms:.2f} ms")
        warm = run_loop(
            runner,
            runs=plan.warmup,
            min_seconds=plan.min_warmup_s,
            phase="warmup",
            progress=progress,
        )
        timed = run_loop(
            runner, runs=plan.runs, min_seconds=plan.min_seconds, phase="timed", progress=progress
        )
    return first_ms, warm, timed


@contextlib.contextmanager
def _run_errors(
    watchdog: Watchdog, provider: str, what: str, unset: Sequence[str] = ()
) -> Iterator[None]:
    """onnxruntime errors as onnxcost errors; a run the watchdog stopped as the time limit."""
    try:
        yield
    except ort_error_types() as e:
        if watchdog.fired:
            raise watchdog.error(what) from e
        raise run_error(e, provider, what, unset) from e


def _sweep(
    model: OrtModel,
    session: Any,
    plan: _Plan,
    specs: Sequence[InputSpec],
    axis: BatchAxis | None,
    outputs: Sequence[TensorRecord],
    seed: int,
    progress: ProgressFn | None,
    main: BatchPoint,
    watchdog: Watchdog,
) -> tuple[BatchPoint, ...]:
    """Each batch of the sweep; the batch the model already ran at reuses ``main`` (never
    timed twice), except under a CUDA graph, which the sweep runs without."""
    config = plan.config
    if config.cuda_graph:  # a captured graph replays one shape: sweep without it
        config = config.with_options(enable_cuda_graph=None)
        session = open_session(model, config).session
    points = []
    for i, b in enumerate(plan.batches):
        _say(progress, "batch", i, len(plan.batches), f"batch {b}")
        if b == main.batch and not plan.config.cuda_graph:
            points.append(main)
            continue
        feeds = make_inputs(with_batch(specs, axis, b), seed)
        runner, _ = make_runner(
            session,
            feeds,
            config,
            include_copies=plan.include_copies,
            outputs=outputs,
            run_options=watchdog.options,
        )
        _, _, timed = _timed(
            watchdog.guard(runner), plan, config.provider, f"batch {b}", None, watchdog
        )
        points.append(BatchPoint(b, timed.stats, timed.runs, timed.wall_s))
    _say(progress, "batch", len(plan.batches), len(plan.batches), "sweep done")
    return tuple(points)


def _profile(
    model: OrtModel,
    plan: _Plan,
    feeds: Mapping[str, np.ndarray],
    analysis: AnalysisLike,
    ceilings: Ceilings | None,
    trace_out: str | os.PathLike[str] | None,
    workdir: str,
    warnings: list[str],
    progress: ProgressFn | None,
    watchdog: Watchdog,
    latency_median_ms: float = 0.0,
) -> ProfileResult:
    config = plan.config.with_options(enable_cuda_graph=None)
    optimized = os.path.join(workdir, "optimized.onnx")
    prefix = os.path.join(workdir, "profile")
    try:
        opened = open_session(model, config, profile_prefix=prefix, optimized_model_path=optimized)
    except ModelLoadError as e:
        warnings.append(
            f"onnxruntime could not save its optimized graph ({e}); kernels are matched by name only"
        )
        optimized = ""
        opened = open_session(model, config, profile_prefix=prefix)
    session = opened.session
    runner, _ = make_runner(
        session,
        feeds,
        config,
        include_copies=plan.include_copies,
        outputs=analysis.outputs,
        run_options=watchdog.options,
    )
    runner = watchdog.guard(runner)
    skip = 1 + min(plan.warmup, PROFILE_WARMUP_MAX)
    total = skip + plan.profile_runs
    collector, why_not = _gpu_collector(config.provider)
    activity = None
    try:
        with _run_errors(watchdog, config.provider, "the profiled session"):
            for i in range(total):
                runner()
                if collector is not None:
                    collector.sample_clock()
                _say(progress, "profile", i + 1, total, f"profiled run {i + 1}/{total}")
    finally:
        if collector is not None:
            activity, why_not = _stop_collector(collector)
    trace_file = str(session.end_profiling())
    events = read_trace(trace_file)
    if activity is not None:
        events = merge_activity(events, activity, int(session.get_profiling_start_time_ns()))
        if activity.dropped_records:
            warnings.append(
                f"CUPTI dropped {activity.dropped_records} GPU activity records (buffers full); "
                f"profile fewer runs for complete node times"
            )
    trace = parse_trace(events, skip_runs=skip)
    if len(trace.runs) < total:
        warnings.append(
            f"the trace holds {len(trace.runs)} of {total} profiled runs (onnxruntime's event limit); "
            f"profile fewer runs for complete numbers"
        )
    stats = kernel_stats(trace)
    graph = load_graph_nodes(optimized) if optimized and os.path.exists(optimized) else ()
    op_types = {n.name: n.kernel_type for n in graph}
    groups = map_kernels(graph, analysis.nodes) if graph else ()
    rows = join(stats, groups, analysis.nodes, op_types=op_types)
    if ceilings is not None:
        rows = with_roofline(rows, ceilings)
    measured = trace.measured_runs
    launch = config.provider in CUDA_LIKE and not trace.has_device_times
    note = (
        "CUDA node times are host-side launch times: the GPU runs kernels asynchronously, so node "
        "times and shares show launch cost, not GPU time; the latency figures are end-to-end"
        + (f" (no GPU times: {why_not})" if why_not else "")
        if launch
        else ""
    )
    on_cpu = [r.name for r in rows if config.provider != CPU and r.provider == CPU]
    if on_cpu:
        warnings.append(
            f"{len(on_cpu)} of {len(rows)} profiled nodes ran on {CPU}, not {config.provider} "
            f"(no kernel there): {', '.join(on_cpu[:5])}{' ...' if len(on_cpu) > 5 else ''}"
        )
    trace_path = None
    if trace_out is not None:
        write_chrome_trace(trace, trace_out)
        trace_path = os.fspath(trace_out)
    return ProfileResult(
        nodes=rows,
        by_op_type=by_op_type(stats, op_types=op_types),
        runs=len(measured),
        warmup_runs=skip,
        run_mean_us=trace.run_mean_us,
        kernel_sum_us=trace.kernel_sum_median_us,
        host_launch_times=launch,
        mapped_with="optimized_graph" if graph else "names",
        untimed_nodes=untimed_sources(rows, analysis.nodes),
        note=note,
        trace_path=trace_path,
        run_median_us=trace.run_median_us,
        device_busy_us=trace.device_median("busy_us"),
        device_span_us=trace.device_median("span_us"),
        device_copy_us=trace.device_median("copy_us"),
        device_unowned_us=trace.device_median("unowned_us"),
        latency_median_us=latency_median_ms * 1e3,
        host_node_us=trace.host_node_median_us if trace.has_device_times else 0.0,
    )


def _gpu_collector(provider: str) -> tuple[CuptiCollector | None, str]:
    """A started CUPTI collector on CUDA, or None and why not (CPU: None and '')."""
    if provider not in CUDA_LIKE:
        return None, ""
    try:
        collector = CuptiCollector()
        collector.start()
    except CuptiUnavailableError as e:
        return None, str(e)
    return collector, ""


def _stop_collector(collector: CuptiCollector) -> tuple[Activity | None, str]:
    try:
        return collector.stop(), ""
    except CuptiUnavailableError as e:
        return None, str(e)


def calibration_dtype(analysis: AnalysisLike) -> str:
    """The dtype the ceilings are measured in: the model's float type, read from its first
    float output (else input); float16 models get float16 ceilings (tensor cores on a GPU run
    them several times faster than float32), everything else float32."""
    for rec in (*analysis.outputs, *analysis.inputs):
        if rec.dtype in ("float16", "float32", "bfloat16", "float64"):
            return "float16" if rec.dtype == "float16" else "float32"
    return "float32"


def _calibrate(
    config: SessionConfig,
    recalibrate: bool,
    analysis: AnalysisLike,
    median_ms: float,
    warnings: list[str],
    progress: ProgressFn | None,
) -> tuple[Ceilings, ModelRoofline]:
    """The ceilings (from the cache unless ``recalibrate``) and the model against them."""
    path = cache_path()
    dtype = calibration_dtype(analysis)
    hit = None if recalibrate else cached_ceilings(config, dtype, path=path)
    if hit is not None:
        ceilings = hit
    else:
        _say(progress, "calibrate", 0, 2, f"measuring peak FLOP/s and bandwidth ({dtype})")
        ceilings, cache_warning = calibrate_ceilings(
            config, dtype=dtype, refresh=True, cache=path, progress=progress
        )
        if cache_warning:
            warnings.append(cache_warning)
    roofline = model_roofline(
        analysis.nodes, median_ms, ceilings, from_cache=hit is not None, cache_path=str(path)
    )
    return ceilings, roofline


def _mib_growth(after_mib: float | None, gpu: GpuMemory | None) -> int | None:
    """NVML memory in use after the session minus before it, in bytes."""
    if gpu is None or after_mib is None or gpu.baseline_mb is None:
        return None
    return round((after_mib - gpu.baseline_mb) * 2**20)


def _device_peak(after_mib: float | None, gpu: GpuMemory | None) -> int | None:
    """The largest NVML sample minus the one after the session, in bytes."""
    if gpu is None or after_mib is None or gpu.peak_mb is None:
        return None
    return round((gpu.peak_mb - after_mib) * 2**20)


def _max_batch(
    model: OrtModel,
    plan: _Plan,
    specs: Sequence[InputSpec],
    axis: BatchAxis | None,
    o: BenchOptions,
    workdir: str,
    progress: ProgressFn | None,
) -> MaxBatch:
    assert plan.max_batch is not None and model.prepared is not None
    limit = plan.max_batch
    _say(progress, "max_batch", 0, None, "the need of each batch from the formulas")
    need = batch_formula(
        model.prepared,
        model.inputs,
        specs,
        axis.symbol if axis is not None and axis.fixed is None else None,
        dims=o.dims,
        allow_reshape=o.allow_reshape,
        traffic=o.traffic,
    )
    on_cuda = plan.config.provider in CUDA_LIKE
    free = free_memory(plan.config.device_id if on_cuda else None)  # the main session open
    setup = ProbeSetup(
        model_path=model.to_file(workdir),
        external_folder=model.external_folder,
        config=plan.config.with_options(enable_cuda_graph=None),
        specs=tuple(specs),
        axis=axis,
        warmup=min(plan.warmup, 3),
        runs=max(3, min(plan.runs, 10)),
        min_seconds=min(plan.min_seconds, 0.5),
        include_copies=plan.include_copies,
        timeout_s=PROBE_TIMEOUT_S,
        workdir=workdir,
    )
    count = [0]

    def on_probe(p: Probe) -> None:
        count[0] += 1
        _say(
            progress, "max_batch", count[0], None, f"batch {p.batch}: {'ok' if p.ok else p.detail}"
        )

    found = search_max_batch(subprocess_probe(setup), limit=limit, on_probe=on_probe)
    first = found.probes[0]  # batch 1: its peak RSS gives the host's overhead (not on CUDA)
    guess = (
        need
        if isinstance(need, str)
        else estimate(
            need,
            limit=limit,
            free=free,
            first_rss=first.rss_bytes if first.ok and not on_cuda else None,
        )
    )
    if isinstance(guess, str):
        return replace(found, estimate_note=guess)
    return replace(found, estimate=guess)


def run_bench(
    model_source: ModelSource | PreparedModel,
    options: BenchOptions | None = None,
    *,
    analysis: AnalysisLike | None = None,
    progress: ProgressFn | None = None,
) -> BenchResult:
    """Benchmark ``model_source`` with onnxruntime as ``options`` say (``BenchOptions``: its
    defaults are ``onnxcost bench``'s) and return every figure as a ``BenchResult``.

    ``analysis`` reuses an analysis of the same model with the same shapes: pass
    ``model_source`` as the ``PreparedModel`` it analysed (``onnxcost.prepare``), so node names
    match by construction. Without it, the analysis is made of the prepared model onnxruntime
    runs. ``progress`` receives ``BenchProgress`` events.

    Raises ProviderError (provider missing or dropped), ModelLoadError (onnxruntime cannot load
    the model), BenchError (inputs, out of memory, runtime failure), UsageError (bad arguments).
    """
    o = BenchOptions() if options is None else options
    _check_counts(
        o.warmup, o.min_warmup_s, o.runs, o.min_seconds, o.profile_runs, o.threads, o.inter_threads
    )
    timeout_s = check_timeout(o.timeout_s)
    if o.batches is not None and any(b < 1 for b in o.batches):
        raise UsageError(f"batch sizes must be 1 or more, not {list(o.batches)}")
    if o.max_batch is not None and o.max_batch < 1:
        raise UsageError(f"--max-batch must be 1 or more, not {o.max_batch}")
    config = _plan(
        o.provider,
        o.provider_options,
        o.threads,
        o.inter_threads,
        o.opt_level,
        o.cuda_graph,
        o.include_copies,
    )
    plan = _Plan(
        config=config,
        warmup=o.warmup,
        min_warmup_s=o.min_warmup_s,
        runs=o.runs,
        min_seconds=o.min_seconds,
        include_copies=o.include_copies,
        profile=o.profile or o.trace_out is not None,
        profile_runs=o.profile_runs,
        batches=tuple(o.batches or ()),
        max_batch=o.max_batch,
        timeout_s=timeout_s,
        log_severity=VERBOSE if o.ort_log else QUIET,
    )
    warnings: list[str] = []

    _say(progress, "analyze", 0, None, "loading and analysing the model")
    model = prepare_model(model_source)
    arrays = load_inputs_file(o.inputs_file, model.inputs) if o.inputs_file is not None else None
    if analysis is None:
        from onnxcost.analysis.walk import count

        assert model.prepared is not None  # prepare_model keeps it
        analysis = count(
            model.prepared,
            input_shapes=_merge_shapes(o.input_shapes, arrays),
            dims=o.dims,
            allow_reshape=o.allow_reshape,
            traffic=o.traffic,
        )
    warnings.extend(f"analysis: {w}" for w in analysis.warnings)
    graph = model.prepared.proto.graph if model.prepared and arrays is None else None
    unset = [] if graph is None else defaulted_dims(graph, o.input_shapes or {}, o.dims or {})
    branch = None if graph is None else cache_branch_symbol(graph)  # optimum's merged decoder
    specs = input_specs(analysis.inputs, model.inputs, analysis.nodes, branch)
    if arrays is not None:
        specs = tuple(s.with_shape(tuple(arrays[s.name].shape)) for s in specs)
    axis = batch_axis(model.inputs, o.batch_dim, analysis.outputs)
    if o.batch_dim is None and (why := unbatched(model.inputs, analysis.outputs)):
        warnings.append(why)
    batch = batch_of(specs, axis)
    for b in plan.batches:
        with_batch(specs, axis, b)
    if o.max_batch is not None:
        with_batch(specs, axis, o.max_batch)
    feeds = dict(arrays) if arrays is not None else make_inputs(specs, o.seed)

    with Watchdog(plan.timeout_s, log_severity=plan.log_severity) as watchdog:
        warm_up_onnxruntime(config)
        gpu_memory = GpuMemory(config.device_id) if config.provider in CUDA_LIKE else None
        _say(progress, "session", 0, 1, f"creating the session on {config.provider}")
        release_free_memory()
        rss_before = rss_bytes()
        opened = open_session(model, config)
        release_free_memory()  # what session creation freed again is not the model's
        rss_after = rss_bytes()
        create_ms = opened.create_ms
        _say(progress, "session", 1, 1, f"session created in {create_ms:.0f} ms")
        device_after = gpu_memory.sample() if gpu_memory is not None else None
        runner, io_binding = make_runner(
            opened.session,
            feeds,
            config,
            include_copies=o.include_copies,
            outputs=analysis.outputs,
            run_options=watchdog.options,
        )
        window = PeakWindow()
        window.start()
        first_ms, warm, timed = _timed(
            watchdog.guard(runner), plan, config.provider, "the model", progress, watchdog, unset
        )
        run_peak = window.peak_bytes()
        if gpu_memory is not None:
            gpu_memory.sample()
        stats = timed.stats
        if stats.noisy:
            warnings.append(noisy_warning(stats.cv))

        if arrays is not None and any(b != batch for b in plan.batches):
            warnings.append(
                f"the batch sweep feeds random data (seed {o.seed}) to batches other than {batch}, "
                f"not --inputs {o.inputs_file}"
            )
        if config.cuda_graph and plan.batches:
            warnings.append(
                "the batch sweep runs without the CUDA graph (a graph replays one shape)"
            )
        main = BatchPoint(batch, stats, timed.runs, timed.wall_s, from_main_run=True)
        sweep = (
            _sweep(
                model,
                opened.session,
                plan,
                specs,
                axis,
                analysis.outputs,
                o.seed,
                progress,
                main,
                watchdog,
            )
            if plan.batches
            else ()
        )
        del runner, opened  # free the timed session before the profiled one
        memory_use = MemoryUse(
            weights_estimate_bytes=analysis.totals.param_bytes,
            activations_estimate_bytes=analysis.totals.peak_activation_bytes,
            weights_measured_bytes=growth(rss_after, rss_before),
            run_peak_measured_bytes=growth(run_peak, rss_after),
            run_peak_method=window.method,
            device_weights_measured_bytes=_mib_growth(device_after, gpu_memory),
            device_run_peak_measured_bytes=_device_peak(device_after, gpu_memory),
        )

        ceilings = None
        roofline: ModelRoofline | None = None
        if o.calibrate or o.recalibrate:
            ceilings, roofline = _calibrate(
                config, o.recalibrate, analysis, stats.median_ms, warnings, progress
            )

        workdir = tempfile.mkdtemp(prefix="onnxcost-bench-")
        try:
            prof = (
                _profile(
                    model,
                    plan,
                    feeds,
                    analysis,
                    ceilings,
                    o.trace_out,
                    workdir,
                    warnings,
                    progress,
                    watchdog,
                    stats.median_ms,
                )
                if plan.profile
                else None
            )
            searched = (
                _max_batch(model, plan, specs, axis, o, workdir, progress)
                if plan.max_batch is not None
                else None
            )
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    if searched is not None and searched.largest_ok is None:
        warnings.append(f"max-batch search: even batch 1 failed ({searched.probes[0].detail})")

    return BenchResult(
        model=model.display,
        provider=config.provider,
        environment=_environment(config),
        inputs=specs,
        phases=Phases(create_ms, first_ms, warm.wall_ns / 1e6, timed.wall_s),
        latency=stats,
        runs=timed.runs,
        warmup=warm.runs,
        batch=batch,
        settings=Settings(
            opt_level=config.opt_level,
            provider_options=config.provider_options,
            io_binding=io_binding,
            include_copies=o.include_copies,
            cuda_graph=config.cuda_graph,
            inputs_source=os.fspath(o.inputs_file)
            if o.inputs_file is not None
            else f"random (seed {o.seed})",
        ),
        memory=Memory(
            host_peak_rss_mb(),
            gpu_memory.peak_delta_mb if gpu_memory is not None else None,
            memory_use,
        ),
        profile=prof,
        roofline=roofline,
        sweep=sweep,
        max_batch=searched,
        warnings=tuple(dict.fromkeys(warnings)),
    )


def noisy_warning(cv: float) -> str:
    """The warning for a run whose coefficient of variation ``cv`` is above ``NOISY_CV``."""
    return (
        f"latency varies a lot (CV {_percent_above(cv, NOISY_CV)} > {NOISY_CV:.0%}): the "
        f"machine was busy; close other programs, set --threads, or raise --runs"
    )


def _percent_above(value: float, threshold: float) -> str:
    """``value`` as a percentage with the decimals it takes to read above ``threshold``
    printed the same way: a CV of 10.04% is "10.04%", never "10%" beside a 10% limit."""
    for decimals in range(5):
        shown = f"{value * 100:.{decimals}f}"
        if float(shown) > float(f"{threshold * 100:.{decimals}f}"):
            return f"{shown}%"
    return f"{value * 100:.12g}%"
