"""``onnxcost providers``: the execution providers of this onnxruntime, and which load.

No ``from __future__ import annotations`` in cli/: typer evaluates the annotations at each
start (see onnxcost/cli/__init__.py); names imported for type checking only are quoted.
"""

import typer

from onnxcost.cli.guard import run_guarded
from onnxcost.cli.options import DebugOpt, Format, FormatOpt, WideOpt
from onnxcost.cli.render import pipe_console, report_width


def providers(
    format: FormatOpt = Format.table, debug: DebugOpt = False, wide: WideOpt = False
) -> None:
    """Execution providers in this onnxruntime build, and whether each really loads here."""

    def go() -> None:
        from onnxcost.bench import available_providers

        rows = available_providers()
        if format is Format.json:
            import json

            typer.echo(
                json.dumps(
                    [
                        {
                            "name": r.name,
                            "available": r.available,
                            "loads": r.loads,
                            "detail": r.detail,
                        }
                        for r in rows
                    ],
                    indent=2,
                )
            )
            return
        from onnxcost.report.fit import fitted, layout

        headers = ("provider", "state", "detail")
        cells = [
            [
                r.name,
                "loads"
                if r.loads
                else ("listed, does not load" if r.available else "not in this build"),
                r.detail,
            ]
            for r in rows
        ]
        console = pipe_console(report_width(wide))
        # The provider's name is kept whole; the state and the detail (why it does not load,
        # what to install) are trimmed at their ends, and a line says where to read them whole.
        console.print(
            fitted(None, headers, (False,) * 3, cells, console.width, trim=[2, 1], tail=[2, 1])
        )
        if layout(headers, cells, console.width, trim=[2, 1]).limits:
            console.print("  (trimmed: --wide or --format json shows it all)")

    run_guarded(debug, go)
