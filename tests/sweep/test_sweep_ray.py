"""The sweep on a real local Ray cluster (``ray start --head``), stopped after.

Ray takes this machine's interface address as its node's whatever ``--node-ip-address``
says (Ray 2.60 printed 192.0.2.2 with --node-ip-address=127.0.0.1), so the cluster, the sweep
that drives it and ``ray stop`` run together in a network namespace of their own that has
loopback only (``unshare -n``, root): nothing can reach or leave the machine. Skipped where
Ray is not installed or no namespace can be made.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import ROOT

pytest.importorskip("ray")

pytestmark = pytest.mark.slow

_SCRIPT = """
set -u
ip link set lo up
{ray} start --head --node-ip-address=127.0.0.1 --port={port} --num-cpus=2 --num-gpus=0 \
    --include-dashboard=false --temp-dir={temp} --disable-usage-stats >{temp}/start.log 2>&1 \
    || {{ cat {temp}/start.log >&2; exit 97; }}
{python} -m onnxcost sweep g.toml -o r.jsonl --ray 127.0.0.1:{port} -f csv
status=$?
{ray} stop --force >/dev/null 2>&1
exit $status
"""


def _netns_available() -> bool:
    probe = (
        subprocess.run(
            ["unshare", "-n", "true"], capture_output=True, text=True, timeout=30, check=False
        )
        if shutil.which("unshare")
        else None
    )
    return probe is not None and probe.returncode == 0


def test_a_sweep_on_a_ray_cluster(tmp_path: Path) -> None:
    if not _netns_available():
        pytest.skip("no network namespace (unshare -n) to keep Ray on loopback")
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    (tmp_path / "g.toml").write_text(
        'command = "analyze"\nmodels = ["mlp", "bad.onnx"]\n[grid]\ndim = ["batch=1", "batch=8"]\n'
    )
    temp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))  # Ray's socket paths are short
    script = _SCRIPT.format(
        ray=shlex.quote(str(Path(sys.executable).with_name("ray"))),
        python=shlex.quote(sys.executable),
        port=6379,
        temp=shlex.quote(str(temp)),
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0")
    try:
        r = subprocess.run(
            ["unshare", "-n", "sh", "-c", script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert sorted((row["cell"]["model"], row["cell"]["dim"], row["status"]) for row in rows) == [
        ("bad.onnx", "batch=1", "error"),
        ("bad.onnx", "batch=8", "error"),
        ("mlp", "batch=1", "ok"),
        ("mlp", "batch=8", "ok"),
    ]
    # MLP 784-128-32-10: 784*128 + 128*32 + 32*10 = 104,768 MACs per sample; x8 = 838,144.
    assert r.stdout.splitlines() == [
        "metric,model,batch=1,batch=8",
        "totals.macs,bad.onnx,error,error",
        "totals.macs,mlp,104768,838144",
    ]
