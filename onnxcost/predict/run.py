"""``predict``: an analysis of the model, then every node's time on the device."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import onnx

from onnxcost.analysis.records import NodeRecord
from onnxcost.analysis.result import Analysis
from onnxcost.api import analyze
from onnxcost.load.model import ModelSource
from onnxcost.predict.device import Device, load_device
from onnxcost.predict.estimate import NodeTime, predict_nodes
from onnxcost.predict.result import OpTypeTime, Prediction
from onnxcost.prepare import PreparedModel, prepare


def _batch(analysis: Analysis) -> int:
    for t in analysis.inputs:
        if t.shape and isinstance(t.shape[0], int):
            return t.shape[0]
    return 1


def _by_op_type(nodes: Sequence[NodeTime]) -> tuple[OpTypeTime, ...]:
    total = sum(n.predicted_us for n in nodes)
    times: dict[str, list[float]] = {}
    for n in nodes:
        times.setdefault(n.op_type, []).append(n.predicted_us)
    rows = [
        OpTypeTime(op, len(ts), sum(ts), sum(ts) / total if total > 0 else 0.0)
        for op, ts in times.items()
    ]
    return tuple(sorted(rows, key=lambda r: (-r.predicted_us, r.op_type)))


def static_inputs(model: onnx.ModelProto) -> bool:
    """Whether the model itself fixes every dim of every input (onnxruntime then knows all
    shapes when it builds a session, and folds every Shape)."""
    initializers = {t.name for t in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name in initializers:
            continue
        tensor = vi.type.tensor_type
        if not tensor.HasField("shape"):
            return False
        if any(not d.HasField("dim_value") for d in tensor.shape.dim):
            return False
    return True


def predict_analysis(
    analysis: Analysis, device: Device, *, static_shapes: bool = True, model: str | None = None
) -> Prediction:
    """The prediction for a model already analysed (its shapes as the analysis set them).
    ``static_shapes``: the model file fixes every input dim (``static_inputs``)."""
    return predict_records(
        analysis.counted_nodes,
        [t.name for t in analysis.inputs],
        device,
        batch=_batch(analysis),
        inputs=len(analysis.inputs),
        outputs=len(analysis.outputs),
        static_shapes=static_shapes,
        weight_bytes=analysis.totals.param_bytes,
        warnings=analysis.warnings,
        model=model or analysis.model.path,
    )


def predict_records(
    nodes: Sequence[NodeRecord],
    graph_inputs: Sequence[str],
    device: Device,
    *,
    batch: int,
    inputs: int,
    outputs: int,
    static_shapes: bool,
    weight_bytes: int,
    warnings: Sequence[str],
    model: str | None,
) -> Prediction:
    """The prediction from the records of the nodes counted (an analysis' ``counted_nodes``,
    or ``sweep``'s at a point), the model's weight bytes and its inputs and outputs."""
    times = predict_nodes(
        nodes, graph_inputs, device, static_shapes=static_shapes, weight_bytes=weight_bytes
    )
    said = list(warnings)
    if device.roofline_bound:
        said.append(f"{device.name}: {device.note}")
    return Prediction(model, device, batch, inputs, outputs, times, _by_op_type(times), tuple(said))


def predict(
    model: ModelSource | PreparedModel,
    device: Device | str | os.PathLike[str],
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    provider: str | None = None,
    allow_reshape: bool = False,
) -> Prediction:
    """Predicted latency of ``model`` on ``device`` (a ``Device``, a device file, or a
    built-in name: H100, A100, H200, L4). ``provider``: refuse a device made for another."""
    dev = load_device(device, provider)
    prepared = model if isinstance(model, PreparedModel) else prepare(model)
    static = static_inputs(prepared.proto)
    analysis = analyze(prepared, input_shapes=input_shapes, dims=dims, allow_reshape=allow_reshape)
    name = prepared.builtin or prepared.display
    return predict_analysis(analysis, dev, static_shapes=static, model=name)


__all__ = ["predict", "predict_analysis", "predict_records"]
