"""Providers: names, options, why one did not load, and onnxruntime's error messages."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from onnxcost.bench import _ort, providers
from onnxcost.bench._ort import capture_output, clean_message, is_oom
from onnxcost.bench.providers import (
    CPU,
    CUDA,
    available_providers,
    diagnose,
    install_hint,
    parse_provider_options,
    provider_dropped,
    resolve_provider,
)
from onnxcost.errors import ProviderError, UsageError

# What onnxruntime-gpu 1.31.1 logged here (no CUDA libraries) while creating a CUDA session.
CUDA_LOG = """\
2026-11-22 11:06:42.505020281 [E:onnxruntime:Default, provider_bridge_ort.cc:2458 operator()] /onnxruntime_src/onnxruntime/core/session/provider_bridge_ort.cc:2043 onnxruntime::Provider& onnxruntime::ProviderLibrary::Get() [ONNXRuntimeError] : 1 : FAIL : Failed to load library /work/venv/lib/python3.11/site-packages/onnxruntime/capi/libonnxruntime_providers_cuda.so with error: libcublasLt.so.13: cannot open shared object file: No such file or directory
2026-11-22 11:06:42.505098738 [W:onnxruntime:Default, onnxruntime_pybind_state.cc:1295 CreateExecutionProviderFactoryInstance] Failed to create CUDAExecutionProvider. Require cuDNN 9.* and CUDA 13.*. Please install all dependencies as mentioned in the GPU requirements page (https://onnxruntime.ai/docs/execution-providers/CUDA-ExecutionProvider.html#requirements), make sure they're in the PATH, and that your GPU is supported.
"""


def test_diagnose_names_the_missing_library() -> None:
    assert diagnose(CUDA, CUDA_LOG) == (
        "libonnxruntime_providers_cuda.so needs libcublasLt.so.13, which was not found; "
        "this onnxruntime needs cuDNN 9.* and CUDA 13.*"
    )


def test_diagnose_other_causes() -> None:
    assert (
        diagnose(CUDA, "CUDA failure 100: no CUDA-capable device is detected")
        == "no CUDA-capable GPU is visible"
    )
    assert (
        diagnose("FooExecutionProvider", "EP Error Unknown Provider Type: Foo")
        == "this onnxruntime build does not know it"
    )
    assert diagnose(CUDA, "") == "onnxruntime dropped it without logging why"


def test_dropped_provider_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(providers, "no_nvidia_driver", lambda: None)  # a driver, no CUDA libs
    err = provider_dropped(CUDA, [CPU], CUDA_LOG)
    assert isinstance(err, ProviderError)
    text = str(err)
    assert "libcublasLt.so.13" in text
    assert "fell back to CPUExecutionProvider, so nothing was measured" in text
    assert "pip install 'onnxcost[cuda]'" in text
    assert "\n" not in text


def test_install_hints() -> None:
    assert "onnxruntime-gpu[cuda,cudnn]" in install_hint(CUDA)
    assert install_hint("DmlExecutionProvider") == "pip install onnxruntime-directml"


def test_provider_options() -> None:
    assert parse_provider_options(["device_id=1", " arena_extend_strategy = kSameAsRequested"]) == {
        "device_id": "1",
        "arena_extend_strategy": "kSameAsRequested",
    }
    assert parse_provider_options({"enable_cuda_graph": True, "device_id": 0}) == {
        "enable_cuda_graph": "1",
        "device_id": "0",
    }
    assert parse_provider_options(None) == {}
    assert parse_provider_options("device_id=2") == {"device_id": "2"}
    with pytest.raises(UsageError, match="KEY=VALUE"):
        parse_provider_options(["device_id"])


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        (
            "[ONNXRuntimeError] : 1 : FAIL : Fatal error: com.acme:FooBar(-1) is not a registered function/op",
            "com.acme:FooBar(-1) is not a registered function/op",
        ),
        (
            "[ONNXRuntimeError] : 1 : FAIL : /onnxruntime_src/onnxruntime/core/graph/model.cc:256 onnxruntime::Model::Model("
            "onnx::ModelProto&&, const onnxruntime::PathString&, const onnxruntime::IOnnxRuntimeOpSchemaRegistryList*, "
            "const onnxruntime::logging::Logger&, const onnxruntime::ModelOptions&) Unsupported model IR version: 14, max "
            "supported IR version: 13\n",
            "Unsupported model IR version: 14, max supported IR version: 13",
        ),
        (
            "[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Got invalid dimensions for input: x for the following indices\n"
            " index: 0 Got: 3 Expected: 2\n Please fix either the inputs/outputs or the model.",
            "Got invalid dimensions for input: x for the following indices index: 0 Got: 3 Expected: 2 "
            "Please fix either the inputs/outputs or the model.",
        ),
    ],
)
def test_clean_message(raw: str, clean: str) -> None:
    assert clean_message(raw) == clean


def test_is_oom() -> None:
    assert is_oom("CUDA failure 2: out of memory ; GPU=0")
    assert is_oom(MemoryError())
    assert not is_oom("Got invalid dimensions for input")


def test_capture_output_takes_native_and_python_writes() -> None:
    with capture_output() as cap:
        print("from python")
        subprocess.run(
            [sys.executable, "-c", "import os; os.write(2, b'from a child\\n')"], check=True
        )
    assert "from python" in cap.text
    assert "from a child" in cap.text


@pytest.mark.ort
def test_resolve_provider_aliases() -> None:
    assert resolve_provider("cpu") == CPU
    assert resolve_provider("CUDA") == CUDA
    assert resolve_provider("cudaexecutionprovider") == CUDA
    with pytest.raises(UsageError, match="unknown execution provider 'quantum'"):
        resolve_provider("quantum")


@pytest.mark.ort
def test_available_providers_tries_each(cuda_loads: bool) -> None:
    statuses = {s.name: s for s in available_providers()}
    assert statuses[CPU].available
    assert statuses[CPU].loads
    cuda = statuses[CUDA]
    assert cuda.loads == cuda_loads
    if not cuda.loads:
        # No driver: no package to install helps. A driver: the install line.
        expected = "no NVIDIA driver or GPU" if providers.no_nvidia_driver() else "pip install"
        assert expected in cuda.detail


def test_no_driver_is_said_before_any_install_line(monkeypatch: pytest.MonkeyPatch) -> None:
    why = "libcuda.so.1 cannot be loaded: cannot open shared object file"
    monkeypatch.setattr(providers, "no_nvidia_driver", lambda: why)
    err = provider_dropped(CUDA, [CPU], CUDA_LOG)
    assert str(err).startswith(f"{CUDA} cannot run here: there is no NVIDIA driver or GPU")
    assert why in str(err)
    assert "pip install" not in str(err)  # was: pip install 'onnxcost[cuda]', twice over
    assert providers.no_driver_error(CPU) is None


@pytest.mark.skipif(
    providers.no_nvidia_driver() is None, reason="this machine has the NVIDIA driver"
)
def test_bench_on_cuda_without_a_driver_says_so(tmp_path: Any) -> None:
    """For real, in the CLI: this machine has no libcuda.so.1."""
    from typer.testing import CliRunner

    from onnxcost import zoo
    from onnxcost.cli.app import app

    model = zoo.save("mlp", tmp_path / "m.onnx")
    r = CliRunner().invoke(
        app, ["bench", str(model), "--provider", "CUDAExecutionProvider", "--runs", "1"]
    )
    assert r.exit_code == 1, r.output
    assert r.output.count("\n") == 1
    assert "there is no NVIDIA driver or GPU on this machine (libcuda.so.1" in r.output
    assert "pip install" not in r.output


class _Dist:
    def __init__(self, name: str) -> None:
        self.metadata = {"Name": name}


def test_two_onnxruntime_packages_in_one_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    dists = [_Dist("numpy"), _Dist("onnxruntime"), _Dist("onnxruntime_gpu")]
    monkeypatch.setattr(_ort.metadata, "distributions", lambda: dists)
    _ort.installed_ort_packages.cache_clear()
    try:
        with pytest.raises(ProviderError) as e:
            _ort.import_ort()
        assert str(e.value) == (
            "onnxruntime and onnxruntime-gpu are both installed here, in the same folder, and "
            "break each other; keep one: pip uninstall -y onnxruntime onnxruntime-gpu && "
            "pip install onnxruntime-gpu"
        )
        # One of them alone imports as before.
        monkeypatch.setattr(_ort.metadata, "distributions", lambda: dists[:2])
        _ort.installed_ort_packages.cache_clear()
        assert _ort.import_ort().__name__ == "onnxruntime"
    finally:
        _ort.installed_ort_packages.cache_clear()


def test_the_cli_says_it_on_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from onnxcost import zoo
    from onnxcost.cli.app import app

    model = zoo.save("mlp", tmp_path / "m.onnx")
    dists = [_Dist("onnxruntime-gpu"), _Dist("onnxruntime")]
    monkeypatch.setattr(_ort.metadata, "distributions", lambda: dists)
    _ort.installed_ort_packages.cache_clear()
    try:
        r = CliRunner().invoke(app, ["bench", str(model), "--runs", "1"])
    finally:
        _ort.installed_ort_packages.cache_clear()
    assert r.exit_code == 1, r.output
    assert r.output.count("\n") == 1
    assert "pip uninstall -y onnxruntime onnxruntime-gpu && pip install onnxruntime-gpu" in r.output
