"""The sweep on a real local Ray cluster (``ray start --head`` on 127.0.0.1, stopped after)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, cli

pytest.importorskip("ray")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A one-node Ray cluster of 2 CPUs on 127.0.0.1; its address."""
    ray_bin = Path(sys.executable).with_name("ray")
    temp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))  # Ray's socket paths are short
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0")
    start = subprocess.run(
        [str(ray_bin), "start", "--head", "--node-ip-address=127.0.0.1", "--port=0",
         "--num-cpus=2", "--num-gpus=0", "--include-dashboard=false",
         f"--temp-dir={temp}", "--disable-usage-stats"],
        env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    try:
        assert start.returncode == 0, start.stdout + start.stderr
        found = re.search(r"--address='([0-9.]+:[0-9]+)'", start.stdout)
        assert found, start.stdout
        yield found.group(1)
    finally:
        subprocess.run([str(ray_bin), "stop", "--force"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(temp, ignore_errors=True)


def test_a_sweep_on_a_ray_cluster(tmp_path: Path, cluster: str) -> None:
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    (tmp_path / "g.toml").write_text(
        'command = "analyze"\nmodels = ["mlp", "bad.onnx"]\n[grid]\ndim = ["batch=1", "batch=8"]\n'
    )
    r = cli("sweep", "g.toml", "-o", "r.jsonl", "--ray", cluster, "-f", "csv", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
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
