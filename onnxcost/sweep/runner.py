"""One cell, one process: ``python -m onnxcost COMMAND --opt value ... -f json -- MODEL`` with a
timeout, and its row.

The cell runs the command's own code path in a process of its own (a new session, so that a
timeout ends the process and anything it started). Exit 0: status ``ok`` and ``result`` the
command's JSON as it printed it. Another exit: ``error`` and the ``reason``, stderr's last
line. Killed by a signal (a segfault, the kernel's out-of-memory killer): ``error`` naming the
signal. Past ``timeout_s``: ``timeout``. Nothing a cell does ends the sweep.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
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


def run_cell(
    argv: Sequence[str],
    *,
    cell: Mapping[str, Any],
    cwd: Path | None = None,
    timeout_s: float | None = None,
    repeat: int | None = None,
) -> dict[str, Any]:
    """Run ``python -m onnxcost *argv`` in ``cwd`` and return the cell's row: ``cell``,
    ``status`` (ok, error, timeout), ``result`` (the command's JSON, None unless ok),
    ``host``, ``started`` (UTC, ISO 8601), ``seconds`` (wall), ``reason`` (unless ok) and
    ``repeat`` (when given)."""
    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "onnxcost", *argv],
        cwd=cwd,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
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


__all__ = ["run_cell"]
