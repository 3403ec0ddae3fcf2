"""``onnxcost ops``: every operator with a cost formula, and those known to have none.

No ``from __future__ import annotations`` in cli/: typer evaluates the annotations at each
start (see onnxcost/cli/__init__.py); names imported for type checking only are quoted.
"""

from typing import TYPE_CHECKING, Annotated, Any

import typer

from onnxcost.cli.options import FormatOpt, WideOpt
from onnxcost.cli.render import Format, Views, render

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

    rows = supported(domain)
    missing = known_unsupported(domain)

    def as_json() -> str:
        import json

        data = {
            "supported": [r._asdict() for r in rows],
            "unsupported": [m._asdict() for m in missing],
        }
        return json.dumps(data, indent=2)

    def as_text(csv: bool) -> str:
        sep = "," if csv else " | "
        head = ["domain", "op_type", "opsets", "status", "formula", "backward"]
        lines = (
            [sep.join(head)]
            if csv
            else ["| " + " | ".join(head) + " |", "|---|---|---|---|---|---|"]
        )
        for r in [*rows, *missing]:
            cells = [
                r.domain,
                r.op_type,
                r.opsets,
                r.status,
                r.formula.replace(",", ";") if csv else r.formula,
                r.backward.replace(",", ";") if csv else r.backward,
            ]
            lines.append(sep.join(cells) if csv else "| " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"

    def draw(console: "Console") -> None:
        from rich.console import Group

        from onnxcost.report.fit import fitted

        # One table per domain, so the formula has the width a domain column would take. The
        # op type names the row; a narrow terminal loses the opset range, then trims the
        # formula at its end (--wide or --format markdown keeps it whole).
        by_domain: dict[str, list[Any]] = {}
        for r in [*rows, *missing]:
            by_domain.setdefault(r.domain, []).append(r)
        parts = []
        for name, group in by_domain.items():
            costed = sum(1 for r in group if r.status != "unsupported")
            parts.append(
                fitted(
                    f"{name}: {costed} with a formula, {len(group) - costed} without",
                    ("op", "opsets", "status", "formula", "backward"),
                    (False,) * 5,
                    [[r.op_type, r.opsets, r.status, r.formula, r.backward] for r in group],
                    console.width,
                    drop=[1],
                    trim=[4, 3, 0],
                    tail=[4, 3],
                )
            )
        console.print(Group(*parts))

    views = Views(
        table=draw, json=as_json, csv=lambda: as_text(csv=True), markdown=lambda: as_text(csv=False)
    )
    render(views, Format(format), None, wide=wide)
