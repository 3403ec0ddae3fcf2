"""Progress events: the library never prints; the caller (the CLI) passes a callback that may."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BenchProgress:
    """One step of a bench run.

    ``phase`` is one of: analyze, session, first_run, warmup, timed, batch, profile,
    calibrate, max_batch. ``done``/``total`` count runs or probes (``total`` None when open).
    """

    phase: str
    done: int
    total: int | None
    message: str


ProgressFn = Callable[[BenchProgress], None]
