"""Export small random-weight PaddlePaddle models through paddle2onnx for onnxcost's hold-out
check, not a test.

Needs an environment of its own, never the project's (paddlepaddle pins its own numpy and
protobuf)::

    python3 -m venv /work/pdenv
    /work/pdenv/bin/pip install 'paddlepaddle==3.3.*' 'paddle2onnx==2.1.*' onnx onnxruntime
    /work/pdenv/bin/python scripts/export_holdout_paddle.py --out /tmp/holdout_paddle \\
        [--opset 11 --opset 17] [NAME ...]

then, in the project's environment, ``python scripts/check_symbolic_holdout.py --dir
/tmp/holdout_paddle`` and ``onnxcost analyze|bench|compare`` on the files.

Each model is exported with ``paddle.onnx.export`` (paddle2onnx, with its default constant
folding by Polygraphy, which it installs on first use: onnx_graphsurgeon, sympy) and a
``paddle.static.InputSpec`` whose batch (and time, or height and width) dims are None;
paddle2onnx names them ``DynamicDimension.N``, as a user's export has them. Files are
``paddle_NAME_opN.onnx``, one per opset. Weights are random (``pretrained=False``: nothing is
downloaded), seeded; BatchNorm's running mean and variance are set to random values too (not
0 and 1, as an untrained net has them). Each export that fails is one printed line, not a
stop; each that works is run in onnxruntime against Paddle's own output on a random input
(batch 2, time 7).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("GLOG_minloglevel", "2")

import numpy as np
import onnx

SEED = 0
OPSETS = (11, 17)

Spec = tuple[tuple[int | None, ...], str]
"""An input's shape (None: a dynamic dim) and dtype."""


def _nn() -> Any:
    import paddle

    return paddle.nn


def mlp() -> Any:
    """Linear(16 -> 32) + ReLU + Linear(32 -> 4) over (batch, 16): 16·32 + 32·4 = 640 MACs a
    row."""
    nn = _nn()
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


def cnn() -> Any:
    """Conv2D(3 -> 8, 3x3, pad 1) + BatchNorm + ReLU + MaxPool 2 + Conv2D(8 -> 16, 3x3, stride
    2) + BatchNorm + ReLU + AdaptiveAvgPool 1 + Flatten + Linear(16 -> 10) over (batch, 3, 32,
    32)."""
    nn = _nn()
    return nn.Sequential(
        nn.Conv2D(3, 8, 3, padding=1),
        nn.BatchNorm2D(8),
        nn.ReLU(),
        nn.MaxPool2D(2),
        nn.Conv2D(8, 16, 3, stride=2),
        nn.BatchNorm2D(16),
        nn.ReLU(),
        nn.AdaptiveAvgPool2D(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    )


def resnet18() -> Any:
    import paddle

    return paddle.vision.models.resnet18(pretrained=False)


def mobilenet_v2() -> Any:
    import paddle

    return paddle.vision.models.mobilenet_v2(pretrained=False)


def mobilenet_v3_small() -> Any:
    import paddle

    return paddle.vision.models.mobilenet_v3_small(pretrained=False)


class _Rnn:
    """A recurrent layer's sequence output alone (Paddle's LSTM/GRU return it with the final
    states)."""

    @staticmethod
    def make(kind: str, inputs: int, hidden: int, layers: int = 1, bi: bool = False) -> Any:
        import paddle

        nn = paddle.nn
        cls = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.SimpleRNN}[kind]

        class Seq(nn.Layer):  # type: ignore[misc]
            def __init__(self) -> None:
                super().__init__()
                direction = "bidirect" if bi else "forward"
                self.rnn = cls(inputs, hidden, num_layers=layers, direction=direction)

            def forward(self, x: Any) -> Any:
                return self.rnn(x)[0]

        return Seq()


def lstm() -> Any:
    """LSTM(4 -> 8) over (batch, time, 4): 4·8·(4 + 8) = 384 MACs a step and row."""
    return _Rnn.make("lstm", 4, 8)


def bilstm() -> Any:
    """Bidirectional LSTM(12 -> 24), two layers, over (batch, time, 12): the first layer
    2·4·24·(12 + 24) = 6,912 MACs a step and row, the second 2·4·24·(48 + 24) = 13,824."""
    return _Rnn.make("lstm", 12, 24, layers=2, bi=True)


def gru() -> Any:
    """GRU(16 -> 32) over (batch, time, 16): 3·32·(16 + 32) = 4,608 MACs a step and row."""
    return _Rnn.make("gru", 16, 32)


def bigru() -> Any:
    """Bidirectional GRU(8 -> 16) over (batch, time, 8): 2·3·16·(8 + 16) = 2,304 MACs a step
    and row."""
    return _Rnn.make("gru", 8, 16, bi=True)


def simple_rnn() -> Any:
    """SimpleRNN(8 -> 16) over (batch, time, 8): 16·(8 + 16) = 384 MACs a step and row.

    NB: paddle2onnx 2.1.0 writes it with a Transpose of a tensor no node makes
    (``p2o.pd_op.rnn.0.0``): onnxruntime refuses the file, and so does onnxcost, in one line
    naming the node."""
    return _Rnn.make("rnn", 8, 16)


def transformer() -> Any:
    """A TransformerEncoder of 2 post-norm layers (d_model 32, 4 heads, FFN 64) over (batch,
    seq, 32)."""
    nn = _nn()
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0)
    return nn.TransformerEncoder(layer, 2)


def bert() -> Any:
    """A small BERT-like encoder over token ids (batch, seq): word embedding (100 x 32) plus a
    learned position embedding (64 x 32) sliced to seq, LayerNorm, 2 TransformerEncoder layers
    (4 heads, FFN 64, gelu), the first token through Linear(32 -> 32) + tanh (the pooler)."""
    import paddle

    nn = paddle.nn

    class Bert(nn.Layer):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.words = nn.Embedding(100, 32)
            self.positions = nn.Embedding(64, 32)
            self.norm = nn.LayerNorm(32)
            layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu")
            self.encoder = nn.TransformerEncoder(layer, 2)
            self.pooler = nn.Linear(32, 32)

        def forward(self, ids: Any) -> Any:
            pos = paddle.arange(paddle.shape(ids)[1], dtype="int64").unsqueeze(0)
            x = self.norm(self.words(ids) + self.positions(pos))
            x = self.encoder(x)
            return paddle.tanh(self.pooler(x[:, 0]))

    return Bert()


def decoder() -> Any:
    """A latent (batch, 8) decoded by Linear(8 -> 256) + reshape to (16, 4, 4) +
    Conv2DTranspose(16 -> 8, 4, stride 2, pad 1) + ReLU + Conv2DTranspose(8 -> 3, 3, stride
    2) to (batch, 3, 17, 17)."""
    import paddle

    nn = paddle.nn

    class Decoder(nn.Layer):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 256)
            self.up1 = nn.Conv2DTranspose(16, 8, 4, stride=2, padding=1)
            self.up2 = nn.Conv2DTranspose(8, 3, 3, stride=2)

        def forward(self, z: Any) -> Any:
            x = paddle.reshape(self.fc(z), [-1, 16, 4, 4])
            return paddle.nn.functional.sigmoid(self.up2(paddle.nn.functional.relu(self.up1(x))))

    return Decoder()


def fcn() -> Any:
    """A fully convolutional net over (batch, 3, height, width), every dim but the channels
    dynamic: Conv2D(3 -> 8, 3x3, stride 2, pad 1) + ReLU, back up to the input's size by
    bilinear ``interpolate`` (a Resize to a size computed in the graph), concatenated with
    Conv2D(3 -> 8, 3x3, pad 1) of the input, then Conv2D(16 -> 2, 1x1)."""
    import paddle

    nn = paddle.nn

    class FCN(nn.Layer):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.down = nn.Conv2D(3, 8, 3, stride=2, padding=1)
            self.skip = nn.Conv2D(3, 8, 3, padding=1)
            self.head = nn.Conv2D(16, 2, 1)

        def forward(self, x: Any) -> Any:
            d = paddle.nn.functional.relu(self.down(x))
            u = paddle.nn.functional.interpolate(d, size=paddle.shape(x)[2:4], mode="bilinear")
            return self.head(paddle.concat([self.skip(x), u], axis=1))

    return FCN()


IMAGE = ((None, 3, 224, 224), "float32")
CASES: dict[str, tuple[Callable[[], Any], list[Spec]]] = {
    "mlp": (mlp, [((None, 16), "float32")]),
    "cnn": (cnn, [((None, 3, 32, 32), "float32")]),
    "resnet18": (resnet18, [IMAGE]),
    "mobilenet_v2": (mobilenet_v2, [IMAGE]),
    "mobilenet_v3_small": (mobilenet_v3_small, [IMAGE]),
    "lstm": (lstm, [((None, None, 4), "float32")]),
    "bilstm": (bilstm, [((None, None, 12), "float32")]),
    "gru": (gru, [((None, None, 16), "float32")]),
    "bigru": (bigru, [((None, None, 8), "float32")]),
    "simple_rnn": (simple_rnn, [((None, None, 8), "float32")]),
    "transformer": (transformer, [((None, None, 32), "float32")]),
    "bert": (bert, [((None, None), "int64")]),
    "decoder": (decoder, [((None, 8), "float32")]),
    "fcn": (fcn, [((None, 3, None, None), "float32")]),
}


def _randomize(model: Any) -> None:
    """BatchNorm's running statistics random (an untrained net's are 0 and 1: a folded
    BatchNorm would hide nothing)."""
    import paddle

    rng = np.random.default_rng(SEED)
    for name, buf in model.named_buffers():
        if name.endswith("_mean"):
            buf.set_value(paddle.to_tensor(0.1 * rng.standard_normal(buf.shape), buf.dtype))
        elif name.endswith("_variance"):
            buf.set_value(paddle.to_tensor(rng.uniform(0.5, 1.5, buf.shape), buf.dtype))


@contextlib.contextmanager
def _quiet(log: Path) -> Iterator[None]:
    """stdout and stderr, Python's and paddle2onnx's C++ alike, into ``log``."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log, "w") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            with contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
                yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def export(name: str, opset: int, out: Path) -> str:
    """Export ``name`` at ``opset`` into ``out`` and say how it went (one line)."""
    import paddle

    build, specs = CASES[name]
    paddle.seed(SEED)
    model = build()
    _randomize(model)
    model.eval()
    inputs = [
        paddle.static.InputSpec(list(shape), dtype, f"x{k}" if len(specs) > 1 else "x")
        for k, (shape, dtype) in enumerate(specs)
    ]
    path = out / f"paddle_{name}_op{opset}.onnx"
    with tempfile.TemporaryDirectory() as tmp:
        with _quiet(Path(tmp) / "log"):
            paddle.onnx.export(model, f"{tmp}/m", input_spec=inputs, opset_version=opset)
        proto = onnx.load(f"{tmp}/m.onnx")
    onnx.save(proto, path)
    rng = np.random.default_rng(SEED)
    feeds: dict[str, np.ndarray] = {}
    for spec, (shape, dtype) in zip(inputs, specs, strict=True):
        concrete = [2 if k == 0 else 7 if d is None else d for k, d in enumerate(shape)]
        if dtype.startswith("int"):
            feeds[spec.name] = rng.integers(0, 100, concrete).astype(dtype)
        else:
            feeds[spec.name] = rng.standard_normal(concrete).astype(dtype)
    ref = model(*[paddle.to_tensor(v) for v in feeds.values()]).numpy()
    ops = {n.op_type for n in proto.graph.node}
    head = (
        f"paddle_{name}_op{opset}: {len(proto.graph.node)} nodes, {len(ops)} op types, "
        f"{path.stat().st_size / 1024:.0f} KiB"
    )
    try:
        import onnxruntime as ort
    except ImportError:
        return f"{head}; onnxruntime not installed: not compared"
    try:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as e:  # paddle2onnx 2.1's SimpleRNN: a Transpose of a tensor none makes
        path.unlink()
        first = str(e).strip().splitlines()[0][:160]
        return f"{head}; onnxruntime refuses it, not kept ({type(e).__name__}: {first})"
    got = np.asarray(session.run(None, {i.name: feeds[i.name] for i in session.get_inputs()})[0])
    if got.shape != ref.shape:
        return f"{head}; ran, shape {got.shape}, Paddle's {ref.shape}"
    diff = float(np.abs(got.astype(np.float64) - ref.astype(np.float64)).max())
    return f"{head}; max |onnxruntime - Paddle| {diff:.2g} (max |Paddle| {np.abs(ref).max():.2g})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"models (default: all): {', '.join(CASES)}")
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument(
        "--opset",
        type=int,
        action="append",
        help=f"paddle2onnx's opset (repeatable; default: {' and '.join(map(str, OPSETS))})",
    )
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in CASES]
    if unknown:
        parser.error(f"unknown model {', '.join(unknown)}")
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.names or list(CASES):
        for opset in args.opset or OPSETS:
            try:
                line = export(name, opset, args.out)
            except Exception as e:  # the exporter's failure, one line
                first = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
                line = f"paddle_{name}_op{opset}: the export failed ({type(e).__name__}: {first})"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
