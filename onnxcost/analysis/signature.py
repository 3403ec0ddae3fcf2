"""What torch's dynamo exporter says each stored tensor was in torch: no buffer is a param.

The exporter keeps the ExportedProgram's graph signature in the graph's ``metadata_props``
(``pkg.torch.export.ExportedProgram.graph_signature``), one line per input of the program::

    p_m_model_embed_tokens_weight: PARAMETER target='m.model.embed_tokens.weight'
    b_m_model_rotary_emb_inv_freq: BUFFER target='m.model.rotary_emb.inv_freq' persistent=False
    c_m_layers_0_attn_lifted_tensor_0: CONSTANT_TENSOR target='m.layers.0.attn.lifted_tensor_0'

An initializer stored under a buffer's or a constant's target is none of the model's params,
whatever reads it: a rotary embedding's ``inv_freq`` (Llama's: a tiny Llama counted 8 params
more than ``num_parameters()``, Llama 3 8B 64), Swin V2's ``relative_coords_table`` (12 x 450
= 5,400 in swin_v2_t). A BatchNorm's running statistics, buffers too, still count as its
statistics (``stat_params``): only the param role is taken from them. A model without the
signature (every other exporter) is left as it is. A built-in model names its own buffers
(``load.tensors.ZOO_BUFFERS``: the LLaMA shape's rotary tables, 524,288 params of LLaMA-7B's
that it counted before).
"""

from __future__ import annotations

import re

import onnx

from onnxcost.load.tensors import ZOO_BUFFERS

SIGNATURE = "pkg.torch.export.ExportedProgram.graph_signature"
"""The graph's metadata key of the ExportedProgram's graph signature."""
_NOT_PARAMS = re.compile(r"^\w+: (?:BUFFER|CONSTANT_TENSOR) target='([^'\n]*)'", re.MULTILINE)


def buffers(proto: onnx.ModelProto) -> frozenset[str]:
    """The targets of the buffers and constant tensors in ``proto``'s graph signature (the
    module docstring), and the initializers a built-in model names as buffers
    (``ZOO_BUFFERS``: its rotary tables); empty without either."""
    text = next((p.value for p in proto.graph.metadata_props if p.key == SIGNATURE), "")
    found = frozenset(_NOT_PARAMS.findall(text)) if text else frozenset()
    zoo = next((p.value for p in proto.metadata_props if p.key == ZOO_BUFFERS), "")
    return found | frozenset(zoo.splitlines()) if zoo else found


__all__ = ["SIGNATURE", "buffers"]
