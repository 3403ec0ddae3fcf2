"""A decoder's KV cache by its inputs' and outputs' names, and the attention mask's length
that the TorchScript and dynamo exporters leave as a symbol of its own.

``torch.onnx.export(..., dynamic_axes={"attention_mask": {0: "batch", 1: "total_seq"}, ...})``
writes the mask's length as a new symbol (the dynamo exporter names it ``s53``), where
optimum writes ``past_sequence_length + sequence_length``. The model runs only where it is
the cache length plus the new tokens, so ``link_mask_dims`` writes it as that sum, which the
analysis computes (``onnxcost.shapes.derived``) instead of taking it as 1, and a warning
says so.

optimum's merged decoder (``decoder_model_merged.onnx``: one If on ``use_cache_branch``
between the decoder with the cache and the one without) declares the mask of the branch
without it, [batch, seq]: that input's length is written as past + seq too (seq where the
cache is empty, the first step). ``cache_branch_symbol`` finds the cache length, whose value
at a point gives the flag's (``shapes.bodies``).
"""

from __future__ import annotations

import re

import onnx

from onnxcost.load.tensors import name_text

PAST = re.compile(r"^(past|cache)", re.IGNORECASE)
"""A graph input that holds the KV cache (``past_key_values.0.key``, ``past_0``, ``cache_k``)."""
PRESENT = re.compile(r"^(present|cache)", re.IGNORECASE)
"""A graph output that holds the updated KV cache (``present.0.key``)."""
MASK = re.compile(r"attention_mask$", re.IGNORECASE)
"""A graph input that is an attention mask over the cached and the new positions."""


def link_mask_dims(proto: onnx.ModelProto) -> list[str]:
    """Write the length of a decoder's attention mask [batch, L] as ``past + seq`` in the
    main graph's declared shapes (inputs, outputs, value_info), where L is a symbol no other
    input has; one warning per mask so written. Only for a decoder with a KV cache (inputs
    ``PAST``, outputs ``PRESENT``) whose cache inputs have exactly one symbol the others lack
    (the cache length) and whose other inputs exactly one the cache lacks (the new tokens):
    an encoder-decoder's decoder, with the encoder's length beside them, is left as it is.
    In optimum's merged decoder (``cache_branch_symbol``), a mask [batch, seq] has that
    input's length written so."""
    graph = proto.graph
    inits = {t.name for t in graph.initializer}
    inputs = [vi for vi in graph.input if vi.name not in inits]
    if not any(PRESENT.match(name_text(o.name)) for o in graph.output):
        return []
    cache = [vi for vi in inputs if PAST.match(name_text(vi.name))]
    masks = [vi for vi in inputs if vi not in cache and MASK.search(name_text(vi.name))]
    others = [vi for vi in inputs if vi not in cache and vi not in masks]
    cache_symbols = {p for vi in cache for p in _params(vi) if p.isidentifier()}
    other_symbols = {p for vi in others for p in _params(vi) if p.isidentifier()}
    past = cache_symbols - other_symbols
    seq = other_symbols - cache_symbols
    if not cache or len(past) != 1 or len(seq) != 1:
        return []
    total = f"{next(iter(past))} + {next(iter(seq))}"
    batch = cache_symbols & other_symbols
    linked: dict[str, str] = {}
    merged: list[onnx.ValueInfoProto] = []
    for vi in masks:
        params = _params(vi)
        length = params[-1] if len(params) == 2 else ""
        # a symbol no other input has (those have only past, seq and batch)
        if params[0] in batch | {""} and length.isidentifier() and length not in past | seq | batch:
            linked.setdefault(length, vi.name)
        elif params[0] in batch | {""} and length in seq and cache_branch_symbol(graph):
            merged.append(vi)  # optimum's merged decoder: declared as its first step's
    for vi in (*graph.input, *graph.output, *graph.value_info):
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param in linked:
                d.dim_param = total
    for vi in merged:
        vi.type.tensor_type.shape.dim[-1].dim_param = total
    return [
        f"input {mask!r}: its length {length!r} is taken as {total} (an attention mask covers "
        f"the cached and the new tokens: the model runs only there); set those, not {length}"
        for length, mask in linked.items()
    ] + [
        f"input {vi.name!r}: its length {next(iter(seq))!r} is taken as {total} (optimum's "
        f"merged decoder declares the mask of its first step, without the cache; its branch "
        f"with the cache reads the cached and the new tokens)"
        for vi in merged
    ]


CACHE_BRANCH = "use_cache_branch"
"""The bool input of optimum's merged decoder (``decoder_model_merged.onnx``): its one node, an
If, runs the decoder with the KV cache (then_branch) where it is true, without it where false."""


def cache_branch_symbol(graph: onnx.GraphProto) -> tuple[str, str] | None:
    """(``CACHE_BRANCH``, the cache length's symbol) of optimum's merged decoder: a bool input
    of one element named ``use_cache_branch`` beside cache inputs (``PAST``) with exactly one
    symbol no other input has (the cache length, ``past_sequence_length``). None for any other
    model. optimum runs the branch with the cache once there is one: the flag is true exactly
    where that symbol is above 0 (the first step, with no cache, runs the other branch)."""
    inits = {t.name for t in graph.initializer}
    inputs = [vi for vi in graph.input if vi.name not in inits]
    flag = next((vi for vi in inputs if vi.name == CACHE_BRANCH), None)
    if flag is None or flag.type.tensor_type.elem_type != onnx.TensorProto.BOOL:
        return None
    if any(p != "" or d.dim_value != 1 for p, d in zip(_params(flag), _dims(flag), strict=True)):
        return None  # a scalar or [1]
    cache = [vi for vi in inputs if PAST.match(name_text(vi.name))]
    others = [vi for vi in inputs if vi not in cache and vi is not flag]
    cache_symbols = {p for vi in cache for p in _params(vi) if p.isidentifier()}
    other_symbols = {p for vi in others for p in _params(vi) if p.isidentifier()}
    past = cache_symbols - other_symbols
    if not cache or len(past) != 1:
        return None
    return CACHE_BRANCH, next(iter(past))


def first_step(past: str) -> str:
    """How a warning about the first step (``past`` = 0) of a merged decoder begins."""
    return f"{past}=0 is the first step of optimum's merged decoder"


def _dims(vi: onnx.ValueInfoProto) -> list[onnx.TensorShapeProto.Dimension]:
    return list(vi.type.tensor_type.shape.dim)


def _params(vi: onnx.ValueInfoProto) -> list[str]:
    """The dim_params of ``vi``'s shape ('' for a fixed or unknown dim)."""
    return [d.dim_param for d in vi.type.tensor_type.shape.dim]
