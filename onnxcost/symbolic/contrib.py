"""The symbolic walk's shapes of the ops onnxcost has its own output-shape rules for
(``onnxcost.shapes.rules``: onnxruntime's com.microsoft contrib ops, the quantizer's QLinear*
ops, LayerNormalization's statistics), from those same rules: each is called with inputs
whose shapes have SymDims (``_SymTensor``), so its arithmetic (sums, products, floor and
ceil divisions by an int) builds the symbolic dims, and the concrete analysis and the walk
cannot disagree on a rule. A rule that needs more than that (a comparison of a symbolic dim,
a division by one) raises, and the node is not carried.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import onnx

from onnxcost.load.tensors import TensorInfo, UnknownShapeError, tensor_bytes
from onnxcost.shapes.rules import Rule
from onnxcost.symbolic.shape_core import Shape, SymbolicShapes, _UncarriedError
from onnxcost.symdim import Dim, SymDim, as_dim


class _SymTensor(TensorInfo):
    """A TensorInfo whose shape has SymDims: ``concrete_shape``, ``numel`` and ``nbytes`` give
    them to a cost formula or a shape rule; ``known_numel`` and ``known_nbytes`` stay -1 (not
    a concrete count)."""

    __slots__ = ("sym_shape",)

    def __init__(self, name: str, elem_type: int, shape: Shape) -> None:
        super().__init__(name, elem_type, None)
        self.sym_shape = shape

    def renamed(self, name: str) -> _SymTensor:
        return _SymTensor(name, self.elem_type, self.sym_shape)

    @property
    def concrete_shape(self) -> tuple[int, ...]:
        return self.sym_shape  # type: ignore[return-value]

    @property
    def numel(self) -> int:
        return math.prod(self.sym_shape)  # type: ignore[arg-type]

    @property
    def nbytes(self) -> int:
        return tensor_bytes(self.numel, self.elem_type)


def carry_by_rule(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    rule: Rule,
    shapes: Sequence[Shape | None],
    elems: Sequence[int],
) -> tuple[int, ...]:
    """Carry ``node``'s output shapes into ``out`` by onnxcost's ``rule`` for it, given its
    inputs' shapes and element types (0 where unknown: the rule's default); returns each
    output's element type as the rule gives it (0 for an output it does not type).
    NB: the rule is given opset 1; only Dropout's reads it, and Dropout is not routed here."""
    ins = [
        None if s is None else _SymTensor(name, elems[k] if k < len(elems) else 0, s)
        for k, (name, s) in enumerate(zip(node.input, shapes, strict=False))
    ]
    try:
        typed = rule(node, 1, ins)
    except (
        UnknownShapeError,
        IndexError,
        ValueError,
        ZeroDivisionError,
        TypeError,
        OverflowError,
    ) as e:
        raise _UncarriedError(f"onnxcost's rule for it needs more ({type(e).__name__})") from e
    types = [0] * len(node.output)
    for index, elem, shape in typed:
        if index < len(node.output) and node.output[index] and shape is not None:
            out.shapes[node.output[index]] = tuple(_dim(d) for d in shape)
            types[index] = elem
    return tuple(types)


def _dim(d: object) -> Dim:
    """A rule's output dim as the walk keeps it (an int where it is one)."""
    if isinstance(d, SymDim) or type(d) is int:
        return as_dim(SymDim.of(d))
    raise _UncarriedError(f"onnxcost's rule for it gives the dim {d!r}")


__all__ = ["carry_by_rule"]
