"""A per-run time limit: a watchdog thread that stops an onnxruntime run in flight.

onnxruntime checks ``RunOptions.terminate`` between kernels (a Loop checks it between
iterations too), so setting it from another thread ends a run that would never finish; the
run then raises, and the bench reports the time limit instead of that error. The watchdog
polls the start time of the run in progress at most every 0.5 s (``timeout / 10`` for short
limits), so the timed loop pays two attribute writes per run and nothing else.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from onnxcost.bench._ort import import_ort
from onnxcost.errors import BenchError, UsageError

DEFAULT_TIMEOUT_S = 600.0
"""Default limit of one run: ten minutes, far above any model this tool benches in one go,
so only a run that would never finish (a Loop of 10**12 iterations) is stopped."""

QUIET = 4
"""onnxruntime's log severity for 'fatal only': its own coloured error lines stay out of the
terminal, where the bench prints its one-line error instead."""
VERBOSE = 2
"""Warnings and errors: what ``--debug`` shows."""


def check_timeout(timeout_s: float | None) -> float | None:
    """``timeout_s`` if it is a usable limit; None or 0 means no limit; else UsageError."""
    if timeout_s is None or timeout_s == 0:
        return None
    if not math.isfinite(timeout_s) or timeout_s < 0:
        raise UsageError(
            f"--timeout must be a number of seconds above 0 (0: no limit), not {timeout_s}"
        )
    return float(timeout_s)


class Watchdog:
    """Owns the ``RunOptions`` every run of a session gets, and terminates a run that overruns.

    Use as a context manager; build runners with ``options`` and wrap them with ``guard``.
    """

    def __init__(self, timeout_s: float | None, *, log_severity: int = QUIET) -> None:
        ort = import_ort()
        self.timeout_s = check_timeout(timeout_s)
        self.options: Any = ort.RunOptions()
        self.options.log_severity_level = log_severity
        self.fired = False
        self._started: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self.timeout_s is not None:
            self._thread = threading.Thread(
                target=self._watch, name="onnxcost-watchdog", daemon=True
            )
            self._thread.start()

    def _watch(self) -> None:
        assert self.timeout_s is not None
        poll = min(0.5, max(0.01, self.timeout_s / 10))
        while not self._stop.wait(poll):
            started = self._started
            if started is not None and time.monotonic() - started > self.timeout_s:
                self.fired = True
                self.options.terminate = True

    def guard(self, run: Callable[[], object]) -> Callable[[], object]:
        """``run`` (built with ``self.options``) with its start time visible to the watchdog."""
        if self.timeout_s is None:
            return run

        def once() -> object:
            self._started = time.monotonic()
            try:
                return run()
            finally:
                self._started = None

        return once

    def error(self, what: str) -> BenchError:
        """The error to raise when the watchdog stopped a run."""
        return BenchError(
            f"a run of {what} took longer than --timeout {self.timeout_s:g} s and was stopped; "
            f"raise --timeout (0: no limit) or check the model's loop trip counts"
        )

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> Watchdog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
