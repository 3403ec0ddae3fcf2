"""``onnxcost ops``: every operator with a cost formula, and those known to have none.

No ``from __future__ import annotations`` in cli/: typer evaluates the annotations at each
start (see onnxcost/cli/__init__.py); names imported for type checking only are quoted.
"""

from typing import Annotated, Any

import typer

from onnxcost.cli.options import Format, FormatOpt, WideOpt
from onnxcost.cli.render import print_fitted


def ops(
    domain: Annotated[
        str | None, typer.Option(help="Only this domain ('' or ai.onnx, com.microsoft, ...).")
    ] = None,
    format: FormatOpt = Format.table,
    wide: WideOpt = False,
) -> None:
    """List every operator with a cost formula, and those known to have none."""
    from onnxcost.costs.catalog import known_unsupported, supported

    rows = supported(domain)
    missing = known_unsupported(domain)
    if format is Format.json:
        import json

        typer.echo(
            json.dumps(
                {
                    "supported": [r._asdict() for r in rows],
                    "unsupported": [m._asdict() for m in missing],
                },
                indent=2,
            )
        )
        return
    if format in (Format.csv, Format.markdown):
        sep = "," if format is Format.csv else " | "
        head = ["domain", "op_type", "opsets", "status", "formula"]
        lines = (
            [sep.join(head)]
            if format is Format.csv
            else ["| " + " | ".join(head) + " |", "|---|---|---|---|---|"]
        )
        for r in [*rows, *missing]:
            cells = [
                r.domain,
                r.op_type,
                r.opsets,
                r.status,
                r.formula.replace(",", ";") if format is Format.csv else r.formula,
            ]
            lines.append(
                sep.join(cells) if format is Format.csv else "| " + " | ".join(cells) + " |"
            )
        typer.echo("\n".join(lines))
        return
    from rich.console import Group

    from onnxcost.report.fit import fitted

    # One table per domain, so the formula has the width a domain column would take. The op
    # type names the row; a narrow terminal loses the opset range, then trims the formula at
    # its end (--wide or --format markdown keeps it whole).
    by_domain: dict[str, list[Any]] = {}
    for r in [*rows, *missing]:
        by_domain.setdefault(r.domain, []).append(r)

    def tables(width: int | None) -> Group:
        parts = []
        for name, group in by_domain.items():
            costed = sum(1 for r in group if r.status != "unsupported")
            parts.append(
                fitted(
                    f"{name}: {costed} with a formula, {len(group) - costed} without",
                    ("op", "opsets", "status", "formula"),
                    (False,) * 4,
                    [[r.op_type, r.opsets, r.status, r.formula] for r in group],
                    width,
                    drop=[1],
                    trim=[3, 0],
                    tail=[3],
                )
            )
        return Group(*parts)

    print_fitted(tables, wide)
