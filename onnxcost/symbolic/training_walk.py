"""The training totals' formulas from one symbolic walk (issue 22 item 2):
``analyze(..., symbolic=True, training=True)`` without sampling analyses with training.

Nothing of the training pass is restated here. ``analysis.training.train`` (requires-grad
propagation, each node's backward rule from ``onnxcost/costs/``, the tensors backward keeps,
the weights', gradients' and optimizer's bytes, the liveness of the step) is run once over
the tensors of the symbolic walk (``symbolic.node_costs``: every dim a ``SymDim``), as the
forward formulas run each node's own cost formula there, with two pieces of its own:

* a tensor's bytes (``_bytes``): a polynomial where its shape has symbols;
* ``most``, the peak's maximum over the steps (``Maximum``): the one step that is at least
  every other wherever the model is valid (every symbol >= 1, the position symbols within
  the model's positions, and each symbol's 0 the model allows: ``domain._sign``), else the
  ``max`` of the few steps no other is at least there (on a decoder the backward's
  overtakes the forward's as seq grows: GPT-2's peak is the max of 4 steps' live bytes);
  past ``MAX_PEAK_TERMS`` of them, no formula for ``peak_bytes``.

Checks, as ``onewalk``'s: at every symbol = 1 against the analysis reported (free), at its
random point past 1 against a concrete analysis with training, and at each symbol's 0 the
model allows (the others at the random point) against one more. Those are analyses of the
whole model, not of the reduced one (``reduced.py``): the reduced model keeps one node per
class, so it has fewer weights (params, gradients, optimizer state) and fewer kept tensors,
and none of the training totals is a sum over classes (a kept tensor counts once however
many nodes keep it; the peak is a maximum over the steps). Where one disagrees, or the pass
raises over SymDims (a backward rule that compares a symbolic dim), the caller samples as
before (``symbolic.training``), with a warning saying why.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from onnxcost.analysis.training import _WIDE_FLOATS, HALF_BYTES, _nbytes, train
from onnxcost.costs import REGISTRY
from onnxcost.costs._registry import Cost, OpSpec
from onnxcost.errors import OnnxcostError
from onnxcost.load.tensors import TensorInfo, normalize_domain
from onnxcost.symbolic.contrib import _SymTensor
from onnxcost.symbolic.dims import with_derived
from onnxcost.symbolic.domain import _sign, within
from onnxcost.symbolic.limits import PositionLimit
from onnxcost.symbolic.maximum import MAX_PEAK_TERMS, Maximum
from onnxcost.symbolic.onewalk import _check_point, _unset, formula_of
from onnxcost.symbolic.poly import Formula, polynomial
from onnxcost.symbolic.training import TRAINING_KEYS, training_vector
from onnxcost.symdim import Dim, SymDim, _MinMax, as_dim

if TYPE_CHECKING:
    from onnxcost.analysis.records import Convention
    from onnxcost.analysis.result import Analysis
    from onnxcost.analysis.training import TrainingOptions
    from onnxcost.prepare import PreparedModel
    from onnxcost.symbolic.result import SymbolicCosts


class _Bytes:
    """``analysis.training._nbytes`` of a tensor whose shape may have SymDims, once per
    (type, shape): a decoder's layers repeat a few."""

    def __init__(self) -> None:
        self.seen: dict[tuple[int, tuple[Dim, ...], bool], int] = {}

    def __call__(self, info: TensorInfo | None, half: bool) -> int:
        if not isinstance(info, _SymTensor):
            return _nbytes(info, half)
        key = (info.elem_type, info.sym_shape, half)
        found = self.seen.get(key)
        if found is None:
            if half and info.elem_type in _WIDE_FLOATS:
                size = SymDim.of(HALF_BYTES * info.numel)
            else:
                size = SymDim.of(info.nbytes)
            found = self.seen[key] = as_dim(size)  # type: ignore[assignment]
        return found  # type: ignore[return-value]


class _Row:
    """What ``train`` reads of a node's record and writes into it (a record of the analysis
    at 1 is not to be written)."""

    __slots__ = ("backward_flops", "backward_macs", "name", "status")

    def __init__(self, name: str, status: str) -> None:
        self.name, self.status = name, status
        self.backward_macs = self.backward_flops = 0


class _Exact:
    """A total as a Formula, exact wherever the model is valid, 0s included: each ``min`` or
    ``max`` it holds (a backward rule's ``dim_max(0, numel(Y) - numel(X))``, a norm's
    ``min(rows, 1)``) becomes a polynomial plus a clamped part, by ``min(p, q) = q - max(0,
    q - p)`` and ``max(p, q) = p + max(0, q - p)``, taken with the side that is the answer
    wherever every symbol is at least 1 (``_sign``; either where it changes). A part that is
    also 0 at each symbol's 0 the model allows is 0 wherever the model is valid, and left out:
    GPT-2's causal mask, ``min(64, seq + past_seq)`` rows, is ``seq + past_seq``."""

    def __init__(
        self, symbols: tuple[str, ...], limit: PositionLimit | None, zeros: Sequence[str]
    ) -> None:
        self.symbols, self.limit, self.zeros = symbols, limit, zeros

    def __call__(self, dim: Dim) -> Formula | None:
        symbols = self.symbols
        if isinstance(dim, int) or dim.is_polynomial:
            return formula_of(dim, symbols)
        polynomial: SymDim = SymDim.of(0)
        parts: dict[Formula, int] = {}
        for mono, c in dim.terms.items():
            # c x (symbols) x (min/max atoms): an atom whose part is 0 wherever the model is
            # valid is its side; one atom to the power 1 may stay a part, times the rest x
            # (symbols and sizes, >= 0: x max(0, r) = max(0, x r)).
            x: SymDim = SymDim.of(1)
            kept: tuple[_MinMax, SymDim, SymDim] | None = None
            for atom, e in mono:
                if isinstance(atom, str):
                    factor: SymDim = SymDim.of(atom)
                elif not isinstance(atom, _MinMax):
                    return None  # a floor: no Formula holds it
                else:
                    found = self.sides(atom)
                    if found is None:
                        return None
                    factor, part = found
                    if not self.nowhere(part):
                        if e != 1 or kept is not None:
                            return None
                        kept = (atom, factor, part)
                        continue
                for _ in range(e):
                    x = x * factor
            if kept is None:
                polynomial = polynomial + c * x
                continue
            atom, side, part = kept
            polynomial = polynomial + c * x * side
            f = formula_of(as_dim(x * part), symbols)
            if f is None:
                return None
            if not f.terms:
                continue
            content = math.gcd(*(k for _e, k in f.terms))
            unit = Formula(f.symbols, tuple((e, k // content) for e, k in f.terms), clamped=True)
            parts[unit] = parts.get(unit, 0) + (c if atom.op == "max" else -c) * content
        total = formula_of(as_dim(polynomial), symbols)
        if total is None:
            return None
        return Formula(
            total.symbols, total.terms, parts=tuple((m, f) for f, m in parts.items() if m)
        )

    def sides(self, atom: _MinMax) -> tuple[SymDim, SymDim] | None:
        """(side, part) of ``atom``: ``min(p, q) = side - max(0, part)``, ``max(p, q) = side +
        max(0, part)``, the side the one that is the answer wherever every symbol >= 1 (part
        <= 0 there) where one is."""
        symbols, limit = self.symbols, self.limit
        p = SymDim.of(within(atom.p, symbols, limit))
        q = SymDim.of(within(atom.q, symbols, limit))
        if not (p.is_polynomial and q.is_polynomial):
            return None
        if _sign(p - q, symbols, limit) == 1:  # p >= q over the domain
            return (q, q - p) if atom.op == "min" else (p, q - p)
        return (p, p - q) if atom.op == "min" else (q, p - q)

    def nowhere(self, part: SymDim) -> bool:
        """Whether ``part`` <= 0 wherever the model is valid: every symbol >= 1, or one of
        ``zeros`` at 0 and the others >= 1."""
        if _sign(part, self.symbols, self.limit) != -1:
            return False
        for sym in self.zeros:
            at_zero = SymDim({m: c for m, c in part.terms.items() if all(a != sym for a, _e in m)})
            others = tuple(s for s in self.symbols if s != sym)
            rest = self.limit
            if rest is not None:
                rest = replace(rest, symbols=tuple(s for s in rest.symbols if s != sym))
            if at_zero.is_constant:
                if at_zero.constant > 0:
                    return False
            elif _sign(at_zero, others, rest) != -1:
                return False
        return True


def _plus(f: Formula, g: Formula) -> Formula:
    """``f + g`` (both with denominator 1; ``f``'s clamped parts kept as parts)."""
    summed: dict[tuple[int, ...], int] = {}
    for exps, c in (*f.terms, *g.terms):
        summed[exps] = summed.get(exps, 0) + c
    terms = sorted(
        ((e, c) for e, c in summed.items() if c), key=lambda t: (sum(t[0]), [-x for x in t[0]])
    )
    return Formula(f.symbols, tuple(terms), parts=(*f.parts, *g.parts))


def _summed(forward: Formula, backward: Dim, symbols: tuple[str, ...]) -> Formula | None:
    """The forward's formula plus the backward's Dim, where either is an expression (a
    floor, min or max): one expression; None where the forward has clamped parts."""
    if forward.parts:
        return None
    total = polynomial(forward) if forward.expression is None else forward.expression
    return formula_of(as_dim(SymDim.of(total) + backward), symbols)


def _concrete(
    source: PreparedModel,
    input_shapes: Mapping[str, Sequence[int]],
    dims: Mapping[str, int],
    point: Mapping[str, int],
    convention: Convention,
    allow_reshape: bool,
    training: TrainingOptions,
) -> list[int] | None:
    """The training totals of a concrete analysis of the whole model at ``point``."""
    from onnxcost.analysis.walk import costs_at

    a = costs_at(
        source,
        input_shapes=input_shapes,
        dims=with_derived(source.proto, input_shapes, {**dims, **point}),
        convention=convention,
        allow_reshape=allow_reshape,
        training=training,
    )
    return training_vector(a.totals.training)


def walk_training(
    source: PreparedModel,
    base: Analysis,
    costs: SymbolicCosts,
    *,
    input_shapes: Mapping[str, Sequence[int]],
    dims: Mapping[str, int],
    convention: Convention,
    allow_reshape: bool,
    training: TrainingOptions,
    seed: int = 0,
) -> tuple[dict[str, Formula | None], list[str], int] | str | None:
    """The formulas of ``TRAINING_KEYS`` from one training pass over the symbolic walk, checked
    (the module docstring): (formulas, warnings, concrete analyses run). Where they are to be
    sampled instead: why (for a warning), or None where the forward formulas were sampled
    (that warning is given) or no check point fits the model's positions."""
    from onnxcost.symbolic.node_costs import node_costs

    symbols = costs.symbols
    n = len(source.view.order)
    if costs.shapes is None or costs.analyses != 1 or len(base.nodes) != n:
        return None
    at_one = training_vector(base.totals.training)
    if at_one is None:
        return None
    walked = node_costs(
        source,
        input_shapes=input_shapes,
        fixed={**_unset(source, input_shapes, dims), **dims},
        traffic=base.traffic,
        convention=convention,
        count_params=True,  # which weights train
    )
    if walked.reasons or walked.types is None or walked.weights is None:
        return "the symbolic walk with the weights counted does not carry every node"
    view, proto = source.view, source.proto
    opsets = {normalize_domain(o.domain): o.version for o in proto.opset_import}
    current = [-1]

    def spec_of(k: int) -> tuple[int, OpSpec | None]:
        current[0] = k  # train calls this just before it costs node k's backward
        domain = normalize_domain(view.domains[k])
        opset = opsets.get(domain, 1)
        return opset, REGISTRY.lookup(domain, view.op_types[k], opset)

    def flops(cost: Cost) -> int:
        if convention == "torch":
            return 2 * cost.macs
        if convention == "fvcore":
            return cost.macs
        return cost.flops

    limit = costs.limit
    check = _check_point(random.Random(seed), symbols, limit)
    if check is None:
        return None
    maximum = Maximum(symbols, limit, check, [s for s in symbols if costs.zero_allowed.get(s)])
    try:
        result = train(
            nodes=view.order,
            op_types=view.op_types,
            inputs=view.inputs,
            outputs=view.outputs,
            kinds=walked.classes,
            records=[_Row(r.name, r.status) for r in base.nodes],  # type: ignore[misc]
            spec_of=spec_of,
            types=walked.types,
            weights=walked.weights,
            graph_inputs=[vi.name for vi in proto.graph.input],
            graph_outputs=[vi.name for vi in proto.graph.output],
            last_use=view.last_use,
            flops=flops,
            forward_flops=0,
            opts=training,
            nbytes=_Bytes(),
            most=maximum,
        )
    except Exception as e:  # a backward rule that needs a concrete dim
        k = current[0]
        where = f" at node {view.names[k]!r} ({view.op_types[k]})" if k >= 0 else ""
        return f"the training pass over symbolic shapes fails{where} ({type(e).__name__}: {e})"
    t = result.totals
    m = t.training_memory
    dims_of: list[Dim] = [
        t.backward_macs,
        t.backward_flops,
        0,  # training_flops: the forward's formula plus the backward's, below
        t.trainable_params,
        m.weights_bytes,
        m.gradient_bytes,
        m.optimizer_bytes,
        m.saved_activation_bytes,
        m.peak_bytes,
    ]
    found: dict[str, Formula | None] = {}
    missing: list[str] = []
    exact = _Exact(symbols, limit, [s for s in symbols if costs.zero_allowed.get(s)])
    for key, dim in zip(TRAINING_KEYS, dims_of, strict=True):
        # else the exact expression, as the forward's totals: a floor (a CNN's sizes over
        # its height at stride 2), or the max of the steps' bytes; each min and max decided
        # where that holds at the allowed 0s too (a crop's min(2·⌊(h + 1)/2⌋, h) is h)
        f = exact(dim) or formula_of(maximum.decided_dim(dim), symbols)
        if f is None:
            missing.append(key)
        found[key] = f
    forward, backward = costs.totals.get("flops"), found["backward_flops"]
    found["training_flops"] = (
        None
        if forward is None or backward is None or forward.denominator != 1
        else _plus(forward, backward)
        if forward.expression is None and backward.expression is None
        else _summed(forward, maximum.decided_dim(dims_of[1]), symbols)
    )
    if found["training_flops"] is None:
        missing.append("training_flops")
    moves = not maximum.decided
    if moves:
        found["peak_bytes"] = None
    points: list[dict[str, int]] = [check]
    points += [{**check, s: 0} for s in symbols if costs.zero_allowed.get(s)]
    for point in [dict.fromkeys(symbols, 1), *points]:
        if all(v == 1 for v in point.values()):
            want: list[int] | None = at_one
        else:
            try:
                want = _concrete(
                    source, input_shapes, dims, point, convention, allow_reshape, training
                )
            except OnnxcostError as e:
                return f"the model does not analyse with training at {_at(point)} ({e})"
        assert want is not None
        for key, w in zip(TRAINING_KEYS, want, strict=True):
            f = found[key]
            if f is not None and f.evaluate(point) != w:
                return (
                    f"the walk's training {key} is not a concrete analysis's at {_at(point)} "
                    f"(please report it)"
                )
    warnings = []
    missing = [k for k in dict.fromkeys(missing) if not (moves and k == "peak_bytes")]
    if missing:
        warnings.append(
            f"training: no exact formula for {', '.join(missing)} (a dim that is not one of "
            f"{', '.join(symbols)})"
        )
    if moves:
        warnings.append(
            f"training: no exact formula for peak_bytes (the peak is the largest of the steps' "
            f"live bytes, and no {MAX_PEAK_TERMS} of them or fewer are proven to bound the "
            f"others as {', '.join(symbols)} vary)"
        )
    return found, warnings, len(points)


def _at(point: Mapping[str, int]) -> str:
    return ", ".join(f"{s}={v}" for s, v in point.items())


__all__ = ["walk_training"]
