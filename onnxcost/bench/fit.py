"""The largest batch that fits, estimated from the formulas (``bench --max-batch``'s estimate).

A batch needs the model's weights and its peak of live activations at that batch (the static
analysis' ``param_bytes`` and ``peak_activation_bytes``), and what the process adds whatever
the batch: the interpreter, onnxruntime, its arena's first chunks. The peak's formula in the
batch symbol comes from one symbolic analysis (``analyze --symbolic``, every other dim fixed
at what the bench runs); the rest, the overhead, from the search's first probe, batch 1,
whose peak resident set is measured: the overhead is that less the model's need at 1. So

    needs(b) = weights + peak(b) + overhead

and the estimate is the largest batch up to the search's limit whose need is within the
memory free before the search (``free_memory``), a formula's evaluation a batch. The probes
at the other batches measure what it predicts; the report prints both, with the error.

What it leaves out: onnxruntime's arena growing in chunks and per-kernel buffers, which grow
with the batch (so it runs ahead of the probes: the search decides), and kernels that fuse
away a tensor the graph holds (an attention's scores), which need less. On CUDA the probes'
device memory is not measured, so the estimate is the model's need alone against NVML's free
device memory: a ceiling the CUDA context and cuDNN's workspaces lower.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from onnxcost.analysis.records import NOT_IN_JSON, Layout, TensorRecord, to_jsonable
from onnxcost.errors import OnnxcostError

if TYPE_CHECKING:
    from onnxcost.analysis.traffic import Traffic
    from onnxcost.bench.inputs import InputSpec
    from onnxcost.prepare import PreparedModel
    from onnxcost.symbolic.poly import Formula


@dataclass(frozen=True, slots=True)
class BatchFormula:
    """What a batch needs by the formulas: ``weights_bytes`` + ``formula`` at the batch."""

    symbol: str
    weights_bytes: int
    formula: Formula

    def needs(self, batch: int) -> int:
        found: int = self.weights_bytes + self.formula.evaluate({self.symbol: batch})
        return found


@dataclass(frozen=True, slots=True)
class BatchEstimate:
    """The largest batch (up to the search's limit) whose need (``needs``) is within the
    free memory."""

    batch: int | None
    """None where not even batch 1 fits."""
    limit: int
    need: BatchFormula = field(metadata=NOT_IN_JSON, repr=False)
    overhead_bytes: int
    overhead_source: str
    free_bytes: int
    free_source: str
    """Where ``free_bytes`` comes from (NVML, /proc/meminfo, the cgroup)."""

    def needs(self, batch: int) -> int:
        """Weights, the peak activations at ``batch`` and the overhead, in bytes."""
        return self.need.needs(batch) + self.overhead_bytes

    @property
    def needs_bytes(self) -> int | None:
        """What the estimated batch needs (None where not even 1 fits)."""
        return None if self.batch is None else self.needs(self.batch)

    @property
    def weights_bytes(self) -> int:
        return self.need.weights_bytes

    @property
    def activations(self) -> str:
        """The peak's formula in the batch symbol (Python syntax)."""
        return self.need.formula.python()

    @property
    def capped(self) -> bool:
        """The estimate stopped at the search's limit: larger batches may fit too."""
        return self.batch == self.limit

    JSON_LAYOUT: ClassVar[Layout] = (
        "batch",
        "capped",
        "needs_bytes",
        "weights_bytes",
        ("activations_formula", "activations"),
        "overhead_bytes",
        "overhead_source",
        "free_bytes",
        "free_source",
    )

    def as_dict(self) -> dict[str, Any]:
        return to_jsonable(self)  # type: ignore[no-any-return]


def batch_formula(
    model: PreparedModel,
    declared: Sequence[TensorRecord],
    specs: Sequence[InputSpec],
    symbol: str | None,
    *,
    dims: Mapping[str, int] | None,
    allow_reshape: bool,
    traffic: Traffic,
) -> BatchFormula | str:
    """The need's formula in the batch symbol, or why there is none (for the report: an
    unnamed batch dim, a peak without a formula). ``symbol``: the batch dim's name (None
    where it has none, or the model fixes the batch)."""
    if symbol is None:
        return "the batch dim has no name to keep symbolic (--batch-dim names one)"
    from onnxcost.symbolic.formulas import symbolic_analysis

    fixed = dict(dims or {})
    shapes = {s.name: s.shape for s in specs}
    for d in declared:  # every other named dim at what the bench runs
        for i, x in enumerate(d.shape or ()):
            if isinstance(x, str) and x != symbol and d.name in shapes:
                fixed.setdefault(x, shapes[d.name][i])
    fixed.pop(symbol, None)
    try:
        a = symbolic_analysis(model, dims=fixed, allow_reshape=allow_reshape, traffic=traffic)
    except OnnxcostError as e:
        return f"the symbolic analysis failed ({e})"
    assert a.symbolic is not None
    if a.symbolic.symbols != (symbol,):
        return f"the formulas are in {', '.join(a.symbolic.symbols) or 'no symbol'}, not {symbol}"
    if a.symbolic.least.get(symbol, 1) > 1:  # the probes start at batch 1
        return f"the formulas hold from {symbol}={a.symbolic.least[symbol]} only, not from 1"
    peak = a.symbolic.totals.get("peak_activation_bytes")
    if peak is None:
        why = next((w for w in a.warnings if "peak_activation_bytes" in w), "no formula")
        return f"no formula for the peak activations in {symbol} ({why})"
    return BatchFormula(symbol, a.totals.param_bytes, peak)


def estimate(
    need: BatchFormula,
    *,
    limit: int,
    free: tuple[int, str] | None,
    first_rss: int | None,
) -> BatchEstimate | str:
    """The estimate from the need's formula, the free memory and ``first_rss``, the first
    probe's peak resident set at batch 1 (None: not measured, no overhead counted)."""
    if free is None:
        return "the free memory could not be read"
    overhead, source = 0, "not measured (the model's need alone)"
    if first_rss is not None:
        overhead = first_rss - need.needs(1)
        source = "the batch-1 probe's peak RSS less the model's need at 1"
    free_bytes, free_source = free

    def fits(b: int) -> bool:
        return need.needs(b) + overhead <= free_bytes

    found = largest_fitting(fits, limit)
    return BatchEstimate(found, limit, need, overhead, source, free_bytes, free_source)


def largest_fitting(fits: Callable[[int], bool], limit: int, start: int = 1) -> int | None:
    """The largest b from ``start`` to ``limit`` with ``fits(b)``, where fits holds up to a
    point (the need grows with the batch): doubling from ``start`` until one does not fit or
    ``limit`` is reached, then bisecting between the last that fit and the first that did
    not; None where ``start`` does not fit. Each b is asked once: ``search_max_batch``'s
    fits runs a probe in a process."""
    last_ok: int | None = None
    first_fail: int | None = None
    b = start
    while True:
        if not fits(b):
            first_fail = b
            break
        last_ok = b
        if b >= limit:
            break
        b = min(2 * b, limit)
    if last_ok is None or first_fail is None:
        return last_ok
    lo, hi = last_ok, first_fail
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def free_memory(cuda_device: int | None) -> tuple[int, str] | None:
    """Free bytes and where they were read: NVML's on ``cuda_device``; else the host's."""
    if cuda_device is not None:
        from onnxcost.bench.system import gpu_free_bytes

        free = gpu_free_bytes(cuda_device)
        return None if free is None else (free, f"NVML free memory of GPU {cuda_device}")
    return _host_free()


def _host_free() -> tuple[int, str] | None:
    """MemAvailable, or what the process's memory cgroup leaves where that is less."""
    found: tuple[int, str] | None = None
    try:
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                found = (int(line.split()[1]) * 1024, "MemAvailable of /proc/meminfo")
    except (OSError, ValueError, IndexError):
        return None
    left = _cgroup_free()
    if left is not None and (found is None or left[0] < found[0]):
        return left
    return found


def _cgroup_free() -> tuple[int, str] | None:
    """The memory cgroup's limit less its use (the inactive page cache, which the kernel
    takes back first, not counted as used); None without a limit. cgroup v2
    (``memory.max``, ``memory.current``) or v1 (``memory.limit_in_bytes``,
    ``memory.usage_in_bytes``), at the process's own cgroup (/proc/self/cgroup)."""
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    for line in lines:
        _id, controllers, path = line.split(":", 2)
        if controllers == "":  # v2
            mount, files = Path("/sys/fs/cgroup"), ("memory.max", "memory.current")
            inactive = "inactive_file"
        elif "memory" in controllers.split(","):  # v1
            mount = Path("/sys/fs/cgroup/memory")
            files = ("memory.limit_in_bytes", "memory.usage_in_bytes")
            inactive = "total_inactive_file"
        else:
            continue
        # The path is the host's where the container has no cgroup namespace, and its mount
        # shows only the container's part: the path's tails, longest first, then the root.
        parts = [p for p in path.split("/") if p]
        for where in (mount.joinpath(*parts[i:]) for i in range(len(parts) + 1)):
            try:
                limit = (where / files[0]).read_text(encoding="ascii").strip()
                used = int((where / files[1]).read_text(encoding="ascii"))
                stat = (where / "memory.stat").read_text(encoding="ascii").split()
            except (OSError, ValueError):
                continue
            if not limit.isdigit() or int(limit) >= 1 << 62:
                break  # "max", or v1's "no limit" (a page-rounded 2**63 - 1)
            cache = int(stat[stat.index(inactive) + 1]) if inactive in stat else 0
            left = max(0, int(limit) - used + cache)
            return left, f"the memory cgroup's {files[0]} less its use"
    return None


__all__ = [
    "BatchEstimate",
    "BatchFormula",
    "batch_formula",
    "estimate",
    "free_memory",
    "largest_fitting",
]
