"""The LLM view of a decoder with a KV cache: weights, cache, prefill, decode, generation.

For a prompt of N tokens, M generated tokens and batch B:

- prefill: the analysis at past = 0, seq = N (it yields the first new token);
- one decode step: seq = 1 at past = P, as an exact formula in batch and the past length
  (``onnxcost.symbolic.formulas``); the first step is at P = N, the last at P = N + M - 2;
- generation = prefill(N) + the M - 1 decode steps at P = N, N + 1, ..., N + M - 2;
- KV cache per token = the bytes of every past input for one position of one sequence
  (layers x 2 x kv_heads x head_dim x bytes per element), and at N + M tokens that times
  (N + M) x B;
- arithmetic intensity = FLOPs / (bytes read + bytes written), of the prefill and of the
  decode steps together; a phase is memory-bound when it is below the ridge point
  peak FLOP/s / bandwidth of the given ceiling;
- with ``training_tokens`` D: training on D tokens in sequences of N tokens (the prompt's
  length, past = 0: the prefill's graph), B of them a step, so D = steps x B x N; FLOPs =
  one step's training FLOPs (``analyze(training=True)``: forward + backward, every float
  weight trained) x D / (B x N), beside Kaplan et al.'s 6·N·D with N the non-embedding
  params (``LlmTraining``).

The cache inputs are found by name: ``past_key_values.{i}.key/value`` (optimum), ``past*``,
``cache*``; outputs ``present*`` (or ``cache*``). The batch, sequence and past dims are the
inputs' symbolic dims: batch the one the cache shares with the other inputs, past the one only
the cache has, seq the other inputs' remaining one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import onnx

from onnxcost.analysis.records import Const, Group, Layout, When, to_jsonable
from onnxcost.analysis.traffic import PAST, PRESENT, Traffic
from onnxcost.errors import OnnxcostError, ShapeError, UsageError
from onnxcost.llm.reach import beyond_reach
from onnxcost.load.kv import first_step
from onnxcost.load.model import ModelSource
from onnxcost.load.positions import position_limit
from onnxcost.load.tensors import tensor_bytes
from onnxcost.prepare import PreparedModel, prepare
from onnxcost.symbolic.formulas import (
    Formula,
    model_symbols,
    sum_over,
    symbolic_costs,
    with_derived,
)
from onnxcost.symbolic.poly import NoClosedFormError

if TYPE_CHECKING:
    from onnxcost.analysis.records import Convention
    from onnxcost.analysis.result import Analysis
    from onnxcost.bench.roofline import Ceilings

SCHEMA = "onnxcost.llm/1"
_FLAGS = "--batch-dim, --seq-dim and --past-dim"
_PAST = PAST  # the analysis finds the cache's bytes by the same names (analysis.traffic)
_PRESENT = PRESENT


class DecoderError(ShapeError):
    """The model is not a decoder with a KV cache onnxcost can tell apart."""


@dataclass(frozen=True, slots=True)
class CacheLayout:
    """Which inputs and outputs are the KV cache, and which symbolic dims are which."""

    batch: str
    seq: str
    past: str
    past_inputs: tuple[str, ...]
    present_outputs: tuple[str, ...]


def _input_dims(proto: onnx.ModelProto) -> dict[str, list[str | int]]:
    inits = {t.name for t in proto.graph.initializer}
    out: dict[str, list[str | int]] = {}
    for vi in proto.graph.input:
        if vi.name in inits:
            continue
        out[vi.name] = [
            d.dim_param if d.HasField("dim_param") else d.dim_value
            for d in vi.type.tensor_type.shape.dim
        ]
    return out


def detect(
    proto: onnx.ModelProto,
    *,
    batch_dim: str | None = None,
    seq_dim: str | None = None,
    past_dim: str | None = None,
    fixed: Collection[str] = (),
) -> CacheLayout:
    """The cache layout of ``proto``; DecoderError naming the flags when it cannot be told.
    A symbol in ``fixed`` (given a value with --dim: an encoder's length beside a decoder's
    cache) is none of the three."""
    dims = _input_dims(proto)
    past_inputs = tuple(n for n in dims if _PAST.match(n))
    present = tuple(n for n in (o.name for o in proto.graph.output) if _PRESENT.match(n))
    if not past_inputs or not present:
        raise DecoderError(
            "no KV cache found: `llm` needs inputs named past_key_values.{i}.key/value (or past*, "
            "cache*) and outputs present.{i}.key/value (or present*); export the decoder with "
            "its cache (optimum: --task text-generation-with-past)"
        )
    others = [n for n in dims if n not in past_inputs]
    # Derived dims ('past_sequence_length + sequence_length') are computed, not chosen.
    cache_syms = {
        d for n in past_inputs for d in dims[n] if isinstance(d, str) and d.isidentifier()
    }
    other_syms = {d for n in others for d in dims[n] if isinstance(d, str) and d.isidentifier()}
    names = set(cache_syms | other_syms)
    cache_syms -= set(fixed)
    other_syms -= set(fixed)
    for flag, given in (
        ("--batch-dim", batch_dim),
        ("--seq-dim", seq_dim),
        ("--past-dim", past_dim),
    ):
        if given is not None and given not in names:
            raise UsageError(
                f"{flag} {given!r} is not a symbolic dim of the inputs; they are: "
                f"{', '.join(sorted(names)) or '(none)'}"
            )

    def pick(given: str | None, candidates: set[str], role: str) -> str:
        if given is not None:
            return given
        if len(candidates) != 1:
            found = ", ".join(sorted(candidates)) or "none"
            raise DecoderError(
                f"cannot tell the {role} dim of this decoder (candidates: {found}); name the "
                f"dims with {_FLAGS}, or give another symbol a value with --dim SYMBOL=N"
            )
        return next(iter(candidates))

    batch = pick(batch_dim, cache_syms & other_syms, "batch")
    past = pick(past_dim, cache_syms - other_syms - {batch}, "past (cache length)")
    seq = pick(seq_dim, other_syms - cache_syms - {batch, past}, "sequence")
    if len({batch, seq, past}) != 3:
        raise DecoderError(
            f"the batch, sequence and past dims must differ (got {batch}, {seq}, {past}); "
            f"name them with {_FLAGS}"
        )
    return CacheLayout(batch, seq, past, past_inputs, present)


def cache_bytes_per_token(
    proto: onnx.ModelProto, layout: CacheLayout, fixed: Mapping[str, int] | None = None
) -> int:
    """Bytes of every past input for one position of one sequence (batch 1, past 1). A
    past input without the past dim (an encoder-decoder's cross-attention keys and values,
    over the encoder's length: a symbol in ``fixed``) does not grow with the tokens: not in
    it (``fixed_cache_bytes``)."""
    return sum(_cache_bytes(proto, layout, fixed or {}, per_token=True).values())


def fixed_cache_bytes(
    proto: onnx.ModelProto, layout: CacheLayout, fixed: Mapping[str, int], batch: int
) -> dict[str, int]:
    """The bytes of each past input without the past dim, at ``batch`` and the ``fixed``
    values: the cache that does not grow with the tokens."""
    return _cache_bytes(proto, layout, {**fixed, layout.batch: batch}, per_token=False)


def _cache_bytes(
    proto: onnx.ModelProto, layout: CacheLayout, fixed: Mapping[str, int], per_token: bool
) -> dict[str, int]:
    """Bytes of each past input that has the past dim (``per_token``: at batch 1, past 1), or
    of each that has not (at ``fixed``, the batch among them)."""
    dims = _input_dims(proto)
    types = {vi.name: vi.type.tensor_type.elem_type for vi in proto.graph.input if vi.name in dims}
    out: dict[str, int] = {}
    for name in layout.past_inputs:
        if (layout.past in dims[name]) != per_token:
            continue
        sizes = []
        for d in dims[name]:
            if per_token and d in (layout.batch, layout.past):
                sizes.append(1)
            elif isinstance(d, str) and d in fixed:
                sizes.append(fixed[d])
            elif isinstance(d, int) and d > 0:
                sizes.append(d)
            else:
                raise DecoderError(
                    f"cache input {name!r} has a dim {d!r} that is neither batch nor past; "
                    f"name the dims with {_FLAGS}, or give it a value with --dim {d}=N"
                )
        out[name] = tensor_bytes(math.prod(sizes), types[name])
    return out


@dataclass(frozen=True, slots=True)
class PhaseCost:
    """MACs, FLOPs and bytes of one phase (prefill, a decode step, the generation)."""

    macs: int
    flops: int
    bytes_read: int
    bytes_written: int

    @property
    def flops_per_byte(self) -> float:
        moved = self.bytes_read + self.bytes_written
        return self.flops / moved if moved else 0.0

    def __add__(self, other: PhaseCost) -> PhaseCost:
        return PhaseCost(
            self.macs + other.macs,
            self.flops + other.flops,
            self.bytes_read + other.bytes_read,
            self.bytes_written + other.bytes_written,
        )

    def as_dict(self, written: bool = True) -> dict[str, int]:
        """The fields (``to_jsonable``); without ``bytes_written`` unless ``written``."""
        out: dict[str, int] = to_jsonable(self)
        if not written:
            del out["bytes_written"]
        return out


_KEYS = ("macs", "flops", "bytes_read", "bytes_written")
_STEP: Layout = ("macs", "flops", "bytes_read")
"""A decode step's or the generation's figures in ``onnxcost.llm/1`` (no bytes written)."""
_MAX_CONCRETE_STEPS = 64
"""Decode steps analysed one by one when a step has no exact formula."""
MAX_TOKENS = 2**40
"""The most --prompt, --generate and --batch take: the cache lengths they make stay dims
(at most 2**62)."""
MAX_TRAINING_TOKENS = 2**62
"""The most --tokens takes (Chinchilla's 1.4e12 tokens and far beyond)."""
CEILING_RANGE = (1e3, 1e21)
"""A ceiling's FLOP/s and bytes/s lie in here: every ratio and time of the roofline is then a
finite number (JSON has no NaN or infinity)."""


@dataclass(frozen=True, slots=True)
class Roofline:
    """Each phase against a ceiling: memory-bound below the ridge (peak / bandwidth)."""

    source: str
    """'flags', or the cached calibration's provider and device."""
    peak_flops_per_s: float
    bandwidth_bytes_per_s: float

    JSON_PROPERTIES: ClassVar[tuple[str, ...]] = ("ridge_flops_per_byte",)
    """Computed, after the fields in the ``ceiling`` object of ``onnxcost.llm/1``."""

    @property
    def ridge_flops_per_byte(self) -> float:
        return self.peak_flops_per_s / self.bandwidth_bytes_per_s

    def bound(self, phase: PhaseCost) -> str:
        return "memory" if phase.flops_per_byte < self.ridge_flops_per_byte else "compute"

    def floor_s(self, phase: PhaseCost) -> float:
        """max(FLOPs / peak, bytes / bandwidth): the least time the phase can take."""
        return max(
            phase.flops / self.peak_flops_per_s,
            (phase.bytes_read + phase.bytes_written) / self.bandwidth_bytes_per_s,
        )


@dataclass(frozen=True, slots=True)
class ReadByRole:
    """The bytes one phase reads, by role (``analysis.traffic``)."""

    weights: int
    kv_cache: int
    activations: int


@dataclass(frozen=True, slots=True)
class LlmTraining:
    """Training on ``tokens`` D tokens, in steps of ``batch`` sequences of ``seq`` tokens.

    ``step_flops``: one step's training FLOPs (forward + backward, in the report's
    convention) at batch B, seq N, past 0; ``flops`` = step_flops x D / (B x N), rounded to
    an integer (a last partial step counts its share). ``params``: the N of 6·N·D, Kaplan et
    al.'s (arXiv 2001.08361) non-embedding count: the trainable params less
    ``embedding_params``, the float initializers a Gather reads rows of (token and position
    embeddings, and with them a tied LM head, as Kaplan's N leaves it out; an untied LM head
    is in N). NB: any other float constant is a trainable param to onnxcost (a rotary cos/sin
    table, a float mask buffer), so it is in N too."""

    tokens: int
    seq: int
    batch: int
    step_flops: int
    flops: int
    params: int
    embedding_params: int

    JSON_PROPERTIES: ClassVar[tuple[str, ...]] = (
        "steps",
        "flops_per_token",
        "flops_6nd",
        "ratio",
    )
    """Computed, after the fields in the ``training`` object of ``onnxcost.llm/1``."""

    @property
    def steps(self) -> float:
        """D / (B x N): the steps of B sequences of N tokens in D tokens."""
        return self.tokens / (self.batch * self.seq)

    @property
    def flops_per_token(self) -> float:
        return self.step_flops / (self.batch * self.seq)

    @property
    def flops_6nd(self) -> int:
        """6·N·D (Kaplan et al.; Chinchilla): forward 2·N·D, backward 4·N·D."""
        return 6 * self.params * self.tokens

    @property
    def ratio(self) -> float:
        """The graph's count over 6·N·D (0 when N is 0)."""
        return self.flops / self.flops_6nd if self.flops_6nd else 0.0


@dataclass(frozen=True, slots=True)
class LlmReport:
    """``onnxcost llm``: the static figures of one generation (and, with --bench, measured)."""

    model: str
    layout: CacheLayout
    batch: int
    prompt: int
    generate: int
    weights_bytes: int
    kv_cache_bytes_per_token: int
    prefill: PhaseCost
    decode_formulas: dict[str, Formula | None]
    """Keys macs, flops, bytes_read, bytes_written: one step (seq 1) in batch and past."""
    decode_first: PhaseCost | None
    """The step at past = N (None when M = 1: the prefill yields the only token)."""
    decode_last: PhaseCost | None
    """The step at past = N + M - 2."""
    decode_total: PhaseCost
    """The M - 1 decode steps together."""
    roofline: Roofline | None
    warnings: tuple[str, ...] = ()
    bench: Any = None
    """``onnxcost.llm.loop.LoopTiming`` with --bench."""
    traffic: Traffic = "runtime"
    """How bytes are counted (``analysis.traffic``)."""
    decode_first_read: ReadByRole | None = None
    """What the step at past = N reads, by role (None when M = 1)."""
    training: LlmTraining | None = None
    """With ``training_tokens``: the cost of training on that many tokens."""
    prefill_activations_bytes: int = 0
    """The prefill's peak of live activations (``peak_activation_bytes``: the KV cache it
    writes included)."""
    decode_activations: Formula | None = None
    """A decode step's peak of live activations in batch and past (the cache it reads and
    writes included; None where the formulas were sampled)."""
    last_activations_bytes: int | None = None
    """That peak at the last step (None when M = 1)."""

    @property
    def decode_activations_text(self) -> str | None:
        return None if self.decode_activations is None else self.decode_activations.python()

    @property
    def peak_memory_bytes(self) -> int:
        """The weights and the largest peak of live activations over the generation (the
        prefill's or the last step's: a step's only grows with the cache)."""
        return self.weights_bytes + max(
            self.prefill_activations_bytes, self.last_activations_bytes or 0
        )

    @property
    def kv_cache_bytes(self) -> int:
        """The cache of the whole batch at N + M tokens."""
        return self.kv_cache_bytes_per_token * (self.prompt + self.generate) * self.batch

    @property
    def generation(self) -> PhaseCost:
        return self.prefill + self.decode_total

    @property
    def decode_flops_per_byte(self) -> float:
        """Intensity of the decode steps together (of the first step when there are none)."""
        if self.generate > 1:
            return self.decode_total.flops_per_byte
        return self.decode_first.flops_per_byte if self.decode_first is not None else 0.0

    def decode_formula_text(self, key: str) -> str | None:
        f = self.decode_formulas.get(key)
        return None if f is None else f.python()

    @property
    def decode_formula_texts(self) -> dict[str, str | None]:
        """The MACs, FLOPs and bytes-read formulas of a decode step as Python expressions."""
        return {k: self.decode_formula_text(k) for k in _KEYS[:3]}

    @property
    def prefill_bound(self) -> str | None:
        """'memory' or 'compute' against the ceiling (None without one)."""
        return None if self.roofline is None else self.roofline.bound(self.prefill)

    @property
    def decode_bound(self) -> str | None:
        """The decode steps' bound (the first step's when there are none; None without a
        ceiling)."""
        decode = self.decode_total if self.generate > 1 else self.decode_first
        return None if self.roofline is None or decode is None else self.roofline.bound(decode)

    JSON_LAYOUT: ClassVar[Layout] = (
        ("schema", Const(SCHEMA)),
        "model",
        "batch",
        "prompt",
        "generate",
        "traffic",
        ("symbols", Group(("batch", "seq", "past"), of="layout")),
        "weights_bytes",
        "kv_cache_bytes_per_token",
        "kv_cache_bytes",
        "prefill",
        (
            "decode",
            Group(
                (
                    ("formulas", "decode_formula_texts"),
                    ("first", Group(_STEP, of="decode_first")),
                    ("first_read", "decode_first_read"),
                    ("last", Group(_STEP, of="decode_last")),
                )
            ),
        ),
        ("generation", Group(_STEP, of="generation")),
        (
            "memory",
            Group(
                (
                    "prefill_activations_bytes",
                    ("decode_activations_formula", "decode_activations_text"),
                    "last_activations_bytes",
                    ("peak_bytes", "peak_memory_bytes"),
                )
            ),
        ),
        (
            "roofline",
            Group(
                (
                    ("prefill_flops_per_byte", "prefill.flops_per_byte"),
                    "decode_flops_per_byte",
                    ("ceiling", "roofline"),
                    "prefill_bound",
                    "decode_bound",
                )
            ),
        ),
        "warnings",
        When("bench", ("bench",)),
        When("training", ("training",)),
    )
    """The JSON contract ``onnxcost.llm/1`` (``records.to_jsonable``)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract ``onnxcost.llm/1``: ``JSON_LAYOUT``."""
        return to_jsonable(self)  # type: ignore[no-any-return]


def _phase(a: Analysis) -> PhaseCost:
    t = a.totals
    return PhaseCost(t.macs, t.flops, t.bytes_read, t.bytes_written)


def _at(formulas: Mapping[str, Formula | None], values: Mapping[str, int]) -> PhaseCost | None:
    found = [formulas.get(k) for k in _KEYS]
    if any(f is None for f in found):
        return None
    return PhaseCost(*(f.evaluate(values) for f in found if f is not None))


def llm_report(
    model: ModelSource | PreparedModel,
    *,
    prompt: int,
    generate: int,
    batch: int = 1,
    params: Mapping[str, str | int] | None = None,
    dims: Mapping[str, int] | None = None,
    batch_dim: str | None = None,
    seq_dim: str | None = None,
    past_dim: str | None = None,
    convention: Convention = "onnxcost",
    traffic: Traffic = "runtime",
    ceilings: Ceilings | None = None,
    ceilings_source: str = "flags",
    calibrated: Callable[[str], tuple[Ceilings, str] | None] | None = None,
    training_tokens: int | None = None,
) -> LlmReport:
    """The static LLM figures of ``model`` (see the module docstring for each).

    ``model``: a path, bytes, a ModelProto, a built-in model's name (built with ``params``),
    or a model already prepared (``prepare(name, weights=True, params=...)`` to run the same
    model in ``onnxcost.llm.loop.run_llm_loop`` afterwards). ``ceilings``: the roofline's ceiling; without, ``calibrated(dtype)`` may give one (a
    cached calibration for the weights' dtype, 'float32' or 'float16') and its source.
    ``training_tokens``: also the cost of training on that many tokens (``LlmTraining``)."""
    from onnxcost.api import analyze

    for flag, value in (("--prompt", prompt), ("--generate", generate), ("--batch", batch)):
        if not 1 <= value <= MAX_TOKENS:
            raise UsageError(
                f"{flag} {value} is out of range; --prompt, --generate and --batch must be "
                f"between 1 and 2**40 ({MAX_TOKENS:,})"
            )
    if training_tokens is not None and not 1 <= training_tokens <= MAX_TRAINING_TOKENS:
        raise UsageError(
            f"--tokens {training_tokens} is out of range; pass a number of tokens from 1 to "
            f"2**62 ({MAX_TRAINING_TOKENS:,})"
        )
    source = prepare(model, params=params)  # loaded and indexed once for every analysis
    proto = source.proto
    try:
        layout = detect(
            proto, batch_dim=batch_dim, seq_dim=seq_dim, past_dim=past_dim, fixed=dims or {}
        )
    except DecoderError as e:
        raise _with_builtin_hint(e, source.builtin) from e
    limit = position_limit(proto)
    if limit is not None and prompt + generate > limit:
        raise ShapeError(
            f"the model has {limit} positions; --prompt + --generate must be at most {limit} "
            f"(they are {prompt} + {generate} = {prompt + generate})"
        )
    fixed = dict(dims or {})
    roles = {layout.batch: "batch", layout.seq: "seq", layout.past: "past"}
    free = [s for s in model_symbols(proto, {}, fixed) if s not in roles]
    if free:
        raise UsageError(
            f"the model has other symbolic dims ({', '.join(free)}); set them with --dim SYMBOL=N"
        )
    per_token = cache_bytes_per_token(proto, layout, fixed)
    constant = fixed_cache_bytes(proto, layout, fixed, batch)

    def at(values: Mapping[str, int], training: bool = False) -> Analysis:
        point = with_derived(proto, {}, {**fixed, **values})
        try:
            return analyze(
                source, dims=point, convention=convention, traffic=traffic, training=training
            )
        except ShapeError as e:  # a length the exporter fixed, met by --prompt or --generate
            raise beyond_reach(e, point, roles, (prompt, generate), fixed) from e

    # With training, the prefill's analysis is the training step's (its forward figures are
    # the same): sequences of N tokens, past 0.
    prefill_a = at(
        {layout.batch: batch, layout.seq: prompt, layout.past: 0},
        training=training_tokens is not None,
    )
    warnings = list(prefill_a.warnings)
    if constant:  # an encoder's keys and values: read every step, the same size at each
        names = ", ".join(constant)
        warnings.append(
            f"cache inputs without the cache length ({layout.past}) do not grow with the "
            f"tokens and are not in the KV cache per token: {names}, "
            f"{sum(constant.values()):,} bytes at batch {batch} (an encoder's keys and values)"
        )
    step_dims = {**fixed, layout.seq: 1}
    step_base = at({layout.seq: 1, layout.batch: 1, layout.past: 1})
    costs = symbolic_costs(source, step_base, dims=step_dims, convention=convention)
    # The positions are checked above (--prompt + --generate): not the formulas' warning; nor
    # that they hold from batch 1, and a merged decoder's from cache 1 (every step has both).
    limits = [costs.limit.warning()] if costs.limit else []
    unread = (f"{layout.batch}=0 is not a", first_step(layout.past), *limits)
    warnings += [w for w in costs.warnings if not w.startswith(unread)]
    decode = dict(costs.totals)
    steps = range(prompt, prompt + generate - 1)  # past = N .. N + M - 2

    def step(past: int) -> PhaseCost:
        values = {layout.batch: batch, layout.past: past}
        found = _at(decode, values)
        if found is None:  # no exact formula: the concrete analysis of that step
            found = _phase(at({**values, layout.seq: 1}))
        return found

    exact = all(decode.get(k) is not None for k in _KEYS)
    total: PhaseCost | None = None
    if exact:  # the sum over past = N .. N + M - 2 in closed form, not step by step
        found = [decode[k] for k in _KEYS]
        at_batch = {layout.batch: batch}
        try:
            total = PhaseCost(
                *(
                    sum_over(f, at_batch, layout.past, steps.start, steps.stop - 1)
                    for f in found
                    if f is not None
                )
            )
        except NoClosedFormError:  # the cache length inside a floor, min or max: by steps
            total = None
    if total is None and len(steps) > _MAX_CONCRETE_STEPS:
        raise OnnxcostError(
            f"a decode step's cost is not a polynomial in the cache length (see the warnings of "
            f"`onnxcost analyze --symbolic`), and {len(steps)} steps are too many to analyse one "
            f"by one; pass --generate {_MAX_CONCRETE_STEPS + 1} or less"
        )
    if total is None:
        total = PhaseCost(0, 0, 0, 0)
        for past in steps:
            total = total + step(past)
    first = step(prompt) if generate > 1 else None
    first_read = None
    if generate > 1:  # the first step's bytes by role, from its concrete analysis
        t = at({**step_dims, layout.batch: batch, layout.past: prompt}).totals
        first_read = ReadByRole(
            t.bytes_read_weights, t.bytes_read_kv_cache, t.bytes_read_activations
        )
    last = step(prompt + generate - 2) if generate > 1 else None
    peak = decode.get("peak_activation_bytes")
    last_peak = None
    if generate > 1:
        values = {layout.batch: batch, layout.past: prompt + generate - 2}
        last_peak = (
            peak.evaluate(values)
            if peak is not None
            else at({**values, layout.seq: 1}).totals.peak_activation_bytes
        )
    if ceilings is None and calibrated is not None:
        found_ceiling = calibrated(weights_dtype(proto))
        if found_ceiling is not None:
            ceilings, ceilings_source = found_ceiling
    roofline = (
        None
        if ceilings is None
        else Roofline(ceilings_source, ceilings.peak_flops_per_s, ceilings.bandwidth_bytes_per_s)
    )
    low, high = CEILING_RANGE
    if roofline is not None and not all(
        low <= v <= high for v in (roofline.peak_flops_per_s, roofline.bandwidth_bytes_per_s)
    ):  # NaN fails every comparison
        raise UsageError(
            f"the roofline ceiling ({roofline.source}: {roofline.peak_flops_per_s!r} FLOP/s, "
            f"{roofline.bandwidth_bytes_per_s!r} B/s) must lie between {low:g} and {high:g} "
            f"FLOP/s and bytes/s; pass --peak-tflops and --bandwidth-gbs in range"
        )
    return LlmReport(
        model=_display(model),
        layout=layout,
        batch=batch,
        prompt=prompt,
        generate=generate,
        weights_bytes=prefill_a.totals.param_bytes,
        kv_cache_bytes_per_token=per_token,
        prefill=_phase(prefill_a),
        decode_formulas=decode,
        decode_first=first,
        decode_last=last,
        decode_total=total,
        roofline=roofline,
        warnings=tuple(dict.fromkeys(warnings)),
        traffic=traffic,
        decode_first_read=first_read,
        training=None
        if training_tokens is None
        else _training(prefill_a, proto, training_tokens, prompt, batch),
        prefill_activations_bytes=prefill_a.totals.peak_activation_bytes,
        decode_activations=peak,
        last_activations_bytes=last_peak,
    )


def _training(
    step: Analysis, proto: onnx.ModelProto, tokens: int, seq: int, batch: int
) -> LlmTraining:
    """``LlmTraining`` of ``tokens`` from the training analysis of one step."""
    assert step.totals.training is not None  # analysed with training=True
    t = step.totals.training
    embedding = embedding_params(proto)
    per_step = batch * seq
    return LlmTraining(
        tokens=tokens,
        seq=seq,
        batch=batch,
        step_flops=t.training_flops,
        flops=(2 * t.training_flops * tokens + per_step) // (2 * per_step),  # rounded
        params=max(t.trainable_params - embedding, 0),
        embedding_params=embedding,
    )


def embedding_params(proto: onnx.ModelProto) -> int:
    """Elements of the float initializers a Gather of the main graph reads rows of (its data
    input): the embedding tables, each once."""
    floats = {
        t.name: math.prod(t.dims)
        for t in proto.graph.initializer
        if t.data_type
        in (
            onnx.TensorProto.FLOAT,
            onnx.TensorProto.FLOAT16,
            onnx.TensorProto.BFLOAT16,
            onnx.TensorProto.DOUBLE,
        )
    }
    tables = {
        n.input[0]
        for n in proto.graph.node
        if n.op_type == "Gather"
        and n.domain in ("", "ai.onnx")
        and n.input
        and n.input[0] in floats
    }
    return sum(floats[name] for name in tables)


def _with_builtin_hint(error: DecoderError, builtin: str | None) -> DecoderError:
    """``error``, or where a built-in model without a cache can be built with one, the flag
    that builds it so."""
    from onnxcost import zoo

    if builtin is None or "kv_cache" not in zoo.MODELS[builtin].params:
        return error
    if not str(error).startswith("no KV cache found"):
        return error
    return DecoderError(
        f"{builtin} is built without a KV cache unless asked: pass --param kv_cache=true "
        f"(`onnxcost llm {builtin} --param kv_cache=true ...`)"
    )


def _display(model: ModelSource | PreparedModel) -> str:
    if isinstance(model, PreparedModel):
        return model.builtin or model.display
    if isinstance(model, str | bytes):
        return model if isinstance(model, str) else "<model bytes>"
    if isinstance(model, onnx.ModelProto):
        return "<in-memory model>"
    return str(model)


def weights_dtype(proto: onnx.ModelProto) -> str:
    """'float16' when most weight elements are half precision, else 'float32' (for picking
    the cached calibration of that type)."""
    half = full = 0
    for t in proto.graph.initializer:
        n = math.prod(t.dims)
        if t.data_type in (onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16):
            half += n
        elif t.data_type == onnx.TensorProto.FLOAT:
            full += n
    return "float16" if half > full else "float32"


def present_for(layout: CacheLayout) -> dict[str, str]:
    """Past input -> the present output fed back into it on the next step.

    Paired by the name after the prefix (``past_key_values.0.key`` <- ``present.0.key``,
    ``past_0`` <- ``present_0``), else in order.
    """

    def tail(name: str, prefix: re.Pattern[str]) -> str:
        rest = prefix.sub("", name)
        return re.sub(r"^(_key_values)?[._]?", "", rest)

    outs = {tail(o, _PRESENT): o for o in layout.present_outputs}
    pairs = {p: outs.get(tail(p, _PAST), "") for p in layout.past_inputs}
    if all(pairs.values()) and len(set(pairs.values())) == len(pairs):
        return pairs
    if len(layout.past_inputs) != len(layout.present_outputs):
        raise DecoderError(
            f"{len(layout.past_inputs)} cache inputs but {len(layout.present_outputs)} present "
            f"outputs: cannot feed the cache back"
        )
    return dict(zip(layout.past_inputs, layout.present_outputs, strict=True))


__all__ = [
    "SCHEMA",
    "CacheLayout",
    "DecoderError",
    "LlmReport",
    "LlmTraining",
    "PhaseCost",
    "Roofline",
    "cache_bytes_per_token",
    "detect",
    "embedding_params",
    "fixed_cache_bytes",
    "llm_report",
    "present_for",
    "weights_dtype",
]
