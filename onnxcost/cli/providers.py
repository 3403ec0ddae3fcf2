"""``onnxcost providers``: the execution providers of this onnxruntime, and which load.

No ``from __future__ import annotations`` in cli/: typer evaluates the annotations at each
start (see onnxcost/cli/__init__.py); names imported for type checking only are quoted.
"""

from typing import TYPE_CHECKING

from onnxcost.cli.guard import run_guarded
from onnxcost.cli.options import DebugOpt, FormatOpt, WideOpt
from onnxcost.cli.render import Format, Views, render

if TYPE_CHECKING:
    from rich.console import Console


def providers(format: FormatOpt = "table", debug: DebugOpt = False, wide: WideOpt = False) -> None:
    """Execution providers in this onnxruntime build, and whether each really loads here."""

    def go() -> None:
        from onnxcost.bench import available_providers

        rows = available_providers()

        def as_json() -> str:
            import json

            return json.dumps(
                [
                    {"name": r.name, "available": r.available, "loads": r.loads, "detail": r.detail}
                    for r in rows
                ],
                indent=2,
            )

        def draw(console: "Console") -> None:
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
            # The provider's name is kept whole; the state and the detail (why it does not
            # load, what to install) are trimmed at their ends, and a line says where to read
            # them whole.
            console.print(
                fitted(None, headers, (False,) * 3, cells, console.width, trim=[2, 1], tail=[2, 1])
            )
            if layout(headers, cells, console.width, trim=[2, 1]).limits:
                console.print("  (trimmed: --wide or --format json shows it all)")

        render(Views(table=draw, json=as_json), Format(format), None, wide=wide)

    run_guarded(debug, go)
