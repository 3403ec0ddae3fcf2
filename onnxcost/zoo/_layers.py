"""torch.nn building blocks written as ONNX nodes, each under its module's scope.

Initial values are scaled so that deep stacks stay finite: He-normal for
convolutions, N(0, 1/fan_in) for linear layers, positive BatchNorm variances.
"""

from __future__ import annotations

import math

from onnxcost.zoo._builder import GraphBuilder, normal, uniform


def conv2d(
    b: GraphBuilder,
    x: str,
    cin: int,
    cout: int,
    k: int,
    *,
    name: str,
    stride: int = 1,
    pad: int = 0,
    groups: int = 1,
    bias: bool = False,
) -> str:
    """``nn.Conv2d``: weight [cout, cin/groups, k, k], optional bias [cout]."""
    with b.scope(name):
        fan_in = cin // groups * k * k
        inputs = [
            x,
            b.param("weight", [cout, cin // groups, k, k], normal(math.sqrt(2.0 / fan_in))),
        ]
        if bias:
            inputs.append(b.param("bias", [cout], normal(0.05)))
        return b.op(
            "Conv",
            inputs,
            dilations=[1, 1],
            group=groups,
            kernel_shape=[k, k],
            pads=[pad, pad, pad, pad],
            strides=[stride, stride],
        )


def batch_norm(b: GraphBuilder, x: str, channels: int, *, name: str, eps: float = 1e-5) -> str:
    """``nn.BatchNorm2d`` in eval mode, kept as a node: weight, bias, running mean and variance."""
    with b.scope(name):
        inputs = [
            x,
            b.param("weight", [channels], uniform(0.5, 1.0)),
            b.param("bias", [channels], normal(0.05)),
            b.param("running_mean", [channels], normal(0.05)),
            b.param("running_var", [channels], uniform(0.5, 1.5)),
        ]
        return b.op("BatchNormalization", inputs, epsilon=eps, momentum=0.9)


def conv_bn(
    b: GraphBuilder,
    x: str,
    cin: int,
    cout: int,
    k: int,
    *,
    conv: str,
    bn: str,
    stride: int = 1,
    pad: int = 0,
    groups: int = 1,
) -> str:
    """``bn(conv(x))``: a bias-free ``nn.Conv2d`` then ``nn.BatchNorm2d``, two nodes."""
    y = conv2d(b, x, cin, cout, k, name=conv, stride=stride, pad=pad, groups=groups)
    return batch_norm(b, y, cout, name=bn)


def relu(b: GraphBuilder, x: str, *, name: str = "relu") -> str:
    """``nn.ReLU``."""
    with b.scope(name):
        return b.op("Relu", [x])


def relu6(b: GraphBuilder, x: str, *, name: str) -> str:
    """``nn.ReLU6``: Clip(x, 0, 6)."""
    with b.scope(name):
        return b.op("Clip", [x, b.scalar(0.0), b.scalar(6.0)])


def gemm(b: GraphBuilder, x: str, fin: int, fout: int, *, name: str, out: str | None = None) -> str:
    """``nn.Linear`` on a 2-D input: Gemm(x, W[fout, fin], bias, transB=1)."""
    with b.scope(name):
        w = b.param("weight", [fout, fin], normal(1.0 / math.sqrt(fin)))
        bias = b.param("bias", [fout], normal(0.02))
        return b.op("Gemm", [x, w, bias], out=out, alpha=1.0, beta=1.0, transB=1)


def linear(
    b: GraphBuilder,
    x: str,
    fin: int,
    fout: int,
    *,
    name: str,
    bias: bool = True,
    out: str | None = None,
) -> str:
    """``nn.Linear`` on an N-D input: MatMul(x, W[fin, fout]) then Add(bias).

    The exporter folds the transpose of torch's [fout, fin] weight into the initializer.
    """
    with b.scope(name):
        w = b.param("weight", [fin, fout], normal(1.0 / math.sqrt(fin)))
        if not bias:
            return b.op("MatMul", [x, w], out=out)
        y = b.op("MatMul", [x, w])
        return b.op("Add", [b.param("bias", [fout], normal(0.02)), y], out=out)


def layer_norm(
    b: GraphBuilder, x: str, dim: int, *, name: str, eps: float = 1e-5, out: str | None = None
) -> str:
    """``nn.LayerNorm`` over the last axis: one node from opset 17, primitives before."""
    with b.scope(name):
        gamma = b.param("weight", [dim], uniform(0.8, 1.2))
        beta = b.param("bias", [dim], normal(0.02))
        if b.opset >= 17:
            return b.op("LayerNormalization", [x, gamma, beta], out=out, axis=-1, epsilon=eps)
        mean = b.reduce_mean(x, [-1])
        centered = b.op("Sub", [x, mean])
        var = b.reduce_mean(b.op("Pow", [centered, b.scalar(2.0)]), [-1])
        std = b.op("Sqrt", [b.op("Add", [var, b.scalar(eps)])])
        normed = b.op("Div", [centered, std])
        return b.op("Add", [b.op("Mul", [normed, gamma]), beta], out=out)


def gelu_erf(b: GraphBuilder, x: str) -> str:
    """Exact GELU as torch exports it before opset 20: x * 0.5 * (1 + erf(x / sqrt(2)))."""
    t = b.op("Erf", [b.op("Div", [x, b.scalar(math.sqrt(2.0))])])
    t = b.op("Add", [t, b.scalar(1.0)])
    return b.op("Mul", [b.op("Mul", [x, t]), b.scalar(0.5)])


def gelu_tanh(b: GraphBuilder, x: str) -> str:
    """GPT-2's GELU: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))."""
    half_x = b.op("Mul", [b.scalar(0.5), x])
    cube = b.op("Pow", [x, b.scalar(3.0)])
    inner = b.op("Add", [x, b.op("Mul", [b.scalar(0.044715), cube])])
    t = b.op("Tanh", [b.op("Mul", [b.scalar(math.sqrt(2.0 / math.pi)), inner])])
    return b.op("Mul", [half_x, b.op("Add", [b.scalar(1.0), t])])
