"""Batch: which dims are the batch, a sweep over batch sizes, and the largest batch that fits.

The batch is every dim named by ``batch_dim``; by default the first input's first dim (every
dim with that symbol, or dim 0 of each input whose first dim is unnamed). A fixed first dim
above 1 is the batch only where an output has it as its first dim too: a detector that takes
one image, ``[3, 320, 320]``, has no batch of 3 (``unbatched``). The max-batch search
doubles the batch until a probe fails, then bisects between the last success and the first
failure. Each probe runs in a fresh ``python -m onnxcost.bench._probe`` process, so running out
of memory (even being killed for it) ends the probe, never the benchmark.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from onnxcost.analysis.records import Layout, TensorRecord, to_jsonable
from onnxcost.bench.fit import BatchEstimate, largest_fitting
from onnxcost.bench.inputs import InputSpec
from onnxcost.bench.session import SessionConfig
from onnxcost.bench.timing import LatencyStats, throughput_per_s
from onnxcost.errors import UsageError


@dataclass(frozen=True, slots=True)
class BatchAxis:
    """The dims that carry the batch: (input name, axis) pairs."""

    symbol: str | None
    """The symbolic name of the batch dim (None when unnamed or fixed)."""
    dims: tuple[tuple[str, int], ...]
    fixed: int | None = None
    """The declared batch when the model fixes it (then no other batch can run)."""


def batch_axis(
    declared: Sequence[TensorRecord],
    batch_dim: str | None = None,
    outputs: Sequence[TensorRecord] | None = None,
) -> BatchAxis | None:
    """Find the batch dims in the model's declared inputs: None where no input has a dim, or
    where the first input's first dim is fixed above 1 and none of ``outputs`` (their
    inferred shapes) starts with it (``unbatched``)."""
    if batch_dim is not None:
        dims = tuple(
            (d.name, i)
            for d in declared
            if d.shape
            for i, x in enumerate(d.shape)
            if x == batch_dim
        )
        if not dims:
            named = sorted({x for d in declared if d.shape for x in d.shape if isinstance(x, str)})
            raise UsageError(
                f"no input has a dim named {batch_dim!r}; symbolic dims of the inputs: {', '.join(named) or 'none'}"
            )
        return BatchAxis(batch_dim, dims)
    first = next((d for d in declared if d.shape), None)
    if first is None or first.shape is None:
        return None
    head = first.shape[0]
    if isinstance(head, str):
        dims = tuple(
            (d.name, i) for d in declared if d.shape for i, x in enumerate(d.shape) if x == head
        )
        return BatchAxis(head, dims)
    if head is None:
        return BatchAxis(
            None, tuple((d.name, 0) for d in declared if d.shape and d.shape[0] is None)
        )
    if outputs is not None and unbatched(declared, outputs) is not None:
        return None
    return BatchAxis(None, ((first.name, 0),), fixed=head)


def unbatched(declared: Sequence[TensorRecord], outputs: Sequence[TensorRecord]) -> str | None:
    """Why the first input's fixed first dim is not a batch (for a warning), or None. A batch
    carries through the model to its outputs' first dim; a dim that none of them starts with
    is the input's own (a detector's image, ``[3, 320, 320]``: 3 channels), so the model runs
    one sample a run, and its throughput is runs per second, not 3 times that."""
    first = next((d for d in declared if d.shape), None)
    if first is None or first.shape is None:
        return None
    head = first.shape[0]
    if not isinstance(head, int) or head == 1:
        return None
    if any(o.shape and o.shape[0] == head for o in outputs):
        return None
    shape = ", ".join("?" if d is None else str(d) for d in first.shape)
    return (
        f"input {first.name!r} [{shape}] fixes its first dim to {head}, and no output starts "
        f"with {head}: it is not taken as a batch (throughput counts one sample a run)"
    )


def batch_of(specs: Sequence[InputSpec], axis: BatchAxis | None) -> int:
    """The batch the specs run at (1 when there is no batch dim)."""
    if axis is None or not axis.dims:
        return 1
    name, i = axis.dims[0]
    spec = next(s for s in specs if s.name == name)
    return spec.shape[i]


def with_batch(
    specs: Sequence[InputSpec], axis: BatchAxis | None, batch: int
) -> tuple[InputSpec, ...]:
    """Specs with every batch dim set to ``batch`` (UsageError when the model fixes another)."""
    if axis is None:
        if batch != 1:
            raise UsageError(
                "the model's inputs have no batch dim, so there is no batch to change; bench "
                "other batches with a model exported with one"
            )
        return tuple(specs)
    if axis.fixed is not None and batch != axis.fixed:
        raise UsageError(
            f"input {axis.dims[0][0]!r} fixes the batch to {axis.fixed}; bench other batches with a model "
            f"exported with a dynamic batch dim"
        )
    where: dict[str, list[int]] = {}
    for name, i in axis.dims:
        where.setdefault(name, []).append(i)
    out = []
    for s in specs:
        shape = list(s.shape)
        for i in where.get(s.name, ()):
            shape[i] = batch
        out.append(s.with_shape(tuple(shape)))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class BatchPoint:
    """Latency and throughput at one batch size."""

    batch: int
    latency: LatencyStats
    runs: int
    wall_s: float
    from_main_run: bool = False
    """The main measurement's runs, reused because this is the batch the model ran at."""

    @property
    def throughput_per_s(self) -> float:
        """batch / median latency, from the same runs as ``latency``."""
        return throughput_per_s(self.batch, self.latency.median_ms)

    JSON_LAYOUT: ClassVar[Layout] = (
        "batch",
        "runs",
        ("latency_ms", "latency"),
        "throughput_per_s",
        "from_main_run",
    )

    def as_dict(self) -> dict[str, Any]:
        return to_jsonable(self)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class Probe:
    """One max-batch probe: did the batch run, and how fast."""

    batch: int
    ok: bool
    throughput_per_s: float | None = None
    median_ms: float | None = None
    detail: str = ""
    rss_bytes: int | None = None
    """The probe process's peak resident set (``ru_maxrss``): the model's weights and
    activations, onnxruntime's arena and the interpreter (None where not measured)."""

    def as_dict(self) -> dict[str, Any]:
        return to_jsonable(self)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class MaxBatch:
    """Every probe of a max-batch search, in the order run."""

    probes: tuple[Probe, ...]
    limit: int
    estimate: BatchEstimate | None = None
    """The largest batch that fits by the formulas (``fit.py``), found before the probes."""
    estimate_note: str | None = None
    """Why there is no estimate, where there is none."""

    @property
    def largest_ok(self) -> int | None:
        ok = [p.batch for p in self.probes if p.ok]
        return max(ok) if ok else None

    @property
    def best(self) -> Probe | None:
        """The throughput-optimal probe (ties: the smaller batch)."""
        ok = [p for p in self.probes if p.ok and p.throughput_per_s is not None]
        return max(ok, key=lambda p: (p.throughput_per_s or 0.0, -p.batch)) if ok else None

    @property
    def hit_limit(self) -> bool:
        """The search stopped at ``limit``, not at a failure: the true maximum may be larger."""
        return self.largest_ok == self.limit

    @property
    def estimate_error(self) -> float | None:
        """(estimated - measured) / measured largest batch, where both ended below the limit
        (a batch the probes saw fail, one the formulas say needs more than is free)."""
        e, ok = self.estimate, self.largest_ok
        if e is None or e.batch is None or e.capped or ok is None or self.hit_limit:
            return None
        return (e.batch - ok) / ok

    JSON_LAYOUT: ClassVar[Layout] = (
        "limit",
        "largest_ok",
        "hit_limit",
        ("best_batch", "best.batch"),
        ("best_throughput_per_s", "best.throughput_per_s"),
        "probes",
        "estimate",
        "estimate_note",
        "estimate_error",
    )

    def as_dict(self) -> dict[str, Any]:
        return to_jsonable(self)  # type: ignore[no-any-return]


def search_max_batch(
    probe: Callable[[int], Probe],
    *,
    limit: int,
    start: int = 1,
    on_probe: Callable[[Probe], None] | None = None,
) -> MaxBatch:
    """Double from ``start`` until a probe fails or ``limit`` is reached, then bisect."""
    if limit < start:
        raise UsageError(f"the max-batch limit ({limit}) must be at least {start}")
    probes: list[Probe] = []

    def run(b: int) -> bool:
        p = probe(b)
        probes.append(p)
        if on_probe is not None:
            on_probe(p)
        return p.ok

    largest_fitting(run, limit, start)
    return MaxBatch(tuple(probes), limit)


@dataclass(frozen=True, slots=True)
class ProbeSetup:
    """Everything a probe process needs except the batch."""

    model_path: str
    external_folder: str | None
    config: SessionConfig
    specs: tuple[InputSpec, ...]
    axis: BatchAxis | None
    warmup: int
    runs: int
    min_seconds: float
    include_copies: bool
    timeout_s: float
    workdir: str


def subprocess_probe(setup: ProbeSetup) -> Callable[[int], Probe]:
    """A probe function that runs each batch in a fresh Python process."""

    def probe(batch: int) -> Probe:
        spec_path = Path(setup.workdir) / f"probe_{batch}.json"
        out_path = Path(setup.workdir) / f"probe_{batch}.out.json"
        spec = {
            "model": setup.model_path,
            "external_folder": setup.external_folder,
            "config": setup.config.to_json(),
            "inputs": [s.as_dict() for s in with_batch(setup.specs, setup.axis, batch)],
            "batch": batch,
            "warmup": setup.warmup,
            "runs": setup.runs,
            "min_seconds": setup.min_seconds,
            "include_copies": setup.include_copies,
        }
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "onnxcost.bench._probe", str(spec_path), str(out_path)],
                capture_output=True,
                timeout=setup.timeout_s,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return Probe(batch, False, detail=f"timed out after {setup.timeout_s:.0f} s")
        result: dict[str, Any] = {}
        if out_path.exists():
            try:
                result = json.loads(out_path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                result = {}
        if proc.returncode == 0 and result.get("ok"):
            rss = result.get("rss_bytes")
            return Probe(
                batch,
                True,
                float(result["throughput_per_s"]),
                float(result["median_ms"]),
                rss_bytes=rss if isinstance(rss, int) else None,
            )
        if result.get("error"):
            return Probe(batch, False, detail=str(result["error"]))
        if proc.returncode < 0:
            sig = -proc.returncode
            why = " (likely out of memory)" if sig == signal.SIGKILL else ""
            return Probe(batch, False, detail=f"killed by signal {sig}{why}")
        tail = proc.stderr.decode("utf-8", errors="replace").strip().splitlines()[-1:] or [
            "no output"
        ]
        return Probe(batch, False, detail=f"exit code {proc.returncode}: {tail[0][:200]}")

    return probe
