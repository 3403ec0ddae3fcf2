"""``onnxcost annotate``: a copy of the model with its shapes and costs written in.

No ``from __future__ import annotations`` in cli/: typer evaluates the annotations at each
start (see onnxcost/cli/__init__.py); names imported for type checking only are quoted.
"""

from pathlib import Path
from typing import Annotated

import typer

from onnxcost.cli.guard import run_guarded
from onnxcost.cli.options import (
    ConventionFlag,
    ConventionOpt,
    DebugOpt,
    DimOpt,
    InputShapeOpt,
    ModelArg,
    TrafficFlag,
    TrafficOpt,
    force_option,
    parse_shape_flags,
)


def annotate(
    model: ModelArg,
    out: Annotated[
        Path,
        typer.Argument(
            help="The annotated copy to write (.onnx); never the input.", show_default=False
        ),
    ],
    input_shape: InputShapeOpt = None,
    dim: DimOpt = None,
    convention: ConventionFlag = ConventionOpt.onnxcost,
    traffic: TrafficFlag = TrafficOpt.runtime,
    force: Annotated[bool, force_option("Replace OUT if it is an existing model.")] = False,
    debug: DebugOpt = False,
) -> None:
    """Write a copy of MODEL with inferred shapes in value_info and costs in metadata_props."""

    def go() -> None:
        from onnxcost.load.outputs import check_output
        from onnxcost.report.annotate import annotated, write

        target = check_output(out, inputs=[model], force=force, writes_model=True, flag="OUT")
        shapes, dims = parse_shape_flags(input_shape, dim)
        proto, _result = annotated(
            model,
            input_shapes=shapes,
            dims=dims,
            convention=convention.value,
            traffic=traffic.value,
        )
        check_output(target, inputs=[model], force=force, writes_model=True, flag="OUT")
        write(proto, model, target)
        typer.echo(f"wrote {out}", err=True)

    run_guarded(debug, go)
