"""What element types a model's arithmetic runs in: the ``by_dtype`` summary.

Each node is labelled by its operands, the first two inputs at data positions (not shapes,
scales, zero points or statistics) in the order the op reads them:

- an operand produced by a DequantizeLinear is labelled with the DequantizeLinear's input
  type (a QDQ model's Conv reads uint8 activations and int8 weights, as the kernel that
  onnxruntime fuses it into does); a packed weight with its bits (MatMulNBits: ``int4``);
- two operands whose types differ, or two integer operands, give ``A x B`` (``uint8 x int8``,
  ``float32 x int4``); otherwise the one type (``float32``, ``float16``);
- a node without data operands is labelled with its first output's type.

MACs, FLOPs, params and bytes of the nodes counted in the totals are summed per label.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import onnx
from onnx import TensorProto

from onnxcost.analysis.records import DtypeSummary, NodeRecord, summed
from onnxcost.costs._registry import OpSpec
from onnxcost.load.tensors import TensorInfo, dtype_name

DEQUANTIZE = frozenset({"DequantizeLinear"})
_PACKED_WEIGHT = {"MatMulNBits": 1, "MatMulBnb4": 1, "GatherBlockQuantized": 0}
"""Ops whose weight input packs several sub-byte weights per element: op -> position."""
_INTEGER = frozenset(
    {
        TensorProto.INT8,
        TensorProto.UINT8,
        TensorProto.INT16,
        TensorProto.UINT16,
        TensorProto.INT32,
        TensorProto.UINT32,
        *(getattr(TensorProto, n) for n in ("INT4", "UINT4") if hasattr(TensorProto, n)),
    }
)


def _bits(node: onnx.NodeProto) -> int:
    for a in node.attribute:
        if a.name == "bits":
            return int(a.i)
    return 4


def _operand(
    node: onnx.NodeProto,
    position: int,
    name: str,
    types: Mapping[str, TensorInfo],
    dequantized_from: Mapping[str, str],
) -> tuple[str, bool]:
    """(type label, whether integer) of one operand."""
    if _PACKED_WEIGHT.get(node.op_type) == position and node.domain == "com.microsoft":
        return f"int{_bits(node)}", True
    source = dequantized_from.get(name)
    info = types.get(source if source is not None else name)
    elem = info.elem_type if info is not None else 0
    return dtype_name(elem), elem in _INTEGER


def label(
    node: onnx.NodeProto,
    inputs: Sequence[str],
    outputs: Sequence[str],
    spec: OpSpec | None,
    types: Mapping[str, TensorInfo],
    dequantized_from: Mapping[str, str],
) -> str:
    """The element types a node's arithmetic runs in (see the module docstring).
    ``dequantized_from``: DequantizeLinear output -> its input, for the nodes seen so far."""
    skip = frozenset() if spec is None else spec.meta_inputs | spec.stat_inputs
    operands = [
        _operand(node, i, name, types, dequantized_from)
        for i, name in enumerate(inputs)
        if name and i not in skip
    ][:2]
    if not operands:
        out = types.get(outputs[0]) if outputs and outputs[0] else None
        return dtype_name(out.elem_type if out is not None else 0)
    if len(operands) == 2 and (operands[0][0] != operands[1][0] or operands[0][1]):
        return f"{operands[0][0]} x {operands[1][0]}"
    return operands[0][0]


def by_dtype(
    records: Sequence[NodeRecord], counted: Sequence[bool], labels: Sequence[str]
) -> tuple[DtypeSummary, ...]:
    """MACs, FLOPs, params and bytes of the counted nodes by arithmetic type, most MACs first
    (then most FLOPs, then bytes)."""
    groups: defaultdict[str, list[NodeRecord]] = defaultdict(list)
    for rec, flag, key in zip(records, counted, labels, strict=True):
        if flag:
            groups[key].append(rec)
    rows = [DtypeSummary(dtype=key, **summed(recs)) for key, recs in groups.items()]
    rows.sort(key=lambda s: (-s.macs, -s.flops, -(s.bytes_read + s.bytes_written), s.dtype))
    return tuple(rows)


__all__ = ["by_dtype", "label"]
