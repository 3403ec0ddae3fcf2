"""``bench --max-batch``'s estimate from the formulas (``bench/fit.py``): expected values by
hand in the comments."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from rich.console import Console

from onnxcost.bench.fit import (
    BatchEstimate,
    BatchFormula,
    _host_free,
    batch_formula,
    estimate,
    largest_fitting,
)
from onnxcost.bench.inputs import InputSpec
from onnxcost.bench.options import BenchOptions
from onnxcost.bench.run import run_bench
from onnxcost.bench.session import prepare_model
from onnxcost.bench.sweep import MaxBatch, Probe
from onnxcost.report.bench import _estimate_line


def test_the_largest_batch_that_fits() -> None:
    # b² <= 50: 7 (49), 8 is 64; within a limit of 5: 5; nothing fits: None
    assert largest_fitting(lambda b: b * b <= 50, 1000) == 7
    assert largest_fitting(lambda b: b * b <= 50, 5) == 5
    assert largest_fitting(lambda b: b * b <= 50, 1) == 1
    assert largest_fitting(lambda b: False, 64) is None
    assert largest_fitting(lambda b: b <= 64, 64) == 64  # the limit itself, a power of two


def _mlp(dims: list[str | int]) -> onnx.ModelProto:
    """x [..., 16] -> MatMul W [16, 32] -> Relu -> y: weights 16·32·4 = 2,048 bytes."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [*dims, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones((16, 32), np.float32), "W")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _need(
    model: onnx.ModelProto, shape: tuple[int, ...], symbol: str | None = "batch"
) -> BatchFormula | str:
    m = prepare_model(model)
    assert m.prepared is not None
    return batch_formula(
        m.prepared,
        m.inputs,
        (InputSpec("x", "float32", shape),),
        symbol,
        dims=None,
        allow_reshape=False,
        traffic="runtime",
    )


def _estimate(free: int, limit: int = 1000, first_rss: int | None = None) -> BatchEstimate:
    need = _need(_mlp(["batch"]), (1, 16))
    assert isinstance(need, BatchFormula)
    found = estimate(need, limit=limit, free=(free, "test"), first_rss=first_rss)
    assert isinstance(found, BatchEstimate)
    return found


def test_the_estimate_is_the_largest_batch_within_the_free_memory() -> None:
    # Per sample, x is 64 bytes, h and y 128 each. Live at MatMul: x + h = 192; at Relu: h +
    # y = 256. So a batch needs 2,048 + 256·batch: 100 fit in 27,648 bytes, 99 in 27,647.
    e = _estimate(27_648)
    assert (e.batch, e.weights_bytes, e.activations, e.overhead_bytes) == (
        100,
        2_048,
        "256*batch",
        0,
    )
    assert e.needs(100) == e.needs_bytes == 27_648
    assert not e.capped
    assert _estimate(27_647).batch == 99
    assert _estimate(2_048 + 255).batch is None
    capped = _estimate(10**9, limit=64)
    assert capped.batch == 64
    assert capped.capped


def test_the_first_probe_gives_the_overhead() -> None:
    # The batch-1 probe peaked at 102,304 bytes; the model needs 2,048 + 256 = 2,304 of
    # them, so the overhead is 100,000, and 500 fit in 2,048 + 256·500 + 100,000 = 230,048.
    e = _estimate(230_048, first_rss=102_304)
    assert (e.overhead_bytes, e.batch) == (100_000, 500)
    assert e.needs(1) == 102_304  # the probe's own figure, by construction
    assert e.overhead_source == "the batch-1 probe's peak RSS less the model's need at 1"


def test_the_other_dims_are_fixed_at_what_the_bench_runs() -> None:
    # seq = 5 as the bench's input [1, 5, 16]: 256·5 = 1,280 bytes a sample; 2,048 + 1,280·10
    # = 14,848 fits 10.
    need = _need(_mlp(["batch", "seq"]), (1, 5, 16))
    assert isinstance(need, BatchFormula)
    assert (need.formula.python(), need.needs(10)) == ("1280*batch", 14_848)


def test_no_estimate_without_a_named_batch_dim_or_free_memory() -> None:
    why = _need(_mlp([4]), (4, 16), None)
    assert why == "the batch dim has no name to keep symbolic (--batch-dim names one)"
    need = _need(_mlp(["batch"]), (1, 16))
    assert isinstance(need, BatchFormula)
    assert estimate(need, limit=8, free=None, first_rss=None) == "the free memory could not be read"


def _searched(fails_from: int, estimate: BatchEstimate | None) -> MaxBatch:
    probes = tuple(Probe(b, b < fails_from, 10.0, 1.0) for b in (1, 2, 4, 8, 16))
    return MaxBatch(probes, 64, estimate=estimate)


def test_the_estimate_error_and_its_line() -> None:
    e = _estimate(2_048 + 256 * 10)
    assert e.batch == 10
    # probes ran up to 8 and failed at 16 (the fake search does not bisect): (10 - 8) / 8
    mb = _searched(16, e)
    assert mb.largest_ok == 8
    assert mb.estimate_error == pytest.approx(0.25)
    line = _estimate_line(mb)
    assert line == (
        "estimate from the formulas: batch 10, needing weights 2.00 KiB + peak activations "
        "2.50 KiB of 4.50 KiB free (test); +25.0% against the largest batch that ran"
    )
    d = mb.as_dict()
    assert d["estimate"] == {
        "batch": 10,
        "capped": False,
        "needs_bytes": 4_608,
        "weights_bytes": 2_048,
        "activations_formula": "256*batch",
        "overhead_bytes": 0,
        "overhead_source": "not measured (the model's need alone)",
        "free_bytes": 4_608,
        "free_source": "test",
    }
    assert d["estimate_error"] == pytest.approx(0.25)
    # no error where the probes reached the limit: the true largest batch is not known
    assert replace(mb, probes=(Probe(64, True, 1.0, 1.0),)).estimate_error is None
    none = MaxBatch((), 8, estimate_note="the free memory could not be read")
    assert _estimate_line(none) == (
        "estimate from the formulas: none (the free memory could not be read)"
    )


def test_the_host_free_memory_is_read() -> None:
    found = _host_free()
    if not Path("/proc/meminfo").exists():
        pytest.skip("no /proc/meminfo")
    assert found is not None
    assert found[0] > 0


@pytest.mark.ort
def test_run_bench_max_batch_gives_the_estimate(emb_path: str, fast: BenchOptions) -> None:
    r = run_bench(emb_path, dataclasses.replace(fast, max_batch=4))
    assert r.max_batch is not None
    assert r.max_batch.estimate is not None, r.max_batch.estimate_note
    # ids [B] -> 16-wide embedding rows: a few hundred bytes a sample; GBs free: the limit
    assert r.max_batch.estimate.batch == 4
    assert r.max_batch.estimate.capped
    console = Console(width=80, record=True)
    console.print(_estimate_line(r.max_batch))
    assert "estimate from the formulas: batch 4 (the search limit" in console.export_text()


def test_no_estimate_where_the_batch_symbol_starts_above_1() -> None:
    from test_symbolic_least import _chain  # valid from n = 24 only (by hand there)

    m = prepare_model(_chain())
    assert m.prepared is not None
    why = batch_formula(
        m.prepared,
        m.inputs,
        (InputSpec("x", "float32", (1, 1, 24)),),
        "n",
        dims=None,
        allow_reshape=False,
        traffic="runtime",
    )
    assert why == "the formulas hold from n=24 only, not from 1"
