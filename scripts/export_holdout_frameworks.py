"""Export small random-weight models from TensorFlow/Keras (tf2onnx), scikit-learn
(skl2onnx) and JAX/Flax (jax2onnx) for onnxcost's hold-out check, not a test.

Needs environments of its own, never the project's (tensorflow pins its own numpy and
protobuf)::

    python3 -m venv /work/tfenv
    /work/tfenv/bin/pip install 'tensorflow-cpu==2.21.*' 'tf2onnx==1.17.*' skl2onnx \\
        scikit-learn onnx onnxruntime
    /work/tfenv/bin/python scripts/export_holdout_frameworks.py --out /tmp/holdout_fw \\
        --framework keras --framework sklearn [NAME ...]
    python3 -m venv /work/jaxenv
    /work/jaxenv/bin/pip install jax jaxlib jax2onnx onnxruntime   # flax comes with jax2onnx
    /work/jaxenv/bin/python scripts/export_holdout_frameworks.py --out /tmp/holdout_fw \\
        --framework jax

then, in the project's environment, ``python scripts/check_symbolic_holdout.py --dir
/tmp/holdout_fw`` and ``onnxcost analyze|bench|compare`` on the files.

Keras 3 models convert with ``tf2onnx.convert.from_keras`` and a ``tf.TensorSpec`` whose
batch (and, for sequence models, time) dims are None; tf2onnx names them ``unk__N``, as a
user's export has them. scikit-learn models convert with ``skl2onnx.to_onnx`` and a
``FloatTensorType([None, features])``, with its defaults (a classifier's probabilities as a
ZipMap). Weights are random (``weights=None`` for keras.applications: nothing is
downloaded), seeded. Each export that fails is one printed line, not a stop; each that works
is checked in onnxruntime against the framework where onnxruntime is installed.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import onnx

OPSET = 17
SEED = 0

Export = tuple[onnx.ModelProto, dict[str, np.ndarray], Any]
"""The model, an example input per graph input and the framework's own output for it
(None where there is nothing to compare)."""


# --- Keras ------------------------------------------------------------------------------------


def _keras(
    build: Callable[[], Any],
    shapes: list[tuple[int | None, ...]],
    dtypes: list[str] | None = None,
    length: int = 7,
) -> Callable[[], Export]:
    """An export of ``build()`` with inputs of ``shapes`` (None: a dynamic dim), float32 or
    ``dtypes``; the example input has 2 for the batch and ``length`` for other None dims."""

    def export() -> Export:
        import keras
        import tensorflow as tf
        import tf2onnx

        keras.utils.set_random_seed(SEED)
        model = build()
        rng = np.random.default_rng(SEED)
        for v in model.weights:  # biases, BN's beta and moving mean: not 0, as trained ones
            if not np.any(np.asarray(v)):
                v.assign(0.1 * rng.standard_normal(v.shape).astype(v.dtype))
        kinds = dtypes or ["float32"] * len(shapes)
        specs = [
            tf.TensorSpec(shape, getattr(tf, kind), name=f"input_{k}")
            for k, (shape, kind) in enumerate(zip(shapes, kinds, strict=True))
        ]
        proto, _ = tf2onnx.convert.from_keras(model, input_signature=specs, opset=OPSET)
        feeds = {}
        for spec, shape, kind in zip(specs, shapes, kinds, strict=True):
            concrete = [2 if k == 0 else length if d is None else d for k, d in enumerate(shape)]
            if kind.startswith("int"):
                feeds[spec.name] = rng.integers(0, 50, concrete).astype(kind)
            else:
                feeds[spec.name] = rng.standard_normal(concrete).astype(kind)
        args = [feeds[s.name] for s in specs]
        ref = model(args if len(args) > 1 else args[0], training=False)
        return proto, feeds, np.asarray(ref)

    return export


def _layers() -> Any:
    import keras

    return keras.layers


def dense() -> Any:
    """Dense(64 -> 10): 640 MACs a row, for the hand check."""
    import keras

    inp = keras.Input((64,))
    return keras.Model(inp, _layers().Dense(10)(inp))


def conv2d() -> Any:
    """One Conv2D(3 -> 8, 3x3, same) + ReLU on (batch, 16, 16, 3), NHWC."""
    import keras

    inp = keras.Input((16, 16, 3))
    return keras.Model(inp, _layers().Conv2D(8, 3, padding="same", activation="relu")(inp))


def mobilenet_v2() -> Any:
    import keras

    return keras.applications.MobileNetV2(
        input_shape=(96, 96, 3), alpha=0.35, weights=None, classes=10
    )


def mobilenet_v2_a050() -> Any:
    import keras

    return keras.applications.MobileNetV2(
        input_shape=(96, 96, 3), alpha=0.5, weights=None, classes=10
    )


def resnet50() -> Any:
    import keras

    return keras.applications.ResNet50(input_shape=(64, 64, 3), weights=None, classes=10)


def small_resnet() -> Any:
    """Two residual blocks (Conv2D + BatchNormalization + ReLU, an Add) and a stride-2 stage
    with a 1x1 projection: a ResNet-like CNN over (batch, 32, 32, 3)."""
    import keras

    la = _layers()
    x = inp = keras.Input((32, 32, 3))
    x = la.ReLU()(la.BatchNormalization()(la.Conv2D(16, 3, padding="same", use_bias=False)(x)))
    for filters, stride in ((16, 1), (32, 2)):
        y = la.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False)(x)
        y = la.ReLU()(la.BatchNormalization()(y))
        y = la.BatchNormalization()(la.Conv2D(filters, 3, padding="same", use_bias=False)(y))
        if stride != 1:
            x = la.Conv2D(filters, 1, strides=stride, use_bias=False)(x)
        x = la.ReLU()(la.Add()([x, y]))
    x = la.Dense(10)(la.GlobalAveragePooling2D()(x))
    return keras.Model(inp, x)


def separable() -> Any:
    """DepthwiseConv2D, SeparableConv2D, BatchNormalization, MaxPooling2D over (batch, 32, 32, 3)."""
    import keras

    la = _layers()
    x = inp = keras.Input((32, 32, 3))
    x = la.Conv2D(8, 3, strides=2, padding="same")(x)
    x = la.BatchNormalization()(la.DepthwiseConv2D(3, padding="same")(x))
    x = la.ReLU(6.0)(x)
    x = la.SeparableConv2D(16, 3, padding="same", activation="relu")(x)
    x = la.MaxPooling2D(2)(x)
    x = la.SeparableConv2D(24, 5, depth_multiplier=2, padding="valid")(x)
    x = la.Dense(4, activation="softmax")(la.GlobalAveragePooling2D()(x))
    return keras.Model(inp, x)


def text_lstm() -> Any:
    """Embedding(1000, 32) + LSTM(64) + Dense(5) over token ids (batch, seq)."""
    import keras

    la = _layers()
    inp = keras.Input((None,), dtype="int32")
    x = la.LSTM(64)(la.Embedding(1000, 32)(inp))
    return keras.Model(inp, la.Dense(5, activation="softmax")(x))


def lstm() -> Any:
    """LSTM(8) over (batch, time, 4), its last state: 4·8·(4 + 8) = 384 MACs a step a row."""
    import keras

    inp = keras.Input((None, 4))
    return keras.Model(inp, _layers().LSTM(8)(inp))


def gru() -> Any:
    """GRU(32, sequences) + GRU(16) + Dense(3) over (batch, time, 16)."""
    import keras

    la = _layers()
    inp = keras.Input((None, 16))
    x = la.GRU(16)(la.GRU(32, return_sequences=True)(inp))
    return keras.Model(inp, la.Dense(3)(x))


def bilstm() -> Any:
    """Bidirectional(LSTM(24, sequences)) + GlobalAveragePooling1D + Dense(2) over
    (batch, time, 12)."""
    import keras

    la = _layers()
    inp = keras.Input((None, 12))
    x = la.Bidirectional(la.LSTM(24, return_sequences=True))(inp)
    return keras.Model(inp, la.Dense(2)(la.GlobalAveragePooling1D()(x)))


def simple_rnn() -> Any:
    """SimpleRNN(16, sequences) + Dense(4) at every step over (batch, time, 8).

    NB: with ``TimeDistributed(Dense(4))`` instead, tf2onnx 1.17 writes a Loop whose
    output onnxruntime runs to 2 steps where Keras has 7 (an exporter bug)."""
    import keras

    la = _layers()
    inp = keras.Input((None, 8))
    x = la.SimpleRNN(16, return_sequences=True)(inp)
    return keras.Model(inp, la.Dense(4)(x))


def conv1d_audio() -> Any:
    """Conv1D(16, 9, stride 2) + BatchNormalization + ReLU + MaxPooling1D + Conv1D(32, 3,
    dilation 2) + GlobalAveragePooling1D + Dense(6) over a waveform (batch, time, 1)."""
    import keras

    la = _layers()
    x = inp = keras.Input((None, 1))
    x = la.ReLU()(la.BatchNormalization()(la.Conv1D(16, 9, strides=2, padding="same")(x)))
    x = la.MaxPooling1D(4)(x)
    x = la.Conv1D(32, 3, dilation_rate=2, activation="relu")(x)
    x = la.Dense(6)(la.GlobalAveragePooling1D()(x))
    return keras.Model(inp, x)


def transformer() -> Any:
    """Token + learned position embedding, one post-norm encoder block (MultiHeadAttention 2
    heads of 16, LayerNormalization, FFN 32 -> 64 -> 32), mean over seq, Dense(3); over
    token ids (batch, seq)."""
    import keras
    import tensorflow as tf

    la = _layers()

    class Positions(la.Layer):  # type: ignore[misc]
        def build(self, shape: Any) -> None:
            self.table = self.add_weight(shape=(64, 32), name="positions")

        def call(self, x: Any) -> Any:
            return x + self.table[: tf.shape(x)[1]]

    inp = keras.Input((None,), dtype="int32")
    x = Positions()(la.Embedding(100, 32)(inp))
    x = la.LayerNormalization()(x + la.MultiHeadAttention(2, 16)(x, x))
    # NB: Keras' exact gelu is an Erfc, which tf2onnx 1.17 cannot convert
    gelu = la.Activation(lambda t: keras.activations.gelu(t, approximate=True))
    y = la.Dense(32)(gelu(la.Dense(64)(x)))
    x = la.LayerNormalization()(x + y)
    return keras.Model(inp, la.Dense(3)(la.GlobalAveragePooling1D()(x)))


def decoder() -> Any:
    """A latent (batch, 8) decoded by Dense + Reshape + Conv2DTranspose (stride 2, same and
    valid) + UpSampling2D + Conv2D to (batch, 38, 38, 1)."""
    import keras

    la = _layers()
    inp = keras.Input((8,))
    x = la.Reshape((4, 4, 16))(la.Dense(4 * 4 * 16, activation="relu")(inp))
    x = la.Conv2DTranspose(16, 3, strides=2, padding="same", activation="relu")(x)
    x = la.Conv2DTranspose(8, 3, strides=2, padding="valid", activation="relu")(x)
    x = la.UpSampling2D(2)(x)
    return keras.Model(inp, la.Conv2D(1, 3, activation="sigmoid")(x))


def fcn() -> Any:
    """A fully convolutional net over (batch, height, width, 3), every spatial dim dynamic:
    Conv2D stride 2, back up to the input's size by ``tf.image.resize`` (bilinear; Keras'
    UpSampling2D does not trace over None dims), Concatenate with a skip."""
    import keras
    import tensorflow as tf

    la = _layers()

    class Up(la.Layer):  # type: ignore[misc]
        def call(self, x: Any, like: Any) -> Any:
            return tf.image.resize(x, tf.shape(like)[1:3], method="bilinear")

    x = inp = keras.Input((None, None, 3))
    d = la.Conv2D(8, 3, strides=2, padding="same", activation="relu")(x)
    u = Up()(d, x)
    x = la.Concatenate()([la.Conv2D(8, 3, padding="same")(x), u])
    return keras.Model(inp, la.Conv2D(2, 1)(x))


KERAS: dict[str, tuple[Any, ...]] = {
    "keras_dense": (dense, [(None, 64)], None),
    "keras_conv2d": (conv2d, [(None, 16, 16, 3)], None),
    "keras_mobilenet_v2": (mobilenet_v2, [(None, 96, 96, 3)], None),
    "keras_mobilenet_v2_a050": (mobilenet_v2_a050, [(None, 96, 96, 3)], None),
    "keras_resnet50": (resnet50, [(None, 64, 64, 3)], None),
    "keras_small_resnet": (small_resnet, [(None, 32, 32, 3)], None),
    "keras_separable": (separable, [(None, 32, 32, 3)], None),
    "keras_text_lstm": (text_lstm, [(None, None)], ["int32"]),
    "keras_lstm": (lstm, [(None, None, 4)], None),
    "keras_gru": (gru, [(None, None, 16)], None),
    "keras_bilstm": (bilstm, [(None, None, 12)], None),
    "keras_simple_rnn": (simple_rnn, [(None, None, 8)], None),
    "keras_conv1d_audio": (conv1d_audio, [(None, None, 1)], None, 64),
    "keras_transformer": (transformer, [(None, None)], ["int32"]),
    "keras_decoder": (decoder, [(None, 8)], None),
    "keras_fcn": (fcn, [(None, None, None, 3)], None, 10),
}


# --- scikit-learn -----------------------------------------------------------------------------


def _sklearn(
    make: Callable[[], Any], features: int = 6, classes: int | None = 3, **options: Any
) -> Callable[[], Export]:
    """Fit ``make()`` on 200 seeded rows of ``features`` (``classes`` labels, or a regression
    target where None) and convert it with ``skl2onnx.to_onnx`` (batch dynamic)."""

    def export() -> Export:
        from skl2onnx import to_onnx
        from skl2onnx.common.data_types import FloatTensorType

        rng = np.random.default_rng(SEED)
        x = rng.standard_normal((200, features)).astype(np.float32)
        if classes is None:
            y: np.ndarray = x @ rng.standard_normal(features) + 0.1 * rng.standard_normal(200)
        else:
            y = (np.abs(x[:, 0] * 3 + x[:, 1]) % classes).astype(np.int64)
        model = make().fit(x, y)
        last = model.steps[-1][1] if hasattr(model, "steps") else model  # options go there
        proto = to_onnx(
            model,
            initial_types=[("input", FloatTensorType([None, features]))],
            target_opset={"": OPSET, "ai.onnx.ml": 3},
            options={id(last): options} if options else None,
        )
        sample = x[:5]
        ref = model.predict(sample) if hasattr(model, "predict") else model.transform(sample)
        return proto, {"input": sample}, np.asarray(ref)

    return export


def _logistic() -> Any:
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(max_iter=500)


def _pca_svc() -> Any:
    from sklearn.decomposition import PCA
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    return make_pipeline(StandardScaler(), PCA(4), SVC(probability=False))


def _pca_linear_svc() -> Any:
    from sklearn.decomposition import PCA
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC

    return make_pipeline(StandardScaler(), PCA(4), LinearSVC())


def _forest() -> Any:
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(n_estimators=5, max_depth=4, random_state=SEED)


def _boosting() -> Any:
    from sklearn.ensemble import GradientBoostingRegressor

    return GradientBoostingRegressor(n_estimators=10, max_depth=3, random_state=SEED)


def _mlp() -> Any:
    from sklearn.neural_network import MLPClassifier

    return MLPClassifier((16, 8), max_iter=300, random_state=SEED)


def _kmeans() -> Any:
    from sklearn.cluster import KMeans

    return KMeans(4, n_init=2, random_state=SEED)


def _linear_regression() -> Any:
    from sklearn.linear_model import LinearRegression

    return LinearRegression()


SKLEARN: dict[str, Callable[[], Export]] = {
    "sk_logistic": _sklearn(_logistic),
    "sk_logistic_nozipmap": _sklearn(_logistic, zipmap=False),
    "sk_linear_regression": _sklearn(_linear_regression, classes=None),
    "sk_pca_svc": _sklearn(_pca_svc),
    # NB: skl2onnx 1.20 refuses a pipeline ending in LinearSVC unless that step is given an
    # option ("Option 'zipmap' not in [...] for class 'LinearSVC'"): nocl=False is its default
    "sk_pca_linear_svc": _sklearn(_pca_linear_svc, nocl=False),
    "sk_random_forest": _sklearn(_forest),
    "sk_gradient_boosting": _sklearn(_boosting, classes=None),
    "sk_mlp": _sklearn(_mlp),
    "sk_kmeans": _sklearn(_kmeans, classes=None),
}


# --- JAX / Flax (jax2onnx; its own environment: jax, flax, jax2onnx) ----------------------------


def _jax(build: Callable[[], Any], shapes: list[tuple[int | str, ...]]) -> Callable[[], Export]:
    """``build()`` (a Flax nnx module or a function) exported by ``jax2onnx.to_onnx`` with
    inputs of ``shapes`` (a str: a symbolic dim of that name); the example has 2 for ``B`` and
    7 for other names."""

    def export() -> Export:
        import jax
        from jax2onnx import to_onnx

        fn = build()
        proto = to_onnx(fn, shapes)
        rng = np.random.default_rng(SEED)
        args = [
            rng.standard_normal(
                [2 if d == "B" else 7 if isinstance(d, str) else d for d in s]
            ).astype(np.float32)
            for s in shapes
        ]
        ref = np.asarray(jax.jit(fn)(*args))
        return proto, {vi.name: a for vi, a in zip(proto.graph.input, args, strict=True)}, ref

    return export


def jax_mlp() -> Any:
    """Linear(16 -> 32) + ReLU + Linear(32 -> 4) over (B, 16)."""
    from flax import nnx

    class MLP(nnx.Module):  # type: ignore[misc]
        def __init__(self, rngs: Any) -> None:
            self.l1 = nnx.Linear(16, 32, rngs=rngs)
            self.l2 = nnx.Linear(32, 4, rngs=rngs)

        def __call__(self, x: Any) -> Any:
            return self.l2(nnx.relu(self.l1(x)))

    return MLP(nnx.Rngs(SEED))


def jax_cnn() -> Any:
    """Conv(3 -> 8, 3x3, SAME) + ReLU + avg_pool 2x2 + Conv(8 -> 16, 3x3, stride 2) + mean over
    space + Linear(16 -> 10), NHWC over (B, 16, 16, 3)."""
    import jax.numpy as jnp
    from flax import nnx

    class CNN(nnx.Module):  # type: ignore[misc]
        def __init__(self, rngs: Any) -> None:
            self.c1 = nnx.Conv(3, 8, (3, 3), padding="SAME", rngs=rngs)
            self.c2 = nnx.Conv(8, 16, (3, 3), strides=(2, 2), padding="VALID", rngs=rngs)
            self.fc = nnx.Linear(16, 10, rngs=rngs)

        def __call__(self, x: Any) -> Any:
            x = nnx.avg_pool(nnx.relu(self.c1(x)), window_shape=(2, 2), strides=(2, 2))
            return self.fc(jnp.mean(nnx.relu(self.c2(x)), axis=(1, 2)))

    return CNN(nnx.Rngs(SEED))


def jax_block() -> Any:
    """A pre-norm transformer block over (B, T, 32): LayerNorm, MultiHeadAttention (4 heads),
    LayerNorm, MLP 32 -> 64 -> 32 with gelu; T symbolic too."""
    from flax import nnx

    class Block(nnx.Module):  # type: ignore[misc]
        def __init__(self, rngs: Any) -> None:
            self.n1 = nnx.LayerNorm(32, rngs=rngs)
            self.attn = nnx.MultiHeadAttention(num_heads=4, in_features=32, decode=False, rngs=rngs)
            self.n2 = nnx.LayerNorm(32, rngs=rngs)
            self.up = nnx.Linear(32, 64, rngs=rngs)
            self.down = nnx.Linear(64, 32, rngs=rngs)

        def __call__(self, x: Any) -> Any:
            x = x + self.attn(self.n1(x))
            return x + self.down(nnx.gelu(self.up(self.n2(x))))

    return Block(nnx.Rngs(SEED))


JAX: dict[str, Callable[[], Export]] = {
    "jax_mlp": _jax(jax_mlp, [("B", 16)]),
    "jax_cnn": _jax(jax_cnn, [("B", 16, 16, 3)]),
    "jax_block": _jax(jax_block, [("B", "T", 32)]),
}


def _cases() -> dict[str, Callable[[], Export]]:
    cases = {name: _keras(*spec) for name, spec in KERAS.items()}
    return {**cases, **SKLEARN, **JAX}


FRAMEWORKS = {"keras": "keras_", "sklearn": "sk_", "jax": "jax_"}
"""Which cases each ``--framework`` takes, by their names' prefix."""


def _agrees(proto: onnx.ModelProto, feeds: dict[str, np.ndarray], ref: Any) -> str:
    """How onnxruntime's first output compares with the framework's (a few words)."""
    try:
        import onnxruntime as ort
    except ImportError:
        return "onnxruntime not installed: not compared"
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = np.asarray(session.run(None, feeds)[0])
    if ref is None:
        return "ran"
    if got.size == np.size(ref):  # a regressor's (n, 1) against scikit-learn's (n,)
        got = got.reshape(np.shape(ref))
    if got.shape != np.shape(ref):
        return f"ran; shape {got.shape}, the framework's {np.shape(ref)}"
    diff = float(np.abs(got.astype(np.float64) - np.asarray(ref, np.float64)).max())
    return f"max |onnxruntime - framework| {diff:.2g}"


def main(argv: list[str] | None = None) -> int:
    cases = _cases()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"models (default: all): {', '.join(cases)}")
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument(
        "--framework",
        choices=sorted(FRAMEWORKS),
        action="append",
        help="only this framework's models (repeatable; default: all)",
    )
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in cases]
    if unknown:
        parser.error(f"unknown model {', '.join(unknown)}")
    args.out.mkdir(parents=True, exist_ok=True)
    prefixes = tuple(FRAMEWORKS[f] for f in args.framework or FRAMEWORKS)
    for name in args.names or [n for n in cases if n.startswith(prefixes)]:
        try:
            proto, feeds, ref = cases[name]()
        except Exception as e:  # the exporter's failure, one line
            first = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
            print(f"{name}: the export failed ({type(e).__name__}: {first})", flush=True)
            continue
        path = args.out / f"{name}.onnx"
        onnx.save(proto, path)
        ops = {n.op_type for n in proto.graph.node}
        try:
            agreement = _agrees(proto, feeds, ref)
        except Exception as e:
            agreement = f"onnxruntime failed ({type(e).__name__})"
        print(
            f"{name}: {len(proto.graph.node)} nodes, {len(ops)} op types, "
            f"{path.stat().st_size / 1024:.0f} KiB; {agreement}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
