"""``onnxcost llm``: a decoder's generation, prefill and decode steps, and its roofline.

No ``from __future__ import annotations`` in cli/: typer evaluates the annotations at each
start (see onnxcost/cli/__init__.py); names imported for type checking only are quoted.
"""

from typing import TYPE_CHECKING, Annotated, Literal

import typer

from onnxcost.cli.guard import run_guarded
from onnxcost.cli.options import (
    ConventionFlag,
    ConventionOpt,
    DebugOpt,
    DimOpt,
    ForceOpt,
    GateThreadsOpt,
    ModelArg,
    OutputOpt,
    PageFormatOpt,
    TrafficFlag,
    TrafficOpt,
    checked_output,
    param_option,
    parse_params,
    parse_shape_flags,
    provider_option,
)
from onnxcost.cli.render import Format, Views, render, views
from onnxcost.errors import OnnxcostError, UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from onnxcost.bench.roofline import Ceilings
    from onnxcost.llm.cost import LlmReport
    from onnxcost.predict.llm import LlmPrediction


def llm_cmd(
    model: ModelArg,
    prompt: Annotated[int, typer.Option("--prompt", help="Prompt length N in tokens.", min=1)],
    generate: Annotated[
        int,
        typer.Option(
            "--generate", help="Tokens M to generate (the first from the prefill).", min=1
        ),
    ],
    batch: Annotated[int, typer.Option("--batch", help="Sequences generated at once.", min=1)] = 1,
    param: Annotated[
        list[str] | None,
        param_option(
            "Built-in model parameter KEY=VALUE, e.g. kv_cache=true (repeatable).",
            show_default=False,
        ),
    ] = None,
    dim: DimOpt = None,
    batch_dim: Annotated[
        str | None, typer.Option("--batch-dim", help="The batch dim's symbol.", show_default=False)
    ] = None,
    seq_dim: Annotated[
        str | None,
        typer.Option("--seq-dim", help="The new tokens' dim symbol.", show_default=False),
    ] = None,
    past_dim: Annotated[
        str | None,
        typer.Option("--past-dim", help="The cache length's dim symbol.", show_default=False),
    ] = None,
    convention: ConventionFlag = ConventionOpt.onnxcost,
    traffic: TrafficFlag = TrafficOpt.runtime,
    peak_tflops: Annotated[
        float | None,
        typer.Option(
            "--peak-tflops", help="Compute ceiling in TFLOP/s (with --bandwidth-gbs).", min=0
        ),
    ] = None,
    bandwidth_gbs: Annotated[
        float | None,
        typer.Option("--bandwidth-gbs", help="Memory bandwidth ceiling in GB/s.", min=0),
    ] = None,
    bench: Annotated[
        bool, typer.Option("--bench", help="Also run the generation loop in onnxruntime.")
    ] = False,
    cache: Annotated[
        str | None,
        typer.Option(
            "--cache",
            metavar="device|host",
            help="The --bench loop: device (IO binding, the KV cache stays on the device; the "
            "default) or host (numpy feeds, the cache copied through the host every step).",
            show_default=False,
        ),
    ] = None,
    provider: Annotated[
        str, provider_option("Execution provider for --bench and the cached calibration.")
    ] = "cpu",
    threads: GateThreadsOpt = None,
    device: Annotated[
        str | None,
        typer.Option(
            "--device",
            help="Also predict time to first token, decode step and tokens/s on this device: a "
            "device file (onnxcost calibrate) or a built-in name (H100, A100, H200, L4).",
            show_default=False,
        ),
    ] = None,
    training: Annotated[
        bool,
        typer.Option(
            "--training",
            help="Also the cost of training on --tokens D tokens, in sequences of --prompt "
            "tokens, --batch a step, beside 6·N·D (docs/training.md).",
        ),
    ] = False,
    tokens: Annotated[
        int | None,
        typer.Option(
            "--tokens", help="Tokens D to train on (with --training).", min=1, show_default=False
        ),
    ] = None,
    format: PageFormatOpt = "table",
    output: OutputOpt = None,
    force: ForceOpt = False,
    debug: DebugOpt = False,
) -> None:
    """A decoder with a KV cache: weights, cache, prefill, decode steps, generation, roofline."""

    def go() -> None:
        from onnxcost.llm.cost import llm_report
        from onnxcost.prepare import prepare

        if training and tokens is None:
            raise UsageError("--training needs --tokens D: the number of tokens to train on")
        if tokens is not None and not training:
            raise UsageError("--tokens needs --training")
        loop = _cache_loop(cache, bench)
        out = checked_output(output, [model], force)
        params = parse_params(param)
        _shapes, dims = parse_shape_flags(None, dim)
        ceilings = _llm_ceilings(peak_tflops, bandwidth_gbs)
        # One model, loaded or built once, analysed and (with --bench) run.
        prepared = prepare(model, weights=bench, params=params)
        report = llm_report(
            prepared,
            prompt=prompt,
            generate=generate,
            batch=batch,
            dims=dims,
            batch_dim=batch_dim,
            seq_dim=seq_dim,
            past_dim=past_dim,
            convention=convention.value,
            traffic=traffic.value,
            ceilings=ceilings,
            calibrated=lambda dtype: _cached_ceilings(provider, threads, dtype),
            training_tokens=tokens,
        )
        if bench:
            import dataclasses

            from onnxcost.bench.providers import resolve_provider
            from onnxcost.bench.session import SessionConfig
            from onnxcost.llm.loop import run_llm_loop

            timing = run_llm_loop(
                prepared,
                report.layout,
                prompt=prompt,
                generate=generate,
                batch=batch,
                config=SessionConfig(resolve_provider(provider), intra_op_threads=threads),
                cache=loop,
            )
            report = dataclasses.replace(report, bench=timing)
        if device is None:
            render(report, Format(format), out)
            return
        if format == "html":
            raise UsageError("--device writes table, markdown or json; drop --format html")
        from onnxcost.predict.llm import predict_llm

        predicted = predict_llm(
            prepared,
            device,
            prompt=prompt,
            generate=generate,
            batch=batch,
            dims=dims,
            batch_dim=batch_dim,
            seq_dim=seq_dim,
            past_dim=past_dim,
        )
        render(_with_prediction(report, predicted), Format(format), out)

    run_guarded(debug, go)


def _with_prediction(report: "LlmReport", predicted: "LlmPrediction") -> Views:
    """The report's views with the predicted figures after its own (JSON: ``predicted``)."""
    from onnxcost.analysis.records import to_json, to_jsonable
    from onnxcost.report.predict import llm_rows
    from onnxcost.report.safe_text import md, text

    base = views(report)
    rows = llm_rows(predicted)

    def table(console: "Console") -> None:
        base.table(console)
        for label, value in rows:
            console.print(text(f"{label}: {value}"))

    def as_json() -> str:
        data = report.to_dict()
        data["predicted"] = to_jsonable(predicted)
        return to_json(data)

    def markdown() -> str:
        head = base.markdown() if base.markdown is not None else ""
        lines = ["", "## Predicted", "", "| figure | value |", "|---|---|"]
        return head + "\n".join(lines + [f"| {md(k)} | {md(v)} |" for k, v in rows]) + "\n"

    return Views(table=table, json=as_json, markdown=markdown)


def _cache_loop(cache: str | None, bench: bool) -> Literal["device", "host"]:
    """The --bench loop --cache names (device when not given); UsageError for any other."""
    if cache is not None and not bench:
        raise UsageError("--cache chooses the --bench loop; add --bench or drop --cache")
    if cache is None or cache == "device":
        return "device"
    if cache == "host":
        return "host"
    raise UsageError(f"--cache must be device or host, not {cache!r}")


def _llm_ceilings(peak_tflops: float | None, bandwidth_gbs: float | None) -> "Ceilings | None":
    """The roofline ceiling from --peak-tflops and --bandwidth-gbs (both or neither)."""
    if (peak_tflops is None) != (bandwidth_gbs is None):
        raise UsageError("pass both --peak-tflops and --bandwidth-gbs, or neither")
    if peak_tflops is None or bandwidth_gbs is None:
        return None
    # Ceilings of 1e3 to 1e21 FLOP/s and bytes/s (llm.CEILING_RANGE) keep every ratio and
    # time finite. NaN fails every comparison.
    for flag, value, low, high in (
        ("--peak-tflops", peak_tflops, 1e-9, 1e9),
        ("--bandwidth-gbs", bandwidth_gbs, 1e-6, 1e12),
    ):
        if not low <= value <= high:
            raise UsageError(
                f"{flag} {value!r} is out of range; pass a number from {low:g} to {high:g}"
            )
    from onnxcost.bench.roofline import Ceilings

    return Ceilings(peak_tflops * 1e12, bandwidth_gbs * 1e9, "flags", "flags")


def _cached_ceilings(
    provider: str, threads: int | None, dtype: str
) -> "tuple[Ceilings, str] | None":
    """This provider's cached ``bench --calibrate`` figures for ``dtype``, if any."""
    try:
        from onnxcost.bench.providers import resolve_provider
        from onnxcost.bench.roofline import cached_ceilings
        from onnxcost.bench.session import SessionConfig

        config = SessionConfig(resolve_provider(provider), intra_op_threads=threads)
        hit = cached_ceilings(config, dtype)
    except (OnnxcostError, OSError):
        return None
    if hit is None:
        return None
    return hit, f"calibration of {hit.provider} on {hit.device}, {hit.measured_at}"
