"""Shapes through a Loop whose loop-carried state keeps its shape from one iteration to the
next, which ONNX's own inference does not assume.

ONNX's Loop inference gives the body the state's element types but not its shapes (a state
may grow), so a body input keeps the shape the exporter declared, and the Loop's state
outputs and the length of its scan outputs stay unknown. tf2onnx writes every Keras RNN it
cannot map to an ONNX RNN op (GRU with ``reset_after``, Keras' default; SimpleRNN) as such a
Loop, its hidden state declared ``[unk__N, units]`` in a symbol of its own: its recurrent
MatMul and what follows it in the body were unknown_shape, counted 0, and every node after
the Loop too (a second GRU counted one iteration).

``infer_loop`` infers the body again with each state input given the shape of its initial
value, and keeps the result only where every state so given comes out of the body with the
same shape (a fixed point: the shape holds at every iteration). The state outputs then have
that shape and each scan output ``[M, *its body shape]``, M the trip count where it is
static.

NB: the scan outputs' length assumes the Loop runs all M iterations, as its cost does
(``analysis.control_flow``): a condition that ends it sooner is not read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxcost.load.graph import iter_graphs
from onnxcost.load.tensors import Shape, TensorInfo
from onnxcost.shapes.folding import KnownValues
from onnxcost.shapes.overrides import shape_of

_VALUE_MAX_ELEMENTS = 1024
"""Outer values the body reads that go in as constants (data propagation may need them)."""

_TRIP_COUNT_MAX = 2**31 - 1
"""A trip count above this is a "no limit" sentinel (the condition ends the Loop): unknown."""


def _body(node: onnx.NodeProto) -> onnx.GraphProto | None:
    for a in node.attribute:
        if a.name == "body" and a.type == onnx.AttributeProto.GRAPH:
            body: onnx.GraphProto = a.g
            return body
    return None


def _outer_reads(graph: onnx.GraphProto) -> Iterable[str]:
    """Tensors ``graph`` (or a graph nested in it) reads from the scopes around it."""
    local = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    local |= {o for n in graph.node for o in n.output}
    for n in graph.node:
        yield from (i for i in n.input if i and i not in local)
        for a in n.attribute:
            subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
            for g in subs:
                yield from (i for i in _outer_reads(g) if i not in local)


def _type(elem_type: int, shape: Shape | None) -> onnx.TypeProto:
    return helper.make_tensor_type_proto(elem_type, None if shape is None else list(shape))


def trip_count(node: onnx.NodeProto, values: KnownValues) -> int | None:
    """The Loop's trip count M where it is static (and not a no-limit sentinel), else None."""
    if not node.input or not node.input[0]:
        return None
    value = values.get(node.input[0])
    if value is None or value.size != 1:
        return None
    m = int(np.asarray(value).reshape(-1)[0])
    return max(m, 0) if m <= _TRIP_COUNT_MAX else None


def _standalone(
    body: onnx.GraphProto,
    state: Sequence[TensorInfo | None],
    types: Mapping[str, TensorInfo],
    values: KnownValues,
    opset_imports: Sequence[onnx.OperatorSetIdProto],
    ir_version: int,
) -> onnx.ModelProto:
    """The body as a model of its own: its state inputs typed as ``state`` (where given), the
    tensors it reads from outside as inputs (small known values as initializers)."""
    graph = onnx.GraphProto()
    graph.CopyFrom(body)
    graph.ClearField("value_info")
    for _scope, g in iter_graphs(graph):
        if g is not graph:
            g.ClearField("value_info")
    for vi, info in zip(graph.input[2:], state, strict=False):
        if info is not None:
            vi.type.CopyFrom(_type(info.elem_type or vi.type.tensor_type.elem_type, info.shape))
    passed = {vi.name: vi.type for vi in graph.input}
    for out in graph.output:
        if out.name in passed:  # a state passed through: its type is the input's (ONNX's
            out.type.CopyFrom(passed[out.name])  # inference would take the output's)
        elif out.type.HasField("tensor_type"):
            out.type.tensor_type.ClearField("shape")
    for name in dict.fromkeys(_outer_reads(body)):
        info = types.get(name)
        if info is None:
            continue  # unknown outside too: what reads it stays unknown
        value = values.get(name) if info.known_numel <= _VALUE_MAX_ELEMENTS else None
        if value is not None and info.known_numel >= 0:
            graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
        else:
            graph.input.append(helper.make_value_info(name, _type(info.elem_type, info.shape)))
    return helper.make_model(graph, opset_imports=list(opset_imports), ir_version=ir_version)


def infer_loop(
    node: onnx.NodeProto,
    types: MutableMapping[str, TensorInfo],
    values: KnownValues,
    opset_imports: Sequence[onnx.OperatorSetIdProto],
    ir_version: int,
) -> bool:
    """Type the body and the outputs of Loop ``node`` in ``types`` where every state whose
    initial value has a concrete shape keeps it through the body; returns whether it did."""
    body = _body(node)
    n_state = len(node.input) - 2
    if body is None or n_state < 1 or len(body.input) != n_state + 2:
        return False
    if len(body.output) < 1 + n_state:
        return False
    state: list[TensorInfo | None] = []
    for name in node.input[2:]:
        info = types.get(name) if name else None
        state.append(info if info is not None and info.is_concrete else None)
    if not any(state):
        return False
    model = _standalone(body, state, types, values, opset_imports, ir_version)
    try:
        inferred = onnx.shape_inference.infer_shapes(
            model, check_type=False, strict_mode=False, data_prop=True
        )
    except Exception:  # best effort: the Loop stays as ONNX's inference left it
        return False
    found: dict[str, TensorInfo] = {}
    for _scope, g in iter_graphs(inferred.graph):
        for vi in (*g.input, *g.output, *g.value_info):
            found[vi.name] = TensorInfo(vi.name, *shape_of(vi.type))
    outs = [found.get(o.name) for o in inferred.graph.output]
    for info, out in zip(state, outs[1 : 1 + n_state], strict=True):
        if info is not None and (out is None or out.shape != info.shape):
            return False  # the state changes shape: the first iteration's shapes only
    outer = set(_outer_reads(body))  # typed outside already
    for name, info in found.items():
        old = types.get(name)
        if name not in outer and info.is_concrete and (old is None or not old.is_concrete):
            types[name] = info
    m = trip_count(node, values)
    for k, name in enumerate(node.output):
        old = types.get(name) if name else None
        if not name or (old is not None and old.is_concrete):
            continue
        if k < n_state:
            kept = state[k]
            if kept is not None:
                types[name] = TensorInfo(name, kept.elem_type, kept.shape)
            continue
        out = outs[1 + k] if 1 + k < len(outs) else None
        if out is not None and out.shape is not None:
            shape: Shape = (m, *out.shape)
            types[name] = TensorInfo(name, out.elem_type or TensorProto.UNDEFINED, shape)
    return True
