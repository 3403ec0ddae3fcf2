"""Why a node counts as 0: the note of a node without a shape (``why_unknown``), and the
analysis's warnings for those nodes and for nodes whose formula failed (``status_warnings``),
naming where unknown shapes start."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import onnx

from onnxcost.analysis.records import NodeRecord
from onnxcost.load.tensors import TensorInfo
from onnxcost.shapes.rules import has_rule


def _op_label(domain: str, op_type: str) -> str:
    """``op`` or ``domain::op``."""
    return op_type if domain == "" else f"{domain}::{op_type}"


def why_unknown(
    types: Mapping[str, TensorInfo],
    domain: str,
    op_type: str,
    in_names: Sequence[str],
    out_names: Sequence[str],
    raised: str,
) -> str:
    """Why a node has no shape: its first input without one; else its first output that
    inference left untyped (and whether onnx or onnxcost has a rule for the op); else what its
    formula could not size."""
    for i, name in enumerate(in_names):
        info = types.get(name) if name else None
        if name and (info is None or not info.is_concrete):
            return f"input {i} {name!r} has no known shape"
    return _untyped_output(types, domain, op_type, out_names) or (
        f"its formula could not size it: {raised or 'a needed shape is unknown'}"
    )


def _untyped_output(
    types: Mapping[str, TensorInfo], domain: str, op_type: str, out_names: Sequence[str]
) -> str:
    """'output j 'name' has no shape: why' for a node's first output without a concrete shape,
    else ''."""
    for j, name in enumerate(out_names):
        info = types.get(name) if name else None
        if name and (info is None or not info.is_concrete):
            # An op type or domain that is not UTF-8 arrives as bytes, which onnx.defs refuses.
            known = isinstance(op_type, str) and isinstance(domain, str)
            if not (known and onnx.defs.has(op_type, domain)) and not has_rule(domain, op_type):
                why = f"onnx has no shape inference for {_op_label(domain, op_type)} and onnxcost no rule"
            else:
                why = "shape inference gave it none from these inputs"
            return f"output {j} {name!r} has no shape: {why}"
    return ""


def _unknown_starts(
    records: Iterable[NodeRecord | None], types: Mapping[str, TensorInfo]
) -> list[str]:
    """'node (op): why' of each node where unknown shapes start: its inputs are all known, but
    an output has no shape (an op nothing can shape) or its own formula could not size it."""
    starts = []
    for rec in records:
        if rec is None or any(
            s is None for n, s in zip(rec.inputs, rec.input_shapes, strict=True) if n
        ):
            continue
        if any(not all(type(d) is int for d in s) for s in rec.input_shapes if s is not None):
            continue
        why = _untyped_output(types, rec.domain, rec.op_type, rec.outputs)
        if not why and rec.status == "unknown_shape":
            why = rec.note
        if why:
            starts.append(f"{rec.name} ({_op_label(rec.domain, rec.op_type)}): {why}")
    return starts


def status_warnings(
    unknown: int,
    errors: Sequence[str],
    records: Iterable[NodeRecord | None],
    types: Mapping[str, TensorInfo],
) -> list[str]:
    """One warning for the ``unknown`` unknown_shape nodes, naming where unknown shapes start
    and why (the input shapes are blamed only where nothing else is), one for the ``errors``
    (a node's 'name (op): note' each)."""
    warnings = []
    if unknown:
        head = (
            f"{unknown} nodes have shapes that could not be resolved and count as 0 "
            f"(status unknown_shape)"
        )
        starts = _unknown_starts(records, types)
        if starts:
            more = f"; and {len(starts) - 3} more" if len(starts) > 3 else ""
            warnings.append(f"{head}; they start at {'; '.join(starts[:3])}{more}")
        else:
            warnings.append(
                f"{head}; fix input shapes with --input-shape NAME=DIMS or --dim SYMBOL=N"
            )
    if errors:
        listed = "; ".join(errors[:3]) + (
            f"; and {len(errors) - 3} more" if len(errors) > 3 else ""
        )
        warnings.append(
            f"{len(errors)} nodes count as 0 because their cost formula failed (status error, "
            f"a bug in onnxcost: please report it): {listed}"
        )
    return warnings


__all__ = ["status_warnings", "why_unknown"]
