"""The generation loop of a decoder with a KV cache, run in onnxruntime (``llm --bench``).

Prefill: the prompt's N tokens with an empty cache (past length 0). Then M - 1 decode steps:
one token each (the argmax of the last logits), the previous step's ``present`` outputs fed
back as the ``past`` inputs. Time to first token is the prefill's wall time; per-token decode
latency is each step's; tokens/s = B x M / (prefill + every decode step). One untimed warm-up
generation of two tokens runs first.

Two loops (``cache``):

- ``device``: IO binding. The cache stays where the provider keeps it (CUDA memory for the
  CUDA and TensorRT providers, host memory otherwise): each step binds the previous step's
  ``present`` OrtValues as its ``past`` inputs and lets onnxruntime allocate the new ones on
  the device; only the logits are bound to host memory and read (the argmax is taken there).
  A step's time covers uploading the token ids, mask and positions, the run and the logits.
- ``host``: ``session.run`` with numpy feeds; every step copies the whole cache out to the
  host and back in (on a GPU). A step's time is the run's.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from onnxcost.analysis.records import NOT_IN_JSON, TensorRecord, to_jsonable
from onnxcost.bench._ort import import_ort, ort_error_types, run_error
from onnxcost.bench.providers import CUDA_LIKE
from onnxcost.bench.session import SessionConfig, open_session, prepare_model
from onnxcost.errors import BenchError, UsageError
from onnxcost.llm.cost import CacheLayout, present_for
from onnxcost.load.model import ModelSource
from onnxcost.prepare import PreparedModel

Cache = Literal["device", "host"]
CACHES: tuple[Cache, ...] = ("device", "host")


@dataclass(frozen=True, slots=True)
class LoopTiming:
    """Measured figures of one generation of M tokens for a batch of B prompts of N tokens."""

    provider: str
    cache: Cache
    """Which loop ran: ``device`` (IO binding, the cache never leaves the provider's memory)
    or ``host`` (numpy feeds, the cache through the host every step)."""
    batch: int = field(metadata=NOT_IN_JSON)
    prompt: int = field(metadata=NOT_IN_JSON)
    generate: int = field(metadata=NOT_IN_JSON)
    ttft_ms: float
    """Wall time of the prefill, which yields the first token."""
    decode_ms: tuple[float, ...] = field(metadata=NOT_IN_JSON)
    """Wall time of each of the M - 1 decode steps."""
    tokens: tuple[tuple[int, ...], ...] = field(default=(), metadata=NOT_IN_JSON)
    """The M generated token ids of each sequence (B rows), of the timed generation."""

    JSON_PROPERTIES: ClassVar[tuple[str, ...]] = (
        "decode_median_ms",
        "decode_p90_ms",
        "decode_steps",
        "total_ms",
        "tokens_per_s",
    )
    """The computed figures of the ``bench`` object of ``onnxcost.llm/1`` (``to_jsonable``)."""

    @property
    def decode_median_ms(self) -> float | None:
        return statistics.median(self.decode_ms) if self.decode_ms else None

    @property
    def decode_p90_ms(self) -> float | None:
        if not self.decode_ms:
            return None
        return float(np.percentile(np.array(self.decode_ms), 90))

    @property
    def decode_steps(self) -> int:
        return len(self.decode_ms)

    @property
    def total_ms(self) -> float:
        return self.ttft_ms + sum(self.decode_ms)

    @property
    def tokens_per_s(self) -> float:
        """B x M generated tokens over the whole loop's time."""
        return self.batch * self.generate / (self.total_ms / 1e3) if self.total_ms else 0.0

    def as_dict(self) -> dict[str, Any]:
        return to_jsonable(self)  # type: ignore[no-any-return]


_NP_TYPES = {"float32": np.float32, "float16": np.float16, "int64": np.int64, "int32": np.int32}


def _resolve(
    shape: tuple[int | str | None, ...] | None, sizes: Mapping[str, int], name: str
) -> tuple[int, ...]:
    if shape is None:
        raise BenchError(f"input {name!r} has no declared shape; the loop cannot feed it")
    out = []
    for d in shape:
        if isinstance(d, int) and d > 0:
            out.append(d)
        elif isinstance(d, str) and d in sizes:
            out.append(sizes[d])
        else:
            raise BenchError(f"input {name!r}: cannot size its dim {d!r} for the loop")
    return tuple(out)


def _feeds(
    inputs: tuple[TensorRecord, ...],
    tokens: np.ndarray,
    past: int,
    cache: Mapping[str, Any],
    batch: int,
) -> dict[str, Any]:
    """Every input for one step: the tokens, the cache (numpy arrays or OrtValues, as given),
    and masks or positions as HF sets them."""
    seq = tokens.shape[1]
    feeds: dict[str, Any] = {}
    for t in inputs:
        if t.name in cache:
            feeds[t.name] = cache[t.name]
        elif "mask" in t.name:
            feeds[t.name] = np.ones((batch, past + seq), dtype=_NP_TYPES.get(t.dtype, np.int64))
        elif "position" in t.name:
            positions = np.arange(past, past + seq, dtype=np.int64)
            feeds[t.name] = np.broadcast_to(positions, (batch, seq)).copy()
        else:
            feeds[t.name] = tokens.astype(_NP_TYPES.get(t.dtype, np.int64))
    return feeds


def _no_vocab(name: str, shape: tuple[int | str | None, ...]) -> BenchError:
    what = "a scalar" if not shape else f"of shape {list(shape)}, a vocabulary of 0"
    return BenchError(
        f"the logits {name!r} are {what}: the loop needs [..., vocab] with vocab >= 1 to pick "
        f"the next token; export the decoder with its logits output"
    )


def _next_tokens(logits: np.ndarray, batch: int, name: str) -> np.ndarray:
    """The next token of each sequence, [batch, 1]: the argmax over the last axis of the
    logits, at the last position where there is a sequence axis ([batch, seq, vocab],
    [batch, vocab], [vocab]); one token for every sequence where the first axis is not the
    batch."""
    if logits.ndim == 0 or logits.shape[-1] == 0:
        raise _no_vocab(name, logits.shape)
    ids = np.asarray(logits.argmax(axis=-1))
    if ids.ndim >= 1 and ids.shape[0] == batch:
        return ids.reshape(batch, -1)[:, -1:].astype(np.int64)
    return np.full((batch, 1), ids.reshape(-1)[-1], dtype=np.int64)


@dataclass(slots=True)
class _Steps:
    """One step of either loop: the feeds, the run, the cache carried to the next step."""

    session: Any
    inputs: tuple[TensorRecord, ...]
    pairs: Mapping[str, str]
    """Past input -> the present output fed back into it."""
    empty: Mapping[str, np.ndarray]
    """The prefill's cache: every past input at past length 0."""
    out_names: list[str]
    logits_name: str
    batch: int
    fail: Any
    """The onnxruntime error of a run -> ours (``run_error``)."""
    device: str = "cpu"
    device_id: int = 0
    binding: Any = None
    """The session's IOBinding (the device loop)."""
    cache: dict[str, Any] = field(default_factory=dict)

    def reset(self) -> None:
        self.cache = dict(self.empty)

    def host(self, tokens: np.ndarray, past: int) -> tuple[float, np.ndarray]:
        """``session.run`` with numpy feeds: the cache comes out to the host and goes back."""
        feeds = _feeds(self.inputs, tokens, past, self.cache, self.batch)
        start = time.perf_counter_ns()
        try:
            values = self.session.run(self.out_names, feeds)
        except ort_error_types() as e:
            raise self.fail(e) from e
        ms = (time.perf_counter_ns() - start) / 1e6
        outs = dict(zip(self.out_names, values, strict=True))
        self.cache = {p: outs[o] for p, o in self.pairs.items()}
        return ms, np.asarray(outs[self.logits_name])

    def bound(self, tokens: np.ndarray, past: int) -> tuple[float, np.ndarray]:
        """IO binding: the previous step's present OrtValues are this step's past inputs,
        every output but the logits is allocated by onnxruntime on the device, and only the
        logits are read on the host."""
        ort, binding = import_ort(), self.binding
        feeds = _feeds(self.inputs, tokens, past, self.cache, self.batch)
        start = time.perf_counter_ns()
        binding.clear_binding_inputs()
        binding.clear_binding_outputs()  # else the next run would write into this step's
        for name, value in feeds.items():
            if isinstance(value, np.ndarray):
                value = ort.OrtValue.ortvalue_from_numpy(value, self.device, self.device_id)
            binding.bind_ortvalue_input(name, value)
        for name in self.out_names:
            if name == self.logits_name:
                binding.bind_output(name, "cpu")
            else:
                binding.bind_output(name, self.device, self.device_id)
        try:
            binding.synchronize_inputs()
            self.session.run_with_iobinding(binding)
            binding.synchronize_outputs()
        except ort_error_types() as e:
            raise self.fail(e) from e
        outs = dict(zip(self.out_names, binding.get_outputs(), strict=True))
        logits = outs[self.logits_name].numpy()
        ms = (time.perf_counter_ns() - start) / 1e6
        self.cache = {p: outs[o] for p, o in self.pairs.items()}
        return ms, logits


def device_of(config: SessionConfig) -> tuple[str, int]:
    """Where the device loop keeps the cache: ``("cuda", device_id)`` for the CUDA and
    TensorRT providers (``device_id`` from the provider options), else ``("cpu", 0)``."""
    if config.provider in CUDA_LIKE:
        return "cuda", config.device_id
    return "cpu", 0


def run_llm_loop(
    model: ModelSource | PreparedModel,
    layout: CacheLayout,
    *,
    prompt: int,
    generate: int,
    batch: int = 1,
    config: SessionConfig | None = None,
    seed: int = 0,
    cache: Cache = "device",
) -> LoopTiming:
    """Run prefill then M - 1 cached decode steps in onnxruntime and time each.

    ``model``: best the one ``llm_report`` analysed, prepared with ``weights=True``: then it is
    neither loaded nor built again. ``cache``: ``device`` (IO binding, the cache stays on the
    device) or ``host`` (numpy feeds, the cache through the host every step)."""
    if cache not in CACHES:
        raise UsageError(f"the cache loop must be one of {', '.join(CACHES)}, not {cache!r}")
    config = config or SessionConfig()
    prepared = prepare_model(model)
    opened = open_session(prepared, config)
    session = opened.session
    pairs = present_for(layout)
    inputs = tuple(t for t in prepared.inputs)
    empty: dict[str, np.ndarray] = {}
    for t in inputs:
        if t.name in pairs:
            shape = _resolve(t.shape, {layout.batch: batch, layout.past: 0}, t.name)
            empty[t.name] = np.zeros(shape, dtype=_NP_TYPES.get(t.dtype, np.float32))
    out_names = [o.name for o in session.get_outputs()]
    logits_name = next((n for n in out_names if "logits" in n), out_names[0])
    declared = next((o.shape for o in prepared.outputs if o.name == logits_name), None)
    if declared is not None and (not declared or declared[-1] == 0):
        raise _no_vocab(logits_name, declared)
    vocab = declared[-1] if declared and isinstance(declared[-1], int) else 2
    rng = np.random.default_rng(seed)
    prompt_ids = rng.integers(0, vocab, size=(batch, prompt), dtype=np.int64)

    def fail(e: BaseException) -> BaseException:
        return run_error(e, config.provider, prepared.display)

    device, device_id = device_of(config)
    steps = _Steps(session, inputs, pairs, empty, out_names, logits_name, batch, fail)
    steps.device, steps.device_id = device, device_id
    steps.binding = session.io_binding()
    step = steps.host if cache == "host" else steps.bound

    def generate_tokens(count: int) -> tuple[list[float], list[np.ndarray]]:
        steps.reset()
        past, tokens = 0, prompt_ids
        times: list[float] = []
        made: list[np.ndarray] = []
        for _ in range(count):
            ms, logits = step(tokens, past)
            times.append(ms)
            past += tokens.shape[1]
            tokens = _next_tokens(logits, batch, logits_name)
            made.append(tokens)
        return times, made

    generate_tokens(min(2, generate))  # warm-up, untimed
    times, made = generate_tokens(generate)
    ids = tuple(tuple(int(i) for i in row) for row in np.concatenate(made, axis=1))
    return LoopTiming(
        config.provider, cache, batch, prompt, generate, times[0], tuple(times[1:]), ids
    )


__all__ = ["CACHES", "Cache", "LoopTiming", "device_of", "run_llm_loop"]
