"""run_bench end to end on the CPU provider, with small models and few runs."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.parser
import pytest
from onnx import TensorProto, helper

from onnxcost.bench import BenchOptions, BenchProgress, read_trace, run_bench
from onnxcost.bench.profile import parse_trace
from onnxcost.errors import BenchError, ModelLoadError, ProviderError, ShapeError, UsageError

pytestmark = pytest.mark.ort


def test_latency_phases_and_inputs(cbr_path: str, fast: BenchOptions) -> None:
    r = run_bench(cbr_path, replace(fast, dims={"N": 2}))
    assert r.provider == "CPUExecutionProvider"
    assert (r.runs, r.warmup, r.batch) == (5, 1, 2)
    assert [(s.name, s.dtype, s.shape) for s in r.inputs] == [("x", "float32", (2, 3, 32, 32))]
    lat = r.latency
    assert lat.count == 5
    assert lat.min_ms <= lat.median_ms <= lat.p90_ms <= lat.max_ms
    assert r.phases.session_create_ms > 0
    assert r.phases.first_run_ms > 0
    # throughput is batch / median latency: 2 x 1000 / median ms.
    assert r.throughput_per_s == pytest.approx(2 * 1000 / lat.median_ms)
    assert r.profile is None
    assert r.settings.inputs_source == "random (seed 0)"
    assert not r.settings.io_binding


def test_free_dims_default_to_one_with_a_warning(cbr_path: str, fast: BenchOptions) -> None:
    r = run_bench(cbr_path, fast)
    assert r.inputs[0].shape == (1, 3, 32, 32)
    assert r.batch == 1
    assert any("'N'" in w and "--dim N=" in w for w in r.warnings)


def test_profile_maps_nchwc_kernels_to_source_nodes(
    cbr_path: str, fast: BenchOptions, tmp_path: Path
) -> None:
    out = tmp_path / "trace.json"
    r = run_bench(cbr_path, replace(fast, dims={"N": 1}, profile_runs=4, trace_out=out))
    assert r.profile is not None
    p = r.profile
    rows = {n.name: n for n in p.nodes}
    assert set(rows) == {"conv1+bn1+relu1", "conv2+relu2", "ReorderOutput"}
    assert rows["conv1+bn1+relu1"].mapping == "fused"
    # conv2: 16 x 32 x 32 outputs x 16 x 3 x 3 = 2359296 MACs (Relu none).
    assert rows["conv2+relu2"].macs == 2_359_296
    assert rows["ReorderOutput"].mapping == "inserted"
    assert p.mapped_with == "optimized_graph"
    # first run + min(warmup 1, 10) dropped; 4 kept.
    assert (p.warmup_runs, p.runs) == (2, 4)
    assert sum(n.share for n in p.nodes) == pytest.approx(1.0)
    assert not p.host_launch_times
    assert p.untimed_nodes == ()
    trace = parse_trace(read_trace(out))
    assert len(trace.runs) == 4
    assert {k.name for k in trace.kernels} == {"r1_nchwc", "y_nchwc", "ReorderOutput"}


def test_opt_level_disable_runs_source_nodes(cbr_path: str, fast: BenchOptions) -> None:
    r = run_bench(
        cbr_path, replace(fast, dims={"N": 1}, opt_level="disable", profile=True, profile_runs=2)
    )
    assert r.profile is not None
    assert [(n.name, n.mapping) for n in r.profile.nodes] == [
        ("conv1", "direct"),
        ("bn1", "direct"),
        ("relu1", "direct"),
        ("conv2", "direct"),
        ("relu2", "direct"),
    ]
    assert r.settings.opt_level == "disable"


def test_unnamed_nodes_join_and_token_ids_stay_in_vocabulary(
    emb_path: str, fast: BenchOptions
) -> None:
    r = run_bench(emb_path, replace(fast, dims={"B": 16}, profile=True, profile_runs=2))
    assert r.profile is not None
    assert [n.name for n in r.profile.nodes] == ["Gather_0", "MatMul_1+Add_2+Relu_3"]
    (ids,) = r.inputs
    # emb is a [100, 16] table: ids are drawn from [0, 100).
    assert ids.high == 100


def test_inputs_file(emb_path: str, fast: BenchOptions, tmp_path: Path) -> None:
    path = tmp_path / "ids.npz"
    np.savez(path, ids=np.arange(6, dtype=np.int64))
    r = run_bench(emb_path, replace(fast, inputs_file=path))
    assert r.inputs[0].shape == (6,)
    assert r.batch == 6
    assert r.settings.inputs_source == str(path)
    np.savez(path, ids=np.arange(6, dtype=np.int32))
    with pytest.raises(BenchError, match="int32 but the model wants int64"):
        run_bench(emb_path, replace(fast, inputs_file=path))


def test_batch_sweep(emb_path: str, fast: BenchOptions) -> None:
    r = run_bench(emb_path, replace(fast, batches=[1, 3]))
    assert [p.batch for p in r.sweep] == [1, 3]
    assert all(p.runs == 5 for p in r.sweep)
    # batch 1 is the batch the model ran at: the main measurement, not a second timing.
    assert r.batch == 1
    assert r.sweep[0].from_main_run
    assert not r.sweep[1].from_main_run
    assert r.sweep[0].latency == r.latency
    assert r.sweep[0].throughput_per_s == r.throughput_per_s
    # batch / median latency: 3 x 1000 / median ms.
    assert r.sweep[1].throughput_per_s == pytest.approx(3 * 1000 / r.sweep[1].latency.median_ms)


def test_fixed_batch_cannot_sweep(
    model_of: Callable[..., onnx.ModelProto], tmp_path: Path, fast: BenchOptions
) -> None:
    path = tmp_path / "fixed.onnx"
    onnx.save(model_of(batch=1), path)
    with pytest.raises(UsageError, match="fixes the batch to 1"):
        run_bench(str(path), replace(fast, batches=[2]))


def test_progress_phases(mm_path: str, fast: BenchOptions) -> None:
    seen: list[BenchProgress] = []
    run_bench(mm_path, fast, progress=seen.append)
    phases = list(dict.fromkeys(p.phase for p in seen))
    assert phases == ["analyze", "session", "first_run", "warmup", "timed"]


def test_model_bytes_and_proto(
    model_of: Callable[..., onnx.ModelProto], fast: BenchOptions
) -> None:
    proto = model_of(named=False)
    r = run_bench(proto, replace(fast, dims={"N": 2}, profile=True, profile_runs=2))
    assert r.model == "<in-memory model>"
    assert r.profile is not None
    # unnamed nodes get the analyzer's names, and onnxruntime sees them too.
    assert [(n.name, n.mapping) for n in r.profile.nodes] == [
        ("MatMul_0", "direct"),
        ("Relu_1", "direct"),
    ]
    assert run_bench(proto.SerializeToString(), fast).runs == 5


def test_unknown_op_is_a_model_load_error(tmp_path: Path, fast: BenchOptions) -> None:
    graph = helper.make_graph(
        [helper.make_node("FooBar", ["x"], ["y"], domain="com.acme", name="foo")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.acme", 1)],
        ir_version=8,
    )
    path = tmp_path / "foo.onnx"
    onnx.save(model, path)
    with pytest.raises(ModelLoadError, match="no kernel for an op") as e:
        run_bench(str(path), fast)
    assert "\n" not in str(e.value)


def test_a_run_that_fails_at_the_unset_dims_names_them(tmp_path: Path, fast: BenchOptions) -> None:
    # a Keras Conv1D over (batch, time, 1) as tf2onnx writes it: time unset runs at 1 sample,
    # shorter than the kernel of 3, and onnxruntime's Conv fails ("Invalid input shape")
    model = onnx.parser.parse_model(
        '<ir_version: 8, opset_import: ["" : 17]>'
        "g (float[unk__1,1,unk__2] x) => (float[unk__1,4,?] y) <float[4,1,3] w = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0}> {"
        " y = Conv (x, w) }"
    )
    path = tmp_path / "conv1d.onnx"
    onnx.save(model, path)
    with pytest.raises(BenchError) as e:
        run_bench(str(path), fast)
    message = str(e.value)
    assert "the dims unk__1, unk__2 were unset and ran at 1" in message, message
    assert "--dim unk__1=N --dim unk__2=N" in message
    assert "\n" not in message
    assert run_bench(str(path), replace(fast, dims={"unk__2": 8})).runs == 5


def test_too_new_ir_version_is_a_model_load_error(
    model_of: Callable[..., onnx.ModelProto], tmp_path: Path, fast: BenchOptions
) -> None:
    # onnx 1.23 writes IR version 14 by default; onnxruntime 1.31 reads up to 13.
    path = tmp_path / "ir.onnx"
    onnx.save(model_of(ir_version=14), path)
    with pytest.raises(ModelLoadError, match=r"IR version: 14.*lower ir_version"):
        run_bench(str(path), fast)


def test_wrong_input_shape_is_a_shape_error(mm_path: str, fast: BenchOptions) -> None:
    # the model's x is [N, 8]: dim 1 is fixed, so x=2x5 is refused before onnxruntime runs
    with pytest.raises(ShapeError, match=r"dim 1: model 8, yours 5"):
        run_bench(mm_path, replace(fast, input_shapes={"x": (2, 5)}))
    # --allow-reshape insists, and the MatMul's 5 columns against its 8-row weight disagree
    with pytest.raises(ShapeError, match=r"Incompatible dimensions for matrix multiplication"):
        run_bench(mm_path, replace(fast, input_shapes={"x": (2, 5)}, allow_reshape=True))


def test_missing_file(tmp_path: Path, fast: BenchOptions) -> None:
    with pytest.raises(ModelLoadError, match="no such file"):
        run_bench(str(tmp_path / "none.onnx"), fast)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"runs": 0}, "--runs must be 1 or more"),
        ({"warmup": -1}, "--warmup"),
        ({"threads": 0}, "--threads"),
        ({"opt_level": "max"}, "--opt-level must be one of"),
        ({"cuda_graph": True}, "--cuda-graph needs the CUDA provider"),
        ({"provider": "quantum"}, "unknown execution provider"),
        ({"batches": [0]}, "batch sizes"),
        ({"provider_options": ["device_id"]}, "KEY=VALUE"),
    ],
)
def test_bad_arguments(mm_path: str, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        run_bench(mm_path, BenchOptions(**kwargs))


def test_cuda_that_does_not_load_is_a_provider_error(
    mm_path: str, fast: BenchOptions, cuda_loads: bool
) -> None:
    if cuda_loads:
        pytest.skip("CUDA loads here; the GPU tests cover it")
    from onnxcost.bench.providers import no_nvidia_driver

    expected = "no NVIDIA driver or GPU" if no_nvidia_driver() else "pip install"
    with pytest.raises(ProviderError, match=expected) as e:
        run_bench(mm_path, replace(fast, provider="cuda"))
    assert "CUDAExecutionProvider" in str(e.value)


def test_import_does_not_load_onnxruntime() -> None:
    code = "import sys, onnxcost.bench, onnxcost.report.bench; print('onnxruntime' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_json_round_trip(mm_path: str, fast: BenchOptions) -> None:
    r = run_bench(mm_path, replace(fast, profile=True, profile_runs=2, batches=[2]))
    d = json.loads(json.dumps(r.to_dict()))
    assert d["schema"] == "onnxcost.bench/1"
    assert d["runs"] == 5
    assert [n["name"] for n in d["nodes"]]
    assert d["sweep"][0]["batch"] == 2


def test_external_data_with_renamed_nodes(
    model_of: Callable[..., onnx.ModelProto], tmp_path: Path, fast: BenchOptions
) -> None:
    # unnamed nodes make onnxcost hand onnxruntime bytes; the weights stay in mm.data beside mm.onnx
    path = tmp_path / "mm.onnx"
    onnx.save(
        model_of(named=False),
        path,
        save_as_external_data=True,
        location="mm.data",
        size_threshold=0,
    )
    assert (tmp_path / "mm.data").exists()
    r = run_bench(str(path), replace(fast, profile=True, profile_runs=2, max_batch=2))
    assert r.profile is not None
    assert [n.name for n in r.profile.nodes] == ["MatMul_0", "Relu_1"]
    assert r.max_batch is not None
    assert r.max_batch.largest_ok == 2


def test_options_are_one_frozen_record(mm_path: str) -> None:
    import dataclasses

    o = BenchOptions()
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.runs = 5  # type: ignore[misc]
    # the settings are BenchOptions' fields, not keywords of run_bench.
    with pytest.raises(TypeError, match="runs"):
        run_bench(mm_path, runs=5)  # type: ignore[call-arg]


def test_options_default_to_the_commands_defaults() -> None:
    from onnxcost.cli import bench as cli

    o = BenchOptions()
    # onnxcost bench --help: --warmup 10, --runs 100, --min-seconds 1.0, --opt-level all,
    # --provider CPUExecutionProvider; profile runs and timeout as the command's constants.
    assert (o.warmup, o.runs, o.min_seconds, o.opt_level) == (10, 100, 1.0, "all")
    assert o.provider == "CPUExecutionProvider"
    assert (o.profile_runs, o.timeout_s) == (cli.BENCH_PROFILE_RUNS, cli.BENCH_TIMEOUT_S)
