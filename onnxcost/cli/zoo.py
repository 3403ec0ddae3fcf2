"""``onnxcost zoo list`` and ``zoo save``: the built-in models.

No ``from __future__ import annotations`` in cli/: typer evaluates the annotations at each
start (see onnxcost/cli/__init__.py); names imported for type checking only are quoted.
"""

from pathlib import Path
from typing import Annotated

import typer

from onnxcost.cli.guard import run_guarded
from onnxcost.cli.options import (
    DebugOpt,
    FormatOpt,
    WideOpt,
    force_option,
    param_option,
    parse_params,
)
from onnxcost.cli.render import Format, render, table_views

zoo_app = typer.Typer(
    help="Built-in reference models, written directly as ONNX.", no_args_is_help=True
)


@zoo_app.command("list")
def zoo_list(format: FormatOpt = "table", wide: WideOpt = False) -> None:
    """The built-in models: name, what it is, inputs, parameters."""
    from onnxcost import zoo
    from onnxcost.report.listings import zoo_table

    def as_json() -> str:
        import json

        return json.dumps(
            [
                {"name": m.name, "summary": m.summary, "inputs": m.inputs, "params": m.params}
                for m in zoo.MODELS.values()
            ],
            indent=2,
        )

    render(table_views(zoo_table(zoo.MODELS.values()), as_json), Format(format), None, wide=wide)


@zoo_app.command("save")
def zoo_save(
    name: Annotated[str, typer.Argument(help="A built-in model (onnxcost zoo list).")],
    file: Annotated[Path, typer.Argument(help="The .onnx file to write.")],
    opset: Annotated[
        int | None, typer.Option(help="ONNX opset to write (default: the model's).")
    ] = None,
    dtype: Annotated[
        str, typer.Option(help="Weight and activation type: fp32, fp16 or bf16.")
    ] = "fp32",
    no_weights: Annotated[
        bool,
        typer.Option(
            "--no-weights", help="Weights as external data in a sparse file: no memory, no disk."
        ),
    ] = False,
    param: Annotated[
        list[str] | None,
        param_option("Builder parameter KEY=VALUE, e.g. layers=2 (repeatable)."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the random weights.")] = 0,
    force: Annotated[
        bool, force_option("Replace FILE (and its weights file) if it exists.")
    ] = False,
    debug: DebugOpt = False,
) -> None:
    """Write a built-in model to FILE."""

    def go() -> None:
        from onnxcost import zoo

        params = parse_params(param)
        path = zoo.save(
            name,
            file,
            dtype=dtype,
            opset=opset,
            weights=not no_weights,
            params=params,
            seed=seed,
            force=force,
        )
        typer.echo(f"wrote {path}", err=True)

    run_guarded(debug, go)
