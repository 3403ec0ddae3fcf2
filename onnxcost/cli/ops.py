"""``onnxcost ops``: every operator with a cost formula, and those known to have none.

No ``from __future__ import annotations`` in cli/: typer evaluates the annotations at each
start (see onnxcost/cli/__init__.py); names imported for type checking only are quoted.
"""

from typing import TYPE_CHECKING, Annotated

import typer

from onnxcost.cli.options import FormatOpt, WideOpt
from onnxcost.cli.render import Format, render, table_views

if TYPE_CHECKING:
    from rich.console import Console


def ops(
    domain: Annotated[
        str | None, typer.Option(help="Only this domain ('' or ai.onnx, com.microsoft, ...).")
    ] = None,
    format: FormatOpt = "table",
    wide: WideOpt = False,
) -> None:
    """List every operator with a cost formula, and those known to have none."""
    from onnxcost.costs.catalog import known_unsupported, supported
    from onnxcost.report.listings import ops_by_domain, ops_table

    rows = supported(domain)
    missing = known_unsupported(domain)

    def as_json() -> str:
        import json

        data = {
            "supported": [r._asdict() for r in rows],
            "unsupported": [m._asdict() for m in missing],
        }
        return json.dumps(data, indent=2)

    def draw(console: "Console") -> None:
        from rich.console import Group

        from onnxcost.report.writers.rich import to_rich

        # One table per domain (--wide or --format markdown keeps every cell whole).
        parts = [to_rich(t, console.width) for t in ops_by_domain([*rows, *missing])]
        console.print(Group(*parts))

    views = table_views(ops_table([*rows, *missing]), as_json, draw)
    render(views, Format(format), None, wide=wide)
