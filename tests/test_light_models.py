"""The ONNX package's light models (onnx/backend/test/data/light: BVLC/Caffe2 conversions whose
weights are made by ConstantOfShape) against published parameter counts."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

import onnxcost

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"

pytestmark = pytest.mark.skipif(
    not LIGHT.is_dir(), reason="this onnx install does not ship its light test models"
)


def _densenet121_bn_channels() -> int:
    """Channels of every BatchNormalization of DenseNet-121 (growth 32, blocks 6/12/24/16,
    bottleneck 4 x 32 = 128, stem 64, transitions halving):
    stem 64; block 1: sum(64 + 32 i, i < 6) = 864, + 6 x 128 = 768; transition 256;
    block 2: sum(128 + 32 i, i < 12) = 3,648, + 1,536; transition 512;
    block 3: sum(256 + 32 i, i < 24) = 14,976, + 3,072; transition 1,024;
    block 4: sum(512 + 32 i, i < 16) = 12,032, + 2,048; final norm 1,024.
    Total 41,824."""
    total, channels = 64, 64
    for i, layers in enumerate((6, 12, 24, 16)):
        total += sum(channels + 32 * k for k in range(layers)) + layers * 128
        channels += 32 * layers
        total += channels  # the transition's norm, or the final norm after block 4
        if i < 3:
            channels //= 2
    return total


def test_densenet121_bn_channel_arithmetic() -> None:
    assert _densenet121_bn_channels() == 41_824


DENSENET_BN = 2 * 41_824  # per BatchNormalization channel: mean + var (statistics), scale + bias


@pytest.mark.parametrize(
    ("model", "params", "stats"),
    [
        # published counts (torchvision / BVLC model cards; field_notes.md)
        ("light_bvlc_alexnet.onnx", 60_965_224, 0),
        ("light_vgg19.onnx", 143_667_240, 0),
        # torchvision ResNet-50: 25,557,032 params; 53,120 BN channels' mean + var = 2 x 26,560
        ("light_resnet50.onnx", 25_557_032, 53_120),
        ("light_squeezenet.onnx", 1_235_496, 0),  # SqueezeNet 1.1
        ("light_inception_v1.onnx", 6_998_552, 0),  # BVLC GoogLeNet
        # torchvision's DenseNet-121 7,978,856 (BN scale and bias included, which this Caffe
        # conversion holds in Mul/Add scale layers) + the unit scale and bias its kept
        # BatchNormalization nodes store again: 2 x 41,824 = 83,648 -> 8,062,504; statistics
        # mean + var 2 x 41,824 = 83,648
        ("light_densenet121.onnx", 7_978_856 + DENSENET_BN, DENSENET_BN),
    ],
)
def test_light_model_params_match_published(model: str, params: int, stats: int) -> None:
    a = onnxcost.analyze(LIGHT / model)
    assert (a.totals.params, a.totals.stat_params, a.totals.quant_params) == (params, stats, 0)
    assert {n.status for n in a.nodes} <= {"ok", "zero"}


def test_alexnet_peak_activations() -> None:
    # AlexNet at 1 x 3 x 224 x 224 fp32 (ConstantOfShape weights excluded): the largest live set
    # is conv1's output [1, 96, 54, 54] = 279,936 elements x 4 B = 1,119,744 B, read by the Relu
    # that writes as much again: 2 x 1,119,744 = 2,239,488 B (about 2.2 MB).
    a = onnxcost.analyze(LIGHT / "light_bvlc_alexnet.onnx")
    assert a.totals.peak_activation_bytes == 2 * 96 * 54 * 54 * 4 == 2_239_488
