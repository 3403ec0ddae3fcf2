"""``predict``: an analysis of the model, then every node's time on the device."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import onnx

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
    graph_inputs = [t.name for t in analysis.inputs]
    nodes = predict_nodes(
        analysis.counted_nodes,
        graph_inputs,
        device,
        static_shapes=static_shapes,
        weight_bytes=analysis.totals.param_bytes,
    )
    warnings = list(analysis.warnings)
    if device.roofline_bound:
        warnings.append(f"{device.name}: {device.note}")
    return Prediction(
        model or analysis.model.path,
        device,
        _batch(analysis),
        len(analysis.inputs),
        len(analysis.outputs),
        nodes,
        _by_op_type(nodes),
        tuple(warnings),
    )


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


__all__ = ["predict", "predict_analysis"]
