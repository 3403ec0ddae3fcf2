"""The tables of the listing commands: ``ops`` (the cost formulas), ``providers`` (onnxruntime's
execution providers) and ``zoo list`` (the built-in models). One ``Table`` each goes to every
writer; ``ops`` draws one table per domain on the terminal (``ops_by_domain``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from onnxcost.report.tables import Column, Table

if TYPE_CHECKING:
    from onnxcost.bench.providers import ProviderStatus
    from onnxcost.costs.catalog import OpRow
    from onnxcost.zoo import ZooModel

_OP_COLUMNS = (
    Column("opsets"),
    Column("status"),
    Column("formula", cut="end"),
    Column("backward", cut="end"),
)


def ops_table(rows: Sequence[OpRow]) -> Table:
    """Every operator, one row each, with its domain: what CSV and Markdown write."""
    return Table(
        "",
        (Column("domain"), Column("op_type"), *_OP_COLUMNS),
        tuple((r.domain, r.op_type, r.opsets, r.status, r.formula, r.backward) for r in rows),
    )


def ops_by_domain(rows: Sequence[OpRow]) -> list[Table]:
    """One table per domain, titled with its counts, so the formula has the width a domain
    column would take. The op type names the row (cut in the middle only past the rest); a
    narrow terminal drops the opset range first, then cuts the prose at its end."""
    by_domain: dict[str, list[OpRow]] = {}
    for r in rows:
        by_domain.setdefault(r.domain, []).append(r)
    tables = []
    for name, group in by_domain.items():
        costed = sum(1 for r in group if r.status != "unsupported")
        tables.append(
            Table(
                f"{name}: {costed} with a formula, {len(group) - costed} without",
                (Column("op", cut="middle"), *_OP_COLUMNS),
                tuple((r.op_type, r.opsets, r.status, r.formula, r.backward) for r in group),
                drop=(1,),
            )
        )
    return tables


def providers_table(rows: Iterable[ProviderStatus]) -> Table:
    """Each provider, its state and the detail (why it does not load, what to install). The
    name is kept whole; the state and the detail are cut at their ends."""
    return Table(
        "",
        (Column("provider"), Column("state", cut="end"), Column("detail", cut="end")),
        tuple(
            (
                r.name,
                "loads"
                if r.loads
                else ("listed, does not load" if r.available else "not in this build"),
                r.detail,
            )
            for r in rows
        ),
    )


def zoo_table(models: Iterable[ZooModel]) -> Table:
    """The built-in models. The name is what ``zoo save`` and ``analyze`` take: kept whole; a
    narrow terminal drops the inputs, then cuts the description and the parameters at their
    ends."""
    return Table(
        "",
        (
            Column("name"),
            Column("model", cut="end"),
            Column("inputs", cut="end"),
            Column("parameters (--param)", cut="end"),
        ),
        tuple(
            (m.name, m.summary, m.inputs, " ".join(f"{k}={v}" for k, v in m.params.items()))
            for m in models
        ),
        drop=(2,),
    )


__all__ = ["ops_by_domain", "ops_table", "providers_table", "zoo_table"]
