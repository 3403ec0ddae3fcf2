"""The operator registry: (domain, op_type, opset range) -> cost formula.

One decorated function per op, or per family of ops sharing a formula::

    @register("Relu", "LeakyRelu")
    def unary(ctx: OpContext) -> Cost:
        '''FLOPs = numel(Y).'''
        return Cost(flops=ctx.out_numel())

A second registration of an op whose opset range overlaps an existing one is an
error (RegistryError), never a silent override.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from onnxcost.costs._context import OpContext, dim_max
from onnxcost.errors import RegistryError
from onnxcost.load.tensors import normalize_domain as normalize_domain  # re-exported

OPSET_MAX = 10_000


@dataclass(frozen=True, slots=True)
class Cost:
    """Arithmetic of one node. ``flops`` is the onnxcost total: 2 x ``macs`` plus every other op."""

    macs: int = 0
    flops: int = 0

    @staticmethod
    def contraction(macs: int, extra_flops: int = 0) -> Cost:
        """A contraction: FLOPs = 2 x MACs + ``extra_flops`` (bias, scaling, ...)."""
        return Cost(macs=macs, flops=2 * macs + extra_flops)

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.macs + other.macs, self.flops + other.flops)

    def __mul__(self, k: int) -> Cost:
        return Cost(self.macs * k, self.flops * k)


Formula = Callable[[OpContext], Cost]
AttributeParams = Callable[[OpContext], tuple[int, int]]
"""The learned numbers an op holds in its attributes (ai.onnx.ml's coefficients, support
vectors, split thresholds): (their count, their element type)."""
Reads = Callable[[OpContext], tuple[int, ...]]
"""A traffic rule: the bytes a runtime reads of each input position (0 for an omitted one)."""

Needs = tuple[bool, ...]
"""Per input position of a node: whether backward must compute the gradient of that input
(a trainable weight, or an activation with one upstream; ``analysis.training``)."""


@dataclass(frozen=True, slots=True)
class Saved:
    """What a node keeps from its forward for its backward: input and output positions
    (activations, each counted once however many nodes keep it) and ``extra_bytes`` of its
    own (statistics such as LayerNorm's mean and rstd per row, in fp32)."""

    inputs: tuple[int, ...] = ()
    outputs: tuple[int, ...] = ()
    extra_bytes: int = 0


NOTHING_SAVED = Saved()

Backward = Callable[[OpContext, Needs], Cost]
"""A backward rule: the cost of the gradients ``needs`` asks for, given the gradient of the
outputs. MACs are the contractions (a torch-convention count is 2 x MACs)."""
Saves = Callable[[OpContext, Needs], Saved]


@dataclass(frozen=True, slots=True)
class OpSpec:
    """One registry entry.

    ``meta_inputs``: input positions that hold shapes, axes, indices, scales or
    zero points, never weights: constants there are not parameters.
    ``stat_inputs``: positions whose constants are statistics (BatchNorm mean/var),
    reported apart from parameters.
    ``zero``: the op does no arithmetic (status ``zero``).
    ``param_elements``: positions whose parameter count is not their element count.
    """

    domain: str
    op_type: str
    since: int
    until: int
    formula: Formula
    summary: str
    zero: bool = False
    module: str = ""
    meta_inputs: frozenset[int] = field(default_factory=frozenset)
    stat_inputs: frozenset[int] = field(default_factory=frozenset)
    param_elements: Mapping[int, Callable[[OpContext], int]] = field(default_factory=dict)
    """Input position -> its logical weight count, where storage packs several per element
    (MatMulNBits' uint8 B holds N x K 4-bit weights)."""
    quant_inputs: frozenset[int] = field(default_factory=frozenset)
    """Positions holding quantization scales and zero points (also in ``meta_inputs``):
    constants there count as quantization params, apart from params."""
    reads_data: bool = True
    """False for ops that read only their inputs' shapes (Shape, Size): no input bytes."""
    moves_data: bool = True
    """False for ops a runtime takes out at load (Identity: onnxruntime's IdentityElimination,
    at its lowest enabled optimisation level): no bytes read or written under
    ``traffic="runtime"``."""
    backward: Backward | None = None
    """The backward rule (``register_backward``), beside the forward formula; None: a
    ``zero`` op routes the gradient for free, any other op has no rule yet."""
    saves: Saves | None = None
    """What backward keeps of the forward; None: nothing."""
    backward_summary: str = ""
    differentiable: bool = True
    """False for ops whose outputs carry no gradient (comparisons, rounding, random draws)."""
    reads: Reads | None = None
    """The traffic rule (``register_reads``): the bytes a runtime reads of each input, where
    that is less than the whole input (a Gather reads the rows it selects). None: each input
    is read whole."""
    attribute_params: AttributeParams | None = None
    """The params the node holds in its attributes, not in initializers (``AttributeParams``);
    None: none."""
    bias_inputs: frozenset[int] = field(default_factory=frozenset)
    """Positions of a learned per-channel tensor (Conv's bias B, Gemm's C, PRelu's slope): a
    stored tensor of one element there is a param (one channel, or one shared slope), not a
    lone scalar such as an epsilon."""

    @property
    def family(self) -> str:
        return self.module.rsplit(".", 1)[-1]


def _summary(fn: Callable[..., object]) -> str:
    doc = (fn.__doc__ or "").strip()
    return doc.splitlines()[0].strip() if doc else ""


def _no_cost(ctx: OpContext) -> Cost:
    return Cost()


class Registry:
    def __init__(self) -> None:
        self._specs: dict[tuple[str, str], list[OpSpec]] = {}

    def add(self, spec: OpSpec) -> None:
        key = (spec.domain, spec.op_type)
        for other in self._specs.get(key, []):
            if spec.since <= other.until and other.since <= spec.until:
                raise RegistryError(
                    f"{spec.domain or 'ai.onnx'}::{spec.op_type} opsets {spec.since}-{spec.until} "
                    f"is already registered by {other.formula.__module__}.{other.formula.__name__}"
                )
        self._specs.setdefault(key, []).append(spec)

    def lookup(self, domain: str, op_type: str, opset: int) -> OpSpec | None:
        for spec in self._specs.get((normalize_domain(domain), op_type), ()):
            if spec.since <= opset <= spec.until:
                return spec
        return None

    def specs(self) -> list[OpSpec]:
        """Every entry, sorted by domain, op type and opset: a stable listing."""
        return [
            s
            for key in sorted(self._specs)
            for s in sorted(self._specs[key], key=lambda s: s.since)
        ]

    def known(self, domain: str, op_type: str) -> bool:
        return (normalize_domain(domain), op_type) in self._specs

    def attach(self, domain: str, op_type: str, since: int, until: int, **changes: object) -> None:
        """Set ``changes`` (backward, saves, backward_summary, differentiable, reads) on the
        entries of ``op_type`` whose opsets overlap [since, until]; RegistryError where there is
        none, or where a backward or traffic rule is set twice."""
        key = (normalize_domain(domain), op_type)
        specs = self._specs.get(key, [])
        hit = False
        for k, spec in enumerate(specs):
            if spec.since <= until and since <= spec.until:
                if "backward" in changes and spec.backward is not None:
                    raise RegistryError(
                        f"{domain or 'ai.onnx'}::{op_type} opsets {spec.since}-{spec.until} "
                        f"already has a backward rule"
                    )
                if "reads" in changes and spec.reads is not None:
                    raise RegistryError(
                        f"{domain or 'ai.onnx'}::{op_type} opsets {spec.since}-{spec.until} "
                        f"already has a traffic rule"
                    )
                specs[k] = replace(spec, **changes)  # type: ignore[arg-type]
                hit = True
        if not hit:
            what = "a traffic rule" if "reads" in changes else "a backward rule"
            raise RegistryError(
                f"{domain or 'ai.onnx'}::{op_type}: {what} needs a forward entry first"
            )

    def with_formula(self, op_type: str, formula: Formula, *, domain: str = "") -> Registry:
        """A copy in which ``formula`` costs ``op_type`` at every opset; this registry is
        unchanged. For one run: ``analyze(model, registry=REGISTRY.with_formula("Relu", f))``.

        The op keeps its entry's input roles (meta, statistics, quantization inputs); an op
        with no entry gets one for every opset with none.
        """
        copy = Registry()
        copy._specs = {key: list(specs) for key, specs in self._specs.items()}
        key = (normalize_domain(domain), op_type)
        summary = _summary(formula)
        current = copy._specs.get(key)
        if current:
            copy._specs[key] = [
                replace(s, formula=formula, summary=summary or s.summary, zero=False)
                for s in current
            ]
        else:
            copy._specs[key] = [
                OpSpec(key[0], op_type, 1, OPSET_MAX, formula, summary, module=formula.__module__)
            ]
        return copy


REGISTRY = Registry()


def register(
    *op_types: str,
    domain: str = "",
    since: int = 1,
    until: int = OPSET_MAX,
    meta_inputs: Iterable[int] = (),
    stat_inputs: Iterable[int] = (),
    param_elements: Mapping[int, Callable[[OpContext], int]] | None = None,
    quant_inputs: Iterable[int] = (),
    attribute_params: AttributeParams | None = None,
    bias_inputs: Iterable[int] = (),
) -> Callable[[Formula], Formula]:
    """Register ``fn`` as the cost formula of ``op_types`` in ``domain`` for opsets [since, until].

    ``quant_inputs`` (scales, zero points) are meta inputs counted as quantization params;
    ``attribute_params`` counts the params a node holds in its attributes; at ``bias_inputs``
    a one-element weight is a param too."""

    def deco(fn: Formula) -> Formula:
        for op in op_types:
            REGISTRY.add(
                OpSpec(
                    domain=normalize_domain(domain),
                    op_type=op,
                    since=since,
                    until=until,
                    formula=fn,
                    summary=_summary(fn),
                    module=fn.__module__,
                    meta_inputs=frozenset(meta_inputs) | frozenset(quant_inputs),
                    stat_inputs=frozenset(stat_inputs),
                    param_elements=dict(param_elements or {}),
                    quant_inputs=frozenset(quant_inputs),
                    attribute_params=attribute_params,
                    bias_inputs=frozenset(bias_inputs),
                )
            )
        return fn

    return deco


def register_zero(
    *op_types: str,
    domain: str = "",
    reason: str = "no arithmetic: moves, copies or reinterprets data",
    meta_inputs: Iterable[int] = (),
    since: int = 1,
    until: int = OPSET_MAX,
    reads_data: bool = True,
    moves_data: bool = True,
) -> None:
    """Declare ops that do no arithmetic: status ``zero``, bytes still counted (input bytes
    not, with ``reads_data=False``: the op reads only its inputs' shapes; none, with
    ``moves_data=False`` under ``traffic="runtime"``: a runtime takes the op out at load)."""
    for op in op_types:
        REGISTRY.add(
            OpSpec(
                domain=normalize_domain(domain),
                op_type=op,
                since=since,
                until=until,
                formula=_no_cost,
                summary=reason,
                zero=True,
                module=sys._getframe(1).f_globals.get("__name__", ""),
                meta_inputs=frozenset(meta_inputs),
                reads_data=reads_data,
                moves_data=moves_data,
            )
        )


def register_backward(
    *op_types: str,
    domain: str = "",
    since: int = 1,
    until: int = OPSET_MAX,
    saves: Saves | None = None,
) -> Callable[[Backward], Backward]:
    """Register ``fn`` as the backward rule of ``op_types`` (already registered forward, in the
    same family module): ``fn(ctx, needs)`` costs the gradients ``needs`` asks for; ``saves``
    says what the op keeps for it. The docstring's first line states the formula."""

    def deco(fn: Backward) -> Backward:
        for op in op_types:
            REGISTRY.attach(
                domain, op, since, until, backward=fn, saves=saves, backward_summary=_summary(fn)
            )
        return fn

    return deco


def register_reads(*op_types: str, domain: str = "") -> Callable[[Reads], Reads]:
    """Register ``fn`` as the traffic rule of ``op_types`` (every opset their cost formula is
    registered for): the bytes a runtime reads of each input. The op must be registered
    already (its cost formula first, in the same module); a second rule is an error."""

    def deco(fn: Reads) -> Reads:
        for op in op_types:
            REGISTRY.attach(domain, op, 1, OPSET_MAX, reads=fn)
        return fn

    return deco


def no_gradient(*op_types: str, domain: str = "", since: int = 1, until: int = OPSET_MAX) -> None:
    """Declare ops whose outputs carry no gradient (zero almost everywhere, or not a function
    of their inputs): backward stops there."""
    for op in op_types:
        REGISTRY.attach(
            domain,
            op,
            since,
            until,
            differentiable=False,
            backward_summary="no gradient: its output is piecewise constant, random or not numeric",
        )


def passes_gradient(ctx: OpContext, needs: Needs) -> Cost:
    """0: the gradient passes through unchanged, or is routed (copied, sliced, concatenated)."""
    return Cost()


def saves_inputs(*positions: int) -> Saves:
    """A ``saves`` rule keeping the given input positions whatever the gradients needed."""
    kept = Saved(inputs=positions)
    return lambda ctx, needs: kept


def saves_outputs(*positions: int) -> Saves:
    """A ``saves`` rule keeping the given output positions whatever the gradients needed."""
    kept = Saved(outputs=positions)
    return lambda ctx, needs: kept


def broadcast_sum(ctx: OpContext, i: int) -> int:
    """Adds to reduce the output-shaped gradient to input ``i``'s (broadcast) shape:
    numel(Y) - numel(X_i) (0 when it is not broadcast; ``dim_max``: a SymDim max(0, ...) over
    symbolic shapes, exact at a dim of 0 too)."""
    return dim_max(0, ctx.out_numel() - ctx.numel(i))


def needs_any(needs: Needs, *positions: int) -> bool:
    return any(p < len(needs) and needs[p] for p in positions)


# Positions 1..15: every input after the first is a shape, axis, index or scalar.
AFTER_FIRST = range(1, 16)
