"""Helpers for the bench tests: saved traces, small models, and whether CUDA loads here."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxcost.bench import BenchOptions

TRACES = Path(__file__).resolve().parents[1] / "data" / "ort_traces"


def _events(name: str) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads((TRACES / f"{name}.trace.json").read_text())
    return data


@pytest.fixture
def events() -> Callable[[str], list[dict[str, Any]]]:
    """Events of ``tests/data/ort_traces/<name>.trace.json``."""
    return _events


@pytest.fixture
def graph_json() -> Callable[[str], list[dict[str, Any]]]:
    """Nodes of ``tests/data/ort_traces/<name>.graph.json`` (the optimized graph onnxruntime saved)."""

    def load(name: str) -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = json.loads((TRACES / f"{name}.graph.json").read_text())
        return data

    return load


@functools.cache
def _cuda_loads() -> bool:
    from onnxcost.bench.providers import CUDA, probe_provider

    return probe_provider(CUDA).loads


@pytest.fixture
def cuda() -> None:
    """Skip unless the CUDA execution provider really loads here."""
    try:
        loads = _cuda_loads()
    except ImportError:
        loads = False
    if not loads:
        pytest.skip("the CUDA execution provider does not load on this machine")


@pytest.fixture
def cuda_loads() -> bool:
    return _cuda_loads()


def save(model: onnx.ModelProto, path: Path) -> str:
    onnx.save(model, path)
    return str(path)


def matmul_model(
    *, batch: str | int = "N", k: int = 8, n: int = 4, ir_version: int = 8, named: bool = True
) -> onnx.ModelProto:
    """y[batch, n] = Relu(x[batch, k] @ W[k, n]) with W = 0.1 everywhere."""
    w = numpy_helper.from_array(np.full((k, n), 0.1, np.float32), "W")
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["m"], name="mm" if named else ""),
        helper.make_node("Relu", ["m"], ["y"], name="relu" if named else ""),
    ]
    graph = helper.make_graph(
        nodes,
        "mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, n])],
        [w],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=ir_version
    )


@pytest.fixture
def cbr_path() -> str:
    """The saved Conv+BN+Relu+Conv+Relu model (x[N,3,32,32]) the traces were captured from."""
    return str(TRACES / "cbr.onnx")


@pytest.fixture
def emb_path() -> str:
    """The saved model with unnamed nodes: ids[B] -> Gather(emb[100,16]) -> MatMul -> Add -> Relu."""
    return str(TRACES / "emb.onnx")


@pytest.fixture
def if_path() -> str:
    """If(c) then Neg(Relu(x)) else Abs(x): the branch kernels run inside the If kernel."""
    return str(TRACES / "if.onnx")


@pytest.fixture
def res_path() -> str:
    """A residual block: r = Relu(Conv_a(x)); y = Relu(Conv_b(r) + r)."""
    return str(TRACES / "res.onnx")


@pytest.fixture
def mm_path(tmp_path: Path) -> str:
    return save(matmul_model(), tmp_path / "mm.onnx")


@pytest.fixture
def fast() -> BenchOptions:
    """run_bench options that keep a CPU test well under a second."""
    return BenchOptions(warmup=1, min_warmup_s=0.0, runs=5, min_seconds=0.0)


@pytest.fixture
def model_of() -> Callable[..., onnx.ModelProto]:
    return matmul_model
