"""Seeded numpy weights shared by ``export_torch.py`` and ``export_keras.py``.

Both export scripts build the same three architectures and load the weights made
here, so a PyTorch export and a Keras export of one architecture compute the same
function. Weights are generated once, in PyTorch layout and under PyTorch
``state_dict`` names:

- ``Linear.weight`` is ``[out, in]`` (Keras ``Dense.kernel`` is its transpose),
- ``Conv2d.weight`` is ``OIHW`` (Keras ``Conv2D.kernel`` is ``HWIO``),
- ``MultiheadAttention.in_proj_weight`` is ``[3 * d_model, d_model]`` with rows q, k, v.

Every bias is non-zero (exporters drop zero biases) and every BatchNorm has
non-trivial affine parameters and running statistics. Only numpy is imported at
module level (``describe`` imports onnx when called), so the module loads in both
the PyTorch and the TensorFlow virtual environments.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

WEIGHT_SEED = 20260611
"""Seed of ``np.random.default_rng`` for every weight of every architecture."""

INPUT_SEED = 7
"""Seed of ``np.random.default_rng`` for the inputs the export scripts check each export on."""

BN_EPS = 1e-5
"""BatchNorm epsilon in both frameworks (Keras' default 1e-3 is overridden)."""

LN_EPS = 1e-5
"""LayerNorm epsilon in both frameworks (Keras' default 1e-3 is overridden)."""

MLP_SIZES = (784, 128, 32, 10)
RESNET_STAGES = (16, 32, 64)
RESNET_BLOCKS_PER_STAGE = 3
RESNET_CLASSES = 10
ENCODER_D_MODEL = 256
ENCODER_HEADS = 4
ENCODER_FF = 1024
ENCODER_SEQ = 128

Weights = dict[str, np.ndarray]


@dataclass(frozen=True)
class Architecture:
    """One architecture: its name, input/output shapes for batch 1 and a sub-seed."""

    name: str
    torch_input_shape: tuple[int, ...]
    keras_input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    sub_seed: int


MLP = Architecture("mlp", (1, 784), (1, 784), (1, 10), 0)
RESNET20 = Architecture("resnet20", (1, 3, 32, 32), (1, 32, 32, 3), (1, 10), 1)
ENCODER = Architecture(
    "encoder",
    (1, ENCODER_SEQ, ENCODER_D_MODEL),
    (1, ENCODER_SEQ, ENCODER_D_MODEL),
    (1, ENCODER_SEQ, ENCODER_D_MODEL),
    2,
)
ARCHITECTURES: tuple[Architecture, ...] = (MLP, RESNET20, ENCODER)


def _rng(arch: Architecture) -> np.random.Generator:
    return np.random.default_rng([WEIGHT_SEED, arch.sub_seed])


def _f32(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32)


def _linear(rng: np.random.Generator, w: Weights, prefix: str, n_in: int, n_out: int) -> None:
    """Uniform(-1/sqrt(n_in), 1/sqrt(n_in)) weight and bias, as PyTorch's default init."""
    bound = 1.0 / np.sqrt(n_in)
    w[f"{prefix}.weight"] = _f32(rng.uniform(-bound, bound, size=(n_out, n_in)))
    w[f"{prefix}.bias"] = _f32(rng.uniform(-bound, bound, size=(n_out,)))


def _conv(rng: np.random.Generator, w: Weights, name: str, c_in: int, c_out: int, k: int) -> None:
    """He-normal OIHW kernel, std = sqrt(2 / (c_in * k * k)); no bias (BatchNorm follows)."""
    std = np.sqrt(2.0 / (c_in * k * k))
    w[name] = _f32(rng.normal(0.0, std, size=(c_out, c_in, k, k)))


def _batchnorm(rng: np.random.Generator, w: Weights, prefix: str, c: int) -> None:
    """gamma in [0.5, 1.5), beta in [-0.2, 0.2), running mean N(0, 0.1), running var in [0.5, 1.5)."""
    w[f"{prefix}.weight"] = _f32(rng.uniform(0.5, 1.5, size=c))
    w[f"{prefix}.bias"] = _f32(rng.uniform(-0.2, 0.2, size=c))
    w[f"{prefix}.running_mean"] = _f32(rng.normal(0.0, 0.1, size=c))
    w[f"{prefix}.running_var"] = _f32(rng.uniform(0.5, 1.5, size=c))


def _layernorm(rng: np.random.Generator, w: Weights, prefix: str, c: int) -> None:
    """gamma in [0.8, 1.2), beta in [-0.1, 0.1)."""
    w[f"{prefix}.weight"] = _f32(rng.uniform(0.8, 1.2, size=c))
    w[f"{prefix}.bias"] = _f32(rng.uniform(-0.1, 0.1, size=c))


def mlp_weights() -> Weights:
    """784-128-32-10 MLP: ``fc1``, ``fc2``, ``fc3`` (ReLU after fc1 and fc2)."""
    rng = _rng(MLP)
    w: Weights = {}
    for i, (n_in, n_out) in enumerate(itertools.pairwise(MLP_SIZES), start=1):
        _linear(rng, w, f"fc{i}", n_in, n_out)
    return w


def resnet20_blocks() -> list[tuple[str, int, int, int]]:
    """(prefix, c_in, c_out, stride) of each BasicBlock, in order."""
    blocks: list[tuple[str, int, int, int]] = []
    c_in = RESNET_STAGES[0]
    for s, c_out in enumerate(RESNET_STAGES):
        for b in range(RESNET_BLOCKS_PER_STAGE):
            stride = 2 if (s > 0 and b == 0) else 1
            blocks.append((f"layer{s + 1}.{b}", c_in, c_out, stride))
            c_in = c_out
    return blocks


def resnet20_weights() -> Weights:
    """CIFAR ResNet-20 with option-B shortcuts (1x1 conv stride 2 + BatchNorm where shape changes)."""
    rng = _rng(RESNET20)
    w: Weights = {}
    _conv(rng, w, "conv1.weight", 3, RESNET_STAGES[0], 3)
    _batchnorm(rng, w, "bn1", RESNET_STAGES[0])
    for prefix, c_in, c_out, stride in resnet20_blocks():
        _conv(rng, w, f"{prefix}.conv1.weight", c_in, c_out, 3)
        _batchnorm(rng, w, f"{prefix}.bn1", c_out)
        _conv(rng, w, f"{prefix}.conv2.weight", c_out, c_out, 3)
        _batchnorm(rng, w, f"{prefix}.bn2", c_out)
        if stride != 1 or c_in != c_out:
            _conv(rng, w, f"{prefix}.shortcut.0.weight", c_in, c_out, 1)
            _batchnorm(rng, w, f"{prefix}.shortcut.1", c_out)
    _linear(rng, w, "fc", RESNET_STAGES[-1], RESNET_CLASSES)
    return w


def encoder_weights() -> Weights:
    """Post-norm Transformer encoder layer under ``nn.TransformerEncoderLayer`` names."""
    rng = _rng(ENCODER)
    d, ff = ENCODER_D_MODEL, ENCODER_FF
    w: Weights = {}
    bound = 1.0 / np.sqrt(d)
    w["self_attn.in_proj_weight"] = _f32(rng.uniform(-bound, bound, size=(3 * d, d)))
    w["self_attn.in_proj_bias"] = _f32(rng.uniform(-bound, bound, size=(3 * d,)))
    _linear(rng, w, "self_attn.out_proj", d, d)
    _linear(rng, w, "linear1", d, ff)
    _linear(rng, w, "linear2", ff, d)
    _layernorm(rng, w, "norm1", d)
    _layernorm(rng, w, "norm2", d)
    return w


WEIGHTS = {MLP.name: mlp_weights, RESNET20.name: resnet20_weights, ENCODER.name: encoder_weights}


def reference_input(arch: Architecture) -> np.ndarray:
    """Standard-normal float32 input of batch 1 in PyTorch layout (NCHW for the ResNet)."""
    rng = np.random.default_rng([INPUT_SEED, arch.sub_seed])
    return rng.standard_normal(arch.torch_input_shape, dtype=np.float32)


def nchw_to_nhwc(x: np.ndarray) -> np.ndarray:
    """Transpose a 4-D NCHW array to NHWC; arrays of other ranks are returned unchanged."""
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if x.ndim == 4 else x


def parameter_count(w: Weights) -> int:
    """Trainable parameters: every array except BatchNorm running statistics."""
    return sum(int(v.size) for k, v in w.items() if not k.endswith(("running_mean", "running_var")))


def describe(path: Path) -> str:
    """Opset written, file size, input/output signature and node counts by op type."""
    import onnx

    m = onnx.load(str(path))
    onnx.checker.check_model(m, full_check=True)
    opset = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))

    def sig(v: onnx.ValueInfoProto) -> str:
        dims = [d.dim_param or str(d.dim_value) for d in v.type.tensor_type.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type)
        return f"{v.name}:{dtype}[{','.join(dims)}]"

    ops = Counter(n.op_type for n in m.graph.node)
    init = sum(int(np.prod(t.dims)) for t in m.graph.initializer)
    return (
        f"  opset={opset} ir={m.ir_version} size={path.stat().st_size} bytes "
        f"initializer_elements={init}\n"
        f"  inputs={[sig(v) for v in m.graph.input]} outputs={[sig(v) for v in m.graph.output]}\n"
        f"  nodes={len(m.graph.node)} {dict(sorted(ops.items()))}"
    )
