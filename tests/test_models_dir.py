"""The real PyTorch and Keras exports shipped in models/ (see models/README.md).

Every file is a valid ONNX model that runs in onnxruntime on CPU; for each architecture
the PyTorch and Keras exports, made from the same seeded weights by
scripts/export_torch.py and scripts/export_keras.py, compute the same function; and
onnxcost counts the MACs and parameters worked out by hand in models/README.md.
Needs only onnx, onnxruntime and numpy: no PyTorch or TensorFlow.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

import onnxcost

MODELS_DIR = Path(__file__).resolve().parents[1] / "models"
MAX_TOTAL_BYTES = 10_000_000  # the repository travels with a 64 MiB limit
MAX_FILE_BYTES = 5_000_000
BATCH = 2  # not 1, so a batch dimension the exporter fixed to 1 would show
SEED = 1234

# Outputs of two exports of one architecture may differ by float32 rounding only: the
# exports order their sums differently (BatchNorm folded into Conv by different tools,
# one fused QKV MatMul against three, LayerNormalization against its decomposition).
# Observed max |torch - keras| on these inputs: MLP 0, ResNet-20 1.5e-5 on outputs of
# magnitude ~27, encoder 1.9e-6 on outputs of magnitude ~5, i.e. below 1e-6 of the
# output scale. A real mismatch (a padding or transpose error, BatchNorm or LayerNorm
# epsilon 1e-3 against 1e-5) moves outputs by 5e-4 of the scale or more.
REL_TOL = 1e-4


@dataclass(frozen=True)
class Arch:
    """An architecture: per-sample input shapes, output shape, and hand-counted costs."""

    torch_input: tuple[int, ...]
    keras_input: tuple[int, ...]
    output: tuple[int, ...]
    macs: int
    params: int


ARCHS = {
    # 784*128 + 128*32 + 32*10 = 104,768 MACs
    # (784*128 + 128) + (128*32 + 32) + (32*10 + 10) = 104,938 params
    "mlp": Arch((784,), (784,), (10,), 104_768, 104_938),
    # Convs 40,812,544 MACs + FC 64*10 = 640 (models/README.md has the sum);
    # both exports fold every BatchNorm into its Conv: conv weights 270,256
    # + folded conv biases 16*7 + 32*7 + 64*7 = 784 + FC 650 = 271,690 params
    "resnet20": Arch((3, 32, 32), (32, 32, 3), (10,), 40_813_184, 271_690),
    # 128*256*768 (QKV) + 2 * 4*128*128*64 (QK^T, AV) + 128*256*256 (out)
    # + 2 * 128*256*1024 (FF) = 109,051,904 MACs
    # (3*256*256 + 768) + (256*256 + 256) + (256*1024 + 1024) + (1024*256 + 256)
    # + 2 * 2*256 (LayerNorm) = 789,760 params
    "encoder": Arch((128, 256), (128, 256), (128, 256), 109_051_904, 789_760),
}

# Every .onnx file in models/: (architecture, framework). Keras inputs are NHWC.
SHIPPED = {
    "mlp_torch_dynamo.onnx": ("mlp", "torch"),
    "mlp_torch_script.onnx": ("mlp", "torch"),
    "mlp_keras.onnx": ("mlp", "keras"),
    "resnet20_torch_dynamo.onnx": ("resnet20", "torch"),
    "resnet20_keras.onnx": ("resnet20", "keras"),
    "encoder_torch_dynamo.onnx": ("encoder", "torch"),
    "encoder_keras.onnx": ("encoder", "keras"),
}
TORCH_FILES = [f for f, (_, fw) in SHIPPED.items() if fw == "torch"]
# The GPT-2-style decoders with a KV cache (models/README.md), tested in tests/test_llm.py.
DECODERS = ("decoder_kv_torch_dynamo.onnx", "decoder_kv_torch_script.onnx")


def keras_file(torch_file: str) -> str:
    return f"{SHIPPED[torch_file][0]}_keras.onnx"


def torch_input(arch: str) -> np.ndarray:
    """Seeded standard-normal float32 input in PyTorch layout (NCHW for the ResNet)."""
    rng = np.random.default_rng(SEED)
    return rng.standard_normal((BATCH, *ARCHS[arch].torch_input), dtype=np.float32)


def input_for(file: str) -> np.ndarray:
    """The input of ``torch_input`` in the layout ``file`` takes."""
    arch, framework = SHIPPED[file]
    x = torch_input(arch)
    if framework == "keras" and x.ndim == 4:
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))  # NCHW -> NHWC
    assert x.shape[1:] == getattr(ARCHS[arch], f"{framework}_input")
    return x


@functools.cache
def _session(file: str) -> Any:
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(str(MODELS_DIR / file), providers=["CPUExecutionProvider"])


def run(file: str, x: np.ndarray) -> np.ndarray:
    sess = _session(file)
    (out,) = sess.run(None, {sess.get_inputs()[0].name: x})
    return np.asarray(out)


def test_models_dir_holds_exactly_the_shipped_files() -> None:
    on_disk = sorted(p.name for p in MODELS_DIR.glob("*.onnx"))
    assert on_disk == sorted({*SHIPPED, *DECODERS}), (
        "add new files to SHIPPED here and to models/README.md"
    )
    assert (MODELS_DIR / "README.md").is_file()


def test_models_dir_size_limits() -> None:
    files = [p for p in MODELS_DIR.rglob("*") if p.is_file()]
    sizes = {p.name: p.stat().st_size for p in files}
    assert sum(sizes.values()) < MAX_TOTAL_BYTES, sizes
    assert max(sizes.values()) < MAX_FILE_BYTES, sizes


@pytest.mark.parametrize("file", sorted(SHIPPED))
def test_model_passes_checker(file: str) -> None:
    model = onnx.load(str(MODELS_DIR / file))
    onnx.checker.check_model(model, full_check=True)
    (inp,) = model.graph.input
    dims = inp.type.tensor_type.shape.dim
    assert inp.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert dims[0].dim_param == "batch"  # dynamic batch
    arch, framework = SHIPPED[file]
    assert tuple(d.dim_value for d in dims[1:]) == getattr(ARCHS[arch], f"{framework}_input")


@pytest.mark.ort
@pytest.mark.parametrize("file", sorted(SHIPPED))
def test_model_runs_in_onnxruntime(file: str) -> None:
    x = input_for(file)
    assert np.all(x != 0)
    y = run(file, x)
    assert y.shape == (BATCH, *ARCHS[SHIPPED[file][0]].output)
    assert y.dtype == np.float32
    assert np.all(np.isfinite(y))
    assert not np.allclose(y[0], y[1])  # the two samples are told apart


@pytest.mark.ort
@pytest.mark.parametrize("file", TORCH_FILES)
def test_torch_and_keras_exports_agree(file: str) -> None:
    expected = run(file, input_for(file))
    got = run(keras_file(file), input_for(keras_file(file)))
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(got, expected, rtol=0, atol=REL_TOL * scale)


@pytest.mark.ort
@pytest.mark.parametrize("file", sorted(SHIPPED))
def test_batch_rows_are_independent(file: str) -> None:
    x = input_for(file)
    both = run(file, x)
    first = run(file, np.ascontiguousarray(x[:1]))
    scale = max(1.0, float(np.abs(first).max()))
    np.testing.assert_allclose(both[:1], first, rtol=0, atol=REL_TOL * scale)


@pytest.mark.parametrize("file", sorted(SHIPPED))
def test_analyze_counts_hand_computed_macs(file: str) -> None:
    result = onnxcost.analyze(MODELS_DIR / file, dims={"batch": 1})
    assert result.totals.macs == ARCHS[SHIPPED[file][0]].macs


@pytest.mark.parametrize("file", sorted(SHIPPED))
def test_analyze_counts_hand_computed_params(file: str) -> None:
    result = onnxcost.analyze(MODELS_DIR / file, dims={"batch": 1})
    assert result.totals.params == ARCHS[SHIPPED[file][0]].params
    assert result.totals.stat_params == 0  # every BatchNorm is folded into a Conv
