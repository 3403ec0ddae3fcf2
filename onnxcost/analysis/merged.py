"""Params an untrained model's torch export merged or dropped, counted as the model's own.

torch's dynamo exporter (``torch.onnx.export(..., dynamo=True)``, the default since torch
2.9) runs onnxscript's optimizer, which changes what an untrained model stores:

- **Merged.** ``DeduplicateInitializersPass`` keeps one of the initializers of up to 1,024
  elements that hold the same values and points every reader at it. In a freshly initialised
  model every LayerNorm weight is ones and every bias zeros, so GPT-2 small's 25 LayerNorm
  weights [768] became one tensor, read by 25 LayerNorms, and its 25 biases another.
- **Dropped.** A Gemm whose C is all zeros loses its C, and a Conv its B: GPT-2's ``Conv1D``
  layers (torch's ``addmm``) store no bias at all, nor do a freshly initialised ViT's
  attention projections, classifier head and patch embedding, or MobileNet's classifier
  (``linear`` on a 2-D input), nor a Conv with an untrained BatchNorm folded in (its bias,
  the BatchNorm's shift, is zeros; the TorchScript exporter and a trained model store it).

Counted as stored, GPT-2 small from the dynamo exporter had 124,320,000 params where torch
has 124,439,808 (36,864 merged, 82,944 dropped); trained, the same export stores every one.
Both are read back from the exporter's own record of each node (its ``metadata_props``):

- a merged tensor (all of its elements alike, read by nodes of more than one module, as
  ``pkg.torch.onnx.name_scopes`` names the module of each) counts once per module that reads
  it (``shared``); a module called again (ALBERT's one shared layer) is one module. It is
  named as a param, or it is a param laid out anew and folded (a ConvNeXt layer scale,
  ``gamma.view(1, -1, 1, 1)``, stored as ``view``; a GroupNorm's weight taken apart, as
  ``val_21``), as its readers' records show (``_folded_params``);
- a dropped bias is the ``%p_..._bias`` placeholder that a Gemm's or Conv's
  ``pkg.torch.onnx.fx_node`` names (``aten.addmm(%p_..._bias, x, %p_..._weight)``,
  ``aten.linear(x, %p_..._weight, %p_..._bias)``, ``aten.conv2d(x, %p_..._weight,
  %p_..._bias, ...)``) where the node has no bias input and no initializer is that bias
  (``dropped``): N params, its output features, of its weight's element type.

A model whose nodes carry no such record (every other exporter, a trained model's export
where nothing was merged) is left as it is, at the cost of one look at its first node.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import onnx

from onnxcost.analysis.scopes import from_dynamo, metadata, name_scopes
from onnxcost.load.graph import GraphView
from onnxcost.load.samples import all_alike
from onnxcost.load.tensors import FLOAT_TYPES, PARAMETER_PATH

FX_NODE = "pkg.torch.onnx.fx_node"
"""The metadata key of the torch FX node a node comes from."""

MERGED_LIMIT = 1024
"""onnxscript's ``DeduplicateInitializersPass`` merges initializers of at most this many
elements (its ``size_limit``)."""

_BIAS_ARGUMENT = re.compile(
    r"aten\.addmm\.default\]\(args = \(%(p_\w+)"  # addmm(bias, x, weight): GPT-2's Conv1D
    # linear(x, weight, bias), conv2d(x, weight, bias, ...), conv_transpose2d(...), convolution
    r"|aten\.(?:linear|conv[123]d|conv_transpose[123]d|convolution)\.default\]"
    r"\(args = \(%\w+, %p_\w+, %(p_\w+)[,)]"
    # a Conv with a BatchNorm folded in: its bias is the BatchNorm's shift (its record the
    # BatchNorm's, batch_norm(conv, %p_..._weight, %p_..._bias, ...))
    r"|aten\.(?:_native_batch_norm_legit_no_training|batch_norm)\.default\]"
    r"\(args = \(%\w+, %p_\w+, %(p_\w+)[,)]"
)
_PLACEHOLDER = re.compile(r"%(p_\w+)")
"""A param's placeholder in an FX record (``%p_blocks_0_gamma_2``)."""
_WEIGHT_BIAS_OPS = frozenset(
    {
        "LayerNormalization", "BatchNormalization", "InstanceNormalization",
        "GroupNormalization", "Gemm", "Conv", "ConvTranspose",
    }
)  # fmt: skip
"""The ops whose inputs 1 and 2 are their module's weight and bias, as torch names them."""
_WEIGHT_BIAS = {1: "weight", 2: "bias"}
_SCALE_SHIFT = {"Mul": "weight", "Add": "bias"}
"""A normalization taken apart: its output times its weight, plus its bias."""
_LAYOUT = frozenset(
    {"view", "reshape", "_unsafe_view", "unsqueeze", "squeeze", "permute", "t", "add"}
)
"""FX values that lay a param out anew (``gamma.view(1, -1, 1, 1)``), computing nothing; or
add one to it (Gemma's norms scale by ``1 + weight``, ``add_4``: zeros at init, so ones)."""
_NUMBERED = re.compile(r"_\d+\Z")
"""The number the exporter adds to a name it made once already (``view_3``)."""
_WITH_BIAS = {"Gemm": 2, "Conv": 2, "ConvTranspose": 2}
"""The ops whose bias the optimizer drops where it is all zeros: their inputs without it."""


class Dropped(NamedTuple):
    """A bias the optimizer dropped from a Gemm, Conv or ConvTranspose (``op_type``): its
    param's path (the node's module's ``.bias``; the FX placeholder where the module is not
    recorded), its elements and their type."""

    name: str
    elements: int
    elem_type: int
    op_type: str = "Gemm"


class Merged:
    """What ``merged_params`` found: the tensors several modules' params were merged into, and
    the biases dropped from Gemms. (A plain class: every analysis imports it, and a dataclass
    costs a start-up of its own.)"""

    __slots__ = ("dropped", "leaves", "readers", "shared")

    def __init__(self) -> None:
        self.shared: dict[str, dict[str, str]] = {}
        """Initializer -> {reader node's name: its module}, for a tensor that stands for one
        param per module."""
        self.leaves: dict[tuple[str, str, int], str] = {}
        """(initializer, reader, input index) -> the last part of the param it stands for
        there, where that is not the initializer's own (``_leaf``): two params of one module
        merged (CaiT's ``gamma_1`` and ``gamma_2``), or a BatchNorm's weight and bias."""
        self.dropped: dict[str, Dropped] = {}
        """Gemm's (Conv's, ConvTranspose's) node name -> the bias it was written without."""
        self.readers: set[str] = set()
        """The nodes that read a param merged or dropped: the others are counted as ever."""

    def __bool__(self) -> bool:
        return bool(self.shared or self.dropped)

    def warning(self, recovered: int) -> str:
        """What was counted beyond the file's tensors, and why, for the analysis' warnings."""
        parts = []
        if self.shared:
            n = len(self.shared)
            parts.append(
                f"merged {n} {'tensor' if n == 1 else 'tensors'} of equal values that params of "
                f"several modules shared (an untrained model's LayerNorm ones, zero biases, "
                f"layer scales; counted once per module that reads them)"
            )
        if self.dropped:
            ops = Counter(d.op_type for d in self.dropped.values())
            listed = " and ".join(f"{n} {op}" for op, n in sorted(ops.items()))
            biases = "bias" if len(self.dropped) == 1 else "biases"
            parts.append(f"dropped {listed} {biases} of zeros (counted from its record of each)")
        return (
            f"torch's exporter {', and '.join(parts)}: {recovered:,} params that the file does "
            f"not store as such are counted as the model's own (an export of the trained model "
            f"stores them)"
        )


def merged_params(proto: onnx.ModelProto, view: GraphView, path: Path | None) -> Merged:
    """The params torch's exporter merged or dropped from an untrained model (the module
    docstring), for the main graph of ``proto``; empty for a model without the exporter's
    record of its nodes."""
    found = Merged()
    nodes = view.order
    if not from_dynamo(view):
        return found
    initializers = {t.name: t for t in proto.graph.initializer}
    small = {  # small enough to be merged
        name
        for name, t in initializers.items()
        if t.data_type in FLOAT_TYPES and 1 < math.prod(t.dims) <= MERGED_LIMIT
    }
    readers: dict[str, list[int]] = {}
    for k, ins in enumerate(view.inputs):
        for name in ins:
            if name in small:
                readers.setdefault(name, []).append(k)
    for name, ks in readers.items():
        if len(ks) < 2:
            continue
        modules = {view.names[k]: _module(nodes[k]) for k in ks}
        if None in modules.values() or len(set(modules.values())) < 2:
            continue
        if not PARAMETER_PATH.match(name) and not _folded_params(name, ks, view, modules):
            continue  # a tensor the exporter computed (a folded mask, ``where``): no param
        if all_alike(initializers[name], path, MERGED_LIMIT):
            found.shared[name] = {n: m for n, m in modules.items() if m is not None}
            found.readers.update(modules)
            own = name.rpartition(".")[2]
            for k in dict.fromkeys(ks):
                for i in (i for i, read in enumerate(view.inputs[k]) if read == name):
                    leaf = _leaf(nodes[k], view.op_types[k], i, modules[view.names[k]])
                    if leaf is not None and leaf != own:
                        found.leaves[name, view.names[k], i] = leaf
    stored: set[str] = set()  # the initializers' names as the FX graph's placeholders hold them
    for k, op in enumerate(view.op_types):
        if _WITH_BIAS.get(op) == len(view.inputs[k]):
            stored = stored or {name.replace(".", "_") for name in initializers}
            bias = _dropped_bias(nodes[k], initializers, stored)
            if bias is not None:
                found.dropped[view.names[k]] = bias
                found.readers.add(view.names[k])
    return found


def _folded_params(
    name: str, readers: list[int], view: GraphView, modules: dict[str, str | None]
) -> bool:
    """Whether a tensor the exporter named (``view``, ``val_21``) stands for a param of each
    module that reads it, folded (reshaped) and then merged, as its readers' FX records tell:
    each names one FX value of the tensor's own name, an op that only lays a tensor out
    (``aten.mul(%permute_5, %view_1)``: a ConvNeXt block's layer scale, ``gamma.view(1, -1,
    1, 1)``), and they name more than one (``where``, ``expand``: a mask, counted as ever);
    or each is a Mul or Add whose record names a param of its module (a GroupNorm taken
    apart, ``aten.group_norm(x, 1, %p_norm1_weight, %p_norm1_bias, ...)``: x times its weight
    plus its bias). A value that torch itself shares (a buffer many modules read) is named
    alike by every reader, and a constant made up for an op (an InstanceNormalization's ones)
    is read by no Mul or Add that names a param."""
    stem = _NUMBERED.sub("", name)
    values: set[str] = set()
    by_value, by_param = stem in _LAYOUT, True
    for k in readers:
        record = metadata(view.order[k], FX_NODE)
        found = re.findall(rf"%({stem}(?:_\d+)?)\b", record) if by_value else []
        by_value = by_value and len(found) == 1
        values.update(found)
        module = modules[view.names[k]]
        by_param = (
            by_param
            and view.op_types[k] in _SCALE_SHIFT
            and module is not None
            and f"%p_{module.replace('.', '_')}_" in record
        )
    return (by_value and len(values) > 1 and name in values) or by_param


def _leaf(node: onnx.NodeProto, op_type: str, index: int, module: str | None) -> str | None:
    """The last part of the param that input ``index`` of ``node`` (of ``module``) reads: a
    normalization's, Gemm's or Conv's weight (input 1) or bias (input 2); else the one param
    placeholder its FX record names, where it is of the module (``aten.mul(%p_blocks_0_gamma_2,
    x)`` in ``blocks.0``: ``gamma_2``). None where it cannot be told."""
    if op_type in _WEIGHT_BIAS_OPS:
        return _WEIGHT_BIAS.get(index)
    found = _PLACEHOLDER.findall(metadata(node, FX_NODE))
    prefix = None if module is None else "p_" + module.replace(".", "_") + "_"
    if prefix is None or not found or not all(p.startswith(prefix) for p in found):
        return None
    leaves = [p[len(prefix) :] for p in found]
    if leaves == ["weight", "bias"] and op_type in _SCALE_SHIFT:  # a norm taken apart
        return _SCALE_SHIFT[op_type]
    if len(leaves) != 1:
        return None
    return leaves[0] or None


def _module(node: onnx.NodeProto) -> str | None:
    """The path of the module a node comes from (the last of its name scopes but its own)."""
    scopes = name_scopes(node)  # ['', 'gpt2', ..., 'gpt2.transformer.h.1.ln_2', 'layer_norm_3']
    return scopes[-2] if scopes is not None and len(scopes) >= 2 else None


def _dropped_bias(
    node: onnx.NodeProto, initializers: dict[str, onnx.TensorProto], stored: set[str]
) -> Dropped | None:
    """The bias a Gemm's, Conv's or ConvTranspose's exporter record names, written without it,
    that no initializer holds: its output features (Gemm: B's columns, or rows with transB;
    Conv: W's first dim; ConvTranspose: W's second times the groups)."""
    match = _BIAS_ARGUMENT.search(metadata(node, FX_NODE))
    bias = None if match is None else match.group(1) or match.group(2) or match.group(3)
    if match is not None and match.group(3) and node.op_type != "Conv":
        return None
    if bias is None or bias[2:] in stored:
        return None
    weight = initializers.get(node.input[1])
    if weight is None or len(weight.dims) < 2:
        return None
    ints = {a.name: a.i for a in node.attribute if a.type == onnx.AttributeProto.INT}
    if node.op_type == "Gemm":
        features = weight.dims[0 if ints.get("transB", 0) else 1]
    elif node.op_type == "Conv":
        features = weight.dims[0]
    else:
        features = weight.dims[1] * ints.get("group", 1)
    module = _module(node)
    name = bias if module is None else f"{module}.bias"
    return Dropped(name, int(features), weight.data_type, node.op_type)


__all__ = ["MERGED_LIMIT", "Dropped", "Merged", "merged_params"]
