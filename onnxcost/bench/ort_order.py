"""Peak activation memory under onnxruntime's own execution order.

onnxruntime optimizes a model before it runs it: it folds constants, fuses nodes (Conv + Add
+ Relu into FusedConv, MatMul + Add into Gemm, attention and normalization subgraphs into
contrib ops) and runs the result in the topological order of the optimized graph. Asked with
``SessionOptions.optimized_model_filepath``, it writes that graph, nodes in that order. Here
the graph it writes at ORT_ENABLE_EXTENDED (the fusions every provider gets; the CPU-only
NCHWc layout of level "all" reorders tensors into blocks whose shapes the file does not
give) is inferred with onnxcost's shape inference, its unknown tensors sized by name from
the original model's (a fused node keeps the name of the output it replaces), and its
liveness computed over that order (``onnxcost.liveness``). Tensors onnxruntime computes
from constants at load time are initializers there, so they are weights here too.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence

import onnx

from onnxcost.bench.session import OptLevel, SessionConfig, open_session, prepare_model
from onnxcost.graph import build
from onnxcost.liveness import peak_activation
from onnxcost.model import ModelSource
from onnxcost.prepare import PreparedModel, prepare
from onnxcost.records import PeakActivation
from onnxcost.shapes import infer

OPT_LEVEL: OptLevel = "extended"


def optimized_model(model: ModelSource | PreparedModel) -> onnx.ModelProto:
    """The graph onnxruntime (CPU provider, ORT_ENABLE_EXTENDED) writes for ``model``, weights
    left in its external data file, which is never read."""
    prepared = prepare_model(model)
    with tempfile.TemporaryDirectory(prefix="onnxcost-ort-order-") as folder:
        path = os.path.join(folder, "optimized.onnx")
        open_session(prepared, SessionConfig(opt_level=OPT_LEVEL), optimized_model_path=path)
        return onnx.load(path, load_external_data=False)


def _constants(graph: onnx.GraphProto) -> set[str]:
    """Tensors computed only from initializers and Constants (what is left unfolded)."""
    constant = {t.name for t in graph.initializer}
    for node in graph.node:
        named = [i for i in node.input if i]
        if node.op_type == "Constant" or (named and all(i in constant for i in named)):
            constant.update(o for o in node.output if o)
    return constant


def ort_peak_activation(
    model: ModelSource | PreparedModel,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dims: Mapping[str, int] | None = None,
) -> PeakActivation:
    """Peak activation memory of ``model`` over onnxruntime's execution order, the input
    shapes set as the analysis sets them (``input_shapes``, ``dims``, else 1)."""
    prepared = prepare(model, weights=True)
    optimized = optimized_model(prepared)
    known = infer(prepared.working_copy(), input_shapes, dims, prepared.view).types
    view = build(optimized.graph, name_unnamed=True)
    types = dict(infer(optimized, input_shapes, dims, view).types)
    for name, info in known.items():
        mine = types.get(name)
        if mine is None or mine.known_nbytes < 0:
            types[name] = info
    return peak_activation(
        view.names,
        view.inputs,
        view.outputs,
        [vi.name for vi in optimized.graph.input],
        [vi.name for vi in optimized.graph.output],
        types,
        _constants(optimized.graph),
        view.last_use,
    )


__all__ = ["OPT_LEVEL", "optimized_model", "ort_peak_activation"]
