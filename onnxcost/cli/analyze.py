"""``onnxcost analyze``: the static cost of every node.

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
    ForceOpt,
    FrozenOpt,
    GradInputsOpt,
    InputShapeOpt,
    MixedPrecisionOpt,
    ModelArg,
    OptimizerOpt,
    OutputOpt,
    ReportFormatOpt,
    SortBy,
    TrafficFlag,
    TrafficOpt,
    TrainingOpt,
    WideOpt,
    checked_output,
    parse_shape_flags,
    split_least,
)
from onnxcost.cli.render import Format, render


def analyze(
    model: ModelArg,
    input_shape: InputShapeOpt = None,
    dim: DimOpt = None,
    allow_reshape: AllowReshapeOpt = False,
    convention: ConventionFlag = ConventionOpt.onnxcost,
    traffic: TrafficFlag = TrafficOpt.runtime,
    format: ReportFormatOpt = "table",
    output: OutputOpt = None,
    top: Annotated[
        int | None,
        typer.Option(
            help="List the N costliest nodes (by --sort-by, default FLOPs; 0: all). Default: "
            "table and markdown all up to 50 nodes, else 30; json, csv and html all.",
            min=0,
        ),
    ] = None,
    sort_by: Annotated[
        SortBy | None,
        typer.Option(
            "--sort-by",
            help="Order of the node list. Default: graph order, or FLOPs when nodes are cut.",
            show_default=False,
        ),
    ] = None,
    op_type: Annotated[
        str | None,
        typer.Option(
            "--op-type", help="Only nodes whose op type fully matches this regex, e.g. 'Conv|Gemm'."
        ),
    ] = None,
    depth: Annotated[
        int | None,
        typer.Option(
            help="Show the scope tree from node names (a torch dynamo export's module paths) "
            "to this depth instead of the nodes: subtotals and share per scope, repeated "
            "blocks folded.",
            min=1,
        ),
    ] = None,
    tree: Annotated[
        bool, typer.Option("--tree", help="Show the whole scope tree (see --depth).")
    ] = False,
    force: ForceOpt = False,
    symbolic: Annotated[
        bool,
        typer.Option(
            "--symbolic",
            help="Also give every cost as an exact formula in the unset symbolic dims, from "
            "each one's least value (1, or as the model's sizes need, or --dim SYMBOL>=N).",
        ),
    ] = False,
    wide: WideOpt = False,
    ort_peak: Annotated[
        bool,
        typer.Option(
            "--ort-peak",
            help="Also the peak activation memory under onnxruntime's execution order "
            "(needs onnxruntime; builds a session).",
        ),
    ] = False,
    training: TrainingOpt = False,
    optimizer: OptimizerOpt = "adamw",
    frozen: FrozenOpt = None,
    grad_inputs: GradInputsOpt = False,
    mixed_precision: MixedPrecisionOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Static cost of every node: MACs, FLOPs, parameters, bytes read and written, peak activations."""

    def go() -> None:
        from onnxcost.api import analyze as run
        from onnxcost.report.select import op_type_miss, select

        out = checked_output(output, [model], force)
        values, least = split_least(dim, symbolic)
        shapes, dims = parse_shape_flags(input_shape, values)
        fmt = Format(format)
        prepared = None
        if fmt is Format.netron:
            from onnxcost.prepare import prepare

            # Loaded once: analysed, and its node names as the file has them kept for Netron.
            prepared = prepare(model, weights=ort_peak, keep_source=True)
        result = run(
            model if prepared is None else prepared,
            input_shapes=shapes,
            dims=dims,
            convention=convention.value,
            traffic=traffic.value,
            symbolic=symbolic,
            least=least or None,
            ort_peak=ort_peak,
            allow_reshape=allow_reshape,
            training=training,
            optimizer=optimizer,
            frozen=frozen,
            grad_inputs=grad_inputs,
            mixed_precision=mixed_precision,
        )
        if prepared is not None:
            render(result, fmt, out, model=prepared)
            return
        # One selection for every format: the same nodes in the same order.
        chosen = select(
            result.nodes,
            sort_by=None if sort_by is None else sort_by.value,
            top=top,
            op_type=op_type,
            screen=fmt in (Format.table, Format.markdown),
        )
        if op_type and not chosen.matched:
            typer.echo(f"onnxcost: warning: {op_type_miss(result.nodes, op_type)}", err=True)
        render(result, fmt, out, wide=wide, selection=chosen, depth=depth, tree=tree)

    run_guarded(debug, go)
