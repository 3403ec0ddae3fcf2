"""The cost formulas of costs/ evaluated over symbolic shapes (issue 22, a first slice): each
node's MACs and FLOPs as ``SymDim``s in the model's symbols, from one walk of the symbolic
shape pass (``symbolic.shapes``) and one call of the node's own registered formula.

The registered formula is not restated here: it is called with tensors whose shapes are
SymDims (``_SymTensor``), so the same arithmetic (``math.prod``, products, sums) builds the
polynomial. A formula that needs more than that (a comparison of a symbolic dim, a value)
raises (a SymDim has no truth value), and the node gets no formula (None) with the reason.
NB: a formula's comparison of a symbolic dim with 1 (``d == 1``: a broadcast) is False, so
the polynomials hold where every symbol is at least 2; at 0 and 1 a formula may branch
otherwise, and the sampler's checks there are still needed. Not yet used by ``--symbolic``,
which still finds its formulas by sampling; bytes are not carried yet.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import onnx

from onnxcost.costs import REGISTRY
from onnxcost.costs._context import OpContext, TensorInfo
from onnxcost.symbolic.shapes import Shape, SymbolicShapes, symbolic_shapes
from onnxcost.symdim import Dim, SymDim, as_dim


class _SymTensor(TensorInfo):
    """A TensorInfo whose shape is SymDims: ``concrete_shape`` and ``numel`` give them to the
    formula; ``known_numel`` and ``known_nbytes`` stay -1 (not a concrete count)."""

    __slots__ = ("sym_shape",)

    def __init__(self, name: str, elem_type: int, shape: Shape) -> None:
        super().__init__(name, elem_type, None)
        self.sym_shape = shape

    @property
    def concrete_shape(self) -> tuple[int, ...]:
        return self.sym_shape  # type: ignore[return-value]

    @property
    def numel(self) -> int:
        return math.prod(self.sym_shape)  # type: ignore[arg-type]


@dataclass
class NodeCosts:
    """Per node (graph order), its MACs and FLOPs as Dims, or None with a reason."""

    macs: list[Dim | None] = field(default_factory=list)
    flops: list[Dim | None] = field(default_factory=list)
    reasons: dict[int, str] = field(default_factory=dict)
    shapes: SymbolicShapes | None = None


def _types(proto: onnx.ModelProto) -> dict[str, int]:
    g = proto.graph
    out = {t.name: t.data_type for t in g.initializer}
    for vi in (*g.input, *g.value_info, *g.output):
        out.setdefault(vi.name, vi.type.tensor_type.elem_type)
    return out


def _tensors(
    names: Sequence[str], found: SymbolicShapes, types: dict[str, int]
) -> tuple[_SymTensor | None, ...]:
    return tuple(
        _SymTensor(n, types.get(n, onnx.TensorProto.FLOAT), found.shapes[n])
        if n and n in found.shapes
        else None
        for n in names
    )


def node_costs(proto: onnx.ModelProto) -> NodeCosts:
    """Every node's MACs and FLOPs over the symbolic shapes of ``proto``."""
    found = symbolic_shapes(proto)
    types = _types(proto)
    opsets = {(o.domain or ""): o.version for o in proto.opset_import}
    out = NodeCosts(shapes=found)
    uncarried = {name for name, _op, _why in found.uncarried}
    for i, node in enumerate(proto.graph.node):
        macs: Dim | None = None
        flops: Dim | None = None
        domain = "" if node.domain == "ai.onnx" else node.domain
        spec = REGISTRY.lookup(domain, node.op_type, opsets.get(domain, 1))
        name = node.name or f"{node.op_type}_{i}"
        if spec is None:
            out.reasons[i] = "no cost formula registered"
        elif spec.zero:
            macs = flops = 0
        elif name in uncarried or any(n and n not in found.shapes for n in node.input):
            out.reasons[i] = "its shapes are not carried"
        else:
            ctx = OpContext(
                node,
                opsets.get(domain, 1),
                _tensors(node.input, found, types),
                _tensors(node.output, found, types),
            )
            try:
                cost = spec.formula(ctx)
                macs = as_dim(SymDim.of(cost.macs))
                flops = as_dim(SymDim.of(cost.flops))
            except Exception as e:  # any formula may need a concrete dim somewhere
                out.reasons[i] = f"its formula needs concrete dims ({type(e).__name__})"
        out.macs.append(macs)
        out.flops.append(flops)
    return out


__all__ = ["NodeCosts", "node_costs"]
