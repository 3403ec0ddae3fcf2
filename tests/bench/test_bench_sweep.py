"""Batch dims, the max-batch search (fake probes), and real probes in subprocesses."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.numpy_helper
import pytest

from onnxcost.analysis.records import TensorRecord
from onnxcost.bench import BenchOptions, run_bench
from onnxcost.bench.inputs import InputSpec
from onnxcost.bench.session import SessionConfig
from onnxcost.bench.sweep import (
    BatchAxis,
    Probe,
    ProbeSetup,
    batch_axis,
    batch_of,
    search_max_batch,
    subprocess_probe,
    unbatched,
    with_batch,
)
from onnxcost.errors import UsageError

BERT = (
    TensorRecord("ids", "int64", ("batch", "seq")),
    TensorRecord("mask", "int64", ("batch", "seq")),
)
SPECS = (InputSpec("ids", "int64", (2, 8), 100), InputSpec("mask", "int64", (2, 8)))


def test_batch_axis_from_the_first_symbolic_dim() -> None:
    axis = batch_axis(BERT)
    assert axis == BatchAxis("batch", (("ids", 0), ("mask", 0)))
    assert batch_of(SPECS, axis) == 2
    assert [s.shape for s in with_batch(SPECS, axis, 5)] == [(5, 8), (5, 8)]
    assert with_batch(SPECS, axis, 5)[0].high == 100


def test_named_batch_dim() -> None:
    axis = batch_axis(BERT, "seq")
    assert axis == BatchAxis("seq", (("ids", 1), ("mask", 1)))
    assert [s.shape for s in with_batch(SPECS, axis, 3)] == [(2, 3), (2, 3)]
    with pytest.raises(
        UsageError, match="no input has a dim named 'time'; symbolic dims of the inputs: batch, seq"
    ):
        batch_axis(BERT, "time")


def test_unnamed_and_fixed_batch_dims() -> None:
    unnamed = batch_axis(
        (TensorRecord("x", "float32", (None, 3)), TensorRecord("y", "float32", (4,)))
    )
    assert unnamed == BatchAxis(None, (("x", 0),))
    fixed = batch_axis((TensorRecord("x", "float32", (1, 3)),))
    assert fixed == BatchAxis(None, (("x", 0),), fixed=1)
    spec = (InputSpec("x", "float32", (1, 3)),)
    assert with_batch(spec, fixed, 1) == spec
    with pytest.raises(UsageError, match="fixes the batch to 1"):
        with_batch(spec, fixed, 2)
    assert batch_axis((TensorRecord("s", "float32", ()),)) is None


def test_a_fixed_first_dim_is_a_batch_only_where_an_output_starts_with_it() -> None:
    # torchvision's detectors take one image, [3, 320, 320], and give [N, 4] boxes: 3 is the
    # image's channels, not a batch of 3 (throughput was 3 times the runs per second).
    image = (TensorRecord("images", "float32", (3, 320, 320)),)
    boxes = (TensorRecord("boxes", "float32", ("N", 4)), TensorRecord("scores", "float32", ("N",)))
    assert batch_axis(image, outputs=boxes) is None
    why = unbatched(image, boxes)
    assert why is not None
    assert "input 'images' [3, 320, 320] fixes its first dim to 3" in why
    with pytest.raises(UsageError, match="the model's inputs have no batch dim"):
        with_batch((InputSpec("images", "float32", (3, 320, 320)),), None, 2)
    # A classifier exported at batch 3 gives [3, 1000]: that is a batch of 3.
    logits = (TensorRecord("logits", "float32", (3, 1000)),)
    assert batch_axis(image, outputs=logits) == BatchAxis(None, (("images", 0),), fixed=3)
    assert unbatched(image, logits) is None
    # A fixed batch of 1 is 1 either way, and a named dim is a batch without a look at outputs.
    one = (TensorRecord("x", "float32", (1, 3)),)
    assert batch_axis(one, outputs=boxes) == BatchAxis(None, (("x", 0),), fixed=1)
    assert unbatched(BERT, boxes) is None


def fake(fits_up_to: int, best_at: int) -> Any:
    def probe(b: int) -> Probe:
        if b > fits_up_to:
            return Probe(b, False, detail="out of memory")
        return Probe(b, True, throughput_per_s=1000.0 - (b - best_at) ** 2, median_ms=1.0)

    return probe


def test_search_doubles_then_bisects() -> None:
    result = search_max_batch(fake(37, 16), limit=64)
    # doubling: 1 2 4 8 16 32 ok, 64 fails; bisect (32, 64): 48 x, 40 x, 36 ok, 38 x, 37 ok.
    assert [p.batch for p in result.probes] == [1, 2, 4, 8, 16, 32, 64, 48, 40, 36, 38, 37]
    assert result.largest_ok == 37
    assert not result.hit_limit
    best = result.best
    assert best is not None
    assert best.batch == 16


def test_search_stops_at_the_limit() -> None:
    result = search_max_batch(fake(1000, 1), limit=10)
    assert [p.batch for p in result.probes] == [1, 2, 4, 8, 10]
    assert result.hit_limit


def test_search_when_nothing_fits() -> None:
    result = search_max_batch(fake(0, 1), limit=8)
    assert [p.batch for p in result.probes] == [1]
    assert result.largest_ok is None
    assert result.best is None
    assert result.as_dict()["best_batch"] is None


def setup_for(model: str, tmp_path: Path) -> ProbeSetup:
    return ProbeSetup(
        model_path=model,
        external_folder=None,
        config=SessionConfig(intra_op_threads=1),
        specs=(InputSpec("ids", "int64", (1,), 100),),
        axis=BatchAxis("B", (("ids", 0),)),
        warmup=1,
        runs=3,
        min_seconds=0.0,
        include_copies=False,
        timeout_s=120,
        workdir=str(tmp_path),
    )


@pytest.mark.ort
def test_probe_in_a_subprocess(emb_path: str, tmp_path: Path) -> None:
    probe = subprocess_probe(setup_for(emb_path, tmp_path))
    ok = probe(4)
    assert ok.ok, ok.detail
    assert ok.throughput_per_s is not None
    assert ok.throughput_per_s > 0
    assert ok.rss_bytes is not None  # the session and its runs took some of the host
    assert ok.rss_bytes > 0
    failed = subprocess_probe(setup_for(str(tmp_path / "gone.onnx"), tmp_path))(2)
    assert not failed.ok
    assert "gone.onnx" in failed.detail


@pytest.mark.ort
def test_run_bench_max_batch(emb_path: str, fast: BenchOptions) -> None:
    r = run_bench(emb_path, replace(fast, max_batch=4))
    assert r.max_batch is not None
    assert [p.batch for p in r.max_batch.probes] == [1, 2, 4]
    assert r.max_batch.largest_ok == 4
    assert r.max_batch.hit_limit


@pytest.mark.ort
def test_run_bench_takes_an_image_without_a_batch_dim_as_one_sample(
    tmp_path: Path, fast: BenchOptions
) -> None:
    # x [3, 8, 8] summed over its first dim gives y [8, 8]: 3 channels of one image.
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
        "image",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 8, 8])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(np.array([0], np.int64), "axes")],
    )
    path = tmp_path / "image.onnx"
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    r = run_bench(str(path), fast)
    assert r.batch == 1
    assert any("it is not taken as a batch" in w for w in r.warnings)
