"""The peak of live activation bytes as a formula (``formulas["peak_activation_bytes"]``).

A concrete analysis finds the peak by liveness over the topological order
(``analysis.liveness.peak_activation``): a tensor is live from the step that writes it (a
graph input from the first) to the last step that reads it (a graph output to the last),
weights and tensors of unknown size do not count, and the peak is the largest sum of live
bytes at one step. Here the same liveness runs over the one walk's tensors (each size a
polynomial in the symbols), and the peak is their ``Maximum``: the one step that is at
least every other over the model's domain, or the ``max`` of a few (on a decoder the
attention scores, ``batch·heads·seq²``, overtake the MLP's ``batch·seq·4·hidden`` as seq
grows). Only the steps that can be largest are candidates: a step that frees nothing
before the next one adds is at most that next one, and a step that adds nothing is at most
the one before it.

The formula is exact by construction where the walk's shapes are (each node's bytes written
are checked against a concrete analysis by ``onewalk``); it is checked at every symbol = 1
against the analysis reported, and the property test compares it with concrete analyses at
random points and at each symbol's 0.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from onnxcost.symbolic.domain import _rising
from onnxcost.symbolic.maximum import MAX_PEAK_TERMS, Maximum
from onnxcost.symdim import Dim, SymDim, _Monomial, as_dim

if TYPE_CHECKING:
    from onnxcost.prepare import PreparedModel
    from onnxcost.symbolic.limits import PositionLimit

KEY = "peak_activation_bytes"
"""The key of the peak's formula among ``SymbolicCosts.totals``."""


def peak_formula(
    source: PreparedModel,
    nbytes: Callable[[str], Dim | None],
    weights: Collection[str],
    symbols: tuple[str, ...],
    limit: PositionLimit | None,
    probe: Mapping[str, int],
    zeros: Sequence[str],
    at_one: int,
    sizes_missed: bool = False,
) -> Dim | str:
    """The peak as a Dim in ``symbols``, or why there is none (for a warning). ``nbytes``: each
    tensor's bytes as the walk sized it (``node_costs._Types.nbytes``: None where it has no
    such tensor, < 0 where its size is not concrete); ``weights``: the tensors computed from
    constants only; ``probe``: a point past 1 (``Maximum``'s); ``zeros``: the symbols whose
    0 the model allows; ``at_one``: the peak of the analysis reported (every symbol = 1);
    ``sizes_missed``: a node's walked bytes written missed a concrete analysis (at 1, or at
    a symbol's 0: its warning says which), so the walk's sizes, and their peak, are not the
    model's there."""
    if sizes_missed:  # the walk's sizes are not the model's somewhere: nor is their peak
        return "a node's walked bytes written miss a concrete analysis (see its warning)"
    steps = _candidates(source, nbytes, weights)
    maximum = Maximum(symbols, limit, probe, zeros)
    peak: Dim = maximum(steps) if steps else 0  # type: ignore[arg-type]
    if not maximum.decided:
        return (
            f"no {MAX_PEAK_TERMS} steps or fewer are proven to bound the others' live bytes "
            f"as {', '.join(symbols)} vary"
        )
    ones = dict.fromkeys(symbols, 1)
    got = peak if isinstance(peak, int) else peak.evaluate(ones)
    if got != at_one:
        return (
            f"the walk's peak, {got:,} bytes at {', '.join(f'{s}=1' for s in symbols)}, is not "
            f"the analysis' {at_one:,} " + "(please report it)"
        )
    return peak


def _candidates(
    source: PreparedModel, nbytes: Callable[[str], Dim | None], weights: Collection[str]
) -> list[Dim]:
    """The live bytes at each step that can be the peak, as ``liveness.peak_activation``
    counts them (its loop, over Dims): a step that adds a tensor, where the next step frees
    one (or it is the last); less any whose every coefficient another's is at least
    (``_skyline``)."""
    view, graph = source.view, source.proto.graph
    n = len(view.order)
    if n == 0:
        return []
    last_use, outputs = view.last_use, {vi.name for vi in graph.output}
    # Each size as (monomial index, coefficient) pairs; live bytes as one coefficient a
    # monomial, changed in place: a step's SymDim is made only where it is a candidate.
    index: dict[_Monomial, int] = {}
    sizes: dict[SymDim, list[tuple[int, int]]] = {}
    added: dict[int, list[tuple[int, int]]] = {}
    freed: dict[int, list[tuple[int, int]]] = {}
    graph_inputs = (-1, tuple(vi.name for vi in graph.input))
    for k, written in (graph_inputs, *enumerate(view.outputs)):
        start = k if k > 0 else 0
        for tensor in written:
            if not tensor or tensor in weights:
                continue
            terms = _bytes(nbytes(tensor), sizes, index)
            if terms:  # else unknown size, or empty
                end = n - 1 if tensor in outputs else max(last_use.get(tensor, start), start)
                added.setdefault(start, []).extend(terms)
                freed.setdefault(end + 1, []).extend(terms)
    live = [0] * len(index)
    steps: list[tuple[int, ...]] = []
    for k in sorted(added.keys() | freed.keys()):
        if k == n:
            break
        for i, c in added.get(k, ()):
            live[i] += c
        for i, c in freed.get(k, ()):
            live[i] -= c
        if k in added and (k == n - 1 or k + 1 in freed):
            steps.append(tuple(live))
    monomials = list(index)
    kept = _skyline(list(dict.fromkeys(steps)), monomials)
    return [as_dim(SymDim({m: c for m, c in zip(monomials, v, strict=True) if c})) for v in kept]


def _skyline(
    vectors: list[tuple[int, ...]], monomials: Sequence[_Monomial]
) -> list[tuple[int, ...]]:
    """``vectors`` (coefficients a monomial) less each that another is at least in every
    coefficient: at most that one wherever every monomial is >= 0 (each symbol >= 0, and
    each floor, min or max >= 0 there: ``_nonnegative``); all of them where one may not be.
    In the order of their sums, largest first, a vector can only be at least one after it:
    each one kept removes those after it that it is at least (the 32-layer llama's 1,338
    distinct steps keep 24, in 1.5 ms)."""
    if not all(map(_nonnegative, monomials)) or not vectors:
        return vectors
    import numpy as np

    if max(abs(c) for v in vectors for c in v) >= 1 << 62:
        return vectors  # past int64: left to ``Maximum``
    ordered = np.array(sorted(vectors, key=sum, reverse=True), dtype=np.int64)
    alive = np.ones(len(ordered), dtype=bool)
    kept: list[tuple[int, ...]] = []
    for i, v in enumerate(ordered):
        if alive[i]:
            kept.append(tuple(int(c) for c in v))
            alive[i + 1 :] &= ~(v >= ordered[i + 1 :]).all(axis=1)
    return kept


def _nonnegative(monomial: _Monomial) -> bool:
    """Whether a monomial is >= 0 wherever every symbol is >= 0: a product of symbols, or of
    floors, mins and maxes that are >= 0 with every symbol at 0 and do not fall from there."""
    atoms = [SymDim({((atom, 1),): 1}) for atom, _e in monomial if not isinstance(atom, str)]
    return all(
        _rising(a, dict.fromkeys(a.symbols, 0)) and a.evaluate(dict.fromkeys(a.symbols, 0)) >= 0
        for a in atoms
    )


def _bytes(
    nbytes: Dim | None,
    sizes: dict[SymDim, list[tuple[int, int]]],
    index: dict[_Monomial, int],
) -> list[tuple[int, int]]:
    """A tensor's bytes as (monomial index, coefficient) pairs ([] where its size is unknown
    or 0), once per size: a decoder's layers repeat a few."""
    if nbytes is None:
        return []
    if type(nbytes) is int:
        return [(index.setdefault((), len(index)), nbytes)] if nbytes > 0 else []
    assert isinstance(nbytes, SymDim)
    found = sizes.get(nbytes)
    if found is None:
        found = sizes[nbytes] = [
            (index.setdefault(m, len(index)), c) for m, c in nbytes.terms.items()
        ]
    return found


__all__ = ["KEY", "peak_formula"]
