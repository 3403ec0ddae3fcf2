"""Memory traffic: the bytes a node reads and writes, and whose bytes they are.

Two conventions (``Traffic``):

- ``runtime`` (the default): what a runtime moves per run.
  * A node reads each input whole, except where its op has a traffic rule
    (``costs._registry.register_reads``): Gather, GatherElements, GatherND and Slice (and
    GatherBlockQuantized, EmbedLayerNormalization) read the elements they select, plus their
    indices. Shape and Size read no data. A node writes its outputs whole.
  * An Identity of the main graph that writes no graph output moves nothing
    (``OpSpec.moves_data``): onnxruntime takes it out at load.
  * A node computed only from constants (``Weights.see``: a weight's Transpose, Cast or
    DequantizeLinear, a Constant, a buffer's Slice by constant bounds, a ConstantOfShape of a
    constant shape) is evaluated once at load, as onnxruntime's constant folding does: it
    reads and writes nothing per run, and its result is a weight, read by its consumer.
  * A cache built by Concat (past and new keys in, present out) is the copy it is: the
    Concat reads past + new and writes the whole present.
- ``all-inputs``: every node reads every input whole and writes every output whole, folded
  or not (torchstat's MemRead / MemWrite; onnxcost's figures before ``--traffic``).

Every byte read is one of three roles:

- weights: a tensor computed only from constants (an initializer, a Constant, a folded
  result; the shapes and indices stored in the model too);
- KV cache: a cache input (``past*``, ``cache*``), a cache output (``present*``, ``cache*``),
  named as ``onnxcost llm`` finds them, and what layout ops (Transpose, Reshape, Expand,
  Concat...) make of them: the transposed keys are a copy of the cache;
- activations: everything else.

A node writes activations or KV cache (never weights: a folded node writes nothing per run).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, TypeAlias

from onnxcost.errors import UsageError
from onnxcost.load.kv import PAST, PRESENT
from onnxcost.load.tensors import name_text

Traffic = Literal["runtime", "all-inputs"]
TRAFFIC_MODES: tuple[Traffic, ...] = ("runtime", "all-inputs")


KV_LAYOUT_OPS = frozenset(
    {
        "Cast",
        "Concat",
        "Expand",
        "Flatten",
        "Identity",
        "Reshape",
        "Slice",
        "Squeeze",
        "Tile",
        "Transpose",
        "Unsqueeze",
    }
)
"""Default-domain ops whose output is the KV cache again when their data input is: a copy,
view or rearrangement of it (a Concat when any input is)."""


def check_traffic(traffic: str) -> None:
    """Raise UsageError unless ``traffic`` is one of ``TRAFFIC_MODES``."""
    if traffic not in TRAFFIC_MODES:
        raise UsageError(
            f"traffic must be one of {', '.join(TRAFFIC_MODES)}, not {traffic!r}; "
            f"pass --traffic runtime or --traffic all-inputs"
        )


def kv_cache_names(inputs: Iterable[str], outputs: Iterable[str]) -> set[str]:
    """The graph's cache inputs and outputs, by name (``PAST``, ``PRESENT``)."""
    # name_text: protobuf hands out a name that is not UTF-8 as bytes, which a pattern refuses.
    return {n for n in inputs if PAST.match(name_text(n))} | {
        n for n in outputs if PRESENT.match(name_text(n))
    }


NodeTraffic: TypeAlias = tuple[int, int, int, int, int]
"""The bytes one node moves: (read, written, read of weights, read of KV cache, written of KV
cache); the rest is activations. A plain tuple: one is made per node, and a NamedTuple's
constructor is a Python call."""

NOTHING: NodeTraffic = (0, 0, 0, 0, 0)


def sum_traffic(parts: Iterable[NodeTraffic]) -> NodeTraffic:
    """The traffic of several nodes together (a body's, which its control-flow node moves)."""
    read = written = weights = kv_read = kv_written = 0
    for r, wr, rw, kr, kw in parts:
        read, written, weights = read + r, written + wr, weights + rw
        kv_read, kv_written = kv_read + kr, kv_written + kw
    return read, written, weights, kv_read, kv_written


def node_traffic(
    op_type: str,
    default_domain: bool,
    inputs: Sequence[str],
    reads: Sequence[int],
    outputs: Sequence[str],
    writes: Sequence[int],
    folded: bool,
    runtime: bool,
    constant: set[str],
    kv: set[str],
) -> NodeTraffic:
    """The traffic of one node, given the bytes it reads of each input (``reads``: under the
    op's traffic rule with ``runtime``, else whole) and writes of each output. ``folded``:
    the node computes only from constants. ``kv`` (the KV-cache tensors so far) gains the
    node's outputs where it is a layout op over the cache; call in topological order."""
    if kv and default_domain and op_type in KV_LAYOUT_OPS and inputs and not folded:
        carries = any(n in kv for n in inputs) if op_type == "Concat" else inputs[0] in kv
        if carries:
            kv.update(o for o in outputs if o)
    if folded and runtime:
        return NOTHING
    if constant.isdisjoint(inputs) and (
        not kv or (kv.isdisjoint(inputs) and kv.isdisjoint(outputs))
    ):  # the usual node: activations in, activations out (an omitted input reads 0)
        return (sum(reads), sum(writes), 0, 0, 0)
    read = read_weights = read_kv = 0
    for name, size in zip(inputs, reads, strict=False):
        if not name or not size:
            continue
        read += size
        if name in constant:
            read_weights += size
        elif name in kv:
            read_kv += size
    if not kv:  # no KV cache: every output is an activation
        return (read, sum(writes), read_weights, 0, 0)
    written = written_kv = 0
    for name, size in zip(outputs, writes, strict=False):
        written += size
        if name in kv:
            written_kv += size
    return (read, written, read_weights, read_kv, written_kv)


__all__ = [
    "KV_LAYOUT_OPS",
    "PAST",
    "PRESENT",
    "TRAFFIC_MODES",
    "NodeTraffic",
    "Traffic",
    "check_traffic",
    "kv_cache_names",
    "node_traffic",
    "sum_traffic",
]
