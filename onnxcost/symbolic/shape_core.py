"""The base of the symbolic shape pass (``symbolic.shapes``, ``symbolic.more_shapes``,
``symbolic.contrib``): its result, its error, and the helpers every rule reads inputs with."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from onnxcost.errors import OnnxcostError
from onnxcost.symbolic.domain import _sign, within
from onnxcost.symdim import Dim, SymDim, as_dim, sym_max, sym_min

Shape = tuple[Dim, ...]


class Floats(tuple[float, ...]):
    """A float tensor's values: a tuple of its own type, so that a memo keeps it apart from
    an integer tensor's."""

    __slots__ = ()


class _UncarriedError(OnnxcostError):
    """A node this pass cannot carry, and why."""


@dataclass
class SymbolicShapes:
    """The result: shapes and values by tensor name, and the nodes not carried."""

    shapes: dict[str, Shape] = field(default_factory=dict)
    values: dict[str, tuple[Dim, ...]] = field(default_factory=dict)
    """Small integer tensors' values, flattened (a scalar: one entry)."""
    floats: dict[str, Floats] = field(default_factory=dict)
    """Small float tensors stored in the model (a Resize's scales), flattened; never shapes."""

    def known(self, name: str) -> tuple[Dim, ...] | Floats | None:
        """``name``'s value, integer or float, where known (a memo key's part); an empty
        one is known too (``x.shape[2:]`` of a 2-D x: torch's shape arithmetic concatenates
        it)."""
        value = self.values.get(name)
        return value if value is not None else self.floats.get(name)

    def keep(self, name: str, value: tuple[Dim, ...] | Floats | None) -> None:
        """Store ``value`` (``known``'s) as ``name``'s, in the dict of its kind."""
        if isinstance(value, Floats):
            self.floats[name] = value
        elif value is not None:
            self.values[name] = value

    uncarried: list[tuple[str, str, str]] = field(default_factory=list)
    """(node name, op type, reason) of every node not carried."""
    assumed: dict[SymDim, str] = field(default_factory=dict)
    """Conditions ``c >= 0``, each true wherever every symbol is at least 1, under which a
    rule wrote a division that ONNX rounds toward 0 in its readable form, the plain floor (a
    Conv's output size ``(h - 1) // 2 + 1``: ``trunc_div``), each with the first tensor whose
    shape took it. At a symbol's 0 the walk's shapes are ONNX's where each still holds.
    NB: recorded where a class is computed, so a walk given another walk's memo
    (``node_costs(memo=...)``, the walks at the 0s) has those of its new classes only."""
    opset: int = 0
    """The model's ONNX opset (a pool's ceil_mode rounds otherwise from 22), 0 if unknown."""

    def warnings(self) -> list[str]:
        return [
            f"node {name!r} ({op}): its shape is not carried symbolically ({why}); the costs "
            f"downstream of it come from sampling"
            for name, op, why in self.uncarried
        ]


def _value(out: SymbolicShapes, name: str) -> tuple[Dim, ...]:
    if name not in out.values:
        raise _UncarriedError(f"the value of input {name!r} is not known")
    return out.values[name]


def _selected(
    values: tuple[Dim, ...],
    shape: Shape,
    ranges: Sequence[range],
    order: Sequence[int] | None = None,
) -> tuple[Dim, ...] | None:
    """The known ``values`` (flat, row-major) of a tensor of constant ``shape`` at the
    indices ``ranges`` gives each dim, the dims walked in ``order`` (a Transpose's perm;
    default as they are): a Slice's or a Transpose's value (F.pad's pads, reversed by a
    Slice of step -1 over [n, 2], transposed, as the TorchScript exporter writes them).
    None where the shape is not constant or the values are not all of it."""
    dims = [d for d in shape if isinstance(d, int)]
    if len(dims) != len(shape) or len(values) != math.prod(dims):
        return None
    order = list(range(len(dims))) if order is None else list(order)
    strides = [math.prod(dims[k + 1 :]) for k in range(len(dims))]
    return tuple(
        values[sum(i * strides[k] for i, k in zip(index, order, strict=True))]
        for index in itertools.product(*(ranges[k] for k in order))
    )


def _broadcast(shapes: Sequence[Shape]) -> Shape:
    rank = max(len(s) for s in shapes)
    result: list[Dim] = []
    for k in range(rank):
        found: Dim = 1
        for s in shapes:
            j = k - (rank - len(s))
            if j < 0:
                continue
            d = s[j]
            if d == 1:
                continue
            if found == 1:
                found = d
            elif found != d:
                if isinstance(found, int) and isinstance(d, SymDim):
                    continue  # a valid model: the symbol is found there
                if isinstance(d, int) and isinstance(found, SymDim):
                    found = d
                    continue
                # min(positions, seq) against seq: equal wherever the model is valid (seq
                # within its positions); the unbounded one is kept.
                if (
                    isinstance(d, SymDim)
                    and isinstance(found, SymDim)
                    and found.unbounded() == d.unbounded()
                ):
                    found = d.unbounded()
                    continue
                if isinstance(d, SymDim) and isinstance(found, SymDim) and _alike(found, d):
                    continue
                raise _UncarriedError(f"broadcast of {found} and {d}")
        result.append(found)
    return tuple(result)


def _alike(p: SymDim, q: SymDim) -> bool:
    """Whether ``p`` and ``q`` are one dim wherever every symbol is at least 1, though written
    unlike: a causal mask's ``min(seq, seq + min(1, seq))`` rows against ``seq`` (the walk
    at a symbol's 0 walks that point again, with the 0 in place)."""

    return within(p - q, sorted(p.symbols | q.symbols), None) == 0


def trunc_div(out: SymbolicShapes, n: Dim, s: int, name: str) -> Dim:
    """``n / s`` rounded toward 0 for an int ``s`` >= 1, as ONNX divides (C++'s integer
    division: a Conv's or pool's output size, an integer Div), exact wherever every symbol is
    at least 1 (``domain._sign`` decides), in the simplest form that is:

    - ``n // s`` where n >= 0 there (a Conv 3x3, stride 2, pad 1: ``(h - 1) // 2``);
    - ``max(s, n + s) // s - 1``, the floor of ``max(0, n) / s``, where n > -s (a 2x2 pool,
      stride 2: ``max(2, h) // 2 - 1``);
    - that less 1 where n <= -s, ``... - min(1, max(0, 1 - s - n))``, where n > -2 s (a 3x3
      Conv, stride 2, no pads: ``trunc((h - 3) / 2)`` is -1 at h = 1; the indicator is
      written so that ``within`` leaves it as it is, exact at h = 0 too);
    - else ``max(0, n) // s - max(0, -n) // s``, exact for every integer n.

    The first three hold only where their condition (n >= 0, n + s - 1 >= 0, n + 2 s - 1 >=
    0) does: it goes to ``out.assumed`` under ``name`` for the walk's check at a symbol's 0
    (``onewalk``)."""
    n = as_dim(n)
    if isinstance(n, int):
        return _trunc(n, s)
    if s == 1:
        return n
    symbols = sorted(n.symbols)
    for k, condition in enumerate((n, n + (s - 1), n + (2 * s - 1))):
        if _sign(condition, symbols, None) != 1:
            continue
        out.assumed.setdefault(condition, name)
        if k == 0:
            return as_dim(n // s)
        floor = SymDim.of(sym_max(s, n + s)) // s - 1  # floor(max(0, n) / s)
        return as_dim(floor if k == 1 else floor - sym_min(1, sym_max(0, 1 - s - n)))
    return as_dim(SymDim.of(sym_max(0, n)) // s - SymDim.of(sym_max(0, -n)) // s)


def _trunc(n: int, s: int) -> int:
    """n / s rounded toward 0 (C++'s integer division), s >= 1."""
    return n // s if n >= 0 else -(-n // s)


def _ints(attrs: Mapping[str, object], key: str, default: list[int]) -> list[int]:
    value = attrs.get(key)
    return [int(v) for v in value] if isinstance(value, list) else default


def _axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a


def _matmul_shape(a: Shape, b: Shape) -> Shape:
    """numpy matmul's output shape of ``a`` and ``b`` (1-D operands, batch broadcasting)."""
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    result: Shape = (*_broadcast([a2[:-2], b2[:-2]]), a2[-2], b2[-1])
    if len(a) == 1:
        result = (*result[:-2], result[-1])
    if len(b) == 1:
        result = result[:-1]
    return result


__all__ = ["Floats", "Shape", "SymbolicShapes", "trunc_div"]
