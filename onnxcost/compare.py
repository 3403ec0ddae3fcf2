"""Compare two or more models: totals, op types, an alignment of their compute layers, findings.

Exporters name nodes differently, so layers are aligned by what they compute, never by name:
the sequences of compute nodes (Conv, Gemm, MatMul, attention, RNN and their quantized or
fused forms) are aligned with Needleman-Wunsch. A pair scores by op family (must agree),
MACs ratio, weight shape (equal up to a transpose) and output shape; one node may also
stand for 2 to 4 consecutive nodes of the other model whose MACs add up to exactly its own
(a fused Q/K/V projection against three separate ones). Every other model is aligned with
the first, the baseline.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

import onnx
import onnx.inliner

from onnxcost.analyze import Analysis, analyze
from onnxcost.errors import OnnxcostError, ShapeError, UsageError
from onnxcost.graph import name_nodes
from onnxcost.model import ModelSource, load_model
from onnxcost.records import Convention, NodeRecord, ShapeOut, TensorRecord
from onnxcost.tensors import shape_text

SCHEMA = "onnxcost.compare/1"

AttrValue = int | float | str | tuple[int | float | str, ...]
PairKind = Literal["match", "merge", "only_a", "only_b"]

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
_MAX_MERGE = 4

# Fused ops that another exporter may write as primitive ops: the primitives that must be
# present for the finding (one of each group) and the primitive op types it may list.
_DECOMPOSED: tuple[tuple[str, frozenset[str], tuple[frozenset[str], ...], frozenset[str]], ...] = (
    (
        "LayerNormalization",
        frozenset({"LayerNormalization", "SimplifiedLayerNormalization",
                   "SkipLayerNormalization", "SkipSimplifiedLayerNormalization"}),
        (frozenset({"ReduceMean", "GlobalAveragePool"}), frozenset({"Sqrt", "Rsqrt"})),
        frozenset({"ReduceMean", "GlobalAveragePool", "Sub", "Pow", "Mul", "Sqrt", "Div",
                   "Reciprocal", "Add", "Neg", "ReduceSumSquare"}),
    ),
    (
        "Gelu",
        frozenset({"Gelu", "FastGelu", "BiasGelu", "QuickGelu"}),
        (frozenset({"Erf", "Tanh", "Sigmoid"}),),
        frozenset({"Erf", "Tanh", "Sigmoid", "Mul", "Add", "Div", "Pow"}),
    ),
    (
        "Softmax",
        frozenset({"Softmax", "LogSoftmax"}),
        (frozenset({"Exp"}), frozenset({"ReduceSum"})),
        frozenset({"Exp", "ReduceSum", "ReduceMax", "Sub", "Div", "Log"}),
    ),
)  # fmt: skip

# Non-compute ops whose presence on one side only usually has a known cause.
_ROLES: Mapping[str, str] = {
    "Transpose": "layout",
    "BatchNormalization": "unfused BatchNorm",
    "Pad": "explicit padding",
    "Cast": "type cast",
    "Identity": "identity",
    "Reshape": "reshape",
    "Flatten": "reshape",
    "Squeeze": "reshape",
    "Unsqueeze": "reshape",
}
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")


@dataclass(frozen=True, slots=True)
class ComputeNode:
    """One compute node as the alignment sees it."""

    name: str
    op_type: str
    domain: str
    family: str
    macs: int
    input_shape: ShapeOut
    weight_shape: ShapeOut
    """Shape of the first weight (initializer or Constant) of rank 2 or more; None if none."""
    output_shape: ShapeOut
    bias: Literal["", "inline", "add"]
    """Where the bias goes: '' none, 'inline' an input of the node, 'add' a following Add."""
    attrs: Mapping[str, AttrValue]
    """Attributes with the schema's defaults filled in (and Conv's implied ones)."""

    @property
    def op_label(self) -> str:
        op = self.op_type if not self.domain else f"{self.domain}::{self.op_type}"
        return op + "+Add" if self.bias == "add" else op

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "op_type": self.op_type,
            "domain": self.domain,
            "macs": self.macs,
            "input_shape": _shape_list(self.input_shape),
            "weight_shape": _shape_list(self.weight_shape),
            "output_shape": _shape_list(self.output_shape),
            "bias": self.bias,
            "attributes": {
                k: list(v) if isinstance(v, tuple) else v for k, v in self.attrs.items()
            },
        }


@dataclass(frozen=True, slots=True)
class AlignedPair:
    """A row of the alignment: one node each ('match'), one against several ('merge'), or one side."""

    a: tuple[ComputeNode, ...]
    b: tuple[ComputeNode, ...]
    differences: tuple[str, ...]
    score: float

    @property
    def kind(self) -> PairKind:
        if not self.b:
            return "only_a"
        if not self.a:
            return "only_b"
        return "match" if len(self.a) == len(self.b) == 1 else "merge"

    @property
    def macs_a(self) -> int:
        return sum(n.macs for n in self.a)

    @property
    def macs_b(self) -> int:
        return sum(n.macs for n in self.b)


@dataclass(frozen=True, slots=True)
class Alignment:
    """The compute layers of ``candidate`` aligned with those of ``baseline`` (labels)."""

    baseline: str
    candidate: str
    pairs: tuple[AlignedPair, ...]

    def count(self, kind: PairKind) -> int:
        return sum(1 for p in self.pairs if p.kind == kind)


@dataclass(frozen=True, slots=True)
class OnlyIn:
    """An op type (not a compute op) with more nodes in ``model`` than in the other model."""

    baseline: str
    candidate: str
    model: str
    op_type: str
    domain: str
    count: int
    other_count: int
    role: str
    nodes: tuple[str, ...]
    """Names of ``model``'s nodes of this type when the other model has none."""


@dataclass(frozen=True, slots=True)
class MetricRow:
    """One metric for every model, with its difference in % from the first (None: no base)."""

    key: str
    label: str
    kind: Literal["count", "bytes", "ms", "rate"]
    values: tuple[float | None, ...]

    @property
    def diff_percent(self) -> tuple[float | None, ...]:
        base = self.values[0]
        return tuple(None if i == 0 else _pct(base, v) for i, v in enumerate(self.values))


@dataclass(frozen=True, slots=True)
class OpTypeRow:
    """Static cost of one op type (as written in the files) in every model."""

    op_type: str
    domain: str
    count: tuple[int, ...]
    macs: tuple[int, ...]
    flops: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TimeRow:
    """Measured time of one kernel op type (as onnxruntime ran it: FusedConv, ...) per model."""

    op_type: str
    count: tuple[int | None, ...]
    mean_us: tuple[float | None, ...]
    """Mean time per run; None where the model ran no kernel of this type."""


@dataclass(frozen=True, slots=True)
class BenchSettings:
    """One benchmark setting for every model of a comparison (see ``onnxcost.bench.run_bench``)."""

    provider: str = "cpu"
    runs: int = 100
    warmup: int = 10
    threads: int | None = None
    profile: bool = True
    min_seconds: float = 1.0
    """The timed loop runs ``runs`` times and at least this long."""


@dataclass(frozen=True, slots=True)
class BenchSummary:
    """What a benchmark measured for one model, as the comparison uses it."""

    provider: str
    latency_ms: Mapping[str, float]
    """min, mean, median, p90, p95, p99, max, std."""
    throughput_per_s: float
    runs: int
    noisy: bool
    time_by_op_type_us: Mapping[str, tuple[int, float]] = field(default_factory=dict)
    """Kernel op type -> (kernels, mean time per run in us); empty without a profile."""
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ComparedModel:
    label: str
    path: str | None
    analysis: Analysis
    compute: tuple[ComputeNode, ...]
    facts: _Facts
    bench: BenchSummary | None = None


@dataclass(frozen=True, slots=True)
class _Facts:
    """Structural facts of one model that the findings draw on."""

    op_counts: Mapping[str, int]
    """Node count by op type ('domain::Op' outside the default domain), main graph."""
    nodes_by_op: Mapping[str, tuple[str, ...]]
    input_transposes: tuple[tuple[str, tuple[int, ...]], ...]
    """(node name, perm) of Transposes that read a graph input."""
    output_transposes: tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True)
class Comparison:
    """The result of ``compare``; ``models[0]`` is the baseline."""

    models: tuple[ComparedModel, ...]
    totals: tuple[MetricRow, ...]
    by_op_type: tuple[OpTypeRow, ...]
    alignments: tuple[Alignment, ...]
    only_in: tuple[OnlyIn, ...]
    findings: tuple[str, ...]
    inputs_differ: bool
    convention: Convention = "onnxcost"
    time_by_op_type: tuple[TimeRow, ...] = ()
    """Measured kernel time by op type, side by side (with a profiled bench)."""

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(m.label for m in self.models)

    def worse_than(self, percent: float) -> tuple[str, ...]:
        """One line per metric of a candidate that is worse than the baseline by more than ``percent``.

        Metrics: MACs, FLOPs, params, peak activation, and median latency when benchmarked.
        """
        lines = []
        watched = ("macs", "flops", "params", "peak_activation_bytes", "latency_ms")
        base = self.models[0].label
        for row in self.totals:
            if row.key not in watched:
                continue
            for m, value, pct in zip(
                self.models[1:], row.values[1:], row.diff_percent[1:], strict=True
            ):
                if value is None or pct is None or pct <= percent:
                    continue
                shown = "inf" if pct == float("inf") else f"{pct:.2f}"
                lines.append(
                    f"{m.label} {row.label} {_exact(value, row.kind)} vs {base} "
                    f"{_exact(row.values[0], row.kind)}: +{shown}%, worse by more than {percent:g}%"
                )
        return tuple(lines)

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract ``onnxcost.compare/1``; keys are stable, new ones may be added."""
        benched = any(m.bench is not None for m in self.models)
        return {
            "schema": SCHEMA,
            "convention": self.convention,
            "models": [_model_dict(m) for m in self.models],
            "totals_diff": [
                {
                    "metric": r.key,
                    "label": r.label,
                    "values": list(r.values),
                    "diff_percent": [_json_float(p) for p in r.diff_percent],
                }
                for r in self.totals
            ],
            "by_op_type": [
                {
                    "op_type": r.op_type,
                    "domain": r.domain,
                    "count": list(r.count),
                    "macs": list(r.macs),
                    "flops": list(r.flops),
                }
                for r in self.by_op_type
            ],
            "alignment": [
                {
                    "baseline": al.baseline,
                    "candidate": al.candidate,
                    "kind": p.kind,
                    "a": [n.to_dict() for n in p.a],
                    "b": [n.to_dict() for n in p.b],
                    "macs_a": p.macs_a,
                    "macs_b": p.macs_b,
                    "differences": list(p.differences),
                }
                for al in self.alignments
                for p in al.pairs
            ],
            "only_in": [asdict(o) | {"nodes": list(o.nodes)} for o in self.only_in],
            "findings": list(self.findings),
            "inputs_differ": self.inputs_differ,
            **(
                {
                    "bench_by_op_type": [
                        {"op_type": r.op_type, "count": list(r.count), "mean_us": list(r.mean_us)}
                        for r in self.time_by_op_type
                    ]
                }
                if benched
                else {}
            ),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)


def _json_float(v: float | None) -> float | str | None:
    return "inf" if v == float("inf") else v


def _model_dict(m: ComparedModel) -> dict[str, Any]:
    a = m.analysis
    out: dict[str, Any] = {
        "label": m.label,
        "path": m.path,
        "inputs": [_tensor_dict(t) for t in a.inputs],
        "outputs": [_tensor_dict(t) for t in a.outputs],
        "totals": asdict(a.totals),
        "node_count": a.model.node_count,
        "compute_nodes": len(m.compute),
        "op_counts": dict(m.facts.op_counts),
        "warnings": list(a.warnings),
    }
    if m.bench is not None:
        out["bench"] = {
            "provider": m.bench.provider,
            "latency_ms": dict(m.bench.latency_ms),
            "throughput_per_s": m.bench.throughput_per_s,
            "runs": m.bench.runs,
            "noisy": m.bench.noisy,
            "warnings": list(m.bench.warnings),
        }
    return out


def _tensor_dict(t: TensorRecord) -> dict[str, Any]:
    return {"name": t.name, "dtype": t.dtype, "shape": _shape_list(t.shape)}


def _shape_list(s: ShapeOut) -> list[int | str | None] | None:
    return None if s is None else list(s)


def _pct(base: float | None, value: float | None) -> float | None:
    if base is None or value is None:
        return None
    if base == 0:
        return 0.0 if value == 0 else float("inf")
    return 100.0 * (value - base) / base


def _exact(v: float | None, kind: str) -> str:
    if v is None:
        return "-"
    if kind == "ms":
        return f"{v:.3f} ms"
    if kind == "rate":
        return f"{v:,.1f}/s"
    return f"{int(v):,}" + (" bytes" if kind == "bytes" else "")


# --- loading ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Graph:
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


def _graph_of(proto: onnx.ModelProto) -> _Graph:
    if proto.functions:
        proto = onnx.inliner.inline_local_functions(proto)
    name_nodes(proto.graph)
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
    return _Graph(
        nodes={n.name: n for n in nodes},
        weights=frozenset(weights),
        consumers={k: tuple(v) for k, v in consumers.items()},
        opsets={(o.domain if o.domain != "ai.onnx" else ""): o.version for o in proto.opset_import},
        inputs=inputs,
        outputs=frozenset(vi.name for vi in proto.graph.output),
        symbols=frozenset(symbols),
    )


def _describe_source(source: ModelSource) -> str:
    if isinstance(source, onnx.ModelProto):
        return "an in-memory ModelProto"
    if isinstance(source, bytes | bytearray):
        return f"{len(source)} bytes"
    return str(source)


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
    except onnx.defs.SchemaError:
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
    rec: NodeRecord, node: onnx.NodeProto | None, g: _Graph
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


def _compute_nodes(a: Analysis, g: _Graph) -> tuple[ComputeNode, ...]:
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
            )
        )
    return tuple(out)


def _op_key(op_type: str, domain: str) -> str:
    return op_type if not domain else f"{domain}::{op_type}"


def _perm(node: onnx.NodeProto) -> tuple[int, ...]:
    for a in node.attribute:
        if a.name == "perm":
            return tuple(a.ints)
    return ()


def _facts(a: Analysis, g: _Graph) -> _Facts:
    main = [r for r in a.nodes if not r.graph]
    counts = Counter(_op_key(r.op_type, r.domain) for r in main)
    by_op: dict[str, list[str]] = {}
    for r in main:
        by_op.setdefault(_op_key(r.op_type, r.domain), []).append(r.name)
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
    return _Facts(
        op_counts=dict(sorted(counts.items())),
        nodes_by_op={k: tuple(v) for k, v in by_op.items()},
        input_transposes=tuple(ins),
        output_transposes=tuple(outs),
    )


# --- alignment ----------------------------------------------------------------------------


def _ratio(x: int, y: int) -> float:
    if x == y:
        return 1.0
    if x <= 0 or y <= 0:
        return 0.0
    return min(x, y) / max(x, y)


def _squeezed(s: ShapeOut) -> tuple[str, ...] | None:
    """Dims other than 1, sorted: shapes equal up to layout and unit dims compare equal."""
    if s is None:
        return None
    return tuple(sorted(str(d) for d in s if d != 1))


def _weight_relation(a: ShapeOut, b: ShapeOut) -> Literal["same", "transposed", "different"]:
    if a is None or b is None:
        return "same" if a is None and b is None else "different"
    if tuple(a) == tuple(b):
        return "same"
    if len(a) == len(b) and sorted(map(str, a)) == sorted(map(str, b)):
        return "transposed"
    return "different"


def _similarity(a: ComputeNode, b: ComputeNode) -> float:
    """Pair score: 1 for the family, 2 x MACs ratio, 1 for the weight shape, 0.5 output, 0.25 op."""
    if a.family != b.family:
        return -1.0
    score = 1.0 + 2.0 * _ratio(a.macs, b.macs)
    if _weight_relation(a.weight_shape, b.weight_shape) != "different":
        score += 1.0
    if a.output_shape is not None and _squeezed(a.output_shape) == _squeezed(b.output_shape):
        score += 0.5
    if a.op_type == b.op_type:
        score += 0.25
    return score


def _merge_score(one: ComputeNode, group: Sequence[ComputeNode]) -> float:
    """One node against consecutive nodes of the same family whose MACs sum to exactly its own."""
    if one.macs <= 0 or any(n.family != one.family for n in group):
        return -1.0
    if sum(n.macs for n in group) != one.macs:
        return -1.0
    return 3.0 + (0.25 if all(n.op_type == one.op_type for n in group) else 0.0)


def align(a: Sequence[ComputeNode], b: Sequence[ComputeNode]) -> list[tuple[int, int, int, int]]:
    """Needleman-Wunsch over two compute sequences; gaps cost 0, pairs score by ``_similarity``.

    Returns steps in order as (i, di, j, dj): a[i:i+di] against b[j:j+dj], where one of di,
    dj is 0 for a node on one side only, both 1 for a pair, and one of them 2..4 for a merge.
    """
    n, m = len(a), len(b)
    sim = [[_similarity(x, y) for y in b] for x in a]
    sum_a, sum_b = [0], [0]
    for x in a:
        sum_a.append(sum_a[-1] + x.macs)
    for y in b:
        sum_b.append(sum_b[-1] + y.macs)
    score = [[0.0] * (m + 1) for _ in range(n + 1)]
    back = [[(0, 0)] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        for j in range(m + 1):
            if i == 0 and j == 0:
                continue
            best, step = float("-inf"), (0, 0)
            if i and j and sim[i - 1][j - 1] > 0:
                best, step = score[i - 1][j - 1] + sim[i - 1][j - 1], (1, 1)
            for k in range(2, _MAX_MERGE + 1):  # prefix sums rule out most merges cheaply
                if i >= 1 and j >= k and sum_b[j] - sum_b[j - k] == a[i - 1].macs:
                    s = _merge_score(a[i - 1], b[j - k : j])
                    if s > 0 and score[i - 1][j - k] + s > best:
                        best, step = score[i - 1][j - k] + s, (1, k)
                if j >= 1 and i >= k and sum_a[i] - sum_a[i - k] == b[j - 1].macs:
                    s = _merge_score(b[j - 1], a[i - k : i])
                    if s > 0 and score[i - k][j - 1] + s > best:
                        best, step = score[i - k][j - 1] + s, (k, 1)
            if i and score[i - 1][j] > best:
                best, step = score[i - 1][j], (1, 0)
            if j and score[i][j - 1] > best:
                best, step = score[i][j - 1], (0, 1)
            score[i][j], back[i][j] = best, step
    steps = []
    i, j = n, m
    while i or j:
        di, dj = back[i][j]
        steps.append((i - di, di, j - dj, dj))
        i, j = i - di, j - dj
    steps.reverse()
    return steps


def _fmt_value(v: AttrValue | None) -> str:
    if v is None:
        return "-"
    if isinstance(v, tuple):
        return "[" + ",".join(_fmt_value(x) for x in v) + "]"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _differences(a: ComputeNode, b: ComputeNode) -> tuple[str, ...]:
    out = []
    if a.op_label != b.op_label:
        out.append(f"op {a.op_label} vs {b.op_label}")
    if a.op_type == b.op_type and a.domain == b.domain:
        for key in sorted(set(a.attrs) | set(b.attrs)):
            va, vb = a.attrs.get(key), b.attrs.get(key)
            if va != vb:
                out.append(f"{key} {_fmt_value(va)} vs {_fmt_value(vb)}")
    rel = _weight_relation(a.weight_shape, b.weight_shape)
    if a.op_type != b.op_type or a.domain != b.domain:
        for node in (a, b):
            trans = [f"{k}=1" for k in ("transA", "transB") if node.attrs.get(k) == 1]
            if trans:
                out.append(f"{node.op_type} {' '.join(trans)}")
    if rel != "same":
        what = " (transposed)" if rel == "transposed" else ""
        out.append(
            f"weight {shape_text(a.weight_shape) if a.weight_shape else 'none'} vs "
            f"{shape_text(b.weight_shape) if b.weight_shape else 'none'}{what}"
        )
    # Shapes that differ only by unit dims or order (a flattened batch) are shown, not flagged.
    for what, sa, sb in (
        ("input", a.input_shape, b.input_shape),
        ("output", a.output_shape, b.output_shape),
    ):
        if _squeezed(sa) != _squeezed(sb):
            out.append(f"{what} {shape_text(sa)} vs {shape_text(sb)}")
    return tuple(out)


def _alignment(base: ComparedModel, cand: ComparedModel) -> Alignment:
    pairs = []
    for i, di, j, dj in align(base.compute, cand.compute):
        xa, xb = base.compute[i : i + di], cand.compute[j : j + dj]
        if di == 1 and dj == 1:
            pairs.append(AlignedPair(xa, xb, _differences(xa[0], xb[0]), _similarity(xa[0], xb[0])))
        elif di and dj:
            one, group = (xa[0], xb) if di == 1 else (xb[0], xa)
            diff = f"{di} node{'s' if di > 1 else ''} vs {dj}: MACs add up to the same"
            pairs.append(AlignedPair(xa, xb, (diff,), _merge_score(one, group)))
        else:
            pairs.append(AlignedPair(xa, xb, (), 0.0))
    return Alignment(base.label, cand.label, tuple(pairs))


# --- op types and findings --------------------------------------------------------------


def _by_op_type(models: Sequence[ComparedModel]) -> tuple[OpTypeRow, ...]:
    keys: dict[tuple[str, str], None] = {}
    tables = []
    for m in models:
        table = {(s.domain, s.op_type): s for s in m.analysis.by_op_type}
        tables.append(table)
        keys.update(dict.fromkeys(table))
    rows = []
    for dom, op in keys:
        cells = [t.get((dom, op)) for t in tables]
        rows.append(
            OpTypeRow(
                op_type=op,
                domain=dom,
                count=tuple(c.count if c else 0 for c in cells),
                macs=tuple(c.macs if c else 0 for c in cells),
                flops=tuple(c.flops if c else 0 for c in cells),
            )
        )
    rows.sort(key=lambda r: (-max(r.flops), -max(r.macs), -max(r.count), r.op_type))
    return tuple(rows)


def _only_in(base: ComparedModel, cand: ComparedModel) -> list[OnlyIn]:
    out = []
    ca, cb = base.facts.op_counts, cand.facts.op_counts
    for key in sorted(set(ca) | set(cb)):
        op = key.split("::")[-1]
        if op in FAMILY_OF:
            continue
        na, nb = ca.get(key, 0), cb.get(key, 0)
        if na == nb:
            continue
        more, count, other = (base, na, nb) if na > nb else (cand, nb, na)
        domain = key.split("::")[0] if "::" in key else ""
        out.append(
            OnlyIn(
                baseline=base.label,
                candidate=cand.label,
                model=more.label,
                op_type=op,
                domain=domain,
                count=count,
                other_count=other,
                role=_role(op, more, base if more is cand else cand),
                nodes=more.facts.nodes_by_op.get(key, ()) if other == 0 else (),
            )
        )
    return out


def _role(op: str, more: ComparedModel, fewer: ComparedModel) -> str:
    if op == "Add":

        def bias_adds(m: ComparedModel) -> int:
            return sum(1 for n in m.compute if n.bias == "add")

        if bias_adds(more) > bias_adds(fewer):
            return "bias Add after a MatMul/Conv"
    return _ROLES.get(op, "")


def _layout(perm: tuple[int, ...], at: Literal["input", "output"]) -> str:
    if perm == (0, 3, 1, 2):
        return "NHWC layout" if at == "input" else "NCHW to NHWC"
    if perm == (0, 2, 3, 1):
        return "NCHW to NHWC" if at == "input" else "NHWC layout"
    if perm == (0, 4, 1, 2, 3):
        return "NDHWC layout" if at == "input" else "NCDHW to NDHWC"
    if len(perm) >= 2 and perm[:2] == (1, 0) and list(perm[2:]) == list(range(2, len(perm))):
        return "swaps the first two axes: sequence-first"
    return "a layout change"


def _io_text(m: ComparedModel) -> str:
    return ", ".join(f"{t.name}[{_shape_commas(t.shape)}] {t.dtype}" for t in m.analysis.inputs)


def _shape_commas(s: ShapeOut) -> str:
    return "?" if s is None else ",".join("?" if d is None else str(d) for d in s)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _transpose_findings(base: ComparedModel, cand: ComparedModel) -> list[str]:
    out = []
    for at in ("input", "output"):
        pa = base.facts.input_transposes if at == "input" else base.facts.output_transposes
        pb = cand.facts.input_transposes if at == "input" else cand.facts.output_transposes
        if len(pa) == len(pb):
            continue
        for m, perms, other in ((base, pa, pb), (cand, pb, pa)):
            if len(perms) > len(other):
                kinds = sorted(
                    {
                        f"perm {_fmt_value(p)}: {_layout(p, at)}" if p else "reversed axes"
                        for _n, p in perms
                    }
                )
                rest = f"{len(other)}" if other else "none"
                out.append(
                    f"{m.label} has {_plural(len(perms), 'Transpose')} at the {at} "
                    f"({'; '.join(kinds)}), {_other(m, base, cand)} {rest}"
                )
    inner_a = base.facts.op_counts.get("Transpose", 0) - len(
        {n for n, _ in base.facts.input_transposes + base.facts.output_transposes}
    )
    inner_b = cand.facts.op_counts.get("Transpose", 0) - len(
        {n for n, _ in cand.facts.input_transposes + cand.facts.output_transposes}
    )
    if inner_a != inner_b:
        out.append(
            f"inside the graph, {base.label} has {_plural(inner_a, 'Transpose')}, "
            f"{cand.label} {inner_b}"
        )
    return out


def _other(m: ComparedModel, base: ComparedModel, cand: ComparedModel) -> str:
    return cand.label if m is base else base.label


def _count_finding(base: ComparedModel, cand: ComparedModel, op: str, what: str) -> list[str]:
    na, nb = base.facts.op_counts.get(op, 0), cand.facts.op_counts.get(op, 0)
    if na == nb:
        return []
    more, n, other, k = (base, na, cand, nb) if na > nb else (cand, nb, base, na)
    rest = f"{other.label} has {k}" if k else f"{other.label} has none"
    return [f"{more.label} keeps {n} {op} node{'' if n == 1 else 's'} ({what}); {rest}"]


def _pad_findings(al: Alignment) -> list[str]:
    groups: Counter[tuple[str, str, str, str]] = Counter()
    for p in al.pairs:
        if p.kind != "match":
            continue
        x, y = p.a[0], p.b[0]
        if x.family not in ("conv", "conv_transpose") or x.op_type != y.op_type:
            continue
        pads_a = x.attrs.get("pads", x.attrs.get("auto_pad"))
        pads_b = y.attrs.get("pads", y.attrs.get("auto_pad"))
        if pads_a == pads_b:
            continue
        strides = x.attrs.get("strides")
        if isinstance(strides, tuple) and strides and len(set(strides)) == 1:
            stride = f"stride-{strides[0]}"
        else:
            stride = f"strides {_fmt_value(strides)}"
        groups[(x.op_type, stride, _fmt_value(pads_a), _fmt_value(pads_b))] += 1
    return [
        f"{al.baseline} pads {n} {stride} {op}{'' if n == 1 else 's'} {pa}, {al.candidate} {pb}"
        for (op, stride, pa, pb), n in sorted(groups.items())
    ]


def _attr_findings(al: Alignment) -> list[str]:
    groups: Counter[tuple[str, str, str, str]] = Counter()
    for p in al.pairs:
        if p.kind != "match":
            continue
        x, y = p.a[0], p.b[0]
        if x.op_type != y.op_type or x.domain != y.domain:
            continue
        for key in sorted(set(x.attrs) | set(y.attrs)):
            if key in ("pads", "auto_pad") and x.family in ("conv", "conv_transpose"):
                continue  # _pad_findings
            va, vb = x.attrs.get(key), y.attrs.get(key)
            if va != vb:
                groups[(x.op_type, key, _fmt_value(va), _fmt_value(vb))] += 1
    return [
        f"{_plural(n, f'aligned {op} pair')} differ in {key}: {al.baseline} {va}, {al.candidate} {vb}"
        for (op, key, va, vb), n in sorted(groups.items())
    ]


def _weight_layout(n: ComputeNode) -> str:
    if n.weight_shape is None or len(n.weight_shape) != 2:
        return ""
    if n.op_type in ("Gemm", "FusedGemm"):
        return "weights [out, in], transB=1" if n.attrs.get("transB") == 1 else "weights [in, out]"
    if n.op_type in ("MatMul", "FusedMatMul", "QLinearMatMul", "MatMulInteger"):
        return "weights [in, out]"
    return ""


def _op_findings(al: Alignment) -> list[str]:
    groups: dict[tuple[str, str], list[AlignedPair]] = {}
    for p in al.pairs:
        if p.kind == "match" and p.a[0].op_label != p.b[0].op_label:
            groups.setdefault((p.a[0].op_label, p.b[0].op_label), []).append(p)
    out = []
    for (la, lb), pairs in sorted(groups.items()):
        family = pairs[0].a[0].family
        noun = "dense layer" if family == "dense" else f"{family} layer"
        wa = {_weight_layout(p.a[0]) for p in pairs}
        wb = {_weight_layout(p.b[0]) for p in pairs}
        ta = f" ({wa.pop()})" if len(wa) == 1 and "" not in wa else ""
        tb = f" ({wb.pop()})" if len(wb) == 1 and "" not in wb else ""
        out.append(
            f"{al.baseline} uses {la}{ta} for {_plural(len(pairs), noun)}, {al.candidate} {lb}{tb}"
        )
    return out


def _merge_findings(al: Alignment) -> list[str]:
    out = []
    for p in al.pairs:
        if p.kind != "merge":
            continue
        (one_label, one), (many_label, many) = (
            ((al.baseline, p.a[0]), (al.candidate, p.b))
            if len(p.a) == 1
            else ((al.candidate, p.b[0]), (al.baseline, p.a))
        )
        ops = sorted({n.op_type for n in many})
        out.append(
            f"{one_label} does in one {one.op_type} ({one.name}, {one.macs:,} MACs"
            f"{', weight ' + shape_text(one.weight_shape) if one.weight_shape else ''}) what "
            f"{many_label} does in {len(many)} {'/'.join(ops)} nodes "
            f"({', '.join(n.name for n in many)})"
        )
    return out


def _unmatched_findings(al: Alignment) -> list[str]:
    out = []
    for side, kind in ((al.baseline, "only_a"), (al.candidate, "only_b")):
        nodes = [n for p in al.pairs if p.kind == kind for n in (*p.a, *p.b)]
        if not nodes:
            continue
        other = al.candidate if side == al.baseline else al.baseline
        shown = ", ".join(f"{n.name} ({n.op_type}, {n.macs:,} MACs)" for n in nodes[:5])
        more = f" and {len(nodes) - 5} more" if len(nodes) > 5 else ""
        out.append(
            f"{side} has {_plural(len(nodes), 'compute node')} with no counterpart in {other}: "
            f"{shown}{more}"
        )
    return out


def _decomposed_findings(base: ComparedModel, cand: ComparedModel) -> tuple[list[str], set[str]]:
    out, explained = [], set()
    for name, fused, required, primitives in _DECOMPOSED:
        for whole, split in ((base, cand), (cand, base)):
            n_fused = sum(whole.facts.op_counts.get(op, 0) for op in fused)
            if not n_fused or any(split.facts.op_counts.get(op, 0) for op in fused):
                continue
            counts = split.facts.op_counts
            if not all(any(counts.get(op, 0) for op in group) for group in required):
                continue
            extra = {
                op: counts.get(op, 0) - whole.facts.op_counts.get(op, 0)
                for op in sorted(primitives)
            }
            listed = ", ".join(f"{op} {k:+d}" for op, k in extra.items() if k > 0)
            fused_ops = sorted(op for op in fused if whole.facts.op_counts.get(op, 0))
            out.append(
                f"{split.label} splits {name} into primitive ops ({listed} vs {whole.label}); "
                f"{whole.label} has {n_fused} {'/'.join(fused_ops)} node{'' if n_fused == 1 else 's'}"
            )
            explained |= {op for op, k in extra.items() if k > 0} | set(fused_ops)
    return out, explained


def _totals_finding(base: ComparedModel, cand: ComparedModel) -> str:
    ta, tb = base.analysis.totals, cand.analysis.totals
    parts = []
    for label, va, vb in (("MACs", ta.macs, tb.macs), ("parameters", ta.params, tb.params)):
        if va == vb:
            parts.append(f"the same {label} ({va:,})")
        else:
            pct = _pct(va, vb)
            shown = "inf" if pct == float("inf") else f"{pct:+.2f}"
            parts.append(f"{label} {va:,} vs {vb:,} ({shown}%)")
    return f"{base.label} and {cand.label}: " + " and ".join(parts)


def _status_findings(m: ComparedModel) -> list[str]:
    out = []
    a = m.analysis
    if a.unsupported:
        out.append(
            f"{m.label} has ops with no cost formula, counted as 0: {', '.join(a.unsupported)}"
        )
    unknown = sum(1 for r in a.nodes if r.status == "unknown_shape")
    if unknown:
        out.append(
            f"{m.label} has {_plural(unknown, 'node')} with unresolved shapes, counted as 0; "
            f"its totals are lower bounds"
        )
    return out


def _bench_findings(base: ComparedModel, cand: ComparedModel) -> list[str]:
    if base.bench is None or cand.bench is None:
        return []
    la, lb = base.bench.latency_ms.get("median"), cand.bench.latency_ms.get("median")
    if la is None or lb is None:
        return []
    pct = _pct(la, lb)
    change = "" if pct is None else f" ({pct:+.2f}%)"
    noisy = [m.label for m in (base, cand) if m.bench is not None and m.bench.noisy]
    caveat = (
        f"; timings of {' and '.join(noisy)} are noisy, rerun with more --runs" if noisy else ""
    )
    return [
        f"median latency on {cand.bench.provider}: {base.label} {la:.3f} ms, "
        f"{cand.label} {lb:.3f} ms{change}{caveat}"
    ]


def _findings(models: Sequence[ComparedModel], alignments: Sequence[Alignment]) -> list[str]:
    base = models[0]
    out: list[str] = []
    if any(_io_text(m) != _io_text(base) for m in models[1:]):
        out.append(
            "the models' inputs differ: " + ", ".join(f"{m.label} {_io_text(m)}" for m in models)
        )
    for m in models:
        out += _status_findings(m)
    for cand, al in zip(models[1:], alignments, strict=True):
        out.append(_totals_finding(base, cand))
        out += _transpose_findings(base, cand)
        out += _count_finding(base, cand, "BatchNormalization", "not folded into the convs")
        out += _pad_findings(al)
        out += _attr_findings(al)
        out += _op_findings(al)
        out += _merge_findings(al)
        decomposed, explained = _decomposed_findings(base, cand)
        out += decomposed
        out += _unmatched_findings(al)
        explained |= {"Transpose", "BatchNormalization", "Constant"}
        if _role("Add", cand, base) or _role("Add", base, cand):
            explained.add("Add")  # the bias Adds of MatMul+Add, named by _op_findings
        out += _bench_findings(base, cand)
        for m, other in ((base, cand), (cand, base)):
            only = [
                f"{op} {n}"
                for op, n in m.facts.op_counts.items()
                if op not in explained
                and op.split("::")[-1] not in FAMILY_OF
                and not other.facts.op_counts.get(op)
            ]
            if only:
                out.append(f"op types only in {m.label} (not in {other.label}): {', '.join(only)}")
    return out


# --- the entry point ------------------------------------------------------------------------


def _split_flags(
    graphs: Sequence[_Graph],
    labels: Sequence[str],
    input_shapes: Mapping[str, Sequence[int]],
    dims: Mapping[str, int],
) -> list[tuple[dict[str, Sequence[int]], dict[str, int]]]:
    """The --input-shape / --dim flags that apply to each model; a flag no model knows is an error."""
    for name in input_shapes:
        if not any(name in g.inputs for g in graphs):
            have = "; ".join(
                f"{lab}: {', '.join(g.inputs)}" for lab, g in zip(labels, graphs, strict=True)
            )
            raise ShapeError(f"--input-shape names {name!r}, which no model has; inputs are {have}")
    for sym in dims:
        if not any(sym in g.symbols for g in graphs):
            have = "; ".join(
                f"{lab}: {', '.join(sorted(g.symbols)) or '(none)'}"
                for lab, g in zip(labels, graphs, strict=True)
            )
            raise ShapeError(
                f"--dim {sym}=... matches no model's symbolic dims; symbols are {have}"
            )
    return [
        (
            {k: v for k, v in input_shapes.items() if k in g.inputs},
            {k: v for k, v in dims.items() if k in g.symbols},
        )
        for g in graphs
    ]


def _labels(n: int, labels: Sequence[str] | None) -> tuple[str, ...]:
    if labels is None:
        return tuple(chr(ord("A") + i) if i < 26 else f"M{i + 1}" for i in range(n))
    if len(labels) != n:
        raise UsageError(f"got {len(labels)} labels for {n} models; give one --label per model")
    if len(set(labels)) != n or any(not s.strip() for s in labels):
        raise UsageError("labels must be distinct and non-empty; give one --label per model")
    return tuple(labels)


def _which(i: int, label: str, source: ModelSource) -> str:
    ordinal = _ORDINALS[i] if i < len(_ORDINALS) else f"#{i + 1}"
    return f"model {label} ({ordinal}, {_describe_source(source)})"


def compare(
    models: Sequence[ModelSource],
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    convention: Convention = "onnxcost",
    labels: Sequence[str] | None = None,
    bench: BenchSettings | None = None,
) -> Comparison:
    """Compare ``models`` (paths, bytes, ModelProtos or built-in names); the first is the baseline.

    ``input_shapes`` and ``dims`` apply to every model that has that input or symbol.
    ``labels`` name the models in the report (default A, B, C...). ``bench`` also measures
    every model with onnxruntime under the same settings, one after the other.
    """
    if len(models) < 2:
        raise UsageError(f"compare needs at least two models, got {len(models)}")
    names = _labels(len(models), labels)
    graphs, paths = [], []
    for i, source in enumerate(models):
        try:
            loaded = load_model(source)
        except OnnxcostError as e:
            raise type(e)(f"{_which(i, names[i], source)}: {e}") from e
        graphs.append(_graph_of(loaded.proto))
        paths.append(
            str(loaded.path)
            if loaded.path is not None
            else (str(source) if isinstance(source, str) else None)
        )
    flags = _split_flags(graphs, names, input_shapes or {}, dims or {})
    compared = []
    for i, source in enumerate(models):
        shapes, model_dims = flags[i]
        try:
            result = analyze(source, input_shapes=shapes, dims=model_dims, convention=convention)
        except OnnxcostError as e:
            raise type(e)(f"{_which(i, names[i], source)}: {e}") from e
        compared.append(
            ComparedModel(
                label=names[i],
                path=paths[i],
                analysis=result,
                compute=_compute_nodes(result, graphs[i]),
                facts=_facts(result, graphs[i]),
            )
        )
    if bench is not None:
        measured = []
        for i, (source, m) in enumerate(zip(models, compared, strict=True)):
            shapes, model_dims = flags[i]
            try:
                summary = measure(source, bench, shapes, model_dims, m.analysis)
            except OnnxcostError as e:
                raise type(e)(f"{_which(i, names[i], source)}: {e}") from e
            measured.append(replace(m, bench=summary))
        compared = measured
    base = compared[0]
    alignments = tuple(_alignment(base, c) for c in compared[1:])
    only = [o for c in compared[1:] for o in _only_in(base, c)]
    return Comparison(
        models=tuple(compared),
        totals=_metric_rows(compared),
        by_op_type=_by_op_type(compared),
        alignments=alignments,
        only_in=tuple(only),
        findings=tuple(_findings(compared, alignments)),
        inputs_differ=any(_io_text(m) != _io_text(base) for m in compared[1:]),
        convention=convention,
        time_by_op_type=_time_rows(compared),
    )


def measure(
    source: ModelSource,
    settings: BenchSettings,
    shapes: Mapping[str, Sequence[int]],
    dims: Mapping[str, int],
    analysis: Analysis,
) -> BenchSummary:
    """Benchmark one model with ``settings``, reusing its ``analysis`` (same shapes and dims)."""
    from onnxcost.bench import run_bench

    result = run_bench(
        source,
        provider=settings.provider,
        runs=settings.runs,
        warmup=settings.warmup,
        threads=settings.threads,
        profile=settings.profile,
        min_seconds=settings.min_seconds,
        input_shapes=shapes,
        dims=dims,
        analysis=analysis,
    )
    times = (
        {o.op_type: (o.count, o.mean_us) for o in result.profile.by_op_type}
        if result.profile is not None
        else {}
    )
    lat = result.latency
    return BenchSummary(
        provider=result.provider,
        latency_ms={
            "min": lat.min_ms,
            "mean": lat.mean_ms,
            "median": lat.median_ms,
            "p90": lat.p90_ms,
            "p95": lat.p95_ms,
            "p99": lat.p99_ms,
            "max": lat.max_ms,
            "std": lat.std_ms,
        },
        throughput_per_s=result.throughput_per_s,
        runs=result.runs,
        noisy=result.noisy,
        time_by_op_type_us=times,
        warnings=tuple(w for w in result.warnings if not w.startswith("analysis: ")),
    )


def _time_rows(models: Sequence[ComparedModel]) -> tuple[TimeRow, ...]:
    if all(m.bench is None or not m.bench.time_by_op_type_us for m in models):
        return ()
    ops: dict[str, None] = {}
    for m in models:
        if m.bench is not None:
            ops.update(dict.fromkeys(m.bench.time_by_op_type_us))
    rows = []
    for op in ops:
        cells = [None if m.bench is None else m.bench.time_by_op_type_us.get(op) for m in models]
        rows.append(
            TimeRow(
                op_type=op,
                count=tuple(None if c is None else c[0] for c in cells),
                mean_us=tuple(None if c is None else c[1] for c in cells),
            )
        )
    rows.sort(key=lambda r: (-max(t or 0.0 for t in r.mean_us), r.op_type))
    return tuple(rows)


_TOTALS: tuple[tuple[str, str, Literal["count", "bytes"]], ...] = (
    ("macs", "MACs", "count"),
    ("flops", "FLOPs", "count"),
    ("params", "params", "count"),
    ("param_bytes", "param bytes", "bytes"),
    ("bytes_read", "bytes read", "bytes"),
    ("bytes_written", "bytes written", "bytes"),
    ("peak_activation_bytes", "peak activation", "bytes"),
)


def _metric_rows(models: Sequence[ComparedModel]) -> tuple[MetricRow, ...]:
    rows = [
        MetricRow(key, label, kind, tuple(getattr(m.analysis.totals, key) for m in models))
        for key, label, kind in _TOTALS
    ]
    rows.append(
        MetricRow(
            "node_count", "nodes", "count", tuple(m.analysis.model.node_count for m in models)
        )
    )
    rows.append(
        MetricRow("compute_nodes", "compute nodes", "count", tuple(len(m.compute) for m in models))
    )
    if any(m.bench is not None for m in models):
        rows.append(
            MetricRow(
                "latency_ms",
                "latency (median)",
                "ms",
                tuple(
                    None if m.bench is None else m.bench.latency_ms.get("median") for m in models
                ),
            )
        )
        rows.append(
            MetricRow(
                "throughput_per_s",
                "throughput",
                "rate",
                tuple(None if m.bench is None else m.bench.throughput_per_s for m in models),
            )
        )
    return tuple(rows)


__all__ = [
    "SCHEMA",
    "AlignedPair",
    "Alignment",
    "BenchSettings",
    "BenchSummary",
    "ComparedModel",
    "Comparison",
    "ComputeNode",
    "MetricRow",
    "OnlyIn",
    "OpTypeRow",
    "TimeRow",
    "align",
    "compare",
    "measure",
]
