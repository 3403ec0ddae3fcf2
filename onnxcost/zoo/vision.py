"""Image models: an MLP, ResNet-20 for CIFAR-10 and the torchvision classics.

The torchvision models follow ``torchvision.models`` layer for layer (ResNet v1.5:
the stride of a bottleneck sits on its 3x3 convolution), with BatchNormalization
kept as nodes so running statistics stay apart from parameters. Parameter names
match torchvision's state dict (``layer1.0.conv1.weight``).
"""

from __future__ import annotations

import math

import onnx

from onnxcost.zoo._builder import (
    INT64_MAX,
    Dim,
    GraphBuilder,
    Options,
    check_heads,
    normal,
    require,
)
from onnxcost.zoo._layers import (
    conv2d,
    conv_bn,
    gelu_erf,
    gemm,
    layer_norm,
    linear,
    relu,
    relu6,
)


def _image_input(b: GraphBuilder, batch: Dim, image_size: int, channels: int = 3) -> str:
    return b.input("input", b.ftype, [batch, channels, image_size, image_size])


def _classifier_output(b: GraphBuilder, batch: Dim, num_classes: int) -> None:
    b.output("logits", b.ftype, [batch, num_classes])


def _conv_out(size: int, k: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - k) // stride + 1


# ---------------------------------------------------------------------------- MLP
def mlp(
    *,
    batch: Dim = "batch",
    in_features: int = 784,
    hidden1: int = 128,
    hidden2: int = 32,
    num_classes: int = 10,
    opts: Options | None = None,
) -> onnx.ModelProto:
    """A 784-128-32-10 perceptron with ReLU: three ``nn.Linear`` exported as Gemm."""
    b = GraphBuilder(opts or Options())
    x = b.input("input", b.ftype, [batch, in_features])
    x = b.op("Relu", [gemm(b, x, in_features, hidden1, name="fc1")])
    x = b.op("Relu", [gemm(b, x, hidden1, hidden2, name="fc2")])
    gemm(b, x, hidden2, num_classes, name="fc3", out="logits")
    _classifier_output(b, batch, num_classes)
    return b.finish(
        "mlp",
        f"MLP {in_features}-{hidden1}-{hidden2}-{num_classes}, ReLU.",
    )


# ---------------------------------------------------------------------------- ResNet-20
def _cifar_block(b: GraphBuilder, x: str, cin: int, planes: int, stride: int) -> str:
    """BasicBlock of He et al. 2016 section 4.2 with the option-A (parameter-free) shortcut."""
    out = conv_bn(b, x, cin, planes, 3, conv="conv1", bn="bn1", stride=stride, pad=1)
    out = conv_bn(b, relu(b, out), planes, planes, 3, conv="conv2", bn="bn2", pad=1)
    shortcut = x
    if stride != 1 or cin != planes:
        # x[:, :, ::2, ::2] zero-padded with planes // 4 channels on each side.
        with b.scope("shortcut"):
            sub = b.op(
                "Slice",
                [
                    x,
                    b.ints([0, 0]),
                    b.ints([INT64_MAX, INT64_MAX]),
                    b.ints([2, 3]),
                    b.ints([stride, stride]),
                ],
            )
            extra = planes // 4
            shortcut = b.op(
                "Pad",
                [sub, b.ints([0, extra, 0, 0, 0, extra, 0, 0]), b.scalar(0.0)],
                mode="constant",
            )
    return relu(b, b.op("Add", [out, shortcut]), name="relu_1")


def resnet20_cifar(
    *,
    batch: Dim = "batch",
    image_size: int = 32,
    num_classes: int = 10,
    opts: Options | None = None,
) -> onnx.ModelProto:
    """ResNet-20 for CIFAR-10 (He et al. 2016, section 4.2), option-A identity shortcuts.

    Three stages of three BasicBlocks at 16, 32 and 64 channels; the shortcuts that
    change shape subsample by 2 and zero-pad channels, so they add no parameters
    (0.27M in all, as in the paper's Table 6).
    """
    b = GraphBuilder(opts or Options())
    x = _image_input(b, batch, image_size)
    x = relu(b, conv_bn(b, x, 3, 16, 3, conv="conv1", bn="bn1", pad=1))
    size, cin = image_size, 16
    for stage, planes in enumerate((16, 32, 64), start=1):
        layer = f"layer{stage}"
        for i in range(3):
            stride = 2 if stage > 1 and i == 0 else 1
            with b.scope(layer, f"{layer}.{i}"):
                x = _cifar_block(b, x, cin, planes, stride)
            size = _conv_out(size, 3, stride, 1)
            cin = planes
    # F.avg_pool2d(out, out.size()[3]) then out.view(out.size(0), -1)
    x = b.op("AveragePool", [x], kernel_shape=[size, size], strides=[size, size])
    x = b.op("Flatten", [x], axis=1)
    gemm(b, x, 64, num_classes, name="linear", out="logits")
    _classifier_output(b, batch, num_classes)
    return b.finish(
        "resnet20_cifar",
        "ResNet-20 for CIFAR-10, option-A shortcuts.",
    )


# ---------------------------------------------------------------------------- torchvision ResNet
def _downsample(b: GraphBuilder, x: str, cin: int, cout: int, stride: int) -> str:
    with b.scope("downsample"):
        return conv_bn(b, x, cin, cout, 1, conv="downsample.0", bn="downsample.1", stride=stride)


def _basic_block(b: GraphBuilder, x: str, cin: int, planes: int, stride: int) -> str:
    out = conv_bn(b, x, cin, planes, 3, conv="conv1", bn="bn1", stride=stride, pad=1)
    out = conv_bn(b, relu(b, out), planes, planes, 3, conv="conv2", bn="bn2", pad=1)
    identity = _downsample(b, x, cin, planes, stride) if stride != 1 or cin != planes else x
    return relu(b, b.op("Add", [out, identity]))


def _bottleneck(b: GraphBuilder, x: str, cin: int, planes: int, stride: int) -> str:
    width, cout = planes, planes * 4
    out = relu(b, conv_bn(b, x, cin, width, 1, conv="conv1", bn="bn1"))
    out = conv_bn(b, out, width, width, 3, conv="conv2", bn="bn2", stride=stride, pad=1)
    out = conv_bn(b, relu(b, out), width, cout, 1, conv="conv3", bn="bn3")
    identity = _downsample(b, x, cin, cout, stride) if stride != 1 or cin != cout else x
    return relu(b, b.op("Add", [out, identity]))


def _resnet(
    name: str,
    blocks: tuple[int, int, int, int],
    bottleneck: bool,
    batch: Dim,
    image_size: int,
    num_classes: int,
    opts: Options | None,
) -> onnx.ModelProto:
    b = GraphBuilder(opts or Options())
    x = _image_input(b, batch, image_size)
    x = relu(b, conv_bn(b, x, 3, 64, 7, conv="conv1", bn="bn1", stride=2, pad=3))
    with b.scope("maxpool"):
        x = b.op(
            "MaxPool", [x], ceil_mode=0, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]
        )
    expansion = 4 if bottleneck else 1
    block = _bottleneck if bottleneck else _basic_block
    cin = 64
    for stage, (count, planes) in enumerate(zip(blocks, (64, 128, 256, 512), strict=True), start=1):
        layer = f"layer{stage}"
        for i in range(count):
            stride = 2 if stage > 1 and i == 0 else 1
            with b.scope(layer, f"{layer}.{i}"):
                x = block(b, x, cin, planes, stride)
            cin = planes * expansion
    with b.scope("avgpool"):
        x = b.op("GlobalAveragePool", [x])
    x = b.op("Flatten", [x], axis=1)
    gemm(b, x, cin, num_classes, name="fc", out="logits")
    _classifier_output(b, batch, num_classes)
    return b.finish(
        name,
        f"torchvision {name}, BatchNormalization kept as nodes.",
    )


def resnet18(
    *,
    batch: Dim = "batch",
    image_size: int = 224,
    num_classes: int = 1000,
    opts: Options | None = None,
) -> onnx.ModelProto:
    """torchvision ``resnet18``: BasicBlocks [2, 2, 2, 2]."""
    return _resnet("resnet18", (2, 2, 2, 2), False, batch, image_size, num_classes, opts)


def resnet50(
    *,
    batch: Dim = "batch",
    image_size: int = 224,
    num_classes: int = 1000,
    opts: Options | None = None,
) -> onnx.ModelProto:
    """torchvision ``resnet50`` (v1.5): Bottlenecks [3, 4, 6, 3]."""
    return _resnet("resnet50", (3, 4, 6, 3), True, batch, image_size, num_classes, opts)


# ---------------------------------------------------------------------------- MobileNetV2
def _conv_bn_relu6(
    b: GraphBuilder, x: str, cin: int, cout: int, k: int, stride: int, groups: int, name: str
) -> str:
    """torchvision ``Conv2dNormActivation``: Conv (no bias), BatchNorm, ReLU6."""
    with b.scope(name):
        pad = (k - 1) // 2
        y = conv_bn(
            b,
            x,
            cin,
            cout,
            k,
            conv=f"{name}.0",
            bn=f"{name}.1",
            stride=stride,
            pad=pad,
            groups=groups,
        )
        return relu6(b, y, name=f"{name}.2")


def _inverted_residual(b: GraphBuilder, x: str, cin: int, cout: int, stride: int, t: int) -> str:
    hidden = cin * t
    with b.scope("conv"):
        y, i = x, 0
        if t != 1:
            y = _conv_bn_relu6(b, y, cin, hidden, 1, 1, 1, "conv.0")
            i = 1
        y = _conv_bn_relu6(b, y, hidden, hidden, 3, stride, hidden, f"conv.{i}")
        y = conv_bn(b, y, hidden, cout, 1, conv=f"conv.{i + 1}", bn=f"conv.{i + 2}")
    if stride == 1 and cin == cout:
        return b.op("Add", [x, y])
    return y


# (expansion t, output channels c, repeats n, first stride s): torchvision's table.
_MOBILENET_V2 = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


def mobilenet_v2(
    *,
    batch: Dim = "batch",
    image_size: int = 224,
    num_classes: int = 1000,
    opts: Options | None = None,
) -> onnx.ModelProto:
    """torchvision ``mobilenet_v2`` (width 1.0): inverted residuals with ReLU6 (Clip)."""
    b = GraphBuilder(opts or Options())
    x = _image_input(b, batch, image_size)
    with b.scope("features"):
        x = _conv_bn_relu6(b, x, 3, 32, 3, 2, 1, "features.0")
        cin, index = 32, 1
        for t, c, n, s in _MOBILENET_V2:
            for i in range(n):
                with b.scope(f"features.{index}"):
                    x = _inverted_residual(b, x, cin, c, s if i == 0 else 1, t)
                cin, index = c, index + 1
        x = _conv_bn_relu6(b, x, cin, 1280, 1, 1, 1, f"features.{index}")
    x = b.op("GlobalAveragePool", [x])
    x = b.op("Flatten", [x], axis=1)
    with b.scope("classifier"):
        gemm(b, x, 1280, num_classes, name="classifier.1", out="logits")
    _classifier_output(b, batch, num_classes)
    return b.finish(
        "mobilenet_v2",
        "torchvision mobilenet_v2, BatchNormalization kept as nodes.",
    )


# ---------------------------------------------------------------------------- ViT-B/16
def _vit_attention(b: GraphBuilder, x: str, hidden: int, heads: int) -> str:
    """``nn.MultiheadAttention`` (batch_first, need_weights=False): packed in-projection, SDPA."""
    head_dim = hidden // heads
    with b.scope("self_attention"):
        w = b.param("in_proj_weight", [hidden, 3 * hidden], normal(1.0 / math.sqrt(hidden)))
        bias = b.param("in_proj_bias", [3 * hidden], normal(0.02))
        qkv = b.op("Add", [b.op("MatMul", [x, w]), bias])
        n, s = b.dim(x, 0), b.dim(x, 1)
        q, k, v = (
            b.op("Transpose", [b.reshape(t, [n, s, heads, head_dim])], perm=[0, 2, 1, 3])
            for t in b.split(qkv, [hidden] * 3, axis=-1)
        )
        q = b.op("Mul", [q, b.scalar(1.0 / math.sqrt(head_dim))])
        scores = b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])])
        ctx = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), v])
        ctx = b.reshape(b.op("Transpose", [ctx], perm=[0, 2, 1, 3]), [n, s, hidden])
        return linear(b, ctx, hidden, hidden, name="out_proj")


def vit_b_16(
    *,
    batch: Dim = "batch",
    image_size: int = 224,
    patch_size: int = 16,
    layers: int = 12,
    hidden: int = 768,
    heads: int = 12,
    mlp_dim: int = 3072,
    num_classes: int = 1000,
    opts: Options | None = None,
) -> onnx.ModelProto:
    """torchvision ``vit_b_16``: 16x16 patches, class token, 12 pre-norm encoder blocks."""
    require(
        image_size % patch_size == 0,
        f"image_size={image_size}: pass a multiple of patch_size={patch_size}",
    )
    check_heads(hidden, heads)
    patches = (image_size // patch_size) ** 2
    b = GraphBuilder(opts or Options())
    image = _image_input(b, batch, image_size)
    x = conv2d(b, image, 3, hidden, patch_size, name="conv_proj", stride=patch_size, bias=True)
    n = b.dim(x, 0)
    x = b.op("Transpose", [b.reshape(x, [n, hidden, patches])], perm=[0, 2, 1])
    cls = b.param("class_token", [1, 1, hidden], normal(0.02))
    cls = b.expand(cls, [n, -1, -1])
    x = b.op("Concat", [cls, x], axis=1)
    with b.scope("encoder"):
        x = b.op("Add", [x, b.param("pos_embedding", [1, patches + 1, hidden], normal(0.02))])
        for i in range(layers):
            with b.scope("layers", f"encoder_layer_{i}"):
                y = _vit_attention(
                    b, layer_norm(b, x, hidden, name="ln_1", eps=1e-6), hidden, heads
                )
                x = b.op("Add", [y, x])
                y = layer_norm(b, x, hidden, name="ln_2", eps=1e-6)
                with b.scope("mlp"):
                    y = linear(b, y, hidden, mlp_dim, name="mlp.0")
                    with b.scope("mlp.1"):
                        y = gelu_erf(b, y)
                    y = linear(b, y, mlp_dim, hidden, name="mlp.3")
                x = b.op("Add", [x, y])
        x = layer_norm(b, x, hidden, name="ln", eps=1e-6)
    x = b.op("Gather", [x, b.int_scalar(0)], axis=1)
    with b.scope("heads"):
        gemm(b, x, hidden, num_classes, name="head", out="logits")
    _classifier_output(b, batch, num_classes)
    return b.finish(
        "vit_b_16",
        "torchvision vit_b_16.",
    )
