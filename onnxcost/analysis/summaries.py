"""What an analysis says besides its records: the model's header (``ModelInfo``), the graph's
inputs and outputs as tensors, and the costs by op type."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

import onnx

from onnxcost.analysis.records import ModelInfo, NodeRecord, OpTypeSummary, TensorRecord, summed
from onnxcost.load.tensors import SUBGRAPH_OPS, dtype_name, is_tensor_type, type_text
from onnxcost.shapes.infer import ShapeResult


def model_info(
    loaded_path: str | None,
    proto: onnx.ModelProto,
    model_bytes: int,
    params_by_dtype: dict[str, int],
) -> ModelInfo:
    return ModelInfo(
        path=loaded_path,
        ir_version=proto.ir_version,
        opsets={(o.domain or "ai.onnx"): o.version for o in proto.opset_import},
        producer=proto.producer_name,
        producer_version=proto.producer_version,
        graph_name=proto.graph.name,
        node_count=len(proto.graph.node),
        model_bytes=model_bytes,
        params_by_dtype=params_by_dtype,
    )


def io_records(
    values: Sequence[onnx.ValueInfoProto], skip: set[str], shapes: ShapeResult
) -> tuple[TensorRecord, ...]:
    out = []
    for vi in values:
        if vi.name in skip:
            continue
        if not is_tensor_type(vi.type):  # a sequence or map: its type, no shape
            out.append(TensorRecord(vi.name, type_text(vi.type), None))
            continue
        info = shapes.types.get(vi.name)
        elem = info.elem_type if info is not None else vi.type.tensor_type.elem_type
        out.append(
            TensorRecord(vi.name, dtype_name(elem), info.shape if info is not None else None)
        )
    return tuple(out)


def by_op_type(records: Sequence[NodeRecord], counted: Sequence[bool]) -> tuple[OpTypeSummary, ...]:
    """Costs by (domain, op type). A main-graph control-flow node is counted as a node, its
    costs left to its bodies' nodes."""
    costed: defaultdict[tuple[str, str], list[NodeRecord]] = defaultdict(list)
    control_flow: Counter[tuple[str, str]] = Counter()
    for rec, flag in zip(records, counted, strict=True):
        key = (rec.domain, rec.op_type)
        group = costed[key]  # listed in the order first seen, counted or not
        if flag:
            group.append(rec)
        elif rec.op_type in SUBGRAPH_OPS and rec.graph == "":
            control_flow[key] += 1
    rows = []
    for (domain, op_type), group in costed.items():
        sums = summed(group)
        sums["count"] += control_flow[domain, op_type]
        if sums["count"]:
            rows.append(OpTypeSummary(op_type=op_type, domain=domain, **sums))
    rows.sort(key=lambda s: (-s.flops, -s.macs, -(s.bytes_read + s.bytes_written), s.op_type))
    return tuple(rows)


__all__ = ["by_op_type", "io_records", "model_info"]
