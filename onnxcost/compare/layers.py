"""A model's compute layers and structural facts, as the alignment and findings see them.

A compute node is a node of a compute family (Conv, Gemm, MatMul, attention, RNN and their
quantized or fused forms), or any other node with MACs > 0, which forms a family of its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import onnx

from onnxcost.analysis.records import NodeRecord, ShapeOut
from onnxcost.analysis.result import Analysis
from onnxcost.compare.records import AttrValue, ComputeNode, Facts
from onnxcost.prepare import PreparedModel

# Op family of every compute op; nodes of other types with MACs > 0 form a family of their own.
_FAMILIES: Mapping[str, tuple[str, ...]] = {
    "conv": (
        "Conv", "ConvInteger", "QLinearConv", "FusedConv", "NhwcConv", "NhwcFusedConv",
        "DeformConv", "CausalConvWithState",
    ),
    "conv_transpose": ("ConvTranspose", "QLinearConvTranspose"),
    "dense": (
        "Gemm", "MatMul", "Einsum", "QLinearMatMul", "MatMulInteger", "MatMulIntegerToFloat",
        "DynamicQuantizeMatMul", "QGemm", "MatMulNBits", "MatMulBnb4", "FusedMatMul",
        "TransposeMatMul", "FusedGemm", "GemmFastGelu",
    ),
    "attention": (
        "Attention", "MultiHeadAttention", "GroupQueryAttention", "QAttention", "PackedAttention",
        "PackedMultiHeadAttention", "DecoderMaskedSelfAttention",
        "DecoderMaskedMultiHeadAttention", "SparseAttention", "LinearAttention",
    ),
    "rnn": ("RNN", "GRU", "LSTM", "DynamicQuantizeLSTM"),
}  # fmt: skip
FAMILY_OF: Mapping[str, str] = {op: fam for fam, ops in _FAMILIES.items() for op in ops}

_CONV_LIKE = frozenset(_FAMILIES["conv"] + _FAMILIES["conv_transpose"])


@dataclass(frozen=True)
class ModelGraph:
    """The loaded model's graph with the analyzer's node names: protos, weights, consumers."""

    nodes: Mapping[str, onnx.NodeProto]
    weights: frozenset[str]
    consumers: Mapping[str, tuple[onnx.NodeProto, ...]]
    opsets: Mapping[str, int]
    inputs: tuple[str, ...]
    outputs: frozenset[str]
    symbols: frozenset[str]


def _all_nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    out = []
    for node in graph.node:
        out.append(node)
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                out += _all_nodes(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    out += _all_nodes(g)
    return out


def graph_of(prepared: PreparedModel) -> ModelGraph:
    """The prepared model's graph (functions inlined, nodes named as the analysis names them)."""
    proto = prepared.proto
    nodes = _all_nodes(proto.graph)
    weights = {t.name for t in proto.graph.initializer}
    for node in nodes:
        if node.op_type == "Constant":
            weights.update(node.output)
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in proto.graph.node:
        for i in node.input:
            consumers.setdefault(i, []).append(node)
    inits = {t.name for t in proto.graph.initializer}
    inputs = tuple(vi.name for vi in proto.graph.input if vi.name not in inits)
    symbols = {
        d.dim_param
        for vi in proto.graph.input
        if vi.name not in inits
        for d in vi.type.tensor_type.shape.dim
        if d.HasField("dim_param")
    }
    return ModelGraph(
        nodes={n.name: n for n in nodes},
        weights=frozenset(weights),
        consumers={k: tuple(v) for k, v in consumers.items()},
        opsets={(o.domain if o.domain != "ai.onnx" else ""): o.version for o in proto.opset_import},
        inputs=inputs,
        outputs=frozenset(vi.name for vi in proto.graph.output),
        symbols=frozenset(symbols),
    )


def _attr_value(a: onnx.AttributeProto) -> AttrValue | None:
    skip = {
        onnx.AttributeProto.GRAPH,
        onnx.AttributeProto.GRAPHS,
        onnx.AttributeProto.TENSOR,
        onnx.AttributeProto.TENSORS,
        onnx.AttributeProto.SPARSE_TENSOR,
        onnx.AttributeProto.SPARSE_TENSORS,
        onnx.AttributeProto.TYPE_PROTO,
        onnx.AttributeProto.TYPE_PROTOS,
        onnx.AttributeProto.UNDEFINED,
    }
    if a.type in skip:
        return None
    v = onnx.helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, list):
        return tuple(x.decode("utf-8", "replace") if isinstance(x, bytes) else x for x in v)
    if isinstance(v, int | float | str):
        return v
    return None


def _attrs(node: onnx.NodeProto, opset: int, weight: ShapeOut) -> dict[str, AttrValue]:
    out: dict[str, AttrValue] = {}
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
    except (onnx.defs.SchemaError, TypeError):  # TypeError: an opset past int32, bytes names
        schema = None
    if schema is not None:
        for name, attr in schema.attributes.items():
            if attr.default_value.type != onnx.AttributeProto.UNDEFINED:
                value = _attr_value(attr.default_value)
                if value is not None:
                    out[name] = value
    if node.op_type in _CONV_LIKE and weight is not None and len(weight) > 2:
        spatial = len(weight) - 2
        kernel = weight[2:]
        if all(isinstance(d, int) for d in kernel):
            out["kernel_shape"] = tuple(int(d) for d in kernel if isinstance(d, int))
        out["strides"] = (1,) * spatial
        out["dilations"] = (1,) * spatial
        out.setdefault("group", 1)
        out.setdefault("auto_pad", "NOTSET")
        out["pads"] = (0,) * (2 * spatial)
        if node.op_type == "ConvTranspose":
            out["output_padding"] = (0,) * spatial
    for a in node.attribute:
        value = _attr_value(a)
        if value is not None:
            out[a.name] = value
    if out.get("auto_pad") not in (None, "NOTSET") and "pads" in out:
        del out["pads"]  # the padding is computed, not written
    return out


def _bias_of(
    rec: NodeRecord, node: onnx.NodeProto | None, g: ModelGraph
) -> Literal["", "inline", "add"]:
    if node is None:
        return ""
    if rec.op_type in ("Gemm", "FusedGemm", "QGemm", "Conv", "ConvTranspose", "FusedConv"):
        idx = {"QGemm": 6}.get(rec.op_type, 2)
        if len(node.input) > idx and node.input[idx]:
            return "inline"
    if len(node.output) != 1:
        return ""
    tensor = node.output[0]
    for _hop in range(2):  # through at most one Reshape (Keras adds a bias after reshaping heads)
        users = g.consumers.get(tensor, ())
        if len(users) != 1:
            return ""
        user = users[0]
        if user.op_type == "Add" and any(i in g.weights for i in user.input if i != tensor):
            return "add"
        if user.op_type != "Reshape" or not user.output:
            return ""
        tensor = user.output[0]
    return ""


def compute_nodes(a: Analysis, g: ModelGraph) -> tuple[ComputeNode, ...]:
    out = []
    for rec in a.nodes:
        family = FAMILY_OF.get(rec.op_type)
        if family is None:
            if rec.macs <= 0:
                continue
            family = rec.op_type
        node = g.nodes.get(rec.name)
        weight_idx = next(
            (
                i
                for i, name in enumerate(rec.inputs)
                if name in g.weights
                and i < len(rec.input_shapes)
                and (s := rec.input_shapes[i]) is not None
                and len(s) >= 2
            ),
            None,
        )
        weight = None if weight_idx is None else rec.input_shapes[weight_idx]
        act = next(
            (s for i, s in enumerate(rec.input_shapes) if rec.inputs[i] and i != weight_idx), None
        )
        attrs = {} if node is None else _attrs(node, g.opsets.get(rec.domain, 1), weight)
        out.append(
            ComputeNode(
                name=rec.name,
                op_type=rec.op_type,
                domain=rec.domain,
                family=family,
                macs=rec.macs,
                input_shape=act,
                weight_shape=weight,
                output_shape=rec.output_shapes[0] if rec.output_shapes else None,
                bias=_bias_of(rec, node, g),
                attrs=attrs,
                scope=rec.scope,
            )
        )
    return tuple(out)


def op_key(op_type: str, domain: str) -> str:
    """``domain::op`` (just ``op`` in the default domain); records carry names as text, also
    where the file's are not UTF-8 (``load.names``)."""
    return op_type if not domain else f"{domain}::{op_type}"


def _perm(node: onnx.NodeProto) -> tuple[int, ...]:
    for a in node.attribute:
        if a.name == "perm":
            return tuple(a.ints)
    return ()


def facts_of(a: Analysis, g: ModelGraph) -> Facts:
    main = [r for r in a.nodes if not r.graph]
    counts = Counter(op_key(r.op_type, r.domain) for r in main)
    by_op: dict[str, list[str]] = {}
    for r in main:
        by_op.setdefault(op_key(r.op_type, r.domain), []).append(r.name)
    graph_inputs = set(g.inputs)
    ins, outs = [], []
    for r in main:
        if r.op_type != "Transpose" or r.domain:
            continue
        node = g.nodes.get(r.name)
        perm = _perm(node) if node is not None else ()
        if any(i in graph_inputs for i in r.inputs):
            ins.append((r.name, perm))
        if any(o in g.outputs for o in r.outputs):
            outs.append((r.name, perm))
    return Facts(
        op_counts=dict(sorted(counts.items())),
        nodes_by_op={k: tuple(v) for k, v in by_op.items()},
        input_transposes=tuple(ins),
        output_transposes=tuple(outs),
    )
