"""``onnxcost analyze``: the static cost of every node.

No ``from __future__ import annotations`` in cli/: typer evaluates the annotations at each
start (see onnxcost/cli/__init__.py); names imported for type checking only are quoted.
"""

from typing import Annotated

import typer

from onnxcost.cli.guard import run_guarded
from onnxcost.cli.options import (
    AllowReshapeOpt,
    ConventionOpt,
    DebugOpt,
    DimOpt,
    ForceOpt,
    InputShapeOpt,
    ModelArg,
    OutputOpt,
    ReportFormat,
    ReportFormatOpt,
    SortBy,
    WideOpt,
    checked_output,
    parse_shape_flags,
)
from onnxcost.cli.render import emit, emit_netron, emit_page, render_rich


def analyze(
    model: ModelArg,
    input_shape: InputShapeOpt = None,
    dim: DimOpt = None,
    allow_reshape: AllowReshapeOpt = False,
    convention: Annotated[
        ConventionOpt,
        typer.Option(
            help="FLOPs convention: onnxcost (2xMACs + all other arithmetic), torch (2xMACs), fvcore (=MACs)."
        ),
    ] = ConventionOpt.onnxcost,
    format: ReportFormatOpt = ReportFormat.table,
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
            help="Show the scope tree from node names to this depth instead of the nodes: "
            "subtotals and share per scope, repeated blocks folded.",
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
            help="Also give every cost as an exact formula in the unset symbolic dims.",
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
    debug: DebugOpt = False,
) -> None:
    """Static cost of every node: MACs, FLOPs, parameters, bytes read and written, peak activations."""

    def go() -> None:
        from onnxcost.api import analyze as run
        from onnxcost.report.select import op_type_miss, select

        out = checked_output(output, [model], force)
        shapes, dims = parse_shape_flags(input_shape, dim)
        netron = format is ReportFormat.netron
        if netron:
            from onnxcost.prepare import prepare

            # Loaded once: analysed, and its node names as the file has them kept for Netron.
            prepared = prepare(model, weights=ort_peak, keep_source=True)
        result = run(
            prepared if netron else model,
            input_shapes=shapes,
            dims=dims,
            convention=convention.value,
            symbolic=symbolic,
            ort_peak=ort_peak,
            allow_reshape=allow_reshape,
        )
        if netron:
            emit_netron(prepared, result, out)
            return
        # One selection for every format: the same nodes in the same order.
        chosen = select(
            result.nodes,
            sort_by=None if sort_by is None else sort_by.value,
            top=top,
            op_type=op_type,
            screen=format in (ReportFormat.table, ReportFormat.markdown),
        )
        if op_type and not chosen.matched:
            typer.echo(f"onnxcost: warning: {op_type_miss(result.nodes, op_type)}", err=True)
        cut = chosen.nodes
        if format is ReportFormat.html:
            from onnxcost.report.html import analysis_html

            emit_page(lambda: analysis_html(result, cut), out)
        elif format is ReportFormat.json:
            from onnxcost.analysis.records import to_json

            data = result.to_dict()
            if cut != result.nodes:
                position = {id(n): k for k, n in enumerate(result.nodes)}
                data["nodes"] = [data["nodes"][position[id(n)]] for n in cut]
            emit(to_json(data) + "\n", out)
        elif format is ReportFormat.csv:
            from onnxcost.report.as_text import to_csv

            emit(to_csv(cut), out)
        elif format is ReportFormat.markdown:
            from onnxcost.report.as_text import to_markdown

            emit(to_markdown(result, cut, depth=depth, tree=tree), out)
        else:
            from onnxcost.report.table import render

            render_rich(
                lambda c: render(
                    result,
                    c,
                    cut,
                    hidden=chosen.hidden,
                    depth=depth,
                    tree=tree,
                    sort_key=chosen.sort_key,
                ),
                out,
                wide=wide,
            )

    run_guarded(debug, go)
