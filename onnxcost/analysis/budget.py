"""Cost budgets for CI gates: parse '2G' / '64MiB', compare an analysis against them.

Counts take K, M, G, T (powers of 1000); byte sizes take KB, MB, GB, TB (powers of 1000)
and KiB, MiB, GiB, TiB (powers of 1024). A plain number is taken as is. Latency budgets are
plain milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Literal

from onnxcost.analysis.records import Totals
from onnxcost.errors import UsageError

Kind = Literal["count", "bytes", "ms"]

COUNT_SUFFIXES: Mapping[str, int] = {
    "": 1,
    "K": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
}
BYTE_SUFFIXES: Mapping[str, int] = {
    "": 1,
    "B": 1,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
    "KIB": 1024,
    "MIB": 1024**2,
    "GIB": 1024**3,
    "TIB": 1024**4,
}
_MAX_BUDGET = Decimal(10) ** 30
"""The largest budget accepted: far above any model, and small enough to print and compare."""
_NUMBER = re.compile(r"^\s*([0-9][0-9_,]*(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$")


def _parse(text: str, flag: str, suffixes: Mapping[str, int], examples: str) -> int:
    match = _NUMBER.match(text)
    suffix = match.group(2).upper() if match else ""
    if match is None or suffix not in suffixes:
        allowed = ", ".join(s for s in suffixes if s)
        raise UsageError(
            f"{flag} {text!r} is not a number with an optional suffix ({allowed}); "
            f"write it like {examples}"
        )
    try:
        value = Decimal(match.group(1).replace("_", "").replace(",", "")) * suffixes[suffix]
    except InvalidOperation as e:
        raise UsageError(f"{flag} {text!r} is not a number; write it like {examples}") from e
    if value > _MAX_BUDGET:
        raise UsageError(
            f"{flag} {text[:40]!r}{'...' if len(text) > 40 else ''} is larger than any model "
            f"(at most 1e30); write it like {examples}"
        )
    if value != value.to_integral_value():
        raise UsageError(f"{flag} {text!r} is not a whole number; write it like {examples}")
    return int(value)


def parse_count(text: str, flag: str = "budget") -> int:
    """'2G' -> 2_000_000_000; '12.5M' -> 12_500_000; '7' -> 7 (K/M/G/T are powers of 1000)."""
    return _parse(text, flag, COUNT_SUFFIXES, "2G, 12.5M or 350000")


def parse_bytes(text: str, flag: str = "budget") -> int:
    """'64MB' -> 64_000_000; '64MiB' -> 67_108_864; '4096' -> 4096."""
    return _parse(text, flag, BYTE_SUFFIXES, "64MB, 64MiB or 1GiB")


def parse_ms(text: str, flag: str = "budget") -> float:
    """'5' -> 5.0; '2.5ms' -> 2.5 (milliseconds)."""
    cleaned = text.strip().lower().removesuffix("ms").strip()
    try:
        value = float(cleaned)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise UsageError(f"{flag} {text!r} is not a positive number of milliseconds, e.g. 5 or 2.5")
    return value


@dataclass(frozen=True, slots=True)
class Budget:
    """An upper limit on one metric: ``key`` names a field of ``Totals`` or 'latency_ms'."""

    key: str
    label: str
    limit: float
    kind: Kind


@dataclass(frozen=True, slots=True)
class BudgetCheck:
    budget: Budget
    value: float

    @property
    def exceeded(self) -> bool:
        return self.value > self.budget.limit

    @property
    def over_percent(self) -> float:
        """By how much ``value`` exceeds the limit, in % of the limit (inf over a 0 limit)."""
        if self.budget.limit == 0:
            return 0.0 if self.value == 0 else float("inf")
        return 100.0 * (self.value - self.budget.limit) / self.budget.limit

    def line(self) -> str:
        """'MACs 40,813,184 exceed the budget 40,000,000 by 813,184 (+2.03%)'; or a within line."""
        b = self.budget
        value, limit = _fmt(self.value, b.kind), _fmt(b.limit, b.kind)
        if not self.exceeded:
            return f"{b.label} {value} within the budget {limit}"
        over = _fmt(self.value - b.limit, b.kind)
        pct = self.over_percent
        shown = "inf" if pct == float("inf") else "<0.01" if pct < 0.005 else f"{pct:.2f}"
        return f"{b.label} {value} exceeds the budget {limit} by {over} (+{shown}%)"

    def usage(self) -> str:
        """'MACs 40,813,184 of 2,000,000,000 (2.04%)'."""
        b = self.budget
        share = f"{100 * self.value / b.limit:.2f}%" if b.limit else "-"
        return f"{b.label} {_fmt(self.value, b.kind)} of {_fmt(b.limit, b.kind)} ({share})"


def ok_line(model: str, checks: Sequence[BudgetCheck]) -> str:
    """The one-line summary of a model within all its budgets."""
    n = len(checks)
    return f"ok: {model} is within {n} budget{'' if n == 1 else 's'}: " + "; ".join(
        c.usage() for c in checks
    )


def _fmt(v: float, kind: Kind) -> str:
    if kind == "ms":
        return f"{v:.4g} ms"
    if kind == "bytes":
        return f"{int(v):,} byte{'' if v == 1 else 's'}"
    return f"{int(v):,}"


STATIC_METRICS: Mapping[str, tuple[str, Kind]] = {
    "macs": ("MACs", "count"),
    "flops": ("FLOPs", "count"),
    "params": ("params", "count"),
    "param_bytes": ("param bytes", "bytes"),
    "peak_activation_bytes": ("peak activation", "bytes"),
}


def budget(key: str, limit: float) -> Budget:
    """A budget for ``key`` (a key of STATIC_METRICS, or 'latency_ms')."""
    if key == "latency_ms":
        return Budget(key, "latency (median)", limit, "ms")
    if key not in STATIC_METRICS:
        known = ", ".join([*STATIC_METRICS, "latency_ms"])
        raise UsageError(f"no budget metric {key!r}; use one of {known}")
    label, kind = STATIC_METRICS[key]
    return Budget(key, label, limit, kind)


def check(
    totals: Totals, budgets: tuple[Budget, ...], *, latency_ms: float | None = None
) -> tuple[BudgetCheck, ...]:
    """Each budget against the analysis totals (and a measured median latency), in order."""
    out = []
    for b in budgets:
        if b.key == "latency_ms":
            if latency_ms is None:
                raise UsageError("a latency budget needs a measured latency: add --bench")
            out.append(BudgetCheck(b, latency_ms))
        else:
            out.append(BudgetCheck(b, getattr(totals, b.key)))
    return tuple(out)


__all__ = [
    "BYTE_SUFFIXES",
    "COUNT_SUFFIXES",
    "STATIC_METRICS",
    "Budget",
    "BudgetCheck",
    "budget",
    "check",
    "ok_line",
    "parse_bytes",
    "parse_count",
    "parse_ms",
]
