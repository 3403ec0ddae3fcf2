"""What `onnxcost ops` lists: operators with a formula, and operators known to have none."""

from __future__ import annotations

from typing import NamedTuple

import onnx.defs

from onnxcost.costs import REGISTRY
from onnxcost.costs._registry import OPSET_MAX, OpSpec
from onnxcost.load.tensors import normalize_domain


class OpRow(NamedTuple):
    domain: str
    op_type: str
    opsets: str
    status: str
    formula: str
    backward: str = ""
    """The backward rule (docs/training.md): its formula, or why there is none."""


ROUTED = "0: routes the gradient as it is (a copy, slice, reshape or concat)"
NO_RULE = "no backward rule yet: counts 0 on the gradient path, with a warning"


def backward_text(spec: OpSpec) -> str:
    """The backward column of ``onnxcost ops`` for one entry."""
    if spec.backward_summary:
        return spec.backward_summary
    return ROUTED if spec.zero else NO_RULE


def _matches(domain: str | None, d: str) -> bool:
    return domain is None or normalize_domain(domain) == d


def supported(domain: str | None = None) -> list[OpRow]:
    rows = []
    for s in REGISTRY.specs():
        if _matches(domain, s.domain):
            opsets = f"{s.since}+" if s.until >= OPSET_MAX else f"{s.since}-{s.until}"
            rows.append(
                OpRow(
                    s.domain or "ai.onnx",
                    s.op_type,
                    opsets,
                    "zero" if s.zero else "formula",
                    s.summary,
                    backward_text(s),
                )
            )
    return rows


def known_unsupported(domain: str | None = None) -> list[OpRow]:
    """Operators of the installed onnx's domains (ai.onnx, ai.onnx.ml, ...) without an entry."""
    seen: set[tuple[str, str]] = set()
    rows = []
    for schema in onnx.defs.get_all_schemas():
        d = normalize_domain(schema.domain)
        if (d, schema.name) in seen or not _matches(domain, d) or REGISTRY.known(d, schema.name):
            continue
        seen.add((d, schema.name))
        rows.append(
            OpRow(
                d or "ai.onnx",
                schema.name,
                f"{schema.since_version}+",
                "unsupported",
                "no formula: counted as 0 and listed",
            )
        )
    rows.sort()
    return rows
