"""The module path of each node of a torch dynamo export, as its scope.

torch's TorchScript exporter names a node by the modules it runs in
(``/transformer/h.2/mlp/act/Mul``), which the scope tree (``--depth``, ``--tree``, the HTML
page) reads. Its dynamo exporter (``torch.onnx.export(..., dynamo=True)``, the default since
torch 2.9) names nodes by op and number (``node_Mul_468``), and writes the module path into
each node's ``pkg.torch.onnx.name_scopes`` metadata instead: the name of every module the
node runs in, outermost first, then the FX node's own,
``['', 'gpt2', 'gpt2.transformer', 'gpt2.transformer.h.2', 'gpt2.transformer.h.2.mlp',
'gpt2.transformer.h.2.mlp.act', 'mul_468']``. Its scope is each module's name relative to
the one it is in, the way TorchScript's names give them: ``/gpt2/transformer/h.2/mlp/act``
(a ModuleList is never called, so ``h.2`` is one part), and a numbered child of a Sequential
with its parent's name before it, ``/m/layer1/layer1.0/conv1`` (``m.layer1.0.conv1``).

A node the exporter's optimizer made of several carries the record of one of them: a Conv
with a BatchNorm folded in has the BatchNorm's (``m.layer1.0.bn1``), and is put back in its
own module where its weight names it (``m.layer1.0.conv1.weight``): ``/m/layer1/layer1.0/conv1``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import onnx

from onnxcost.load.graph import GraphView

if TYPE_CHECKING:
    from onnxcost.analysis.records import NodeRecord

SCOPES = "pkg.torch.onnx.name_scopes"
"""The metadata key of a node's module path, as torch's dynamo exporter writes it."""
MAX_SCOPES_TEXT = 16_384
"""A node's name scopes longer than this are not read, nor other metadata past it (a hostile
model's)."""
_RULE = "pkg.onnxscript.rewriter.rule_name"
"""The metadata key of the rewrite rules onnxscript's optimizer applied to a node."""
_FUSED_NORM = "FuseBatchNormIntoConv"
_AT = 3
"""Where the exporter writes the name scopes among a node's metadata (after its namespace,
class hierarchy and FX node): looked at first, the others only where it is not there."""


def from_dynamo(view: GraphView) -> bool:
    """Whether torch's dynamo exporter wrote the graph: its nodes carry their name scopes."""
    return bool(view.order) and any(p.key == SCOPES for p in view.order[0].metadata_props)


def _text(node: onnx.NodeProto) -> str | None:
    """The node's name scopes as the exporter wrote them (``"['', 'gpt2', ..., 'mul_468']"``),
    None without them or where they are longer than ``MAX_SCOPES_TEXT`` or no list."""
    props = node.metadata_props
    if len(props) > _AT and props[_AT].key == SCOPES:
        text: str | None = props[_AT].value
    else:
        text = next((p.value for p in props if p.key == SCOPES), None)
    if text is None or len(text) > MAX_SCOPES_TEXT or not text.startswith("['"):
        return None
    return text


def _split(text: str) -> list[str]:
    """``_text``'s list as its names (``['', 'gpt2', ..., 'mul_468']``): they hold no quote."""
    return text[2:-2].split("', '")


def name_scopes(node: onnx.NodeProto) -> list[str] | None:
    """The node's name scopes (``['', 'gpt2', ..., 'mul_468']``), None without them (``_text``)."""
    text = _text(node)
    return None if text is None else _split(text)


class ModuleScopes:
    """Each node's scope from its name scopes, made once per module path (the nodes of one
    module differ only in their own FX name, the last); ``place`` then finds one for the
    nodes the exporter's optimizer made, which have none."""

    __slots__ = ("_made", "_unplaced")

    def __init__(self) -> None:
        self._made: dict[str, str | None] = {}
        self._unplaced: list[NodeRecord] = []

    def __call__(self, node: onnx.NodeProto, op_type: str, rec: NodeRecord) -> str | None:
        """``/gpt2/transformer/h.2/mlp/act`` for a node of that module; None for a node
        outside every submodule (the root module's own ops), or without name scopes (``rec``
        is then placed by ``place``)."""
        text = _text(node)
        if text is None:
            self._unplaced.append(rec)
            return None
        if op_type == "Conv" and _FUSED_NORM in metadata(node, _RULE):
            return _scope(_conv_of(_split(text), node))
        modules = text[: text.rfind("', '")]  # all but the node's own FX name
        found = self._made.get(modules, "")
        if found == "":
            found = self._made[modules] = _scope(_split(text))
        return found

    def place(self, records: Iterable[NodeRecord | None]) -> None:
        """Give each node without name scopes (a Split the optimizer wrote for ``chunk``,
        shufflenet's and RAFT's) the module its readers share (``common_scope``: a block's
        chunk read by two of its branches is the block's), else its first input's writer's;
        ``records``: every record of the main graph, in order. Called once, before anything
        hashes a record."""
        if not self._unplaced:
            return
        outputs = {o: rec for rec in self._unplaced for o in rec.outputs if o}
        readers: dict[int, list[str]] = {}
        writer: dict[str, str] = {}
        for rec in records:
            if rec is None or rec.scope is None:
                continue
            for name in rec.inputs:
                unplaced = outputs.get(name)
                if unplaced is not None:
                    readers.setdefault(id(unplaced), []).append(rec.scope)
            for name in rec.outputs:
                writer[name] = rec.scope
        for rec in self._unplaced:
            found = common_scope(readers.get(id(rec), ()))
            if found is None and rec.inputs:
                found = writer.get(rec.inputs[0])
            rec.scope = found
        self._unplaced.clear()


def common_scope(scopes: Iterable[str]) -> str | None:
    """The module path ``scopes`` share (``/gpt2/transformer/h.0/attn`` of its ``c_attn``
    and ``c_proj``), None where there is none or they share no module."""
    parts = [s.split("/") for s in set(scopes)]
    if not parts:
        return None
    common = []
    for level in zip(*parts, strict=False):
        if any(p != level[0] for p in level):
            break
        common.append(level[0])
    return "/".join(common) if len(common) > 1 else None


def metadata(node: onnx.NodeProto, key: str) -> str:
    """The node's metadata ``key``, to ``MAX_SCOPES_TEXT`` characters; "" without it."""
    return next((p.value for p in node.metadata_props if p.key == key), "")[:MAX_SCOPES_TEXT]


def _conv_of(chain: list[str], node: onnx.NodeProto) -> list[str]:
    """The name scopes of a Conv the optimizer folded a BatchNorm into, whose record is the
    BatchNorm's (``['', 'm', 'm.bn1', '_native_batch_norm_legit_no_training']``), with the
    Conv's own module in place of the BatchNorm's where its weight is named as its param
    (``m.conv1.weight``) beside it (``['', 'm', 'm.conv1', ...]``)."""
    weight = node.input[1] if len(node.input) > 1 else ""
    module = weight.removesuffix(".weight")
    if len(chain) < 3 or module == weight or "'" in module:
        return chain
    outer = chain[-3]
    if outer and not module.startswith(outer + "."):
        return chain
    return [*chain[:-2], module, chain[-1]]


def _scope(chain: list[str]) -> str | None:
    """The scope of the name scopes ``chain``: each module's name relative to the one before
    it (whole where it does not start with that one's). None where the chain does not start
    at the root module (``''``: the exporter's own nodes, such as the shape reads of
    ``_empty_nn_module_stack_from_metadata_hook``) or has no submodule."""
    if len(chain) < 3 or chain[0] != "":
        return None
    parts: list[str] = []
    outer = ""
    for full in chain[1:-1]:
        inner = full[len(outer) + 1 :] if outer and full.startswith(outer + ".") else full
        if inner.isdigit() and parts:  # a Sequential's child: layer1.0, as TorchScript names it
            inner = f"{parts[-1]}.{inner}"
        if inner:
            parts.append(inner.replace("/", "."))  # a part holds no separator
        outer = full
    return "/" + "/".join(parts) if parts else None


__all__ = [
    "MAX_SCOPES_TEXT",
    "SCOPES",
    "ModuleScopes",
    "common_scope",
    "from_dynamo",
    "metadata",
    "name_scopes",
]
