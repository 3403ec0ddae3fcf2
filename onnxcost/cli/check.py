"""``onnxcost check``: gate a model on cost budgets for CI.

No ``from __future__ import annotations`` in cli/: typer evaluates the annotations at each
start (see onnxcost/cli/__init__.py); names imported for type checking only are quoted.
"""

from typing import Annotated

import typer

from onnxcost.cli.guard import run_guarded
from onnxcost.cli.options import (
    AllowReshapeOpt,
    ConventionFlag,
    ConventionOpt,
    DebugOpt,
    DimOpt,
    GateBenchOpt,
    GateProviderOpt,
    GateRunsOpt,
    GateThreadsOpt,
    GateWarmupOpt,
    InputShapeOpt,
    ModelArg,
    TrafficFlag,
    TrafficOpt,
    bench_settings,
    parse_shape_flags,
)
from onnxcost.errors import UsageError


def _budget_option(flag: str, metavar: str, help: str) -> object:
    return typer.Option(flag, metavar=metavar, help=help, show_default=False)


def check_cmd(
    model: ModelArg,
    max_macs: Annotated[
        str | None, _budget_option("--max-macs", "N", "MACs budget, e.g. 2G (K/M/G/T).")
    ] = None,
    max_flops: Annotated[
        str | None, _budget_option("--max-flops", "N", "FLOPs budget, e.g. 4.5G.")
    ] = None,
    max_params: Annotated[
        str | None, _budget_option("--max-params", "N", "Parameter budget, e.g. 12M.")
    ] = None,
    max_param_bytes: Annotated[
        str | None,
        _budget_option("--max-param-bytes", "SIZE", "Weight size budget, e.g. 50MB or 48MiB."),
    ] = None,
    max_peak_activation: Annotated[
        str | None,
        _budget_option(
            "--max-peak-activation", "SIZE", "Peak activation memory budget, e.g. 64MB or 64MiB."
        ),
    ] = None,
    max_latency_ms: Annotated[
        str | None,
        _budget_option(
            "--max-latency-ms", "MS", "Median latency budget in milliseconds (needs --bench)."
        ),
    ] = None,
    input_shape: InputShapeOpt = None,
    dim: DimOpt = None,
    allow_reshape: AllowReshapeOpt = False,
    convention: ConventionFlag = ConventionOpt.onnxcost,
    traffic: TrafficFlag = TrafficOpt.runtime,
    bench: GateBenchOpt = False,
    provider: GateProviderOpt = None,
    runs: GateRunsOpt = None,
    warmup: GateWarmupOpt = None,
    threads: GateThreadsOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Gate a model on cost budgets for CI: exit 1 with one line per exceeded budget, else 0.

    Counts take K/M/G/T (powers of 1000); sizes take KB/MB/GB (1000) or KiB/MiB/GiB (1024).
    """

    def go() -> tuple[str, tuple[str, ...]]:
        from onnxcost.analysis import budget as b
        from onnxcost.api import analyze as run

        budgets = []
        for key, text, parse, flag in (
            ("macs", max_macs, b.parse_count, "--max-macs"),
            ("flops", max_flops, b.parse_count, "--max-flops"),
            ("params", max_params, b.parse_count, "--max-params"),
            ("param_bytes", max_param_bytes, b.parse_bytes, "--max-param-bytes"),
            ("peak_activation_bytes", max_peak_activation, b.parse_bytes, "--max-peak-activation"),
        ):
            if text is not None:
                budgets.append(b.budget(key, parse(text, flag)))
        if max_latency_ms is not None:
            if not bench:
                raise UsageError("--max-latency-ms needs a measurement: add --bench")
            budgets.append(b.budget("latency_ms", b.parse_ms(max_latency_ms, "--max-latency-ms")))
        if not budgets:
            raise UsageError(
                "no budget given: pass at least one of --max-macs, --max-flops, --max-params, "
                "--max-param-bytes, --max-peak-activation, --max-latency-ms"
            )
        from onnxcost.prepare import prepare

        settings = bench_settings(bench, provider, runs, warmup, threads)
        shapes, dims = parse_shape_flags(input_shape, dim)
        prepared = prepare(model, weights=settings is not None)  # one model analysed and run
        result = run(
            prepared,
            input_shapes=shapes,
            dims=dims,
            convention=convention.value,
            allow_reshape=allow_reshape,
            traffic=traffic.value,
        )
        latency = None
        if settings is not None:
            import dataclasses

            from onnxcost.compare import measure

            unprofiled = dataclasses.replace(settings, profile=False)
            latency = measure(prepared, unprofiled, shapes, dims, result).latency_ms["median"]
        checks = b.check(result.totals, tuple(budgets), latency_ms=latency)
        return b.ok_line(model, checks), tuple(c.line() for c in checks if c.exceeded)

    from onnxcost.report.safe_text import plain

    ok, over = run_guarded(debug, go)
    if over:
        for line in over:
            typer.echo(f"onnxcost: over budget: {plain(line)}", err=True)
        raise typer.Exit(1)
    typer.echo(plain(ok))
