"""Sequences known element by element: the shape of each tensor a sequence holds, where ONNX's
inference keeps one shape for them all.

ONNX types a sequence by one element type, the union of its elements' shapes: two elements of
different sizes leave that dim unknown, and so does every ``SequenceAt`` from it. torch's
TorchScript exporter writes ``tensor_split`` as such a sequence: a ``SequenceEmpty``, a Loop
that inserts a Slice per section, one more ``SequenceInsert``, then a ``SequenceAt`` per part.
torchvision's MViT (``mvit_v2_s``) pools its queries, keys and values that way, and 4,880 of
its 13,394 nodes had no shape: it counted 5.5 of its 64.2 GMACs.

Here a sequence is the tuple of its elements' types (``SequenceInfo``, among the tensors' types),
made and read by the sequence ops (``sequence_node``) and by a Loop whose loop-carried state is
a sequence, unrolled (``unroll``). A sequence op whose sequence or position is not known
leaves its output to ONNX's inference, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping, Sequence

import numpy as np
import onnx
from onnx import TensorProto

from onnxcost.load.tensors import TensorInfo
from onnxcost.shapes.folding import KnownValues


class SequenceInfo(TensorInfo):
    """A sequence as the analyzer knows it: the type of each element (each concrete), in
    ``types`` beside the tensors. It has no shape of its own (``shape`` None, not concrete);
    its bytes (``known_nbytes``) are its elements', which it holds: onnxruntime's sequence
    ops copy every element they keep (``SequenceInsert`` writes a new sequence of the old
    one's copies and the tensor's, which both stay live through it), so a sequence is read,
    written and live as a tensor of that size. ``SequenceAt`` reads the element it copies
    out, ``SequenceErase`` the ones it keeps, ``SequenceLength`` none
    (``costs.data_movement``)."""

    __slots__ = ("elements",)

    elements: tuple[TensorInfo, ...]

    def __init__(self, name: str, elements: tuple[TensorInfo, ...], elem_type: int = 0) -> None:
        super().__init__(name, elements[0].elem_type if elements else elem_type, None)
        self.known_nbytes = sum(t.known_nbytes for t in elements)
        self.elements = elements

    def renamed(self, name: str) -> SequenceInfo:
        return SequenceInfo(name, self.elements, self.elem_type)

    def __repr__(self) -> str:
        return f"SequenceInfo({self.name!r}, {len(self.elements)} elements)"


SEQUENCE_OPS = frozenset(
    {
        "SequenceEmpty",
        "SequenceConstruct",
        "SequenceInsert",
        "SequenceErase",
        "SequenceAt",
        "SequenceLength",
        "ConcatFromSequence",
        "SplitToSequence",
    }
)

MAX_ELEMENTS = 4096
"""The most elements a sequence is followed with (a hostile model's loop may insert more)."""


def _scalar(values: KnownValues, name: str) -> int | None:
    """The value of a one-element integer input, where known."""
    value = values.get(name) if name else None
    if value is None or value.size != 1 or not np.issubdtype(value.dtype, np.integer):
        return None
    return int(value.reshape(-1)[0])


def _position(values: KnownValues, ins: Sequence[str], k: int, length: int) -> int | None:
    """Input ``k``'s position in a sequence of ``length``, counted from the end where below
    0; the end itself (``length``) where the input is omitted; None where unknown or out of
    range. ``SequenceInsert`` accepts ``length`` itself, ``SequenceAt`` and ``SequenceErase``
    do not (their caller checks)."""
    if len(ins) <= k or not ins[k]:
        return length
    pos = _scalar(values, ins[k])
    if pos is None or not -length <= pos <= length:
        return None
    return pos + length if pos < 0 else pos


def _attr(node: onnx.NodeProto, name: str, default: int) -> int:
    for a in node.attribute:
        if a.name == name and a.type == onnx.AttributeProto.INT:
            return int(a.i)
    return default


def sequence_node(
    node: onnx.NodeProto, types: MutableMapping[str, TensorInfo], values: KnownValues
) -> bool:
    """Type the outputs of a sequence op from the sequences known element by element (a
    ``SequenceInfo`` or a tensor's type into ``types``, ``SequenceLength``'s value into
    ``values``). False where it cannot (an input sequence or position not known): ONNX's
    inference is then asked, as for any op."""
    op, ins, outs = node.op_type, node.input, node.output
    out = outs[0] if outs else ""
    if not out:
        return False
    if op == "SequenceEmpty":
        types[out] = SequenceInfo(out, (), _attr(node, "dtype", TensorProto.FLOAT))
        return True
    if op == "SequenceConstruct":
        found = [types.get(i) for i in ins]
        if not all(t is not None and t.is_concrete for t in found):
            return False
        types[out] = SequenceInfo(out, tuple(t for t in found if t is not None))
        return True
    if op == "SplitToSequence":
        return _split(node, types, values)
    held = types.get(ins[0]) if ins and ins[0] else None
    if not isinstance(held, SequenceInfo):
        return False
    seq = held.elements
    if op == "SequenceInsert":
        tensor = types.get(ins[1]) if len(ins) > 1 else None
        pos = _position(values, ins, 2, len(seq))
        if tensor is None or not tensor.is_concrete or pos is None or len(seq) >= MAX_ELEMENTS:
            return False
        types[out] = SequenceInfo(out, (*seq[:pos], tensor.renamed(""), *seq[pos:]))
        return True
    if op == "SequenceErase":  # the last element where no position is given
        given = len(ins) > 1 and ins[1]
        pos = _position(values, ins, 1, len(seq)) if given else len(seq) - 1
        if pos is None or not 0 <= pos < len(seq):
            return False
        types[out] = SequenceInfo(out, seq[:pos] + seq[pos + 1 :], held.elem_type)
        return True
    if op == "SequenceAt":
        pos = _position(values, ins, 1, len(seq)) if len(ins) > 1 and ins[1] else None
        if pos is None or not 0 <= pos < len(seq):
            return False
        types[out] = seq[pos].renamed(out)
        return True
    if op == "SequenceLength":
        types[out] = TensorInfo(out, TensorProto.INT64, ())
        values.add_folded(out, np.array(len(seq), dtype=np.int64))
        return True
    if op == "ConcatFromSequence":
        return _concat(node, seq, types)
    return False


def _concat(
    node: onnx.NodeProto, seq: Sequence[TensorInfo], types: MutableMapping[str, TensorInfo]
) -> bool:
    """ConcatFromSequence: the elements joined along ``axis`` (stacked along a new one with
    ``new_axis=1``), where they agree on every other dim."""
    if not seq:
        return False
    shapes = [t.concrete_shape for t in seq]  # (a sequence's elements are concrete)
    rank = len(shapes[0])
    if any(len(s) != rank for s in shapes):
        return False
    axis, new_axis = _attr(node, "axis", 0), _attr(node, "new_axis", 0)
    out_rank = rank + 1 if new_axis else rank
    if not -out_rank <= axis < out_rank:
        return False
    axis %= out_rank
    first = shapes[0]
    if new_axis:
        if any(s != first for s in shapes):
            return False
        shape = (*first[:axis], len(seq), *first[axis:])
    else:
        rest = [s[:axis] + s[axis + 1 :] for s in shapes]
        if any(r != rest[0] for r in rest):
            return False
        shape = (*first[:axis], sum(s[axis] for s in shapes), *first[axis + 1 :])
    out = node.output[0]
    types[out] = TensorInfo(out, seq[0].elem_type, shape)
    return True


def _split(
    node: onnx.NodeProto, types: MutableMapping[str, TensorInfo], values: KnownValues
) -> bool:
    """SplitToSequence: the input in parts along ``axis``, as ``split`` gives them (a size
    each, or one size for every part, the last part what remains), or one part per index
    without a ``split`` (each without the axis, ``keepdims=0``)."""
    ins = node.input
    x = types.get(ins[0]) if ins and ins[0] else None
    if x is None or not x.is_concrete or not x.shape:
        return False
    shape = x.concrete_shape
    axis = _attr(node, "axis", 0)
    if not -len(shape) <= axis < len(shape):
        return False
    axis %= len(shape)
    length = shape[axis]
    split = values.get(ins[1]) if len(ins) > 1 and ins[1] else None
    if len(ins) > 1 and ins[1] and split is None:
        return False
    parts: list[tuple[int, ...]]
    if split is None:
        if length > MAX_ELEMENTS:
            return False
        kept = shape if _attr(node, "keepdims", 1) else shape[:axis] + shape[axis + 1 :]
        one = (*shape[:axis], 1, *shape[axis + 1 :]) if _attr(node, "keepdims", 1) else kept
        parts = [one] * length
    else:
        sizes = [int(v) for v in np.asarray(split).reshape(-1)]
        if split.ndim == 0:  # one size for every part, the last what remains
            size = sizes[0]
            if size <= 0 or -(-length // size) > MAX_ELEMENTS:
                return False
            sizes = [size] * (length // size) + ([length % size] if length % size else [])
        if any(s < 0 for s in sizes) or sum(sizes) != length or len(sizes) > MAX_ELEMENTS:
            return False
        parts = [(*shape[:axis], s, *shape[axis + 1 :]) for s in sizes]
    out = node.output[0]
    types[out] = SequenceInfo(out, tuple(TensorInfo("", x.elem_type, p) for p in parts))
    return True


MAX_UNROLLED = 256
"""The most iterations of a Loop unrolled to follow the sequence it fills (``unroll``)."""

MAX_UNROLLED_IN_ALL = 1024
"""The most Loop iterations one inference unrolls, nested Loops' included (each iteration of
an outer Loop unrolls the inner ones again: a hostile model could nest them to 256 ** 8)."""

BodyWalk = Callable[[int, Mapping[str, SequenceInfo]], Mapping[str, TensorInfo]]
"""Propagates a Loop's body once with its iteration number at the value given and its
state inputs holding the sequences given (by body input name); returns the body's types."""


def unroll(
    node: onnx.NodeProto,
    body: onnx.GraphProto,
    trips: int | None,
    types: MutableMapping[str, TensorInfo],
    walk: BodyWalk,
) -> None:
    """Type the Loop's state outputs that hold sequences known element by element after its
    ``trips`` iterations: its body propagated once per iteration (``walk``), each iteration
    given the sequences the one before left, their initial values from ``types``. Only the
    states that stay known to the end; none where the trip count is not static or above
    ``MAX_UNROLLED`` (a condition that ends the Loop sooner is not read, as its cost does
    not read it: ``analysis.control_flow``)."""
    states = node.input[2:]
    if trips is None or trips > MAX_UNROLLED or not states:
        return
    if len(body.input) != 2 + len(states) or len(body.output) < 1 + len(states):
        return
    held = {j: t for j, s in enumerate(states) if isinstance(t := types.get(s), SequenceInfo)}
    for k in range(trips):
        if not held:
            return
        found = walk(k, {body.input[2 + j].name: seq for j, seq in held.items()})
        held = {
            j: t for j in held if isinstance(t := found.get(body.output[1 + j].name), SequenceInfo)
        }
    for j, seq in held.items():
        if j < len(node.output) and node.output[j]:
            types[node.output[j]] = seq.renamed(node.output[j])


__all__ = [
    "MAX_ELEMENTS",
    "MAX_UNROLLED",
    "MAX_UNROLLED_IN_ALL",
    "SEQUENCE_OPS",
    "SequenceInfo",
    "sequence_node",
    "unroll",
]
