"""Data movement: ops that copy, gather, scatter, reshape or reinterpret data, plus the
sequence, optional and string ops. They do no arithmetic (status ``zero``); their bytes
still count. Scatters with a reduction and Col2Im add values, so they have formulas.

``meta_inputs`` name the positions that hold shapes, axes, indices, pads, repeats or
counts: constants there are never parameters. A Gather's data input is not one of them:
an embedding table is a weight.
"""

from __future__ import annotations

import math

from onnxcost.costs._context import OpContext, tensor_bytes
from onnxcost.costs._registry import (
    AFTER_FIRST,
    NOTHING_SAVED,
    Cost,
    Saved,
    broadcast_sum,
    needs_any,
    no_gradient,
    register,
    register_backward,
    register_reads,
    register_zero,
    saves_inputs,
)

register_zero("Reshape", "Squeeze", "Unsqueeze", "Split", "Expand", "Tile", meta_inputs=(1,))
register_zero("Slice", "Pad", meta_inputs=AFTER_FIRST)
register_zero("Transpose", "Flatten", "Concat", "DepthToSpace", "SpaceToDepth")
# An Identity moves nothing at runtime (analysis.walk: except one that writes a graph output,
# which onnxruntime keeps, or sits in a body). NB: onnxruntime also takes out one of those
# where the tensor it copies has no other reader; that copy is still counted.
register_zero(
    "Identity", reason="no arithmetic: onnxruntime takes it out at load", moves_data=False
)
register_zero("Gather", "GatherElements", "GatherND", "Scatter", meta_inputs=(1,))


def selected_reads(ctx: OpContext, data: int = 0, selected: int | None = None) -> tuple[int, ...]:
    """Per input: ``selected`` elements of input ``data`` (default numel(Y)) at its element
    size, every other input whole (0 where omitted)."""
    count = ctx.out_numel() if selected is None else selected
    return tuple(
        0 if t is None else tensor_bytes(count, t.elem_type) if i == data else t.nbytes
        for i, t in enumerate(ctx.inputs)
    )


@register_reads("Gather", "GatherElements", "GatherND", "Slice")
def gather_reads(ctx: OpContext) -> tuple[int, ...]:
    """Bytes read = numel(Y) x element size of data + the indices (starts, ends, axes, steps) whole.

    A gather or slice reads the elements it selects, one per output element, not the whole
    data tensor (an embedding Gather reads its rows, not the table).
    NB: an index repeated is read again (one read per output element); cache lines are not modelled.
    """
    return selected_reads(ctx)


register_zero("TensorScatter", meta_inputs=(2,))
register_zero("Compress", "ReverseSequence", "Trilu", "CenterCropPad", meta_inputs=(1,))
register_zero("OneHot", meta_inputs=(1, 2))
register_zero("Cast", "BitCast", reason="no arithmetic: converts or reinterprets each element")
register_zero(
    "CastLike",
    reason="no arithmetic: converts each element to the second input's type",
    meta_inputs=(1,),
)
register_zero(
    "Shape",
    "Size",
    reason="no arithmetic: reads the input's shape, not its data (0 bytes read)",
    meta_inputs=(0,),
    reads_data=False,
)
register_zero(
    "EyeLike",
    "ConstantOfShape",
    reason="no arithmetic: fills a new tensor",
    meta_inputs=(0,),
)
register_zero(
    "Dropout",
    reason="no arithmetic at inference: an identity (training-mode masking is not counted)",
    meta_inputs=(1, 2),
)
register_zero(
    "Optional",
    "OptionalGetElement",
    "OptionalHasElement",
    "SequenceConstruct",
    "SequenceEmpty",
    "ConcatFromSequence",
    reason="no arithmetic: builds, unwraps or concatenates containers",
)
register_zero(
    "SequenceLength",
    reason="no arithmetic: reads the sequence's length, not its elements (0 bytes read)",
    meta_inputs=(0,),
    reads_data=False,
)
register_zero(
    "SequenceAt",
    "SequenceErase",
    "SplitToSequence",
    reason="no arithmetic: builds, unwraps or splits containers",
    meta_inputs=(1,),
)


@register_reads("SequenceAt", "SequenceErase")
def kept_elements_read(ctx: OpContext) -> tuple[int, ...]:
    """Bytes read = the elements it copies out: SequenceAt's one (its output), SequenceErase's
    every one but the erased (its output sequence); the position whole.

    onnxruntime copies each element it keeps (``shapes.sequences.SequenceInfo``); the others
    are not read.
    """
    kept = ctx.outputs[0]
    return tuple(
        0 if t is None else (kept.nbytes if kept is not None else 0) if i == 0 else t.nbytes
        for i, t in enumerate(ctx.inputs)
    )


register_zero(
    "SequenceInsert",
    reason="no arithmetic: inserts into a container",
    meta_inputs=(2,),
)
register_zero(
    "StringConcat",
    "StringNormalizer",
    "StringSplit",
    "RegexFullMatch",
    reason="no arithmetic: string processing",
)


@register("ScatterElements", "ScatterND", meta_inputs=(1,))
def scatter_reduce(ctx: OpContext) -> Cost:
    """FLOPs = numel(updates) with reduction add, mul, max or min; 0 with reduction 'none' (a copy)."""
    if ctx.attr("reduction", "none") == "none":
        return Cost()
    return Cost(flops=ctx.numel(2))


@register("Col2Im", meta_inputs=(1, 2))
def col2im(ctx: OpContext) -> Cost:
    """FLOPs = numel(X): each column element is added into its image position.

    NB: the first write to each pixel is counted as an add too.
    """
    return Cost(flops=ctx.numel(0))


@register("NonZero")
def non_zero(ctx: OpContext) -> Cost:
    """FLOPs = numel(X): one compare with zero per element."""
    return Cost(flops=ctx.numel(0))


@register("Unique")
def unique(ctx: OpContext) -> Cost:
    """FLOPs = n ceil(log2 n) + n - 1 for n = numel(X): a comparison sort, then neighbours compared.

    NB: with an axis, slices are compared whole; counted per element all the same.
    """
    n = ctx.numel(0)
    return Cost(flops=n * math.ceil(math.log2(n)) + n - 1 if n > 1 else 0)


# --- backward rules: a zero op above routes its gradient for free (a copy, slice, concat);
# these are the ones that add.


@register_backward("Gather", "GatherElements", "GatherND", saves=saves_inputs(1))
def gather_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dData: g added into a zero table at the gathered indices, numel(Y) adds (an embedding's weight gradient); keeps the indices."""
    return Cost(flops=ctx.out_numel() if needs_any(needs, 0) else 0)


@register_backward("Expand", "Tile")
def expand_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """dX = g summed over the copies: numel(Y) - numel(X) adds."""
    return Cost(flops=broadcast_sum(ctx, 0) if needs_any(needs, 0) else 0)


def _dropout_mask(ctx: OpContext) -> bool:
    """A mask output in the graph: the Dropout of a training-mode export."""
    return len(ctx.outputs) > 1 and ctx.outputs[1] is not None


def _dropout_saves(ctx: OpContext, needs: tuple[bool, ...]) -> Saved:
    """Training mode keeps the mask (one byte per element, bool); inference keeps nothing."""
    if _dropout_mask(ctx):
        return Saved(outputs=(1,))
    if ctx.has_input(2):
        return Saved(extra_bytes=ctx.out_numel())
    return NOTHING_SAVED


@register_backward("Dropout", saves=_dropout_saves)
def dropout_backward(ctx: OpContext, needs: tuple[bool, ...]) -> Cost:
    """Training mode (a mask output or a training_mode input): dX = g * mask / (1 - ratio), 2 per element; else 0 (an identity).

    NB: a training_mode input that is a constant false counts as training mode all the same.
    """
    if not needs_any(needs, 0) or not (_dropout_mask(ctx) or ctx.has_input(2)):
        return Cost()
    return Cost(flops=2 * ctx.out_numel())


no_gradient("Shape", "Size", "EyeLike", "ConstantOfShape", "OneHot", "NonZero", "Unique")
