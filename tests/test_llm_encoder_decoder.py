"""``llm`` on an encoder-decoder's decoder with its cache (optimum's
decoder_with_past_model.onnx for T5, Whisper, BART): the encoder's length is a symbol beside
batch, the new tokens and the cache length, given with ``--dim``, and the cross-attention
cache (``past_key_values.{i}.encoder.key``) is over the encoder's length, not the cache's.
It refused with ``--dim encoder_sequence_length=N`` given: 'cannot tell the batch dim
(candidates: batch_size, encoder_sequence_length)', then 'cache input ... has a dim
'encoder_sequence_length' that is neither batch nor past'.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxcost.llm.cost import DecoderError, llm_report


def _decoder() -> onnx.ModelProto:
    """h [b, s, 4] @ W [4, 4], then its scores against the cross-attention keys
    [b, source, 4]; the self-attention cache [b, past, 4] concatenated with h."""
    f = TensorProto.FLOAT
    inputs = [
        helper.make_tensor_value_info("inputs_embeds", f, ["batch", "seq", 4]),
        helper.make_tensor_value_info("past_key_values.0.decoder.key", f, ["batch", "past", 4]),
        helper.make_tensor_value_info("past_key_values.0.encoder.key", f, ["batch", "source", 4]),
    ]
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    nodes = [
        helper.make_node("MatMul", ["inputs_embeds", "w"], ["q"]),
        helper.make_node(
            "Concat", ["past_key_values.0.decoder.key", "q"], ["present.0.decoder.key"], axis=1
        ),
        helper.make_node("Transpose", ["past_key_values.0.encoder.key"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["logits"]),
    ]
    outputs = [
        helper.make_tensor_value_info("logits", f, ["batch", "seq", "source"]),
        helper.make_tensor_value_info("present.0.decoder.key", f, ["batch", "past + seq", 4]),
    ]
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=[w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_decoder_with_an_encoders_length_given() -> None:
    model = _decoder()
    with pytest.raises(DecoderError, match=r"candidates: past, source.*--dim SYMBOL=N"):
        llm_report(model, prompt=3, generate=2)
    r = llm_report(model, prompt=3, generate=2, dims={"source": 6})
    assert (r.layout.batch, r.layout.seq, r.layout.past) == ("batch", "seq", "past")
    # only the self-attention cache grows: [1, 1, 4] float32 a token
    assert r.kv_cache_bytes_per_token == 4 * 4 == 16
    # the cross-attention keys, [1, 6, 4] float32, said apart
    assert any("past_key_values.0.encoder.key, 96 bytes at batch 1" in w for w in r.warnings)
    # a step: q = h @ W, 4 x 4 = 16 MACs; scores against 6 keys of 4: 24 MACs
    macs = r.decode_formulas["macs"]
    assert macs is not None
    assert macs.evaluate({"batch": 2, "past": 7}) == 2 * (16 + 24)
    r = llm_report(model, prompt=3, generate=2, batch=2, dims={"source": 6})
    assert any("192 bytes at batch 2" in w for w in r.warnings)  # 2 x 96
