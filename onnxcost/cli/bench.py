"""``onnxcost bench``: latency, throughput and per-node time with onnxruntime.

No ``from __future__ import annotations`` in cli/: typer evaluates the annotations at each
start (see onnxcost/cli/__init__.py); names imported for type checking only are quoted.
"""

import enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from onnxcost.cli.guard import run_guarded
from onnxcost.cli.options import (
    AllowReshapeOpt,
    DebugOpt,
    DimOpt,
    ForceOpt,
    InputShapeOpt,
    OutputOpt,
    ReportFormatOpt,
    TrafficFlag,
    TrafficOpt,
    WideOpt,
    checked_output,
    parse_shape_flags,
    provider_option,
)
from onnxcost.cli.progress import progress_callback
from onnxcost.cli.render import Format, render, versus_views
from onnxcost.errors import UsageError

if TYPE_CHECKING:
    pass

BENCH_PROFILE_RUNS = 50
"""``onnxcost.bench.options.PROFILE_RUNS``, repeated so that --help imports no bench code (a test
keeps the two equal)."""
BENCH_TIMEOUT_S = 600.0
"""``onnxcost.bench.watchdog.DEFAULT_TIMEOUT_S`` (likewise)."""


class OptLevel(str, enum.Enum):
    disable = "disable"
    basic = "basic"
    extended = "extended"
    all = "all"


def bench(
    model: Annotated[
        str, typer.Argument(help="An .onnx file or a built-in model name (default: resnet18).")
    ] = "resnet18",
    provider: Annotated[
        str, provider_option("Execution provider: CPUExecutionProvider, CUDAExecutionProvider, ...")
    ] = "CPUExecutionProvider",
    provider_option: Annotated[
        list[str] | None,
        typer.Option(
            "--provider-option", help="Provider option KEY=VALUE (repeatable).", show_default=False
        ),
    ] = None,
    threads: Annotated[
        int | None,
        typer.Option(
            help="Intra-op threads (default: onnxruntime's; at most 4 x the logical CPUs).", min=1
        ),
    ] = None,
    inter_threads: Annotated[
        int | None, typer.Option("--inter-threads", help="Inter-op threads.", min=1)
    ] = None,
    opt_level: Annotated[
        OptLevel, typer.Option("--opt-level", help="Graph optimization level.")
    ] = OptLevel.all,
    input_shape: InputShapeOpt = None,
    dim: DimOpt = None,
    allow_reshape: AllowReshapeOpt = False,
    inputs: Annotated[
        Path | None,
        typer.Option(
            "--inputs",
            help="Real input data: an .npz with one array per input name.",
            show_default=False,
        ),
    ] = None,
    warmup: Annotated[int, typer.Option(help="Warm-up runs (at least 0.2 s of them).", min=0)] = 10,
    runs: Annotated[
        int, typer.Option(help="Timed runs (at least --min-seconds of them).", min=1)
    ] = 100,
    min_seconds: Annotated[
        float, typer.Option("--min-seconds", help="Minimum time of the timed loop.", min=0)
    ] = 1.0,
    profile: Annotated[
        bool,
        typer.Option(
            "--profile", help="Per-node and per-op-type time, joined to the static costs."
        ),
    ] = False,
    profile_runs: Annotated[
        int,
        typer.Option(
            "--profile-runs",
            help="Profiled runs: node times are medians over them (with --profile).",
            min=1,
        ),
    ] = BENCH_PROFILE_RUNS,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="Write a cleaned Chrome trace (Perfetto) of the profiled runs.",
            show_default=False,
        ),
    ] = None,
    include_copies: Annotated[
        bool, typer.Option("--include-copies", help="Time host<->device copies too (CUDA).")
    ] = False,
    cuda_graph: Annotated[
        bool, typer.Option("--cuda-graph", help="Capture a CUDA graph (static shapes only).")
    ] = False,
    batch: Annotated[
        str | None,
        typer.Option(
            "--batch", help="Batch sweep: comma-separated sizes, e.g. 1,2,4,8.", show_default=False
        ),
    ] = None,
    max_batch: Annotated[
        int | None,
        typer.Option(
            "--max-batch",
            help="Find the largest batch that fits, up to N (probes in subprocesses).",
            min=1,
        ),
    ] = None,
    calibrate: Annotated[
        bool,
        typer.Option(
            "--calibrate",
            help="Peak FLOP/s and bandwidth of this provider for the roofline (cached once measured).",
        ),
    ] = False,
    recalibrate: Annotated[
        bool,
        typer.Option(
            "--recalibrate", help="Measure the ceilings again instead of reading the cache."
        ),
    ] = False,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            help="Seconds one run may take before it is stopped (0: no limit).",
            min=0,
        ),
    ] = BENCH_TIMEOUT_S,
    predict: Annotated[
        str | None,
        typer.Option(
            "--predict",
            help="Also predict on this device (a device file or a built-in name) and put "
            "predicted and measured side by side per node, largest misses first (turns on "
            "--profile).",
            show_default=False,
        ),
    ] = None,
    traffic: TrafficFlag = TrafficOpt.runtime,
    format: ReportFormatOpt = "table",
    output: OutputOpt = None,
    top: Annotated[
        int, typer.Option(help="Nodes shown in the profile table (0: all).", min=0)
    ] = 20,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
    force: ForceOpt = False,
    wide: WideOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Measure latency, throughput and (with --profile) per-node time with onnxruntime."""

    def go() -> None:
        from onnxcost.bench import BenchOptions, run_bench

        out = checked_output(output, [model], force)
        trace_out = checked_output(trace, [model], force, flag="--trace")
        shapes, dims = parse_shape_flags(input_shape, dim)
        batches = None
        if batch:
            try:
                batches = [int(b) for b in batch.split(",") if b.strip()]
            except ValueError:
                raise UsageError(
                    f"--batch {batch!r} is not a comma-separated list of sizes, e.g. 1,2,4,8"
                ) from None
        fmt = Format(format)
        netron = fmt is Format.netron
        static = None
        if netron:
            from onnxcost.api import analyze as run_analysis
            from onnxcost.prepare import prepare

            # Loaded once: run, analysed, and its node names as the file has them kept for Netron.
            prepared = prepare(model, weights=True, keep_source=True)
            static = run_analysis(
                prepared,
                input_shapes=shapes,
                dims=dims,
                allow_reshape=allow_reshape,
                traffic=traffic.value,
            )
        if predict is not None:
            if fmt not in (Format.table, Format.markdown, Format.json):
                raise UsageError("--predict writes table, markdown or json; pick one with --format")
            from onnxcost.predict.device import load_device

            # Refused before any run: a device for another provider, or a corrupt file.
            target = load_device(predict, provider)
        callback, close = progress_callback(quiet)
        try:
            result = run_bench(
                prepared if netron else model,
                BenchOptions(
                    allow_reshape=allow_reshape,
                    traffic=traffic.value,
                    provider=provider,
                    provider_options=provider_option or None,
                    threads=threads,
                    inter_threads=inter_threads,
                    opt_level=opt_level.value,
                    input_shapes=shapes,
                    dims=dims,
                    inputs_file=inputs,
                    warmup=warmup,
                    runs=runs,
                    min_seconds=min_seconds,
                    profile=profile or predict is not None,
                    trace_out=trace_out,
                    include_copies=include_copies,
                    cuda_graph=cuda_graph,
                    batches=batches,
                    max_batch=max_batch,
                    calibrate=calibrate,
                    recalibrate=recalibrate,
                    profile_runs=profile_runs,
                    timeout_s=timeout,
                    ort_log=debug,
                ),
                analysis=static if inputs is None else None,  # an .npz may set other shapes
                progress=callback,
            )
        finally:
            close()
        if predict is not None:
            from onnxcost.predict.run import predict as run_predict
            from onnxcost.predict.versus import versus

            prediction = versus(
                result,
                run_predict(
                    prepared if netron else model,
                    target,
                    input_shapes=shapes,
                    dims=dims,
                    allow_reshape=allow_reshape,
                ),
            )
            render(versus_views(result, prediction, top), fmt, out, wide=wide)
            return
        render(
            result,
            fmt,
            out,
            wide=wide,
            top=top or None,
            model=prepared if netron else None,
            static=static,
        )

    run_guarded(debug, go)
