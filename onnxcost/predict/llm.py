"""Predicted generation time of a decoder with a KV cache (``onnxcost llm --device``).

Time to first token: the prefill (seq N, past 0). A decode step: seq 1 at past N (the first)
and at past N + M - 2 (the last); the M - 1 steps are taken as their mean, which is exact
where a step's time grows linearly with the cache. Tokens per second: batch / mean step.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from onnxcost.api import analyze
from onnxcost.llm.cost import detect
from onnxcost.load.model import ModelSource
from onnxcost.predict.device import Device, load_device
from onnxcost.predict.run import predict_analysis, static_inputs
from onnxcost.prepare import PreparedModel, prepare
from onnxcost.symbolic.formulas import with_derived


@dataclass(frozen=True, slots=True)
class LlmPrediction:
    """Predicted times of one generation of ``generate`` tokens after a ``prompt``."""

    device: str
    device_source: str
    roofline_bound: bool
    batch: int
    prompt: int
    generate: int
    time_to_first_token_ms: float
    decode_first_ms: float | None
    decode_last_ms: float | None

    @property
    def decode_step_ms(self) -> float | None:
        """The mean decode step: (first + last) / 2 (None with one token: no decode step)."""
        if self.decode_first_ms is None or self.decode_last_ms is None:
            return None
        return (self.decode_first_ms + self.decode_last_ms) / 2

    @property
    def tokens_per_s(self) -> float | None:
        """Decode tokens per second: batch x 1000 / decode_step_ms."""
        step = self.decode_step_ms
        return None if step is None or step <= 0 else self.batch * 1e3 / step

    @property
    def generation_ms(self) -> float:
        """Time to first token + (M - 1) mean decode steps."""
        return self.time_to_first_token_ms + (self.generate - 1) * (self.decode_step_ms or 0.0)

    JSON_PROPERTIES = ("decode_step_ms", "tokens_per_s", "generation_ms")


def predict_llm(
    model: ModelSource | PreparedModel,
    device: Device | str | os.PathLike[str],
    *,
    prompt: int,
    generate: int,
    batch: int = 1,
    params: Mapping[str, str | int] | None = None,
    dims: Mapping[str, int] | None = None,
    batch_dim: str | None = None,
    seq_dim: str | None = None,
    past_dim: str | None = None,
    provider: str | None = None,
) -> LlmPrediction:
    """The prefill's and the decode steps' predicted times on ``device``."""
    dev = load_device(device, provider)
    source = prepare(model, params=params)
    proto = source.proto
    layout = detect(
        proto, batch_dim=batch_dim, seq_dim=seq_dim, past_dim=past_dim, fixed=dims or {}
    )
    static = static_inputs(proto)
    fixed = dict(dims or {})

    def at(seq: int, past: int) -> float:
        values = {**fixed, layout.batch: batch, layout.seq: seq, layout.past: past}
        analysis = analyze(source, dims=with_derived(proto, {}, values))
        return predict_analysis(analysis, dev, static_shapes=static).latency_ms

    first = at(1, prompt) if generate > 1 else None
    last = at(1, prompt + generate - 2) if generate > 1 else None
    return LlmPrediction(
        dev.name,
        dev.source,
        dev.roofline_bound,
        batch,
        prompt,
        generate,
        at(prompt, 0),
        first,
        last,
    )


__all__ = ["LlmPrediction", "predict_llm"]
