"""Per-node time on a device: max(compute time, memory time) + the per-node overhead.

For a node of op class c with F FLOPs and B bytes read + written::

    compute_s = F / (peak x eff_c(F))        (eff from c's curve when its basis is flops;
                                              0 when c's curve is measured against bytes,
                                              whose times hold the arithmetic already)
    memory_s  = B / (bandwidth x eff_m(B))   (eff from c's curve when its basis is bytes,
                                              else from the "elementwise" curve)
    time      = max(compute_s, memory_s) + weights_s + node_overhead (c's own where it has one)

    weights_s = a MatMul's or Conv's weight bytes / weight bandwidth, when the model's
                weights exceed one core's cache (else 0; with weights beyond half the
                last-level cache any other node reads its weights in memory_s)

A class without a curve runs at the ceilings (efficiency 1), which is what a datasheet device
has everywhere. ``bound`` names the larger term, or "overhead" when the overhead is larger
than both. A run adds the run overhead once.

What onnxruntime removes before it runs costs nothing, not even the overhead (``free_nodes``):
nodes computed from constants only (folded at load), Shape of a tensor whose shape is known,
Identity and Dropout, and what it fuses into the node before: BatchNormalization, or Add/Mul
of a constant, after a Conv; an activation after a Conv or Gemm; a bias Add after a MatMul
(MatMul + Add -> Gemm); a residual Add after a Conv (FusedConv's Z input). NB: the fusions are
the common ones of onnxruntime's CPU and CUDA providers, matched on the original graph; a
fusion onnxruntime does and this list lacks is predicted as separate nodes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from onnxcost.analysis.records import NodeRecord
from onnxcost.predict.device import Curve, Device

Bound = Literal["compute", "memory", "overhead", "free"]

_CLASS_OF: dict[str, str] = {}
for _cls, _ops in {
    "matmul": "MatMul Gemm FusedMatMul MatMulInteger QLinearMatMul Einsum FusedGemm "
    "MatMulNBits MatMulIntegerToFloat DynamicQuantizeMatMul Attention MultiHeadAttention "
    "GroupQueryAttention",
    "conv": "Conv FusedConv ConvTranspose QLinearConv ConvInteger NhwcConv",
    "elementwise": "Add Sub Mul Div Relu Clip LeakyRelu PRelu Max Min Neg Abs Where Equal "
    "Less Greater LessOrEqual GreaterOrEqual Not And Or Xor Cast CastLike Sqrt Reciprocal "
    "Floor Ceil Round Sign Mod BatchNormalization Sum Mean IsNaN IsInf BitShift "
    "QuantizeLinear DequantizeLinear DynamicQuantizeLinear QLinearAdd QLinearMul "
    "BiasAdd HardSigmoid HardSwish Shrink ThresholdedRelu",
    "transcendental": "Exp Log Tanh Sigmoid Erf Gelu FastGelu BiasGelu QuickGelu Softplus "
    "Softsign Swish Mish Elu Selu Celu Pow Sin Cos Tan Asin Acos Atan Sinh Cosh Asinh Acosh "
    "Atanh BiasSplitGelu",
    "reduction": "ReduceMean ReduceSum ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 "
    "ReduceLogSum ReduceLogSumExp ReduceSumSquare ArgMax ArgMin GlobalAveragePool "
    "GlobalMaxPool GlobalLpPool CumSum TopK",
    "pool": "MaxPool AveragePool LpPool MaxRoiPool RoiAlign QLinearAveragePool",
    "softmax": "Softmax LogSoftmax Hardmax",
    "lrn": "LRN",
    "normalization": "LayerNormalization InstanceNormalization GroupNormalization "
    "SkipLayerNormalization SimplifiedLayerNormalization SkipSimplifiedLayerNormalization "
    "RMSNormalization LpNormalization MeanVarianceNormalization EmbedLayerNormalization",
    "transpose": "Transpose DepthToSpace SpaceToDepth",
    "copy": "Concat Split Slice Gather GatherElements GatherND Pad Expand Tile Resize "
    "Upsample ScatterND ScatterElements Scatter Range ConstantOfShape Trilu OneHot NonZero "
    "Compress ReverseSequence",
    "view": "Reshape Flatten Squeeze Unsqueeze Shape Size",
}.items():
    for _op in _ops.split():
        _CLASS_OF[_op] = _cls

CLASSES: tuple[str, ...] = (
    "matmul",
    "gemv",
    "conv",
    "conv_1x1",
    "conv_depthwise",
    "conv_grouped",
    "elementwise",
    "transcendental",
    "reduction",
    "pool",
    "softmax",
    "normalization",
    "lrn",
    "transpose",
    "copy",
    "view",
    "other",
)
"""Op classes the calibration measures and the predictor looks up (``op_class``)."""

BASIS: dict[str, Literal["flops", "bytes"]] = {
    c: ("flops" if c.startswith(("matmul", "conv")) else "bytes") for c in CLASSES
}
"""What each class's efficiency is measured against: FLOPs (compute classes) or bytes."""

GEMV_ROWS = 8
"""A MatMul or Gemm with this many rows or fewer is a matrix-vector product (class gemv)."""

_ACTIVATIONS = frozenset(
    {"Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish"}
)
_GEMM_ACTIVATIONS = frozenset({"Relu", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid"})
_ELIMINATED = frozenset({"Identity", "Dropout", "Constant"})


def op_class(node: NodeRecord) -> str:
    """The class a node's time is looked up in (a Conv by its kernel and groups)."""
    cls = _CLASS_OF.get(node.op_type, "other")
    if node.op_type in ("MatMul", "Gemm") and node.input_shapes and node.input_shapes[0]:
        a = node.input_shapes[0]
        rows = a[:-1] if node.op_type == "MatMul" else a[:1]
        ints = [d for d in rows if isinstance(d, int)]
        if len(ints) == len(rows) and math.prod(ints) <= GEMV_ROWS:
            return "gemv"
    if cls == "conv" and node.op_type in ("Conv", "FusedConv", "QLinearConv", "NhwcConv"):
        x = node.input_shapes[0] if node.input_shapes else None
        w_index = 3 if node.op_type == "QLinearConv" else 1
        w = node.input_shapes[w_index] if len(node.input_shapes) > w_index else None
        if x is not None and w is not None and len(x) >= 3 and len(w) >= 3:
            channels, per_group = x[1], w[1]
            if isinstance(channels, int) and isinstance(per_group, int) and per_group > 0:
                if per_group == 1 and channels > 1:
                    return "conv_depthwise"
                if channels != per_group:
                    return "conv_grouped"
                if all(k == 1 for k in w[2:]):
                    return "conv_1x1"
    return cls


def _known(shape: object) -> bool:
    return isinstance(shape, tuple) and all(isinstance(d, int) for d in shape)


def free_nodes(
    nodes: Sequence[NodeRecord], graph_inputs: Iterable[str], static_shapes: bool = True
) -> dict[int, str]:
    """Indices of the nodes onnxruntime folds, eliminates or fuses away, each with why.

    ``static_shapes``: the model as onnxruntime gets it fixes every input dim, so it folds
    each Shape (with symbolic inputs it knows fewer shapes and folds only constants)."""
    produced: dict[str, int] = {}
    consumers: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        for o in n.outputs:
            if o:
                produced[o] = i
        for t in n.inputs:
            if t:
                consumers.setdefault(t, []).append(i)
    inputs = set(graph_inputs)
    constant = {t for t in consumers if t not in produced and t not in inputs}
    free: dict[int, str] = {}

    def sole_producer(i: int, tensor: str, ops: Iterable[str]) -> int | None:
        """The producer of ``tensor`` when it is one of ``ops``, not free, and ``i`` alone reads it."""
        if consumers.get(tensor) != [i]:
            return None
        j = produced.get(tensor)
        while j is not None and j in merged:  # folded into a node before: that node
            j = merged[j]
        if j is None or j in free or nodes[j].op_type not in ops:
            return None
        return j

    fused_into: dict[int, str] = {}  # producer index -> what it became
    merged: dict[int, int] = {}  # a node folded or fused away -> the node it went into
    for i, n in enumerate(nodes):
        named = [t for t in n.inputs if t]
        if n.op_type in _ELIMINATED and n.domain in ("", "ai.onnx"):
            free[i] = "eliminated" if n.op_type != "Constant" else "constant"
        elif (named and all(t in constant for t in named)) or (
            static_shapes and n.op_type == "Shape" and n.input_shapes and _known(n.input_shapes[0])
        ):
            free[i] = "constant"
        if i in free:
            if free[i] == "constant" or (named and all(t in constant for t in named)):
                constant.update(o for o in n.outputs if o)
            continue
        if n.graph:
            continue
        first = named[0] if named else ""
        others = named[1:]
        if n.op_type in ("BatchNormalization", "Add", "Mul") and others:
            j = sole_producer(i, first, ("Conv",))
            if j is not None and all(t in constant for t in others) and j not in fused_into:
                free[i] = f"folded into {nodes[j].name}"
                merged[i] = j
                continue
        if n.op_type in _ACTIVATIONS:
            j = sole_producer(i, first, ("Conv", "FusedConv"))
            if j is not None and fused_into.get(j, "") != "act":
                fused_into[j] = "act"
                free[i] = f"fused into {nodes[j].name}"
                merged[i] = j
                continue
            j = sole_producer(i, first, ("Gemm", "MatMul"))
            if (
                j is not None
                and n.op_type in _GEMM_ACTIVATIONS
                and (nodes[j].op_type == "Gemm" or fused_into.get(j) == "bias")
            ):
                fused_into[j] = "act"
                free[i] = f"fused into {nodes[j].name}"
                merged[i] = j
                continue
        if n.op_type == "Add" and len(named) == 2:
            for a, b in ((named[0], named[1]), (named[1], named[0])):
                j = sole_producer(i, a, ("MatMul",))
                two_d = j is not None and len(nodes[j].input_shapes[0] or ()) == 2
                if j is not None and two_d and b in constant and j not in fused_into:
                    fused_into[j] = "bias"
                    free[i] = f"fused into {nodes[j].name} (Gemm)"
                    merged[i] = j
                    break
                j = sole_producer(i, a, ("Conv",))
                if (
                    j is not None
                    and b not in constant
                    and j not in fused_into
                    and n.output_shapes
                    and nodes[j].output_shapes == n.output_shapes
                ):
                    fused_into[j] = "sum"
                    free[i] = f"fused into {nodes[j].name} (Conv + Add)"
                    merged[i] = j
                    break
    return free


@dataclass(frozen=True, slots=True)
class NodeTime:
    """One node's predicted time on a device."""

    name: str
    op_type: str
    op_class: str
    flops: int
    bytes: int
    compute_us: float
    memory_us: float
    overhead_us: float
    bound: Bound
    note: str = ""
    weights_us: float = 0.0
    """Weights streamed from memory before the arithmetic can use them (a convolution's, when
    the model's weights exceed the cache): not overlapped with compute or memory."""

    @property
    def predicted_us(self) -> float:
        """max(compute_us, memory_us) + weights_us + overhead_us."""
        return max(self.compute_us, self.memory_us) + self.weights_us + self.overhead_us


def _itemsize(dtype: str) -> int:
    return 2 if dtype in ("float16", "bfloat16") else 4


def _eff(curve: Curve | None, size: float) -> float:
    return 1.0 if curve is None or size <= 0 else curve.efficiency(size)


def node_time(
    node: NodeRecord,
    device: Device,
    cls: str | None = None,
    weights_cold: bool = False,
    weights_streamed: bool = False,
) -> NodeTime:
    """``node``'s time on ``device`` (the formula in the module docstring).

    ``weights_streamed`` (the model's weights exceed one core's cache, or ``weights_cold``):
    a MatMul's or Conv's weight bytes (params x element size) are read at the weight
    bandwidth as ``weights_us``, added to its time: its calibration point ran with the
    weights in that cache, and onnxruntime's kernels wait for each weight block before its
    arithmetic (the two do not overlap). ``weights_cold`` (the model's weights exceed half
    the last-level cache): any other node's weight bytes are read at the weight bandwidth
    as part of its memory time, and only the rest on the curve."""
    cls = cls or op_class(node)
    curves: Mapping[str, Curve] = device.curves
    curve = curves.get(cls)
    flops, nbytes = node.flops, node.bytes_total
    c_curve = curve if curve is not None and curve.basis == "flops" else None
    m_curve = curve if curve is not None and curve.basis == "bytes" else None
    if m_curve is None:
        m_curve = curves.get("elementwise")
    cold_s = 0.0
    compute_class = BASIS.get(cls) == "flops"
    if node.params and (weights_cold or (weights_streamed and compute_class)):
        weight_bytes = min(nbytes, node.params * _itemsize(device.ceilings.dtype))
        nbytes -= weight_bytes
        cold_s = weight_bytes / (
            device.weight_bandwidth_bytes_per_s or device.ceilings.bandwidth_bytes_per_s
        )
    if cls == "view" and m_curve is not None:
        # An alias: onnxruntime copies nothing, so no size takes longer than the smallest.
        nbytes = min(nbytes, int(m_curve.points[0][0]))
    # A class measured against bytes has its arithmetic in its curve's times already.
    compute_s = (
        0.0
        if curve is not None and curve.basis == "bytes"
        else flops / (device.ceilings.peak_flops_per_s * _eff(c_curve, flops))
    )
    memory_s = nbytes / (device.ceilings.bandwidth_bytes_per_s * _eff(m_curve, nbytes))
    weights_s = 0.0
    if compute_class:
        weights_s = cold_s
    else:
        memory_s += cold_s
    compute_us, memory_us, weights_us = compute_s * 1e6, memory_s * 1e6, weights_s * 1e6
    overhead = device.node_overhead_us
    if curve is not None and curve.overhead_us is not None:
        overhead = curve.overhead_us
    work = max(compute_us, memory_us, weights_us)
    bound: Bound = (
        "overhead"
        if overhead > work
        else ("compute" if compute_us >= max(memory_us, weights_us) else "memory")
    )
    return NodeTime(
        node.name, node.op_type, cls, flops, nbytes, compute_us, memory_us, overhead, bound,
        weights_us=weights_us,
    )  # fmt: skip


def free_time(node: NodeRecord, why: str) -> NodeTime:
    """A node onnxruntime removes before it runs: no time."""
    return NodeTime(
        node.name, node.op_type, op_class(node), node.flops, node.bytes_total, 0.0, 0.0, 0.0,
        "free", why,
    )  # fmt: skip


def predict_nodes(
    nodes: Sequence[NodeRecord],
    graph_inputs: Iterable[str],
    device: Device,
    *,
    static_shapes: bool = True,
    weight_bytes: int = 0,
) -> tuple[NodeTime, ...]:
    """Every node's time (a control-flow node's is its body nodes', listed apart).

    ``weight_bytes``: the model's; above one core's cache each MatMul and Conv streams its
    weights, above half the last-level cache every node does (``node_time``).
    ``static_shapes``: see ``free_nodes``."""
    free = free_nodes(nodes, graph_inputs, static_shapes)
    cold = device.cache_bytes > 0 and weight_bytes > device.cache_bytes // 2
    streamed = cold or (device.core_cache_bytes > 0 and weight_bytes > device.core_cache_bytes)
    out = []
    seen: dict[tuple[str, int, int, int], NodeTime] = {}
    """(class, FLOPs, bytes, params) -> a node's time: all node_time reads of a node (a
    decoder's layers repeat a few of them)."""
    for i, n in enumerate(nodes):
        if n.op_type in ("If", "Loop", "Scan") and n.domain in ("", "ai.onnx"):
            continue
        if i in free:
            out.append(free_time(n, free[i]))
            continue
        cls = op_class(n)
        key = (cls, n.flops, n.bytes_total, n.params)
        t = seen.get(key)
        if t is None:
            t = seen[key] = node_time(n, device, cls, weights_cold=cold, weights_streamed=streamed)
        elif t.name != n.name or t.op_type != n.op_type:
            t = NodeTime(
                n.name, n.op_type, cls, t.flops, t.bytes, t.compute_us, t.memory_us,
                t.overhead_us, t.bound, t.note, t.weights_us,
            )  # fmt: skip
        out.append(t)
    return tuple(out)


__all__ = [
    "BASIS",
    "CLASSES",
    "NodeTime",
    "free_nodes",
    "node_time",
    "op_class",
    "predict_nodes",
]
