"""``BenchOptions``: every setting of one ``run_bench``, in one frozen record."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from onnxcost.analysis.traffic import Traffic
from onnxcost.bench.providers import CPU
from onnxcost.bench.watchdog import DEFAULT_TIMEOUT_S

PROFILE_RUNS = 50
"""Default profiled runs: per-node times are medians over them (see the README for the
measurement that showed this keeps resnet18's top 10 stable)."""


@dataclass(frozen=True, kw_only=True)
class BenchOptions:
    """How ``run_bench`` measures a model; the defaults are ``onnxcost bench``'s.

    ``provider``: a full name or alias (cpu, cuda, tensorrt, ...); ``provider_options``:
    ``{'key': value}`` or ``['key=value', ...]``. ``threads``/``inter_threads``: intra-/inter-op
    threads (inter > 1 selects the parallel executor). ``opt_level``: disable, basic, extended
    or all. ``input_shapes``/``dims`` resolve symbolic shapes as ``onnxcost.analyze`` does
    (``allow_reshape`` lets ``input_shapes`` change dims the model fixes); ``inputs_file``: an
    .npz of real inputs (else random data from ``seed``).

    Warm-up runs ``warmup`` times and at least ``min_warmup_s``; the timed loop ``runs`` times
    and at least ``min_seconds`` (whichever ends later). ``profile`` (implied by ``trace_out``)
    adds per-node times from a separate profiled session of 1 + min(warmup, 10) +
    ``profile_runs`` runs. ``include_copies`` keeps host<->device copies in the loop on GPUs;
    ``cuda_graph`` replays a CUDA graph (static shapes). ``batches`` sweeps batch sizes
    (``batch_dim`` names the batch dim); ``max_batch`` searches up to that batch in
    subprocesses. ``calibrate`` measures (or reads cached) ceilings for the roofline,
    ``recalibrate`` measures them again. ``timeout_s``: the limit of one run (None or 0: none).
    ``ort_log``: onnxruntime's verbose log.
    """

    provider: str = CPU
    provider_options: Mapping[str, object] | Sequence[str] | None = None
    threads: int | None = None
    inter_threads: int | None = None
    opt_level: str = "all"
    input_shapes: Mapping[str, Sequence[int]] | None = None
    dims: Mapping[str, int] | None = None
    allow_reshape: bool = False
    traffic: Traffic = "runtime"
    """How the analysis joined to the run counts bytes (``onnxcost.analyze``'s ``traffic``)."""
    inputs_file: str | os.PathLike[str] | None = None
    seed: int = 0
    warmup: int = 10
    min_warmup_s: float = 0.2
    runs: int = 100
    min_seconds: float = 1.0
    profile: bool = False
    profile_runs: int = PROFILE_RUNS
    trace_out: str | os.PathLike[str] | None = None
    include_copies: bool = False
    cuda_graph: bool = False
    batches: Sequence[int] | None = None
    batch_dim: str | None = None
    max_batch: int | None = None
    calibrate: bool = False
    recalibrate: bool = False
    timeout_s: float | None = DEFAULT_TIMEOUT_S
    ort_log: bool = False
