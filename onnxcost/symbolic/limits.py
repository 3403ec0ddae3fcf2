"""What a model allows its symbols: a stored position table (``load.positions.position_limit``)
bounds the positions a sequence and its cache may reach, so the points ``--symbolic`` checks
its formulas at stay within it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import onnx

from onnxcost.load.positions import position_limit
from onnxcost.symbolic.dims import _derived_names, _standalone

if TYPE_CHECKING:
    from onnxcost.load.graph import GraphView


@dataclass(frozen=True, slots=True)
class PositionLimit:
    """The model's positions and the symbols that count them."""

    positions: int
    """The rows of the model's position table."""
    symbols: tuple[str, ...]
    """The free symbols whose sum is a position (``seq``, ``past_seq``)."""
    budget: int
    """What the symbols may sum to: ``positions`` less the position dims fixed by --dim."""

    def warning(self) -> str:
        summed = " + ".join(self.symbols)
        return (
            f"the model has {self.positions} positions (its position table): the formulas were "
            f"checked at {summed} <= {self.budget} and hold there, not beyond"
        )


def position_symbols(
    proto: onnx.ModelProto,
    input_shapes: Mapping[str, Sequence[int]],
) -> tuple[str, ...]:
    """The dim_params that name a graph input's dim after its first (a sequence, a cache
    length), directly or inside a derived dim (``past_seq + seq``). NB: a heuristic: the
    batch is the first dim of every input that has it; a symbol used first anywhere (a
    sequence-major layout) is taken as a batch."""
    first: set[str] = set()
    later: dict[str, None] = {}
    standalone = _standalone(proto)
    inits = {t.name for t in proto.graph.initializer}
    for vi in proto.graph.input:
        if vi.name in inits or vi.name in input_shapes:
            continue
        for k, d in enumerate(vi.type.tensor_type.shape.dim):
            param = d.dim_param if d.HasField("dim_param") else ""
            if not param:
                continue
            names = [param] if param.isidentifier() else _derived_names(param, standalone) or []
            if k == 0:
                first.update(names)
            else:
                later.update(dict.fromkeys(names))
    return tuple(s for s in later if s not in first)


def find_limit(
    proto: onnx.ModelProto,
    input_shapes: Mapping[str, Sequence[int]],
    dims: Mapping[str, int],
    symbols: Sequence[str],
    view: GraphView | None = None,
) -> PositionLimit | None:
    """The position limit on ``symbols``, or None where the model has no position table or
    none of ``symbols`` counts positions. ``view``: the main graph's index, read in place of
    the nodes' fields (``position_limit``)."""
    positions = position_limit(proto, view)
    if positions is None:
        return None
    counted = position_symbols(proto, input_shapes)
    limited = tuple(s for s in symbols if s in counted)
    if not limited:
        return None
    fixed = sum(dims[s] for s in counted if s in dims)
    return PositionLimit(positions, limited, positions - fixed)
