"""``onnxcost providers``: the execution providers of this onnxruntime, and which load.

No ``from __future__ import annotations`` in cli/: typer evaluates the annotations at each
start (see onnxcost/cli/__init__.py); names imported for type checking only are quoted.
"""

from typing import TYPE_CHECKING

from onnxcost.cli.guard import run_guarded
from onnxcost.cli.options import DebugOpt, FormatOpt, WideOpt
from onnxcost.cli.render import Format, render, table_views

if TYPE_CHECKING:
    from rich.console import Console


def providers(format: FormatOpt = "table", debug: DebugOpt = False, wide: WideOpt = False) -> None:
    """Execution providers in this onnxruntime build, and whether each really loads here."""

    def go() -> None:
        from onnxcost.bench import available_providers
        from onnxcost.report.listings import providers_table

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

        table = providers_table(rows)

        def draw(console: "Console") -> None:
            from onnxcost.report.writers.rich import is_cut, to_rich

            console.print(to_rich(table, console.width))
            if is_cut(table, console.width):
                console.print("  (trimmed: --wide or --format json shows it all)")

        render(table_views(table, as_json, draw), Format(format), None, wide=wide)

    run_guarded(debug, go)
