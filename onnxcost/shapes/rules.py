"""onnxcost's own output-shape rules, for the outputs ONNX's shape inference leaves untyped.

ONNX has no schema for onnxruntime's com.microsoft ops (the quantizer's QLinearAdd, QGemm,
QAttention, ...), and some schemas type only part of the outputs (Dropout's mask before
opset 10) or give a type without a shape (LessOrEqual and GreaterOrEqual at opsets 12 to 15). Shape inference (``onnxcost.shapes.infer``, which may not import the cost formulas) asks a rule here only for what ONNX's own
inference left out; every rule is tested against the shapes onnxruntime outputs.

A rule takes the node, its opset and the types of its inputs (None where omitted or
unknown) and returns ``(output index, element type, shape)`` for the outputs it can type;
it raises UnknownShapeError when an input shape it needs is not concrete.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import onnx
from onnx import TensorProto, helper

from onnxcost.load.tensors import Shape, TensorInfo, UnknownShapeError

MS = "com.microsoft"

Inputs = Sequence[TensorInfo | None]
Typed = tuple[tuple[int, int, Shape | None], ...]
Rule = Callable[[onnx.NodeProto, int, Inputs], Typed]


def broadcast_shape(*shapes: Sequence[int]) -> tuple[int, ...]:
    """numpy broadcasting of ``shapes``; raises UnknownShapeError when they do not broadcast."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[int] = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0} - {1}
        if len(dims) > 1:
            raise UnknownShapeError(f"shapes {[tuple(s) for s in shapes]} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def matmul_shape(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """Output shape of numpy ``matmul(a, b)`` (1-D operands and batch broadcasting included)."""
    if not a or not b:
        raise UnknownShapeError("matmul of a scalar")
    a2 = (1, *a) if len(a) == 1 else tuple(a)
    b2 = (*b, 1) if len(b) == 1 else tuple(b)
    out = (*broadcast_shape(a2[:-2], b2[:-2]), a2[-2], b2[-1])
    if len(b) == 1:
        out = out[:-1]
    if len(a) == 1:
        out = (*out[:-2], out[-1]) if len(b) > 1 else out[:-1]
    return out


def window_spatial(
    in_spatial: Sequence[int],
    kernel: Sequence[int],
    *,
    strides: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    auto_pad: str = "NOTSET",
    ceil_mode: int = 0,
) -> tuple[int, ...]:
    """Spatial output dims of a convolution or pooling window:
    floor((size + pad_begin + pad_end - ((k - 1) x dilation + 1)) / stride) + 1
    (ceil with ``ceil_mode``; ceil(size / stride) for SAME padding)."""
    n = len(in_spatial)
    strides = list(strides or [1] * n)
    dilations = list(dilations or [1] * n)
    pads = list(pads or [0] * (2 * n))
    out = []
    for i, (size, k) in enumerate(zip(in_spatial, kernel, strict=True)):
        s, d = int(strides[i]), int(dilations[i])
        span = (int(k) - 1) * d + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out.append(-(-size // s))
        elif auto_pad == "VALID":
            out.append(-(-(size - span + 1) // s))
        else:
            padded = size + int(pads[i]) + int(pads[i + n]) - span
            out.append((-(-padded // s) if ceil_mode else padded // s) + 1)
    return tuple(out)


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in node.attribute:
        value = helper.get_attribute_value(a)
        out[a.name] = value.decode() if isinstance(value, bytes) else value
    return out


def _shape(ins: Inputs, i: int) -> tuple[int, ...]:
    info = ins[i] if i < len(ins) else None
    if info is None:
        raise UnknownShapeError(f"input {i} is absent or untyped")
    return info.concrete_shape


def _elem(ins: Inputs, i: int, default: int) -> int:
    """Element type of input ``i`` where it is given and typed, else ``default``."""
    info = ins[i] if i < len(ins) else None
    return info.elem_type if info is not None and info.elem_type else default


def _window_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    return {
        "strides": attrs.get("strides"),
        "pads": attrs.get("pads"),
        "dilations": attrs.get("dilations"),
        "auto_pad": str(attrs.get("auto_pad", "NOTSET")),
        "ceil_mode": int(attrs.get("ceil_mode", 0)),
    }


def _dropout(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """Y and mask are X's shape; the mask is bool from opset 10, X's type before."""
    x = _shape(ins, 0)
    elem = _elem(ins, 0, TensorProto.FLOAT)
    return ((0, elem, x), (1, TensorProto.BOOL if opset >= 10 else elem, x))


def _same_as_x(y_zero_point: int) -> Rule:
    """Y is X's shape, of the type of input ``y_zero_point`` (X's type where it is omitted)."""

    def rule(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
        return ((0, _elem(ins, y_zero_point, _elem(ins, 0, TensorProto.UINT8)), _shape(ins, 0)),)

    return rule


def _quantize(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """y is x's shape, of the zero point's type (uint8 without one)."""
    return ((0, _elem(ins, 2, TensorProto.UINT8), _shape(ins, 0)),)


def _dequantize(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """y is x's shape, of the scale's type."""
    return ((0, _elem(ins, 1, TensorProto.FLOAT), _shape(ins, 0)),)


def _qlinear_binary(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """C is the broadcast of A (0) and B (3), of C_zero_point's type (A's without one)."""
    shape = broadcast_shape(_shape(ins, 0), _shape(ins, 3))
    return ((0, _elem(ins, 7, _elem(ins, 0, TensorProto.UINT8)), shape),)


def _qlinear_where(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """Z is the broadcast of condition (0), X (1) and Y (4), of Z_zero_point's type."""
    shape = broadcast_shape(_shape(ins, 0), _shape(ins, 1), _shape(ins, 4))
    return ((0, _elem(ins, 8, _elem(ins, 1, TensorProto.UINT8)), shape),)


def _qlinear_concat(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """Y concatenates the X of each (X, scale, zero point) triplet from input 2 along ``axis``."""
    shapes = [_shape(ins, i) for i in range(2, len(ins), 3)]
    if not shapes:
        raise UnknownShapeError("QLinearConcat has no inputs")
    rank = len(shapes[0])
    axis = int(_attrs(node).get("axis", 0)) % rank
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return ((0, _elem(ins, 1, _elem(ins, 2, TensorProto.UINT8)), tuple(out)),)


def _qlinear_conv(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """Y [N, M, out...] (NHWC [N, out..., M] with channels_last) from X (0) and W (3)."""
    attrs = _attrs(node)
    x, w = _shape(ins, 0), _shape(ins, 3)
    channels_last = bool(attrs.get("channels_last", 0))
    spatial = x[1:-1] if channels_last else x[2:]
    kernel = attrs.get("kernel_shape") or w[2:]
    out = window_spatial(spatial, kernel, **_window_attrs(attrs))
    shape = (x[0], *out, w[0]) if channels_last else (x[0], w[0], *out)
    return ((0, _elem(ins, 7, _elem(ins, 0, TensorProto.UINT8)), shape),)


def _qlinear_average_pool(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """Y [N, C, out...] (NHWC with channels_last) from X and kernel_shape."""
    attrs = _attrs(node)
    x = _shape(ins, 0)
    kernel = attrs.get("kernel_shape")
    if not kernel:
        raise UnknownShapeError("QLinearAveragePool has no kernel_shape")
    channels_last = bool(attrs.get("channels_last", 0))
    spatial = x[1:-1] if channels_last else x[2:]
    attrs.pop("dilations", None)  # pooling here has no dilation
    out = window_spatial(spatial, kernel, **_window_attrs(attrs))
    shape = (x[0], *out, x[-1]) if channels_last else (x[0], x[1], *out)
    return ((0, _elem(ins, 4, _elem(ins, 0, TensorProto.UINT8)), shape),)


def _qlinear_global_average_pool(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """Y [N, C, 1, ...] ([N, 1, ..., C] with channels_last)."""
    x = _shape(ins, 0)
    ones = (1,) * (len(x) - 2)
    channels_last = bool(_attrs(node).get("channels_last", 0))
    shape = (x[0], *ones, x[-1]) if channels_last else (x[0], x[1], *ones)
    return ((0, _elem(ins, 4, _elem(ins, 0, TensorProto.UINT8)), shape),)


def _qgemm(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """Y [M, N] from A (0) and B (3) with transA/transB; quantized (Y_zero_point's type, uint8
    without one) where y_scale (7) is given, else float."""
    attrs = _attrs(node)
    a, b = _shape(ins, 0), _shape(ins, 3)
    m = a[1] if int(attrs.get("transA", 0)) else a[0]
    n = b[0] if int(attrs.get("transB", 0)) else b[1]
    elem = (
        _elem(ins, 8, TensorProto.UINT8)
        if len(ins) > 7 and ins[7] is not None
        else TensorProto.FLOAT
    )
    return ((0, elem, (m, n)),)


def _float_matmul(scale: int) -> Rule:
    """Y = matmul(A, B) shape, of the type of input ``scale`` (float)."""

    def rule(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
        shape = matmul_shape(_shape(ins, 0), _shape(ins, 1))
        return ((0, _elem(ins, scale, TensorProto.FLOAT), shape),)

    return rule


def _matmul_nbits(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """Y [..., N] from A [..., K], of A's type."""
    a = _shape(ins, 0)
    return ((0, _elem(ins, 0, TensorProto.FLOAT), (*a[:-1], int(_attrs(node).get("N", 0)))),)


def _gather_block_quantized(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """Y = data[:axis] + indices + data[axis + 1:] of the logical (unpacked) data shape, of
    the scales' type."""
    attrs = _attrs(node)
    data, indices = list(_shape(ins, 0)), _shape(ins, 1)
    info = ins[0]
    bits = int(attrs.get("bits", 4))
    if info is not None and info.elem_type == TensorProto.UINT8 and bits < 8 and data:
        data[-1] *= 8 // bits
    axis = int(attrs.get("gather_axis", 0)) % len(data)
    shape = (*data[:axis], *indices, *data[axis + 1 :])
    return ((0, _elem(ins, 2, TensorProto.FLOAT), shape),)


def _qattention(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """output [B, S, D_v] (D_v: the last of qkv_hidden_sizes, else a third of W's columns),
    float; present [2, B, heads, past + S, D_v / heads] where past (8) is given."""
    attrs = _attrs(node)
    x, w = _shape(ins, 0), _shape(ins, 1)
    sizes = attrs.get("qkv_hidden_sizes") or [w[1] // 3] * 3
    d_v = int(sizes[2])
    elem = _elem(ins, 3, TensorProto.FLOAT)
    out: list[tuple[int, int, Shape | None]] = [(0, elem, (x[0], x[1], d_v))]
    if len(ins) > 8 and ins[8] is not None and len(node.output) > 1:
        past = _shape(ins, 8)
        heads = int(attrs.get("num_heads", 1))
        out.append((1, elem, (2, x[0], heads, past[3] + x[1], d_v // heads)))
    return tuple(out)


def _dynamic_quantize_lstm(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """Y [T, D, B, H], Y_h and Y_c [D, B, H] (as LSTM), of X's type."""
    attrs = _attrs(node)
    x = _shape(ins, 0)
    hidden = int(attrs.get("hidden_size", 0))
    if not hidden:
        raise UnknownShapeError("DynamicQuantizeLSTM has no hidden_size")
    d = 2 if str(attrs.get("direction", "forward")) == "bidirectional" else 1
    elem = _elem(ins, 0, TensorProto.FLOAT)
    state = (d, x[1], hidden)
    return ((0, elem, (x[0], d, x[1], hidden)), (1, elem, state), (2, elem, state))


def _qembed_layer_norm(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """layernorm_out [B, S, D] (D: the word table's width), of the scales' type; mask_index_out
    [B] int32."""
    batch, seq = _shape(ins, 0)
    hidden = _shape(ins, 2)[-1]
    return (
        (0, _elem(ins, 8, TensorProto.FLOAT), (batch, seq, hidden)),
        (1, TensorProto.INT32, (batch,)),
    )


# --- onnxruntime's transformer and graph-optimizer fusions -----------------------------------


def _elementwise(*outputs: int) -> Rule:
    """Each of ``outputs`` is X's shape and type (a fused activation, bias or residual add)."""

    def rule(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
        x, elem = _shape(ins, 0), _elem(ins, 0, TensorProto.FLOAT)
        return tuple((i, elem, x) for i in outputs)

    return rule


def _compare_or_equal(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """C is the broadcast of A and B, bool. ONNX 1.23 types LessOrEqual and GreaterOrEqual
    at opsets 12 to 15 (functions of Less, Greater and Equal) without a shape: a mask built
    with them, transformers' at opset 14, left ~85 nodes of a decoder unknown_shape."""
    return ((0, TensorProto.BOOL, broadcast_shape(_shape(ins, 0), _shape(ins, 1))),)


def _bias_dropout(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """output is X's shape and type, mask X's shape in bool."""
    x = _shape(ins, 0)
    return ((0, _elem(ins, 0, TensorProto.FLOAT), x), (1, TensorProto.BOOL, x))


def _bias_split_gelu(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """Y is X [..., D] halved on the last axis: [..., D / 2]."""
    x = _shape(ins, 0)
    return ((0, _elem(ins, 0, TensorProto.FLOAT), (*x[:-1], x[-1] // 2)),)


def _norm_stats(x: tuple[int, ...], axis: int) -> tuple[int, ...]:
    """A normalization's mean / inv_std_var: X's dims before ``axis``, then 1s."""
    axis = axis % len(x)
    return (*x[:axis], *(1,) * (len(x) - axis))


def _layer_norm(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """Y is X's shape; Mean and InvStdDev (float) X[:axis] then 1s. onnxruntime's
    LayerNormalization before opset 17, and its SimplifiedLayerNormalization (Y, inv_std_var)."""
    x = _shape(ins, 0)
    stats = _norm_stats(x, int(_attrs(node).get("axis", -1)))
    stash = int(_attrs(node).get("stash_type", 1))
    out: list[tuple[int, int, Shape | None]] = [(0, _elem(ins, 0, TensorProto.FLOAT), x)]
    indices = (1,) if node.op_type == "SimplifiedLayerNormalization" else (1, 2)
    out += [(i, stash, stats) for i in indices]
    return tuple(out)


def _skip_layer_norm(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """output and input_skip_bias_sum are input's shape; mean and inv_std_var (float) are
    input's dims but the last, then 1."""
    x, elem = _shape(ins, 0), _elem(ins, 0, TensorProto.FLOAT)
    stats = (*x[:-1], 1)
    return (
        (0, elem, x),
        (1, TensorProto.FLOAT, stats),
        (2, TensorProto.FLOAT, stats),
        (3, elem, x),
    )


def _embed_layer_norm(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """output and embedding_sum [B, S, D] (D: the word table's width), of the table's type;
    mask_index [B] int32."""
    batch, seq = _shape(ins, 0)
    table = _shape(ins, 2)
    elem = _elem(ins, 2, TensorProto.FLOAT)
    out = (batch, seq, table[-1])
    return ((0, elem, out), (1, TensorProto.INT32, (batch,)), (2, elem, out))


def _heads(node: onnx.NodeProto, name: str = "num_heads") -> int:
    heads = int(_attrs(node).get(name, 0))
    if heads <= 0:
        raise UnknownShapeError(f"{node.op_type} without {name}")
    return heads


def _attention(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """output [B, S, D_v] (D_v: the last of qkv_hidden_sizes, else a third of the weights'
    columns); present [2, B, N, P + S, D_k / N] (past's shape with past_present_share_buffer).
    Also DecoderMaskedSelfAttention."""
    attrs = _attrs(node)
    x, w = _shape(ins, 0), _shape(ins, 1)
    sizes = attrs.get("qkv_hidden_sizes") or [w[-1] // 3] * 3
    elem = _elem(ins, 0, TensorProto.FLOAT)
    out: list[tuple[int, int, Shape | None]] = [(0, elem, (x[0], x[1], int(sizes[2])))]
    if len(ins) > 4 and ins[4] is not None:
        past = _shape(ins, 4)
        if int(attrs.get("past_present_share_buffer", 0)):
            out.append((1, elem, past))
        else:
            out.append((1, elem, (*past[:3], past[3] + x[1], past[4])))
    elif len(node.output) > 1:
        heads = _heads(node)
        out.append((1, elem, (2, x[0], heads, x[1], int(sizes[1]) // heads)))
    return tuple(out)


def _multi_head_attention(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """output [B, S, N x H_v]; present_key / present_value [B, N, P + L, H] (the key and value
    themselves where they are BNSH, past's length where past and present share a buffer).

    query is [B, S, D] or packed QKV [B, S, N, 3, H]; key [B, L, D], packed KV [B, L, N, 2, H]
    or BNSH [B, N, L, H]."""
    heads = _heads(node)
    q = _shape(ins, 0)
    elem = _elem(ins, 0, TensorProto.FLOAT)
    batch, seq = q[0], q[1]
    bnsh = False
    if len(q) == 5:
        kv_len, head, v_head = seq, q[4], q[4]
    else:
        head = q[2] // heads
        k = _shape(ins, 1)
        if len(k) == 5:
            kv_len, v_head = k[1], k[4]
        elif len(k) == 4:
            bnsh = True
            kv_len, v_head = k[2], _shape(ins, 2)[3]
        else:
            kv_len, v_head = k[1], _shape(ins, 2)[2] // heads
    out: list[tuple[int, int, Shape | None]] = [(0, elem, (batch, seq, heads * v_head))]
    if bnsh:
        total = kv_len
    elif len(ins) > 6 and ins[6] is not None:
        past = _shape(ins, 6)[2]
        shared = len(ins) > 8 and ins[8] is not None
        total = past if shared else past + kv_len
    else:
        total = kv_len
    out.append((1, elem, (batch, heads, total, head)))
    out.append((2, elem, (batch, heads, total, v_head)))
    return tuple(out)


def _decoder_masked_mha(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """output [B, S, N x H_v]; present_key / present_value past's shape where past and present
    share a buffer, else [B, N, P + S, H]."""
    heads = _heads(node)
    q = _shape(ins, 0)
    elem = _elem(ins, 0, TensorProto.FLOAT)
    batch, seq = q[0], q[1]
    k = _shape(ins, 1) if len(ins) > 1 and ins[1] is not None else None
    if k is None:  # packed QKV [B, S, 3 D]
        v_head = q[2] // (3 * heads)
    elif len(k) == 4:  # cross attention over [B, N, L, H] key and value
        v_head = _shape(ins, 2)[3]
    else:
        v_head = _shape(ins, 2)[2] // heads
    out: list[tuple[int, int, Shape | None]] = [(0, elem, (batch, seq, heads * v_head))]
    if len(ins) > 5 and ins[5] is not None and ins[6] is not None:
        past_k, past_v = _shape(ins, 5), _shape(ins, 6)
        if int(_attrs(node).get("past_present_share_buffer", 0)):
            out += [(1, elem, past_k), (2, elem, past_v)]
        else:
            out.append((1, elem, (*past_k[:2], past_k[2] + seq, past_k[3])))
            out.append((2, elem, (*past_v[:2], past_v[2] + seq, past_v[3])))
    return tuple(out)


def _group_query_attention(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """output [B, S, N_q x H]; present_key / present_value [B, N_kv, max(P, P + S), H]: past's
    length P + S (onnxruntime's own inference; a shared buffer keeps P at run time).

    query is [B, S, N_q x H], or packed QKV [B, S, (N_q + 2 N_kv) x H] without key."""
    heads, kv_heads = _heads(node), _heads(node, "kv_num_heads")
    q = _shape(ins, 0)
    elem = _elem(ins, 0, TensorProto.FLOAT)
    batch, seq = q[0], q[1]
    packed = len(ins) < 2 or ins[1] is None
    head = q[2] // (heads + 2 * kv_heads) if packed else q[2] // heads
    out: list[tuple[int, int, Shape | None]] = [(0, elem, (batch, seq, heads * head))]
    if len(ins) > 3 and ins[3] is not None:
        past = _shape(ins, 3)
        present = (batch, kv_heads, past[2] + seq, head)
        out += [(1, elem, present), (2, elem, present)]
    return tuple(out)


def _packed_attention(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """output [T, D_v] from input [T, D_in] (PackedAttention: D_v the last of qkv_hidden_sizes,
    else a third of the weights); PackedMultiHeadAttention: [T, N x H_v]."""
    q = _shape(ins, 0)
    elem = _elem(ins, 0, TensorProto.FLOAT)
    if node.op_type == "PackedAttention":
        sizes = _attrs(node).get("qkv_hidden_sizes") or [_shape(ins, 1)[-1] // 3] * 3
        return ((0, elem, (q[0], int(sizes[2]))),)
    if len(q) == 4:  # packed QKV [T, N, 3, H]
        return ((0, elem, (q[0], q[1] * q[3])),)
    return ((0, elem, (q[0], _shape(ins, 2)[1])),)


def _fused_matmul(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """Y = matmul of A and B after transBatchA/B (the first dim moved next to the last) and
    transA/B (the last two swapped); also TransposeMatMul."""
    attrs = _attrs(node)

    def matrix(shape: tuple[int, ...], trans: str, batch: str) -> tuple[int, ...]:
        if len(shape) >= 3 and int(attrs.get(batch, 0)):
            shape = (*shape[1:-1], shape[0], shape[-1])
        if len(shape) >= 2 and int(attrs.get(trans, 0)):
            shape = (*shape[:-2], shape[-1], shape[-2])
        return shape

    a = matrix(_shape(ins, 0), "transA", "transBatchA")
    b = matrix(_shape(ins, 1), "transB", "transBatchB")
    return ((0, _elem(ins, 0, TensorProto.FLOAT), matmul_shape(a, b)),)


def _gemm_fast_gelu(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """Y = matmul(X, W)'s shape, of X's type."""
    shape = matmul_shape(_shape(ins, 0), _shape(ins, 1))
    return ((0, _elem(ins, 0, TensorProto.FLOAT), shape),)


def _fused_gemm(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """Y [M, N] from A and B with transA/transB."""
    attrs = _attrs(node)
    a, b = _shape(ins, 0), _shape(ins, 1)
    m = a[1] if int(attrs.get("transA", 0)) else a[0]
    n = b[0] if int(attrs.get("transB", 0)) else b[1]
    return ((0, _elem(ins, 0, TensorProto.FLOAT), (m, n)),)


def _fused_conv(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """Y [N, M, out...] from X and W [M, C / group, k...] (NhwcConv, NhwcFusedConv: X and Y NHWC)."""
    attrs = _attrs(node)
    x, w = _shape(ins, 0), _shape(ins, 1)
    channels_last = node.op_type.startswith("Nhwc")
    spatial = x[1:-1] if channels_last else x[2:]
    kernel = attrs.get("kernel_shape") or w[2:]
    out = window_spatial(spatial, kernel, **_window_attrs(attrs))
    shape = (x[0], *out, w[0]) if channels_last else (x[0], w[0], *out)
    return ((0, _elem(ins, 0, TensorProto.FLOAT), shape),)


# --- ai.onnx.ml: what onnxruntime outputs, where ONNX's schema has no inference ----------------

ML = "ai.onnx.ml"


def _rows(ins: Inputs) -> int:
    """The rows of an ai.onnx.ml input: [N, C] -> N; a 1-D [C] is one row."""
    x = _shape(ins, 0)
    return math.prod(x[:-1]) if len(x) > 1 else 1


def _same_shape(elem: int | None) -> Rule:
    """Y is X's shape, of type ``elem`` (X's where None)."""

    def rule(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
        return ((0, elem or _elem(ins, 0, TensorProto.FLOAT), _shape(ins, 0)),)

    return rule


def _columns(name: str, default: int) -> Rule:
    """Y [N, attribute ``name``] float: LinearRegressor's targets, a regressor's n_targets."""

    def rule(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
        n = int(_attrs(node).get(name, default))
        return ((0, TensorProto.FLOAT, (_rows(ins), n)),)

    return rule


def _array_feature_extractor(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """Y is X's shape with its last axis the k indices' (a 1-D X: [1, k])."""
    x = _shape(ins, 0)
    k = math.prod(_shape(ins, 1))
    shape = (1, k) if len(x) == 1 else (*x[:-1], k)
    return ((0, _elem(ins, 0, TensorProto.FLOAT), shape),)


def _tree_classifier(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """Y [N] (int64, or string labels), Z [N, K] float, K the class labels."""
    attrs = _attrs(node)
    strings = attrs.get("classlabels_strings")
    classes = len(strings) if strings else len(attrs.get("classlabels_int64s", ()))
    rows = _rows(ins)
    label = TensorProto.STRING if strings else TensorProto.INT64
    return ((0, label, (rows,)), (1, TensorProto.FLOAT, (rows, classes)))


def _svm_classifier(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """Y [N] (int64, or string labels), Z [N, E] float: with support vectors E = K(K-1)/2
    pairs' votes (K where prob_a gives probabilities, 2 for 2 classes), without (a linear
    SVM) K."""
    attrs = _attrs(node)
    strings = attrs.get("classlabels_strings")
    classes = len(strings) if strings else len(attrs.get("classlabels_ints", ()))
    kernel = bool(attrs.get("support_vectors")) and bool(attrs.get("vectors_per_class"))
    scores = classes
    if kernel and not attrs.get("prob_a") and classes > 2:
        scores = classes * (classes - 1) // 2
    rows = _rows(ins)
    label = TensorProto.STRING if strings else TensorProto.INT64
    return ((0, label, (rows,)), (1, TensorProto.FLOAT, (rows, scores)))


def _linear_classifier(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """Y [N] (int64, or string labels), Z [N, K] float, K the class labels (2 for a binary
    model's one coefficient row); without labels, the coefficient rows."""
    attrs = _attrs(node)
    strings = attrs.get("classlabels_strings")
    classes = len(strings) if strings else len(attrs.get("classlabels_ints", ()))
    if not classes:
        classes = len(attrs.get("coefficients", ())) // _shape(ins, 0)[-1]
    rows = _rows(ins)
    label = TensorProto.STRING if strings else TensorProto.INT64
    return ((0, label, (rows,)), (1, TensorProto.FLOAT, (rows, classes)))


def _no_tensor(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """ZipMap: a sequence of maps, no tensor to type."""
    return ()


def _feature_vectorizer(node: onnx.NodeProto, opset: int, ins: Inputs) -> Typed:
    """Y [N, sum(inputdimensions)] float."""
    width = sum(int(d) for d in _attrs(node).get("inputdimensions", ()))
    return ((0, TensorProto.FLOAT, (_rows(ins), width)),)


RULES: dict[tuple[str, str], Rule] = {
    ("", "Dropout"): _dropout,
    ("", "LessOrEqual"): _compare_or_equal,
    ("", "GreaterOrEqual"): _compare_or_equal,
    (MS, "QuantizeLinear"): _quantize,
    (MS, "DequantizeLinear"): _dequantize,
    (MS, "QLinearConv"): _qlinear_conv,
    (MS, "QLinearAdd"): _qlinear_binary,
    (MS, "QLinearMul"): _qlinear_binary,
    (MS, "QLinearWhere"): _qlinear_where,
    (MS, "QLinearConcat"): _qlinear_concat,
    (MS, "QLinearSigmoid"): _same_as_x(4),
    (MS, "QLinearLeakyRelu"): _same_as_x(4),
    (MS, "QLinearSoftmax"): _same_as_x(4),
    (MS, "QLinearAveragePool"): _qlinear_average_pool,
    (MS, "QLinearGlobalAveragePool"): _qlinear_global_average_pool,
    (MS, "QGemm"): _qgemm,
    (MS, "DynamicQuantizeMatMul"): _float_matmul(2),
    (MS, "MatMulIntegerToFloat"): _float_matmul(2),
    (MS, "MatMulNBits"): _matmul_nbits,
    (MS, "GatherBlockQuantized"): _gather_block_quantized,
    (MS, "QAttention"): _qattention,
    (MS, "DynamicQuantizeLSTM"): _dynamic_quantize_lstm,
    (MS, "QEmbedLayerNormalization"): _qembed_layer_norm,
    # onnxruntime's transformer optimizer and graph optimizer fusions
    (MS, "Gelu"): _elementwise(0),
    (MS, "FastGelu"): _elementwise(0),
    (MS, "QuickGelu"): _elementwise(0),
    (MS, "BiasGelu"): _elementwise(0),
    (MS, "BiasAdd"): _elementwise(0),
    (MS, "BiasSoftmax"): _elementwise(0),
    (MS, "BiasDropout"): _bias_dropout,
    (MS, "BiasSplitGelu"): _bias_split_gelu,
    (MS, "RotaryEmbedding"): _elementwise(0),
    (MS, "GroupNorm"): _elementwise(0),
    (MS, "SkipGroupNorm"): _elementwise(0, 1),
    ("", "LayerNormalization"): _layer_norm,
    ("", "SimplifiedLayerNormalization"): _layer_norm,
    (MS, "SimplifiedLayerNormalization"): _layer_norm,
    (MS, "SkipLayerNormalization"): _skip_layer_norm,
    (MS, "SkipSimplifiedLayerNormalization"): _skip_layer_norm,
    (MS, "EmbedLayerNormalization"): _embed_layer_norm,
    (MS, "Attention"): _attention,
    (MS, "DecoderMaskedSelfAttention"): _attention,
    (MS, "MultiHeadAttention"): _multi_head_attention,
    (MS, "DecoderMaskedMultiHeadAttention"): _decoder_masked_mha,
    (MS, "GroupQueryAttention"): _group_query_attention,
    (MS, "PackedAttention"): _packed_attention,
    (MS, "PackedMultiHeadAttention"): _packed_attention,
    (MS, "FusedMatMul"): _fused_matmul,
    (MS, "TransposeMatMul"): _fused_matmul,
    (MS, "GemmFastGelu"): _gemm_fast_gelu,
    (MS, "FusedGemm"): _fused_gemm,
    (MS, "FusedConv"): _fused_conv,
    (MS, "NhwcConv"): _fused_conv,
    (MS, "NhwcFusedConv"): _fused_conv,
    (ML, "ArrayFeatureExtractor"): _array_feature_extractor,
    (ML, "Scaler"): _same_shape(TensorProto.FLOAT),
    (ML, "Normalizer"): _same_shape(TensorProto.FLOAT),
    (ML, "Imputer"): _same_shape(None),
    (ML, "Binarizer"): _same_shape(None),
    (ML, "LinearRegressor"): _columns("targets", 1),
    (ML, "SVMRegressor"): _columns("", 1),
    (ML, "TreeEnsembleRegressor"): _columns("n_targets", 1),
    (ML, "TreeEnsembleClassifier"): _tree_classifier,
    (ML, "SVMClassifier"): _svm_classifier,
    (ML, "LinearClassifier"): _linear_classifier,
    (ML, "TreeEnsemble"): _columns("n_targets", 1),
    (ML, "ZipMap"): _no_tensor,
    (ML, "FeatureVectorizer"): _feature_vectorizer,
}
"""(domain, op type) -> onnxcost's rule for its output types ('' is the ONNX domain)."""


def rule_outputs(node: onnx.NodeProto, domain: str, opset: int, ins: Inputs) -> Typed:
    """What onnxcost's rule gives for ``node``'s outputs; () where there is no rule or an
    input shape it needs is unknown."""
    rule = RULES.get((domain, node.op_type))
    if rule is None:
        return ()
    try:
        typed = rule(node, opset, ins)
    except (UnknownShapeError, IndexError, ValueError, ZeroDivisionError, TypeError, OverflowError):
        return ()  # an input it needs is unknown, or an attribute is unusable (inf, a graph)
    n = len(node.output)
    return tuple(t for t in typed if t[0] < n and node.output[t[0]])


def has_rule(domain: str, op_type: str) -> bool:
    return (domain, op_type) in RULES


__all__ = ["RULES", "broadcast_shape", "has_rule", "matmul_shape", "rule_outputs", "window_spatial"]
