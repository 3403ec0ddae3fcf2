"""Training cost from the graph: which tensors need a gradient, what each node's backward
costs (the op's backward rule, beside its forward formula in onnxcost/costs/), and the bytes
of one training step (docs/training.md).

Requires-grad propagates in topological order, as autograd's does:

* a trainable parameter needs a gradient: a stored float weight (initializer or Constant)
  counted as a param (``weights.py``: not a BatchNorm statistic, a quantization scale or
  zero point, an index or a shape) whose name ``frozen`` does not match (``re.search``);
* a graph input needs one only with ``grad_inputs`` (and only a float one);
* a node's float outputs need one when one of its inputs does, unless its op carries no
  gradient (comparisons, rounding, random draws: ``costs._registry.no_gradient``).

A node's backward computes the gradients of exactly the inputs that need one (the first
convolution of an image model: its weight's, not its input's); a node none of whose inputs
needs one costs no backward.

Memory of one step (the model and its constants are documented in docs/training.md):

* ``weights_bytes``: every stored weight (params, statistics, quantization params, frozen
  ones included) as stored; with mixed precision a float one counts 2 bytes per element,
  the half-precision copy the forward reads;
* ``gradient_bytes``: one gradient per trainable parameter in its dtype (2 bytes with mixed
  precision);
* ``optimizer_bytes``: per trainable parameter, Adam/AdamW two fp32 moments (8 bytes),
  SGD with momentum one (4), SGD none; with mixed precision plus the fp32 master copy (4):
  the 16 bytes per parameter of mixed-precision Adam in ZeRO (Rajbhandari et al., 2020, 2 + 2
  + 12);
* ``saved_activation_bytes``: each tensor some backward rule keeps (``Saved``), once, plus
  the rules' own statistics; weights are not activations and do not count; float
  activations count 2 bytes per element with mixed precision;
* ``peak_bytes``: weights + gradients + optimizer state + the larger of the forward's
  activation peak (a tensor lives from its writer to its last reader, or, kept for
  backward, to the end of the forward) and the backward's (everything kept, plus the largest
  gradients in flight at one node: its outputs' and the inputs' it computes).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Literal

import onnx

from onnxcost.analysis.records import NodeRecord, TrainingMemory, TrainingTotals
from onnxcost.analysis.weights import Weights
from onnxcost.costs._context import InvalidAttributeError, OpContext
from onnxcost.costs._registry import NOTHING_SAVED, Cost, Needs, OpSpec, Saved
from onnxcost.errors import UsageError
from onnxcost.load.tensors import TensorInfo, UnknownShapeError, element_bits

Optimizer = Literal["adam", "adamw", "sgd", "sgd-momentum"]
MixedPrecision = Literal["fp16", "bf16"]
OPTIMIZERS: tuple[Optimizer, ...] = ("adam", "adamw", "sgd", "sgd-momentum")
MIXED_PRECISIONS: tuple[MixedPrecision, ...] = ("fp16", "bf16")

OPTIMIZER_STATE_BYTES: dict[str, int] = {"adam": 8, "adamw": 8, "sgd-momentum": 4, "sgd": 0}
"""fp32 state per trainable parameter: Adam's two moments, SGD's momentum buffer."""
MASTER_WEIGHT_BYTES = 4
"""The fp32 master copy of a trainable parameter under mixed precision."""
HALF_BYTES = 2

FLOAT_TYPES = frozenset(
    {
        onnx.TensorProto.FLOAT,
        onnx.TensorProto.FLOAT16,
        onnx.TensorProto.BFLOAT16,
        onnx.TensorProto.DOUBLE,
    }
)
"""Element types a gradient flows through (integers, booleans and fp8 do not train)."""
_WIDE_FLOATS = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE})


@dataclass(frozen=True, slots=True)
class TrainingOptions:
    """``analyze(..., training=True, optimizer=..., frozen=..., grad_inputs=...,
    mixed_precision=...)``, checked (``options``)."""

    optimizer: Optimizer = "adamw"
    frozen: re.Pattern[str] | None = None
    grad_inputs: bool = False
    mixed_precision: MixedPrecision | None = None


def options(
    optimizer: str = "adamw",
    frozen: str | None = None,
    grad_inputs: bool = False,
    mixed_precision: str | None = None,
) -> TrainingOptions:
    """Check the training arguments; UsageError naming the bad one and what is allowed."""
    if optimizer not in OPTIMIZERS:
        raise UsageError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, not {optimizer!r}")
    if mixed_precision is not None and mixed_precision not in MIXED_PRECISIONS:
        raise UsageError(
            f"mixed precision must be one of {', '.join(MIXED_PRECISIONS)}, not {mixed_precision!r}"
        )
    pattern = None
    if frozen is not None:
        try:
            pattern = re.compile(frozen)
        except re.error as e:
            raise UsageError(
                f"--frozen {frozen!r} is not a valid regular expression ({e}); "
                f"pass a Python regex such as 'encoder\\.' or '^(?!lora)'"
            ) from e
    return TrainingOptions(optimizer, pattern, grad_inputs, mixed_precision)


def _nbytes(info: TensorInfo | None, half: bool) -> int:
    """Bytes of an activation (0 unknown); a float32/64 one counts 2 bytes per element with
    mixed precision."""
    if info is None or info.known_nbytes < 0:
        return 0
    if half and info.elem_type in _WIDE_FLOATS:
        return HALF_BYTES * info.known_numel
    return info.known_nbytes


@dataclass(frozen=True, slots=True)
class TrainingResult:
    totals: TrainingTotals
    warnings: tuple[str, ...]


def trainable_roots(weights: Weights, frozen: re.Pattern[str] | None) -> dict[str, int]:
    """Stored float weights counted as params that ``frozen`` does not match, and those torch's
    exporter merged or dropped (``Weights.recovered_names``): name -> count."""
    roots: dict[str, int] = {}
    for name, counted in weights.counted.items():
        if (
            counted.role == "param"
            and counted.elem_type in FLOAT_TYPES
            and (name in weights.stored or name in weights.recovered_names)
            and not (frozen is not None and frozen.search(name))
        ):
            roots[name] = counted.elements
    return roots


def train(
    *,
    nodes: Sequence[onnx.NodeProto],
    op_types: Sequence[str],
    inputs: Sequence[Sequence[str]],
    outputs: Sequence[Sequence[str]],
    kinds: Sequence[int],
    records: Sequence[NodeRecord],
    spec_of: Callable[[int], tuple[int, OpSpec | None]],
    types: Mapping[str, TensorInfo],
    weights: Weights,
    graph_inputs: Sequence[str],
    graph_outputs: Sequence[str],
    last_use: Mapping[str, int],
    flops: Callable[[Cost], int],
    forward_flops: int,
    opts: TrainingOptions,
    nbytes: Callable[[TensorInfo | None, bool], int] = _nbytes,
    most: Callable[[list[int]], int] = max,
) -> TrainingResult:
    """Backward per main-graph node (written into its record) and the step's totals.

    ``spec_of(k)``: node k's (opset, registry entry); ``flops``: FLOPs of a Cost in the
    analysis convention; ``forward_flops``: the analysis' total in that convention.

    Nothing here compares two sizes but ``most``, the peak's maximum over the steps, and
    nothing sizes a tensor but ``nbytes``: ``symbolic.training_walk`` runs the same pass over
    tensors whose dims are SymDims, with its own two (a maximum decided over the model's
    domain, a symbolic tensor's bytes)."""
    half = opts.mixed_precision is not None
    roots = trainable_roots(weights, opts.frozen)
    grad: set[str] = set(roots)
    if opts.grad_inputs:
        grad.update(
            n
            for n in graph_inputs
            if (t := types.get(n)) is not None and t.elem_type in FLOAT_TYPES
        )
    constant = weights.constant
    memo: dict[tuple[int, Needs], tuple[Cost, int, Saved]] = {}
    """(node kind, gradients needed) -> (backward, its FLOPs in the convention, what it keeps):
    nodes of one kind (same op, attributes and tensor types) cost the same."""
    missing: Counter[str] = Counter()
    failed: list[str] = []
    saved: dict[str, int] = {}
    sizes: dict[str, int] = {}
    extra_saved = 0
    macs_total = flops_total = 0
    flights: list[int] = []
    """The gradient bytes in flight at each node's backward: its outputs' and the
    activations' it computes (a weight's gradient is in gradient_bytes already)."""
    kept_extra: list[int] = [0] * len(nodes)
    no_cost = (Cost(), 0, NOTHING_SAVED)

    def size(name: str) -> int:
        found = sizes.get(name)
        if found is None:
            found = sizes[name] = nbytes(types.get(name), half)
        return found

    for k, ins in enumerate(inputs):
        rec = records[k]
        needs = tuple([n in grad for n in ins]) if ins else ()
        if True not in needs:
            rec.backward_macs = rec.backward_flops = 0
            continue
        opset, spec = spec_of(k)
        outs = outputs[k]
        # No float output, no gradient to send back (QuantizeLinear, a comparison, Shape).
        floats = [
            o for o in outs if o and (t := types.get(o)) is not None and t.elem_type in FLOAT_TYPES
        ]
        differentiable = bool(floats) and (spec is None or spec.differentiable)
        if differentiable:
            grad.update(floats)
        found = no_cost
        if spec is None or not differentiable or rec.status not in ("ok", "zero"):
            if spec is None or (differentiable and rec.status == "unsupported"):
                missing[op_types[k]] += 1
        elif spec.backward is None:
            if not spec.zero:
                missing[op_types[k]] += 1
        else:
            kind = kinds[k]
            memo_hit = memo.get((kind, needs)) if kind >= 0 else None
            if memo_hit is None:
                ctx = OpContext(
                    nodes[k],
                    opset,
                    tuple([types.get(n) if n else None for n in ins]),
                    tuple([types.get(n) if n else None for n in outs]),
                )
                try:
                    cost = spec.backward(ctx, needs)
                    kept = spec.saves(ctx, needs) if spec.saves is not None else NOTHING_SAVED
                    memo_hit = (cost, flops(cost), kept)
                except (UnknownShapeError, InvalidAttributeError, IndexError, ValueError) as e:
                    failed.append(f"{rec.name} ({op_types[k]}): {e}")
                    memo_hit = no_cost
                if kind >= 0:
                    memo[kind, needs] = memo_hit
            found = memo_hit
        cost, cost_flops, kept = found
        rec.backward_macs = cost.macs
        rec.backward_flops = cost_flops
        macs_total += cost.macs
        flops_total += cost_flops
        for i in kept.inputs:
            if i < len(ins) and ins[i] and ins[i] not in constant:
                saved[ins[i]] = size(ins[i])
        for j in kept.outputs:
            if j < len(outs) and outs[j] and outs[j] not in constant:
                saved[outs[j]] = size(outs[j])
        extra = kept.extra_bytes
        if type(extra) is not int or extra:  # a SymDim has no truth value
            extra_saved += extra
            kept_extra[k] = extra
        flight = 0
        for o in outs:
            if o in grad:
                flight += size(o)
        for n, need in zip(ins, needs, strict=True):
            if need and n not in constant:
                flight += size(n)
        flights.append(flight)
    saved_bytes = sum(saved.values()) + extra_saved
    steps = _forward_steps(
        inputs,
        outputs,
        types,
        constant,
        graph_inputs,
        graph_outputs,
        last_use,
        saved,
        kept_extra,
        half,
        nbytes,
    )
    # The larger of the forward's peak (the live bytes after each step; 0 before the first)
    # and the backward's (everything kept plus the most gradient bytes in flight, or none):
    # saved_bytes >= 0 stands for both 0s.
    peak = most([saved_bytes, *steps, *[saved_bytes + f for f in flights]])
    memory = _memory(weights, roots, opts, saved_bytes, peak)
    backward_flops = flops_total
    warnings = []
    if missing:
        listed = ", ".join(f"{op} ({n})" for op, n in sorted(missing.items()))
        warnings.append(
            f"training: {sum(missing.values())} nodes on the gradient path have no backward "
            f"rule and count 0 backward: {listed}; see `onnxcost ops`"
        )
    if failed:
        more = f"; and {len(failed) - 3} more" if len(failed) > 3 else ""
        warnings.append(
            f"training: {len(failed)} nodes' backward could not be costed and count 0: "
            f"{'; '.join(failed[:3])}{more}"
        )
    if not roots and not opts.grad_inputs:
        warnings.append(
            "training: no trainable parameter (every float weight is frozen or there is none): "
            "backward costs 0; check --frozen"
        )
    return TrainingResult(
        TrainingTotals(
            backward_macs=macs_total,
            backward_flops=backward_flops,
            training_flops=forward_flops + backward_flops,
            trainable_params=sum(roots.values()),
            training_memory=memory,
            optimizer=opts.optimizer,
            mixed_precision=opts.mixed_precision,
            frozen=None if opts.frozen is None else opts.frozen.pattern,
        ),
        tuple(warnings),
    )


def _forward_steps(
    inputs: Sequence[Sequence[str]],
    outputs: Sequence[Sequence[str]],
    types: Mapping[str, TensorInfo],
    constant: set[str],
    graph_inputs: Sequence[str],
    graph_outputs: Sequence[str],
    last_use: Mapping[str, int],
    saved: Mapping[str, int],
    kept_extra: Sequence[int],
    half: bool,
    nbytes: Callable[[TensorInfo | None, bool], int],
) -> list[int]:
    """The forward's live activation bytes at each node when the tensors backward keeps
    live to its end (the forward's peak is their maximum): a tensor lives from its writer (a
    graph input from the start) to its last reader, a kept one or a graph output to the end;
    a node's own statistics from it to the end."""
    n = len(inputs)
    if n == 0:
        return []
    delta = [0] * (n + 1)
    ends = frozenset(graph_outputs)
    written = [(name, 0) for name in graph_inputs]
    written += [(o, k) for k, outs in enumerate(outputs) for o in outs]
    for name, start in written:
        if not name or name in constant:
            continue
        size = saved.get(name)
        if size is None:
            size = nbytes(types.get(name), half)
            end = n - 1 if name in ends else last_use.get(name, start)
        else:
            end = n - 1
        delta[start] += size
        delta[(end if end > start else start) + 1] -= size
    for k, extra in enumerate(kept_extra):
        if type(extra) is not int or extra:
            delta[k] += extra
            delta[n] -= extra
    return list(accumulate(delta[:n]))


def _memory(
    weights: Weights,
    roots: Mapping[str, int],
    opts: TrainingOptions,
    saved_bytes: int,
    activation_peak: int,
) -> TrainingMemory:
    half = opts.mixed_precision is not None
    weights_bytes = 0
    for counted in weights.counted.values():
        if half and counted.elem_type in _WIDE_FLOATS:
            weights_bytes += HALF_BYTES * counted.elements
        else:
            weights_bytes += counted.nbytes
    gradient_bytes = 0
    for name, elements in roots.items():
        per = HALF_BYTES * 8 if half else element_bits(weights.counted[name].elem_type)
        gradient_bytes += elements * per // 8
    trainable = sum(roots.values())
    optimizer_bytes = trainable * (
        OPTIMIZER_STATE_BYTES[opts.optimizer] + (MASTER_WEIGHT_BYTES if half else 0)
    )
    return TrainingMemory(
        weights_bytes=weights_bytes,
        gradient_bytes=gradient_bytes,
        optimizer_bytes=optimizer_bytes,
        saved_activation_bytes=saved_bytes,
        peak_bytes=weights_bytes + gradient_bytes + optimizer_bytes + activation_peak,
    )


__all__ = [
    "MIXED_PRECISIONS",
    "OPTIMIZERS",
    "MixedPrecision",
    "Optimizer",
    "TrainingOptions",
    "TrainingResult",
    "options",
    "train",
    "trainable_roots",
]
