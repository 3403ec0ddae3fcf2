"""A symbol's least value (issue 22): the formulas of a model that is valid only from some size
on. wav2vec2's feature extractor (a Conv of kernel 10 and stride 5, then one of kernel 3 and
stride 2) leaves ``floor(length / 10) - 1`` frames: none below a length of 20.

``onewalk`` and ``search`` prove their formulas where every symbol is at least 1 (and at the
0s the model allows). A symbol s whose least value is L > 1 is walked as ``s + (L - 1)``
(``offsets``: s -> L - 1): the walk's s is at least 1 exactly where the model's is at least L,
so every check runs as it is, its concrete analyses at the model's values (the walk's plus
the offset); the formulas found are then put back in the model's s (``formulas._unshifted``:
s - (L - 1) for s, exact for polynomials and for the floors, mins and maxes of them), and the analysis
reported is the one at the least point. The least values are given (``--dim length>=400``,
``analyze(..., least=...)``) or found from the walk (``least_from_floors``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from onnxcost.errors import ShapeError
from onnxcost.shapes.flags import _check_dim_value
from onnxcost.symbolic.domain import _has_floor
from onnxcost.symbolic.limits import PositionLimit
from onnxcost.symdim import Dim, SymDim

_MAX_LEAST = 2**40
"""The largest least value searched for: past it a size that stays below 1 is no input size."""


@dataclass(frozen=True)
class Least:
    """Least values the walk found the model to need (``least_from_floors``), by symbol, and
    why each: the tensor whose size is below 1 under it."""

    values: dict[str, int]
    why: dict[str, str]


def checked_least(
    least: Mapping[str, int], symbols: Sequence[str], dims: Mapping[str, int]
) -> dict[str, int]:
    """``least`` (symbol -> its least value, as ``--dim length>=400`` gives it), checked: each
    a symbol of the model, not fixed by ``dims``, an integer from 1 to 2**62; those above 1.
    ShapeError naming the flag otherwise."""
    out: dict[str, int] = {}
    for sym, value in least.items():
        flag = f"--dim {sym}>={value}"
        _check_dim_value(value, flag)
        if sym in dims:
            raise ShapeError(f"{flag}: {sym} is set by --dim {sym}={dims[sym]}; give one of them")
        if sym not in symbols:
            known = ", ".join(symbols) or "none"
            raise ShapeError(
                f"{flag} matches no free symbolic dim of the inputs; the model's symbols are: "
                f"{known}"
            )
        if value < 1:
            raise ShapeError(f"{flag}: a least value is 1 or more (0 is checked where allowed)")
        if value > 1:
            out[sym] = int(value)
    return out


def least_from_floors(
    shapes: Mapping[str, tuple[Dim, ...]], symbols: Sequence[str], offsets: Mapping[str, int]
) -> Least | None:
    """The least values of ``symbols`` at which every size in ``shapes`` (a walk's, over
    symbols each from 1 and walked plus ``offsets``) that has a floor is at least 1, where one
    is below 1 at every symbol = 1: each such size raises the first of its symbols that makes
    it 1 or more, searched as a size that grows with its symbols (a Conv's or pool's output
    size, a frame count computed in the graph: so that one made 1 or more stays so as others
    are raised). The values are the model's (the offsets added); ``Least.why`` names, per
    symbol, the size that set it and its value just below. None where every such size is at
    least 1 at the 1s, or one stays below 1 up to 2**40. Not a proof: the formulas are then
    found and checked from these values as from 1."""
    point = dict.fromkeys(symbols, 1)
    why: dict[str, str] = {}
    for name, shape in shapes.items():
        for d in shape:
            if isinstance(d, int) or d.is_polynomial or not d.symbols <= point.keys():
                continue
            if not _has_floor(d) or d.evaluate(point) >= 1:
                continue
            for sym in sorted(d.symbols, key=symbols.index):
                found = _least_where(d, point, sym)
                if found is not None:
                    below = d.evaluate({**point, sym: found - 1})
                    point[sym] = found
                    at = found - 1 + offsets.get(sym, 0)
                    why[sym] = f"tensor {name!r} has a dim of {below} at {sym}={at}"
                    break
            else:
                return None
    if not why:
        return None
    values = {s: v + offsets.get(s, 0) for s, v in point.items()}
    return Least({s: v for s, v in values.items() if v > 1}, why)


def _least_where(d: SymDim, point: Mapping[str, int], sym: str) -> int | None:
    """The least value of ``sym`` above ``point[sym]`` where ``d`` (below 1 at ``point``, taken
    as growing with ``sym``) is at least 1, the other symbols at ``point``: doubling, then
    halving; None past 2**40."""
    low, high = point[sym], max(2, 2 * point[sym])
    while d.evaluate({**point, sym: high}) < 1:
        low, high = high, 2 * high
        if high > _MAX_LEAST:
            return None
    while high - low > 1:  # d is below 1 at low, at least 1 at high
        mid = (low + high) // 2
        if d.evaluate({**point, sym: mid}) >= 1:
            high = mid
        else:
            low = mid
    return high


def offsets_of(least: Mapping[str, int]) -> dict[str, int]:
    """Symbol -> what the walk adds to it (its least value less 1), for those above 1."""
    return {s: v - 1 for s, v in least.items() if v > 1}


def walked_inputs(offsets: Mapping[str, int]) -> dict[str, Dim]:
    """The input dims of the walk for the symbols with an offset: ``s + offset``."""
    return {s: SymDim.of(s) + off for s, off in offsets.items()}


def model_point(values: Mapping[str, int], offsets: Mapping[str, int]) -> dict[str, int]:
    """A point of the walk's symbols as the model's values: each plus its offset."""
    return {s: v + offsets.get(s, 0) for s, v in values.items()}


def walked_limit(limit: PositionLimit | None, offsets: Mapping[str, int]) -> PositionLimit | None:
    """The model's position limit over the walk's symbols: the budget less the offsets of
    the symbols it counts."""
    if limit is None or not offsets:
        return limit
    return replace(limit, budget=limit.budget - sum(offsets.get(s, 0) for s in limit.symbols))


__all__ = [
    "Least",
    "checked_least",
    "least_from_floors",
    "model_point",
    "offsets_of",
    "walked_inputs",
    "walked_limit",
]
