"""``onnxcost predict``: predicted latency of a model on a device.

No ``from __future__ import annotations`` in cli/: typer evaluates the annotations at each
start (see onnxcost/cli/__init__.py); names imported for type checking only are quoted.
"""

from typing import TYPE_CHECKING, Annotated

import typer

from onnxcost.cli.guard import run_guarded
from onnxcost.cli.options import (
    AllowReshapeOpt,
    DebugOpt,
    DimOpt,
    ForceOpt,
    InputShapeOpt,
    ModelArg,
    OutputOpt,
    PageFormatOpt,
    WideOpt,
    checked_output,
    parse_shape_flags,
    provider_option,
)
from onnxcost.cli.render import Format, Views, render

if TYPE_CHECKING:
    from pathlib import Path

    from onnxcost.predict.result import Prediction, PredictSweep


def predict_cmd(
    model: ModelArg,
    device: Annotated[
        str,
        typer.Option(
            "--device",
            help="A device file (onnxcost calibrate) or a built-in device: H100 (measured), "
            "A100, H200, L4 (datasheets: a roofline bound).",
            show_default=False,
        ),
    ],
    input_shape: InputShapeOpt = None,
    dim: DimOpt = None,
    allow_reshape: AllowReshapeOpt = False,
    provider: Annotated[
        str | None,
        provider_option(
            "Refuse a device file made for another provider than this one.", show_default=False
        ),
    ] = None,
    format: PageFormatOpt = "table",
    output: OutputOpt = None,
    top: Annotated[
        int | None,
        typer.Option(help="Nodes listed, most predicted time first (0: all; default 20).", min=0),
    ] = None,
    sweep: Annotated[
        list[str] | None,
        typer.Option(
            "--sweep",
            metavar="SYMBOL=N1,N2,...",
            help="Predict at every point of a grid of symbol values (repeatable: the grid of "
            "them), e.g. --sweep batch=1,8,32 --sweep seq=128,512, from one symbolic analysis "
            "(docs/predict.md); the other symbols as --dim sets them. A table of latency, "
            "throughput and top bound per point; -f json: the first point's prediction "
            "and a sweep list, one entry per point.",
            show_default=False,
        ),
    ] = None,
    force: ForceOpt = False,
    wide: WideOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Predicted latency and throughput on a device, per node with what bounds it."""

    def go() -> None:
        from onnxcost.predict.run import predict

        out = checked_output(output, [model], force)
        shapes, dims = parse_shape_flags(input_shape, dim)
        if sweep is not None:
            _sweep(model, device, sweep, shapes, dims, provider, allow_reshape, format, out)
            return
        result = predict(
            model,
            device,
            input_shapes=shapes,
            dims=dims,
            provider=provider,
            allow_reshape=allow_reshape,
        )
        render(_views(result, top), Format(format), out, wide=wide)

    run_guarded(debug, go)


def _sweep(
    model: str,
    device: str,
    sweep: list[str],
    shapes: dict[str, tuple[int, ...]],
    dims: dict[str, int],
    provider: str | None,
    allow_reshape: bool,
    format: str,
    out: "Path | None",
) -> None:
    """``--sweep``: the prediction at every point, one row each."""
    from onnxcost.errors import UsageError
    from onnxcost.predict.sweep import parse_sweep, predict_sweep

    grid = parse_sweep(sweep)
    if format == "html":
        raise UsageError("--sweep writes table, json or markdown; drop -f html")
    result = predict_sweep(
        model,
        device,
        grid,
        input_shapes=shapes,
        dims=dims,
        provider=provider,
        allow_reshape=allow_reshape,
    )
    render(_sweep_views(result), Format(format), out)


def _sweep_views(result: "PredictSweep") -> Views:
    from onnxcost.analysis.records import to_json
    from onnxcost.report.predict import render_sweep, sweep_markdown

    return Views(
        table=lambda c: render_sweep(result, c),
        json=lambda: to_json(result.to_dict()),
        markdown=lambda: sweep_markdown(result),
    )


def _views(result: "Prediction", top: int | None) -> Views:
    from onnxcost.analysis.records import to_json
    from onnxcost.report.predict import predict_html, to_markdown
    from onnxcost.report.predict import render as draw

    return Views(
        table=lambda c: draw(result, c, top),
        json=lambda: to_json(result.to_dict()),
        markdown=lambda: to_markdown(result, top),
        html=lambda: predict_html(result, top),
    )
