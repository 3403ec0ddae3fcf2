"""Backward rules (``register_backward``, beside each forward formula): MACs and FLOPs of each
op's backward worked by hand, with only the gradients that are needed."""

from __future__ import annotations

import pytest
from onnxcost_testing import analyze_text

from onnxcost.costs import REGISTRY
from onnxcost.errors import RegistryError


def backward(text: str, op: str, *, grad_inputs: bool = True, **kw: object) -> tuple[int, int]:
    """(backward_macs, backward_flops) of the one ``op`` node of the model."""
    a = analyze_text(text, training=True, grad_inputs=grad_inputs, **kw)
    (node,) = [n for n in a.nodes if n.op_type == op]
    assert node.backward_macs is not None
    assert node.backward_flops is not None
    return node.backward_macs, node.backward_flops


def unary(op: str, shape: str = "2,3", attrs: str = "", opset: int = 17) -> str:
    attrs = f"<{attrs}>" if attrs else ""
    return f"""
<ir_version: 8, opset_import: ["" : {opset}]>
g (float[{shape}] x) => (float[{shape}] y) {{
  y = {op} {attrs} (x)
}}"""


def conv(w: str, attrs: str, bias: bool = False) -> str:
    b_decl = ", float[8] b = {1.0}" if bias else ""
    return f"""
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,8,6,6] x) => (float[1,8,6,6] y) <float[{w}] w = {{1.0}}{b_decl}> {{
  y = Conv <{attrs}> (x, w{", b" if bias else ""})
}}"""


# --- contractions: each operand's gradient is one more forward-sized contraction --------------


def test_conv_weight_gradient_only_without_input_gradient() -> None:
    # 1x8x6x6 -> 1x8x6x6, k3 p1, no groups: MACs = 288 x 8 x 9 = 20,736; bias: dB = numel(Y)
    # - C_out = 288 - 8 = 280 adds. The input needs no gradient: dW only, 20,736 MACs,
    # FLOPs 2 x 20,736 + 280 = 41,752.
    text = conv("8,8,3,3", "pads=[1,1,1,1]", bias=True)
    assert backward(text, "Conv", grad_inputs=False) == (20_736, 41_752)
    # With the input's gradient too: dX is another 20,736: 41,472 MACs, 82,944 + 280 FLOPs.
    assert backward(text, "Conv") == (41_472, 83_224)


@pytest.mark.parametrize(
    ("group", "w", "forward_macs"),
    [
        # group 2: W = 8 x 4 x 3 x 3; MACs = 288 x 4 x 9 = 10,368
        (2, "8,4,3,3", 10_368),
        # depthwise, group 8: W = 8 x 1 x 3 x 3; MACs = 288 x 1 x 9 = 2,592
        (8, "8,1,3,3", 2_592),
    ],
)
def test_grouped_conv_weight_gradient_costs_its_forward(
    group: int, w: str, forward_macs: int
) -> None:
    # dX and dW each cost the forward's MACs: 2 x 10,368 = 20,736 (group 2), 2 x 2,592 =
    # 5,184 (depthwise). torch 2.13's FlopCounterMode counts dW `groups` times: it would say
    # 10,368 + 2 x 10,368 = 31,104 MACs for group 2 and 2,592 + 8 x 2,592 = 23,328 depthwise.
    text = conv(w, f"pads=[1,1,1,1], group={group}")
    assert backward(text, "Conv") == (2 * forward_macs, 4 * forward_macs)
    assert backward(text, "Conv", grad_inputs=False) == (forward_macs, 2 * forward_macs)


def test_conv_transpose_backward() -> None:
    # ConvTranspose 1x2x3x3 -> 1x4x5x5 (k3), W = 2 x 4 x 3 x 3: MACs = numel(X) x 4 x 9 =
    # 18 x 36 = 648; dX and dW: 1,296 MACs, 2,592 FLOPs.
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,3,3] x) => (float[1,4,5,5] y) <float[2,4,3,3] w = {1.0}> {
  y = ConvTranspose <kernel_shape=[3,3]> (x, w)
}"""
    assert backward(text, "ConvTranspose") == (1_296, 2_592)


MATMUL = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[5,2,3] x) => (float[5,2,4] y) <float[3,4] w = {1.0}> {
  y = MatMul (x, w)
}"""


def test_matmul_backward_per_needed_operand() -> None:
    # [5,2,3] @ [3,4]: MACs = numel(Y) x K = 40 x 3 = 120. dW = sum over the batch of x^T g:
    # 120 MACs (the broadcast batch summed in the contraction); dX = g W^T: 120 more.
    assert backward(MATMUL, "MatMul", grad_inputs=False) == (120, 240)
    assert backward(MATMUL, "MatMul") == (240, 480)


def test_matmul_of_untrained_activations_costs_no_backward() -> None:
    # No weight anywhere and no input gradient: nothing upstream trains, no backward.
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] a, float[3,4] b) => (float[2,4] y) {
  y = MatMul (a, b)
}"""
    assert backward(text, "MatMul", grad_inputs=False) == (0, 0)


def test_gemm_backward_with_broadcast_bias() -> None:
    # Gemm transB: A [2,3], B [4,3], C [4]: M x N x K = 2 x 4 x 3 = 24 MACs. Without the input
    # gradient: dB 24 MACs; dC = g summed over the 2 rows: numel(Y) - numel(C) = 8 - 4 = 4
    # adds. FLOPs = 2 x 24 + 4 = 52.
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] a) => (float[2,4] y) <float[4,3] b = {1.0}, float[4] c = {1.0}> {
  y = Gemm <transB=1> (a, b, c)
}"""
    assert backward(text, "Gemm", grad_inputs=False) == (24, 52)
    assert backward(text, "Gemm") == (48, 100)


def test_einsum_backward() -> None:
    # "ij,jk->ik" on [2,3], [3,4]: prod(sizes) = 2 x 3 x 4 = 24 MACs; both operands: 48.
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] a, float[3,4] b) => (float[2,4] y) {
  y = Einsum <equation="ij,jk->ik"> (a, b)
}"""
    assert backward(text, "Einsum") == (48, 96)


def test_onnx_attention_backward_is_twice_its_forward() -> None:
    # Q, K, V [1,2,3,4]: scores = 1 x 2 x 3 x 3 = 18, rows = 6, head = v_head = 4.
    # Forward MACs = 18 x (4 + 4) = 144. Backward: dV = P^T dO 18 x 4, dP = dO V^T 18 x 4,
    # dQ 18 x 4, dK 18 x 4: 288 MACs = 2 x 144 (torch's SDPA backward count).
    # FLOPs = 2 x 288 + softmax backward (4 x 18 - 6 = 66) + scale (18) = 660.
    text = """
<ir_version: 10, opset_import: ["" : 23]>
g (float[1,2,3,4] q, float[1,2,3,4] k, float[1,2,3,4] v) => (float[1,2,3,4] y) {
  y = Attention (q, k, v)
}"""
    assert backward(text, "Attention") == (288, 660)


def test_lstm_style_rnn_backward_through_time() -> None:
    # RNN, T = 2, B = 1, I = 3, H = 4, one gate (G = 1), W [1,4,3], R [1,4,4], no bias.
    # Forward elementwise (1 + f) H per step and row with Tanh f = 1: 2 x 4 x 2 = 16.
    # Backward, X needs no gradient: unit = D T B G H = 8; MACs = 8 x (H [dH] + I [dW] +
    # H [dR]) = 8 x 11 = 88; FLOPs = 2 x 88 + 2 x 16 = 208.
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,1,3] x) => (float[2,1,1,4] y) <float[1,4,3] w = {1.0}, float[1,4,4] r = {1.0}> {
  y = RNN <hidden_size=4> (x, w, r)
}"""
    assert backward(text, "RNN", grad_inputs=False) == (88, 208)
    # With dX too: I more per unit: 8 x 14 = 112 MACs, 224 + 32 = 256 FLOPs.
    assert backward(text, "RNN") == (112, 256)


# --- elementwise, activations, normalization, softmax, pooling, reductions, data movement ------


@pytest.mark.parametrize(
    ("op", "per_element"),
    [
        ("Relu", 1),  # g where y > 0: one compare
        ("Sigmoid", 3),  # g y (1 - y): sub, mul, mul
        ("Tanh", 3),  # g (1 - y^2)
        ("Exp", 1),  # g y
        ("Neg", 1),
        ("Erf", 5),  # g 2/sqrt(pi) exp(-x^2)
        ("Gelu", 11),  # Phi(x) + x phi(x): 4 + 4 + mul + add + times g
    ],
)
def test_unary_backward(op: str, per_element: int) -> None:
    # [2,3]: 6 elements, so 6 x per_element FLOPs, no MACs.
    opset = 20 if op == "Gelu" else 17
    assert backward(unary(op, opset=opset), op) == (0, 6 * per_element)


def test_gelu_tanh_backward() -> None:
    # The tanh form's derivative: 17 per element; 6 elements: 102.
    assert backward(unary("Gelu", attrs='approximate="tanh"', opset=20), "Gelu") == (0, 102)


def binary(op: str, b_shape: str, y_shape: str = "2,3") -> str:
    return f"""
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x) => (float[{y_shape}] y) <float[{b_shape}] b = {{1.0}}> {{
  y = {op} (x, b)
}}"""


@pytest.mark.parametrize(
    ("op", "grad_inputs", "flops"),
    [
        # Add of a bias [3] to [2,3]: dX = g (free), db = g summed over 2 rows: 6 - 3 = 3 adds.
        ("Add", False, 3),
        ("Add", True, 3),
        # Sub: db = -g summed: 6 negations + 3 adds = 9; dX free.
        ("Sub", True, 9),
        # Mul: db = g x summed: 6 multiplies + 3 adds = 9; dX = g b: 6 more.
        ("Mul", False, 9),
        ("Mul", True, 15),
        # Div: db = -g y / b: 3 x 6 + 3 = 21; dX = g / b: 6 more.
        ("Div", False, 21),
        ("Div", True, 27),
    ],
)
def test_binary_backward_sums_the_broadcast(op: str, grad_inputs: bool, flops: int) -> None:
    assert backward(binary(op, "3"), op, grad_inputs=grad_inputs) == (0, flops)


def test_softmax_backward() -> None:
    # [2,5], axis -1: y (g - sum(g y)): 4 x 10 - 2 rows = 38.
    assert backward(unary("Softmax", "2,5", opset=13), "Softmax") == (0, 38)
    assert backward(unary("LogSoftmax", "2,5", opset=13), "LogSoftmax") == (0, 38)


LAYER_NORM = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,4] x) => (float[2,4] y) <float[4] s = {1.0, 1.0, 1.0, 1.0}, float[4] b = {0.0, 0.0, 0.0, 0.0}> {
  y = LayerNormalization (x, s, b)
}"""


def test_layer_norm_backward() -> None:
    # n = 8, rows = 2, D = 4. Without dX: x^ recomputed 2n = 16; dScale = sum(g x^) 2n - D = 12;
    # dB = sum(g) n - D = 4: 32. With dX: + 8n = 64: 96.
    assert backward(LAYER_NORM, "LayerNormalization", grad_inputs=False) == (0, 32)
    assert backward(LAYER_NORM, "LayerNormalization") == (0, 96)


def test_batch_norm_backward() -> None:
    # 2 x 3 x 2 x 2: n = 24, C = 3; scale and bias trained, input too: x^ 48 + dB (24 - 3 = 21)
    # + dScale (48 - 3 = 45) + dX 8 x 24 = 192: 306.
    text = """
<ir_version: 8, opset_import: ["" : 15]>
g (float[2,3,2,2] x) => (float[2,3,2,2] y)
  <float[3] s = {1.0, 1.0, 1.0}, float[3] b = {0.0, 0.0, 0.0},
   float[3] m = {0.0, 0.0, 0.0}, float[3] v = {1.0, 1.0, 1.0}> {
  y = BatchNormalization (x, s, b, m, v)
}"""
    assert backward(text, "BatchNormalization") == (0, 306)
    # The running mean and variance are statistics: only scale and bias train (6 params).
    a = analyze_text(text, training=True)
    assert a.totals.training is not None
    assert a.totals.training.trainable_params == 6


def test_pooling_backward() -> None:
    # MaxPool k2 s2 on 1x1x4x4 -> 1x1x2x2: g added at each argmax, 4 adds.
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,4,4] x) => (float[1,1,2,2] y) {
  y = MaxPool <kernel_shape=[2,2], strides=[2,2]> (x)
}"""
    assert backward(text, "MaxPool") == (0, 4)
    # AveragePool: g / 4 spread over 16 taps: taps = 16 FLOPs (the forward's).
    assert backward(text.replace("MaxPool", "AveragePool"), "AveragePool") == (0, 16)
    # GlobalAveragePool on 1x2x3x3: g / 9 per output, 2 divides.
    gap = unary("GlobalAveragePool", "1,2,3,3").replace("float[1,2,3,3] y", "float[1,2,1,1] y")
    assert backward(gap, "GlobalAveragePool") == (0, 2)


def test_reduction_backward() -> None:
    # ReduceMean over axis 1 of [2,3] -> [2,1]: g / 3 broadcast: 2 divides. ReduceSum: 0.
    text = """
<ir_version: 8, opset_import: ["" : 18]>
g (float[2,3] x) => (float[2,1] y) {
  axes = Constant <value = int64[1] {1}> ()
  y = ReduceMean (x, axes)
}"""
    assert backward(text, "ReduceMean") == (0, 2)
    assert backward(text.replace("ReduceMean", "ReduceSum"), "ReduceSum") == (0, 0)


def test_gather_backward_is_a_scatter_add() -> None:
    # Embedding table [10,4] read at int64 ids [2,3]: Y [2,3,4], 24 elements; dTable: 24 adds.
    # The ids are integers: no gradient.
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (int64[2,3] ids) => (float[2,3,4] y) <float[10,4] table = {1.0}> {
  y = Gather (table, ids)
}"""
    assert backward(text, "Gather") == (0, 24)


def test_expand_backward_sums_the_copies() -> None:
    # [1,3] expanded to [4,3]: dX = g summed over 4 copies: 12 - 3 = 9 adds.
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,3] x) => (float[4,3] y) {
  shape = Constant <value = int64[2] {4, 3}> ()
  y = Expand (x, shape)
}"""
    assert backward(text, "Expand") == (0, 9)


def test_comparisons_carry_no_gradient() -> None:
    # Greater's output is boolean and the op carries no gradient: the Where after it gets dX
    # and dY through selects only (free), nothing flows into the comparison.
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x, float[2,3] z) => (float[2,3] y) {
  c = Greater (x, z)
  y = Where (c, x, z)
}"""
    assert backward(text, "Greater") == (0, 0)
    assert backward(text, "Where") == (0, 0)


def test_backward_rule_registered_twice_is_an_error() -> None:
    spec = REGISTRY.lookup("", "Relu", 17)
    assert spec is not None
    assert spec.backward is not None
    with pytest.raises(RegistryError, match="already has a backward rule"):
        REGISTRY.attach("", "Relu", 1, 10_000, backward=spec.backward)


def test_backward_rule_needs_a_forward_entry() -> None:
    with pytest.raises(RegistryError, match="needs a forward entry"):
        REGISTRY.attach("", "NoSuchOp", 1, 10_000, backward=lambda ctx, needs: None)


def test_pow_keeps_its_output_only_for_a_trained_exponent() -> None:
    # x [2,3] ** 3 (a constant exponent): dX = g 3 x^2 needs x (24 B), not y; the exponent is
    # a lone scalar, no activation. Saved: 24 B (keeping y as well would make 48).
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x) => (float[2,3] y) <float p = {3.0}> {
  y = Pow (x, p)
}"""
    a = analyze_text(text, training=True, grad_inputs=True)
    assert a.totals.training is not None
    assert a.totals.training.training_memory.saved_activation_bytes == 24
    # dX: 4 per element (sub, pow, mul, mul): 24 FLOPs.
    assert backward(text, "Pow") == (0, 24)


def dropout(outputs: str, inputs: str) -> str:
    return f"""
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x) => (float[2,3] y) {{
  r = Constant <value = float {{0.1}}> ()
  t = Constant <value = bool {{1}}> ()
  {outputs} = Dropout ({inputs})
}}"""


def test_dropout_keeps_its_mask_in_training_mode() -> None:
    # Training mode (a mask output): dX = g * mask / (1 - ratio), 2 FLOPs x 6 elements = 12;
    # it keeps the mask, bool [2,3]: 6 bytes.
    text = dropout("y, m", "x, r, t")
    assert backward(text, "Dropout") == (0, 12)
    memory = analyze_text(text, training=True, grad_inputs=True).totals.training
    assert memory is not None
    assert memory.training_memory.saved_activation_bytes == 6
    # A training_mode input without the mask output: the mask is kept all the same, 6 bytes.
    text = dropout("y", "x, r, t")
    assert backward(text, "Dropout") == (0, 12)
    memory = analyze_text(text, training=True, grad_inputs=True).totals.training
    assert memory is not None
    assert memory.training_memory.saved_activation_bytes == 6


def test_dropout_at_inference_is_an_identity() -> None:
    text = dropout("y", "x")
    assert backward(text, "Dropout") == (0, 0)
    memory = analyze_text(text, training=True, grad_inputs=True).totals.training
    assert memory is not None
    assert memory.training_memory.saved_activation_bytes == 0
