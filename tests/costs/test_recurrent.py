"""RNN, GRU, LSTM, DynamicQuantizeLSTM, CausalConvWithState: MACs and FLOPs by hand.

Per step, direction and batch row: MACs = G x H x (I + H); the elementwise FLOPs per hidden
unit are RNN 1 + f, GRU 8 + 2f + g, LSTM 8 + 3f + g + h (Sigmoid 4, Tanh 1, Relu 1).
"""

from __future__ import annotations

import pytest
from onnxcost_testing import only_node
from test_contrib import ms_node


def rnn_model(
    op: str, x: str, w: str, r: str, attrs: str, *, bias: str = "", opset: int = 14
) -> str:
    b_decl = f", float[{bias}] b = {{0.0}}" if bias else ""
    b_in = ", b" if bias else ""
    outs = "y, y_h, y_c" if op == "LSTM" else "y, y_h"
    return f"""
<ir_version: 8, opset_import: ["" : {opset}]>
g (float[{x}] x) => (float[] y) <float[{w}] w = {{0.0}}, float[{r}] r = {{0.0}}{b_decl}> {{
  {outs} = {op} <{attrs}> (x, w, r{b_in})
}}"""


def test_lstm_worked_example() -> None:
    # LSTM: seq 5, batch 2, input 8, hidden 16, 1 direction:
    # MACs = 4 gates x (8x16 + 16x16) x 5 x 2 = 4 x 384 x 10 = 15,360
    # elementwise: (8 + 3 x 4 + 1 + 1) = 22 per unit: 22 x 16 x 5 x 2 = 3,520
    # FLOPs = 2 x 15,360 + 3,520 = 34,240; params = W 64x8 + R 64x16 = 512 + 1,024 = 1,536
    n = only_node(rnn_model("LSTM", "5,2,8", "1,64,8", "1,64,16", "hidden_size=16"))
    assert (n.macs, n.flops, n.params, n.status) == (15_360, 34_240, 1_536, "ok")


def test_lstm_bias_is_flops_not_macs() -> None:
    # as above + B [1, 128]: Wb and Rb adds, 2 x 4 x 16 x 5 x 2 = 1,280 FLOPs; params + 128
    n = only_node(rnn_model("LSTM", "5,2,8", "1,64,8", "1,64,16", "hidden_size=16", bias="1,128"))
    assert (n.macs, n.flops, n.params) == (15_360, 34_240 + 1_280, 1_664)


@pytest.mark.parametrize(
    ("x", "attrs", "w", "r", "macs", "flops"),
    [
        # bidirectional: D = 2 doubles everything: MACs 30,720; FLOPs 2 x 34,240 = 68,480
        ("5,2,8", 'hidden_size=16, direction="bidirectional"', "2,64,8", "2,64,16", 30_720, 68_480),
        # layout = 1 (batch first): X [B=3, T=5, I=8]: MACs = 4 x 384 x 5 x 3 = 23,040;
        # elementwise 22 x 16 x 15 = 5,280; FLOPs = 46,080 + 5,280 = 51,360
        ("3,5,8", "hidden_size=16, layout=1", "1,64,8", "1,64,16", 23_040, 51_360),
        # reverse is one direction, like forward
        ("5,2,8", 'hidden_size=16, direction="reverse"', "1,64,8", "1,64,16", 15_360, 34_240),
        # activations f=Relu(1), g=Tanh(1), h=Tanh(1): (8 + 3 + 1 + 1) = 13 x 160 = 2,080
        (
            "5,2,8",
            'hidden_size=16, activations=["Relu","Tanh","Tanh"]',
            "1,64,8",
            "1,64,16",
            15_360,
            32_800,
        ),
        # clip: a min and a max per gate element: + 2 x 4 x 16 x 10 = 1,280
        ("5,2,8", "hidden_size=16, clip=3.0", "1,64,8", "1,64,16", 15_360, 35_520),
    ],
)
def test_lstm_variants(x: str, attrs: str, w: str, r: str, macs: int, flops: int) -> None:
    n = only_node(rnn_model("LSTM", x, w, r, attrs))
    assert (n.macs, n.flops) == (macs, flops)


def test_lstm_peepholes() -> None:
    # P [1, 48] on i, f, o: multiply and add, 6 x 16 x 5 x 2 = 960 FLOPs; params + 48
    text = """
<ir_version: 8, opset_import: ["" : 14]>
g (float[5,2,8] x) => (float[] y) <float[1,64,8] w = {0.0}, float[1,64,16] r = {0.0}, float[1,48] p = {0.0}> {
  y, y_h, y_c = LSTM <hidden_size=16> (x, w, r, , , , , p)
}"""
    n = only_node(text)
    assert (n.macs, n.flops, n.params) == (15_360, 34_240 + 960, 1_536 + 48)


def test_lstm_bidirectional_per_direction_activations() -> None:
    # forward: Sigmoid, Tanh, Tanh (22 per unit); reverse: Relu, Relu, Relu (8 + 3 + 1 + 1 = 13)
    # elementwise = (22 + 13) x 16 x 5 x 2 = 5,600; MACs 30,720 -> FLOPs 61,440 + 5,600 = 67,040
    acts = '["Sigmoid","Tanh","Tanh","Relu","Relu","Relu"]'
    attrs = f'hidden_size=16, direction="bidirectional", activations={acts}'
    n = only_node(rnn_model("LSTM", "5,2,8", "2,64,8", "2,64,16", attrs))
    assert (n.macs, n.flops) == (30_720, 67_040)


@pytest.mark.parametrize("linear_before_reset", [0, 1])
def test_gru(linear_before_reset: int) -> None:
    # GRU: seq 4, batch 1, input 3, hidden 5: MACs = 3 gates x 5 x (3 + 5) x 4 x 1 = 480
    # elementwise (8 + 2 x 4 + 1) = 17 per unit: 17 x 5 x 4 = 340 -> FLOPs 960 + 340 = 1,300;
    # linear_before_reset only moves the reset multiply
    attrs = f"hidden_size=5, linear_before_reset={linear_before_reset}"
    n = only_node(rnn_model("GRU", "4,1,3", "1,15,3", "1,15,5", attrs))
    assert (n.macs, n.flops) == (480, 1_300)


def test_gru_bias_and_bidirectional() -> None:
    # D=2: MACs 960; elementwise 2 x 340 = 680; bias 2 x 3 gates x 5 x 4 x 2 dirs = 240
    # FLOPs = 1,920 + 680 + 240 = 2,840; params = W 2x15x3 + R 2x15x5 + B 2x30 = 90 + 150 + 60
    attrs = 'hidden_size=5, direction="bidirectional"'
    n = only_node(rnn_model("GRU", "4,1,3", "2,15,3", "2,15,5", attrs, bias="2,30"))
    assert (n.macs, n.flops, n.params) == (960, 2_840, 300)


@pytest.mark.parametrize(
    ("attrs", "flops"),
    [
        # RNN: seq 3, batch 2, input 4, hidden 6: MACs = 6 x (4 + 6) x 3 x 2 = 360
        # default Tanh: (1 add + 1 tanh) x 6 x 6 = 72 -> FLOPs 720 + 72 = 792
        ("hidden_size=6", 792),
        # Relu counts 1 like Tanh
        ('hidden_size=6, activations=["Relu"]', 792),
        # Sigmoid counts 4: (1 + 4) x 36 = 180 -> 900
        ('hidden_size=6, activations=["Sigmoid"]', 900),
    ],
)
def test_rnn(attrs: str, flops: int) -> None:
    n = only_node(rnn_model("RNN", "3,2,4", "1,6,4", "1,6,6", attrs))
    assert (n.macs, n.flops) == (360, flops)


def test_rnn_opset_7_has_no_layout() -> None:
    # opset 7: X is [T=3, B=2, I=4] always; same counts as above
    n = only_node(rnn_model("RNN", "3,2,4", "1,6,4", "1,6,6", "hidden_size=6", opset=7))
    assert (n.macs, n.flops) == (360, 792)


def test_initial_states_are_not_params() -> None:
    # initial_h given as an initializer is state, not a weight: params = W 24 + R 36 = 60
    text = """
<ir_version: 8, opset_import: ["" : 14]>
g (float[3,2,4] x) => (float[] y) <float[1,6,4] w = {0.0}, float[1,6,6] r = {0.0}, float[1,2,6] h0 = {0.0}> {
  y, y_h = RNN <hidden_size=6> (x, w, r, , , h0)
}"""
    assert only_node(text).params == 60


def test_dynamic_quantize_lstm() -> None:
    # com.microsoft DynamicQuantizeLSTM, bidirectional, X [5, 2, 8], W [2, 8, 64], R [2, 16, 64], B [2, 128]
    # MACs = 2 dirs x 5 x 2 x 4 x 16 x (8 + 16) = 30,720 -> 61,440
    # LSTM elementwise 22 x 16 x 5 x 2 x 2 = 7,040; bias 8 x 16 x 20 = 2,560
    # quantize X: 6 x 80 = 480; per step/dir/row: quantize H (6) + rescale 2 x 4 gates: 14 x 16 x 20 = 4,480
    # FLOPs = 61,440 + 7,040 + 2,560 + 480 + 4,480 = 76,000
    # params: W 1,024 + R 2,048 + B 256 (int8 weights counted as elements); scales, zero points are meta
    text = """
<ir_version: 8, opset_import: ["" : 14, "com.microsoft" : 1]>
g (float[5,2,8] x) => (float[] out) <int8[2,8,64] w = {0}, int8[2,16,64] r = {0}, float[2,128] b = {0.0},
    float[2] ws = {1.0, 1.0}, int8[2] wz = {0, 0}, float[2] rs = {1.0, 1.0}, int8[2] rz = {0, 0}> {
  y, y_h, y_c = com.microsoft.DynamicQuantizeLSTM <hidden_size=16, direction="bidirectional"> (x, w, r, b, , , , , ws, wz, rs, rz)
  out = Identity (y)
}"""
    n = ms_node(text, "DynamicQuantizeLSTM")
    assert (n.macs, n.flops, n.params, n.status) == (30_720, 76_000, 3_328, "ok")


@pytest.mark.parametrize(
    ("attrs", "bias", "flops"),
    [
        # input [2, 4, 10], depthwise weight [4, 1, 3]: MACs = 80 x 3 = 240 -> 480
        ("", False, 480),
        # + bias add per element (80) + SiLU 5 per element (400)
        ('activation="silu"', True, 960),
    ],
)
def test_causal_conv_with_state(attrs: str, bias: bool, flops: int) -> None:
    b_decl, b_in = (", float[4] b = {0.0, 0.0, 0.0, 0.0}", ", b") if bias else ("", "")
    attrs = f"<{attrs}>" if attrs else ""
    text = f"""
<ir_version: 13, opset_import: ["" : 27]>
g (float[2,4,10] x) => (float[] y) <float[4,1,3] w = {{0.0}}{b_decl}> {{
  y, state = CausalConvWithState {attrs} (x, w{b_in})
}}"""
    n = only_node(text)
    assert (n.macs, n.flops) == (240, flops)
    assert n.params == 12 + (4 if bias else 0)


def test_causal_conv_with_state_contrib_channels_last() -> None:
    # com.microsoft, channels_last: input [2, 10, 4] (B, L, C), weight [4, 1, 3]: MACs = 80 x 3 = 240
    text = """
<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
g (float[2,10,4] x) => (float[] out) <float[4,1,3] w = {0.0}> {
  y, state = com.microsoft.CausalConvWithState <channels_last=1> (x, w)
  out = Identity (y)
}"""
    n = ms_node(text, "CausalConvWithState")
    assert (n.macs, n.flops, n.status) == (240, 480, "ok")
