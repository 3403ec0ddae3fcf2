"""Export the MLP, ResNet-20 and Transformer encoder layer from Keras to ONNX with tf2onnx.

Builds each architecture as a functional ``keras.Model`` (``tf2onnx.convert.from_keras``
fails on ``keras.Sequential``), loads the seeded weights of ``_architectures`` with
the layout changes Keras needs (Dense kernel ``[in, out]``, Conv2D kernel ``HWIO``,
attention kernels ``[d_model, heads, head_dim]``), converts it to
``<arch>_keras.onnx`` and checks the export in onnxruntime against Keras itself. The
ResNet input is NHWC here (NCHW in the PyTorch exports).

Needs tensorflow-cpu, tf2onnx, onnx and onnxruntime (the ``/work/venv-tf`` environment)::

    python scripts/export_keras.py --out models/

To compute the same function as the PyTorch export, the stride-2 3x3 convolutions
are ``ZeroPadding2D(1)`` + ``padding="valid"``: Keras ``padding="same"`` would pad
[top, left, bottom, right] = [0, 0, 1, 1] on a 32x32 input where PyTorch pads 1 all round.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _architectures as arch
import keras
import numpy as np
import onnx
import onnxruntime as ort
import tensorflow as tf
import tf2onnx

REQUESTED_OPSET = 17
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "models"
layers = keras.layers


def _dense(w: arch.Weights, prefix: str) -> list[np.ndarray]:
    return [w[f"{prefix}.weight"].T, w[f"{prefix}.bias"]]


def _conv(w: arch.Weights, name: str) -> list[np.ndarray]:
    return [w[name].transpose(2, 3, 1, 0)]  # OIHW -> HWIO


def _bn(w: arch.Weights, prefix: str) -> list[np.ndarray]:
    return [w[f"{prefix}.{k}"] for k in ("weight", "bias", "running_mean", "running_var")]


def build_mlp() -> keras.Model:
    """784-128-32-10 with ReLU between layers."""
    w = arch.mlp_weights()
    s = arch.MLP_SIZES
    x = inp = keras.Input((s[0],), name="input")
    x = layers.Dense(s[1], activation="relu", name="fc1")(x)
    x = layers.Dense(s[2], activation="relu", name="fc2")(x)
    x = layers.Dense(s[3], name="fc3")(x)
    model = keras.Model(inp, x, name="mlp")
    for name in ("fc1", "fc2", "fc3"):
        model.get_layer(name).set_weights(_dense(w, name))
    return model


def _conv_bn(
    x: keras.KerasTensor,
    w: arch.Weights,
    conv: str,
    bn: str,
    filters: int,
    kernel: int,
    stride: int,
    loaded: list[tuple[keras.layers.Layer, list[np.ndarray]]],
) -> keras.KerasTensor:
    """Conv2D (no bias) + BatchNormalization, padded as PyTorch's ``padding=kernel // 2``."""
    if kernel == 3 and stride == 2:
        x = layers.ZeroPadding2D(1, name=f"{conv}.pad")(x)
        padding = "valid"
    else:
        padding = "same" if kernel == 3 else "valid"
    c = layers.Conv2D(filters, kernel, strides=stride, padding=padding, use_bias=False, name=conv)
    b = layers.BatchNormalization(epsilon=arch.BN_EPS, name=bn)
    x = b(c(x))
    loaded += [(c, _conv(w, f"{conv}.weight")), (b, _bn(w, bn))]
    return x


def build_resnet20() -> keras.Model:
    """CIFAR ResNet-20, NHWC, option-B shortcuts, as ``export_torch.ResNet20``."""
    w = arch.resnet20_weights()
    loaded: list[tuple[keras.layers.Layer, list[np.ndarray]]] = []
    x = inp = keras.Input((32, 32, 3), name="input")
    x = layers.ReLU()(_conv_bn(x, w, "conv1", "bn1", arch.RESNET_STAGES[0], 3, 1, loaded))
    for p, c_in, c_out, stride in arch.resnet20_blocks():
        y = _conv_bn(x, w, f"{p}.conv1", f"{p}.bn1", c_out, 3, stride, loaded)
        y = _conv_bn(layers.ReLU()(y), w, f"{p}.conv2", f"{p}.bn2", c_out, 3, 1, loaded)
        if stride != 1 or c_in != c_out:
            x = _conv_bn(x, w, f"{p}.shortcut.0", f"{p}.shortcut.1", c_out, 1, stride, loaded)
        x = layers.ReLU()(layers.Add()([y, x]))
    x = layers.GlobalAveragePooling2D()(x)
    fc = layers.Dense(arch.RESNET_CLASSES, name="fc")
    x = fc(x)
    model = keras.Model(inp, x, name="resnet20")
    for layer, values in [*loaded, (fc, _dense(w, "fc"))]:
        layer.set_weights(values)
    return model


def build_encoder() -> keras.Model:
    """Post-norm encoder layer as ``nn.TransformerEncoderLayer`` (ReLU, no dropout)."""
    w = arch.encoder_weights()
    d, h, ff = arch.ENCODER_D_MODEL, arch.ENCODER_HEADS, arch.ENCODER_FF
    hd = d // h
    x = inp = keras.Input((arch.ENCODER_SEQ, d), name="input")
    mha = layers.MultiHeadAttention(num_heads=h, key_dim=hd, name="self_attn")
    norm1 = layers.LayerNormalization(epsilon=arch.LN_EPS, name="norm1")
    norm2 = layers.LayerNormalization(epsilon=arch.LN_EPS, name="norm2")
    lin1 = layers.Dense(ff, activation="relu", name="linear1")
    lin2 = layers.Dense(d, name="linear2")
    x = norm1(layers.Add()([x, mha(x, x)]))
    x = norm2(layers.Add()([x, lin2(lin1(x))]))
    model = keras.Model(inp, x, name="encoder")

    # in_proj_weight rows are [q; k; v], each [d_out = h * hd, d_in]; Keras wants
    # kernels [d_in, h, hd] and biases [h, hd]; out_proj [d, h * hd] -> [h, hd, d].
    wq, wk, wv = np.split(w["self_attn.in_proj_weight"], 3)
    bq, bk, bv = np.split(w["self_attn.in_proj_bias"], 3)
    qkv = [(m.T.reshape(d, h, hd), b.reshape(h, hd)) for m, b in ((wq, bq), (wk, bk), (wv, bv))]
    wo = w["self_attn.out_proj.weight"].T.reshape(h, hd, d)
    mha.set_weights([*qkv[0], *qkv[1], *qkv[2], wo, w["self_attn.out_proj.bias"]])
    lin1.set_weights(_dense(w, "linear1"))
    lin2.set_weights(_dense(w, "linear2"))
    for name, layer in (("norm1", norm1), ("norm2", norm2)):
        layer.set_weights([w[f"{name}.weight"], w[f"{name}.bias"]])
    return model


BUILDERS = {
    arch.MLP.name: build_mlp,
    arch.RESNET20.name: build_resnet20,
    arch.ENCODER.name: build_encoder,
}


def convert(model: keras.Model, a: arch.Architecture) -> onnx.ModelProto:
    """``tf2onnx.convert.from_keras`` with a dynamic batch; graph I/O named input/output."""
    spec = tf.TensorSpec((None, *a.keras_input_shape[1:]), tf.float32, name="input")
    proto, _ = tf2onnx.convert.from_keras(model, input_signature=[spec], opset=REQUESTED_OPSET)
    graph = proto.graph
    (out,) = graph.output
    old = out.name
    for node in graph.node:
        node.output[:] = ["output" if o == old else o for o in node.output]
    out.name = "output"
    for v in (*graph.input, *graph.output):
        v.type.tensor_type.shape.dim[0].dim_param = "batch"
    proto.producer_name = f"tf2onnx {tf2onnx.__version__} (keras {keras.__version__})"
    onnx.checker.check_model(proto, full_check=True)
    return proto


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
    parser.add_argument(
        "--arch",
        nargs="+",
        choices=[a.name for a in arch.ARCHITECTURES],
        default=[a.name for a in arch.ARCHITECTURES],
    )
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)

    print(
        f"python {sys.version.split()[0]} tensorflow {tf.__version__} keras {keras.__version__} "
        f"tf2onnx {tf2onnx.__version__} onnx {onnx.__version__} onnxruntime {ort.__version__} "
        f"numpy {np.__version__}"
    )
    print(f"weight seed {arch.WEIGHT_SEED}, input seed {arch.INPUT_SEED}")
    keras.utils.set_random_seed(arch.WEIGHT_SEED)

    for a in arch.ARCHITECTURES:
        if a.name not in args.arch:
            continue
        model = BUILDERS[a.name]()
        x1 = arch.nchw_to_nhwc(arch.reference_input(a))
        ref = np.asarray(model(x1, training=False))
        assert ref.shape == a.output_shape, (a.name, ref.shape)
        n_params = model.count_params() - sum(
            int(np.prod(v.shape))
            for layer in model.layers
            if isinstance(layer, layers.BatchNormalization)
            for v in (layer.moving_mean, layer.moving_variance)
        )
        print(f"{a.name}: {n_params} parameters, keras output |max| {np.abs(ref).max():.4g}")
        path = out / f"{a.name}_keras.onnx"
        onnx.save(convert(model, a), str(path))
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        (got,) = sess.run(None, {"input": x1})
        diff = float(np.abs(got - ref).max())
        print(
            f"{path.name}: opset {REQUESTED_OPSET} requested; max |onnxruntime - keras| = {diff:.3g}"
        )
        print(arch.describe(path))
        if got.shape != ref.shape or not np.allclose(got, ref, rtol=1e-4, atol=1e-4):
            raise SystemExit(f"{path.name} disagrees with Keras (max diff {diff})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
