"""One cell, one process: ``python -m onnxcost COMMAND --opt value ... -f json -- MODEL`` with a
timeout, and its row.

The cell runs the command's own code path in a process of its own (a new session, so that a
timeout ends the process and anything it started). Exit 0: status ``ok`` and ``result`` the
command's JSON as it printed it. Another exit: ``error`` and the ``reason``, stderr's last
line. Killed by a signal (a segfault, the kernel's out-of-memory killer): ``error`` naming the
signal. Past ``timeout_s``: ``timeout``. Nothing a cell does ends the sweep.

``Running`` holds the processes of the cells running now, so that a sweep stopped by Ctrl-C
ends them at once (``stop``) instead of waiting for them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REASON_CHARS = 500
"""A reason longer than this is cut (the row stays one readable line)."""

_SIGNALS = {
    signal.SIGKILL: "killed by SIGKILL (out of memory, or killed from outside)",
    signal.SIGSEGV: "crashed with SIGSEGV (segmentation fault)",
    signal.SIGABRT: "crashed with SIGABRT (aborted)",
    signal.SIGBUS: "crashed with SIGBUS (bus error)",
}


def _env() -> dict[str, str]:
    """The environment of a cell: this one, with the onnxcost the driver runs first on the path
    (the same code in the cell as in the driver, wherever the cell's folder is)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # the folder that holds onnxcost/
    path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = root if not path else f"{root}{os.pathsep}{path}"
    return env


def _reason(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    last = lines[-1] if lines else "no message on stderr"
    return last if len(last) <= REASON_CHARS else last[: REASON_CHARS - 1] + "…"


def _signal_reason(returncode: int) -> str:
    try:
        sig = signal.Signals(-returncode)
    except ValueError:
        return f"killed by signal {-returncode}"
    return _SIGNALS.get(sig, f"killed by {sig.name}")


class StoppedError(Exception):
    """A cell was to start after its sweep was stopped (``Running.stop``)."""


class Running:
    """The processes of the cells running now (shared by a pool's threads). ``stop`` kills
    them and keeps any more from starting: a sweep stopped by Ctrl-C ends its cells at once,
    and their rows, cut short, are never written."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen[bytes]] = set()
        self.stopped = False

    def start(self, args: list[str], cwd: Path | None) -> subprocess.Popen[bytes]:
        with self._lock:
            if self.stopped:
                raise StoppedError
            proc = _popen(args, cwd)
            self._procs.add(proc)
            return proc

    def done(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.discard(proc)

    def stop(self) -> None:
        """SIGKILL every running cell's process group; start no more."""
        with self._lock:
            self.stopped = True
            procs = list(self._procs)
        for proc in procs:
            if proc.poll() is None:
                _kill(proc)


def _popen(args: list[str], cwd: Path | None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        args,
        cwd=cwd,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def run_cell(
    argv: Sequence[str],
    *,
    cell: Mapping[str, Any],
    cwd: Path | None = None,
    timeout_s: float | None = None,
    repeat: int | None = None,
    running: Running | None = None,
) -> dict[str, Any]:
    """Run ``python -m onnxcost *argv`` in ``cwd`` and return the cell's row: ``cell``,
    ``status`` (ok, error, timeout), ``result`` (the command's JSON, None unless ok),
    ``host``, ``started`` (UTC, ISO 8601), ``seconds`` (wall), ``reason`` (unless ok) and
    ``repeat`` (when given). With ``running``, the process is registered there while it runs
    (``StoppedError`` if that was stopped)."""
    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    args = [sys.executable, "-m", "onnxcost", *argv]
    proc = running.start(args, cwd) if running is not None else _popen(args, cwd)
    status, result, reason = "ok", None, ""
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill(proc)
        proc.communicate()
        status, reason = "timeout", f"still running after timeout_s={timeout_s:g}: killed"
    else:
        stderr = err.decode("utf-8", "replace")
        if proc.returncode < 0:
            status, reason = "error", _signal_reason(proc.returncode)
        elif proc.returncode != 0:
            status, reason = "error", f"exit {proc.returncode}: {_reason(stderr)}"
        else:
            try:
                result = json.loads(out)
            except ValueError:
                status, reason = "error", f"exit 0 but stdout is not JSON: {_reason(stderr)}"
    finally:
        if proc.poll() is None:  # interrupted while waiting: leave no cell behind
            _kill(proc)
        if running is not None:
            running.done(proc)
    row: dict[str, Any] = {
        "cell": dict(cell),
        "status": status,
        "result": result,
        "host": socket.gethostname(),
        "started": started.isoformat(timespec="milliseconds"),
        "seconds": round(time.perf_counter() - t0, 6),
    }
    if reason:
        row["reason"] = reason
    if repeat is not None:
        row["repeat"] = repeat
    return row


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the cell's process group (the command and whatever it started)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


__all__ = ["Running", "StoppedError", "run_cell"]
