"""``onnxcost compare``: models side by side, what differs in words, and a --fail-if-worse gate.

No ``from __future__ import annotations`` in cli/: typer evaluates the annotations at each
start (see onnxcost/cli/__init__.py); names imported for type checking only are quoted.
"""

import math
from typing import Annotated

import typer

from onnxcost.cli.guard import run_guarded
from onnxcost.cli.options import (
    AllowReshapeOpt,
    ConventionFlag,
    ConventionOpt,
    DebugOpt,
    DimOpt,
    ForceOpt,
    FrozenOpt,
    GateBenchOpt,
    GateProviderOpt,
    GateRunsOpt,
    GateThreadsOpt,
    GateWarmupOpt,
    GradInputsOpt,
    InputShapeOpt,
    MixedPrecisionOpt,
    OptimizerOpt,
    OutputOpt,
    PageFormatOpt,
    TrafficFlag,
    TrafficOpt,
    TrainingOpt,
    WideOpt,
    bench_settings,
    checked_output,
    parse_shape_flags,
)
from onnxcost.cli.render import Format, render
from onnxcost.errors import UsageError


def compare_cmd(
    models: Annotated[
        list[str],
        typer.Argument(
            help="Two or more .onnx files or built-in model names; the first is the baseline.",
            show_default=False,
        ),
    ],
    input_shape: InputShapeOpt = None,
    dim: DimOpt = None,
    allow_reshape: AllowReshapeOpt = False,
    convention: ConventionFlag = ConventionOpt.onnxcost,
    traffic: TrafficFlag = TrafficOpt.runtime,
    label: Annotated[
        list[str] | None,
        typer.Option(
            "--label",
            "-l",
            help="Name the models in the report, one per model in order (default A, B, C...).",
            show_default=False,
        ),
    ] = None,
    format: PageFormatOpt = "table",
    output: OutputOpt = None,
    fail_if_worse: Annotated[
        float | None,
        typer.Option(
            "--fail-if-worse",
            metavar="PCT",
            help="Exit 1 if a later model's MACs, FLOPs, params, peak activation (or latency "
            "with --bench) exceed the first model's by more than PCT percent.",
            show_default=False,
        ),
    ] = None,
    bench: GateBenchOpt = False,
    provider: GateProviderOpt = None,
    runs: GateRunsOpt = None,
    warmup: GateWarmupOpt = None,
    threads: GateThreadsOpt = None,
    force: ForceOpt = False,
    wide: WideOpt = False,
    training: TrainingOpt = False,
    optimizer: OptimizerOpt = "adamw",
    frozen: FrozenOpt = None,
    grad_inputs: GradInputsOpt = False,
    mixed_precision: MixedPrecisionOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Compare models side by side: totals, op types, aligned layers, and what differs, in words."""

    def go() -> tuple[str, ...]:
        from onnxcost.compare import compare as run

        out = checked_output(output, models, force)
        if len(models) < 2:
            raise UsageError("compare needs at least two models: onnxcost compare A.onnx B.onnx")
        if fail_if_worse is not None and not 0 <= fail_if_worse < math.inf:
            raise UsageError(
                f"--fail-if-worse must be a finite percentage of 0 or more, not {fail_if_worse:g}"
            )
        settings = bench_settings(bench, provider, runs, warmup, threads)
        shapes, dims = parse_shape_flags(input_shape, dim)
        result = run(
            models,
            input_shapes=shapes,
            dims=dims,
            convention=convention.value,
            traffic=traffic.value,
            labels=label or None,
            bench=settings,
            allow_reshape=allow_reshape,
            training=training,
            optimizer=optimizer,
            frozen=frozen,
            grad_inputs=grad_inputs,
            mixed_precision=mixed_precision,
        )
        render(result, Format(format), out, wide=wide)
        return () if fail_if_worse is None else result.worse_than(fail_if_worse)

    worse = run_guarded(debug, go)
    if worse:
        from onnxcost.report.safe_text import plain

        for line in worse:
            typer.echo(f"onnxcost: worse: {plain(line)}", err=True)
        raise typer.Exit(1)
