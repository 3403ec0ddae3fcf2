"""optimum's merged decoders (``decoder_model_merged.onnx``): one If on ``use_cache_branch``
whose then_branch is the decoder with the KV cache and whose else_branch the decoder without.

The files are tests/data/exports/optimum_tiny_*.onnx (``scripts/export_holdout_torch.py``,
random weights): T5's decoder as optimum-onnx 0.1.0 exports it (1 layer, d_model 16, 2 heads
of 8, d_ff 32, vocab 32, tied LM head), its merged decoder and the two files it joins; and
GPT-2's (1 layer, 16 wide, 2 heads of 8, vocab 32, tied LM head) merged by optimum's own
``merge_decoders`` from its decoder without the cache and with it (optimum 1.x's layout for
every decoder; optimum-onnx writes one model.onnx). Before, the shapes inside the branches
were not folded: most of their nodes were unknown_shape and counted 0, and the two branches'
like-named tensors took each other's shapes.

Hand counts (MACs, batch 1). T5's decoder, E encoder states, P cached tokens:
- with the cache (seq 1): self-attention q, k, v, o 4 x 16 x 16 = 1,024; cross-attention q, o
  2 x 256 = 512 (its keys and values are cache inputs); FFN 2 x 16 x 32 = 1,024; LM head
  16 x 32 = 512: 3,072 a token; self-attention scores and values 2 heads x 8 x (P + 1) x 2 =
  32·(P + 1); cross-attention 2 x 8 x E x 2 = 32·E. At E = 6: 3,296 + 32·P; at P = 3, 3,392.
- without it (seq N): 3,072·N; the cross-attention keys and values of the E states 2 x 256 x E
  = 512·E; scores and values 32·N² + 32·N·E. At N = 4, E = 6: 12,288 + 3,072 + 512 + 768 =
  16,640; at N = 8: 24,576 + 3,072 + 2,048 + 1,536 = 31,232.
GPT-2's: c_attn 16 x 48 = 768, c_proj 256, MLP 2 x 16 x 64 = 2,048, LM head 512: 3,584 a
token; attention 2 heads x 8 x s x (P + s) x 2 = 32·s·(P + s). A step (s = 1): 3,616 + 32·P;
at P = 3, 3,712; the prompt (P = 0, s = 8): 28,672 + 2,048 = 30,720.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import onnx
import pytest

import onnxcost
from onnxcost.analysis.records import NodeRecord
from onnxcost.llm.cost import llm_report

EXPORTS = Path(__file__).parent / "data" / "exports"
T5 = EXPORTS / "optimum_tiny_t5_decoder_model_merged.onnx"
T5_WITH_PAST = EXPORTS / "optimum_tiny_t5_decoder_with_past_model.onnx"
T5_WITHOUT = EXPORTS / "optimum_tiny_t5_decoder_model.onnx"
GPT2 = EXPORTS / "optimum_tiny_gpt2_merged_decoder_model_merged.onnx"
ENC = {"encoder_sequence_length": 6}


def _key(r: NodeRecord) -> tuple[object, ...]:
    return (
        r.status,
        r.macs,
        r.flops,
        r.bytes_read,
        r.bytes_written,
        r.bytes_read_weights,
        r.bytes_read_kv_cache,
        r.bytes_written_kv_cache,
        r.input_shapes,
        r.output_shapes,
    )


def _branch(a: onnxcost.Analysis, branch: str) -> list[NodeRecord]:
    return [r for r in a.nodes if r.graph == f"optimum::if/{branch}"]


def _same_nodes(branch: list[NodeRecord], alone: onnxcost.Analysis) -> list[NodeRecord]:
    """Each node of ``branch`` against the node of ``alone`` that writes the same tensors
    (the merge renamed some nodes, not their tensors): equal costs, bytes and shapes. Returns
    the branch's nodes that ``alone`` has not."""
    by_outputs = {r.outputs: r for r in alone.nodes}
    extra = []
    for r in branch:
        other = by_outputs.pop(r.outputs, None)
        if other is None:
            extra.append(r)
        else:
            assert _key(r) == _key(other), (r.name, _key(r), _key(other))
    assert not by_outputs  # every node of the file is in the branch
    return extra


_TOTALS = (
    "macs",
    "flops",
    "bytes_read",
    "bytes_written",
    "bytes_read_weights",
    "bytes_read_kv_cache",
    "bytes_written_kv_cache",
    "peak_activation_bytes",
)


def test_t5_the_branch_with_the_cache_costs_what_its_own_file_does_node_for_node() -> None:
    before = hashlib.sha256(T5.read_bytes()).hexdigest()
    dims = {**ENC, "past_decoder_sequence_length": 3}
    merged = onnxcost.analyze(T5, dims=dims)
    alone = onnxcost.analyze(T5_WITH_PAST, dims=dims)
    assert merged.totals.macs == alone.totals.macs == 3392  # 3,296 + 32 x 3 (module doc)
    extra = _same_nodes(_branch(merged, "then_branch"), alone)
    # the merge writes the cross-attention's keys and values, which this branch reads from the
    # cache, as Constants: outputs the other branch computes
    assert sorted(r.op_type for r in extra) == ["Constant"] * 2  # 1 layer's key and value
    assert all(r.macs == r.flops == r.bytes_read == 0 for r in extra)
    for field in _TOTALS:
        assert getattr(merged.totals, field) == getattr(alone.totals, field), field
    assert not [r for r in merged.nodes if r.status == "unknown_shape"]  # both branches
    assert hashlib.sha256(T5.read_bytes()).hexdigest() == before


def test_t5_the_branch_without_the_cache_costs_what_its_own_file_does_node_for_node() -> None:
    dims = {**ENC, "decoder_sequence_length": 4}
    merged = onnxcost.analyze(T5, dims={**dims, "past_decoder_sequence_length": 0})
    alone = onnxcost.analyze(T5_WITHOUT, dims=dims)
    assert merged.totals.macs == alone.totals.macs == 16640  # 3,072 x 4 + 3,072 + 512 + 768
    assert _same_nodes(_branch(merged, "else_branch"), alone) == []
    for field in _TOTALS:
        assert getattr(merged.totals, field) == getattr(alone.totals, field), field
    assert not [r for r in merged.nodes if r.status == "unknown_shape"]


@pytest.mark.parametrize(
    ("past", "counted", "listed"),
    [(1, "then_branch", "else_branch"), (0, "else_branch", "then_branch")],
)
def test_one_line_says_which_branch_the_totals_count(past: int, counted: str, listed: str) -> None:
    a = onnxcost.analyze(T5, dims={**ENC, "past_decoder_sequence_length": past})
    value = "true" if past else "false"
    line = (
        f"If node 'optimum::if': use_cache_branch is {value} at past_decoder_sequence_length = "
        f"{past} (optimum's merged decoder runs its branch without the cache at the first step, "
        f"past_decoder_sequence_length = 0, and the one with it from "
        f"past_decoder_sequence_length = 1): the totals count {counted}; {listed} is listed, "
        f"not counted"
    )
    assert [w for w in a.warnings if w.startswith("If node")] == [line]
    node = next(r for r in a.nodes if r.op_type == "If")
    assert node.note == line.removeprefix("If node 'optimum::if': ")
    assert node.macs == a.totals.macs  # the If's cost is the branch it counts
    assert node.bytes_read == a.totals.bytes_read  # and so are its bytes
    counted_nodes = {r.name for r, c in zip(a.nodes, a._counted, strict=True) if c}
    assert {r.name for r in _branch(a, counted)} <= counted_nodes
    assert counted_nodes.isdisjoint(r.name for r in _branch(a, listed))


def test_llm_prefills_without_the_cache_and_decodes_with_it() -> None:
    r = llm_report(T5, prompt=8, generate=4, dims=ENC)
    macs = r.decode_formulas["macs"]
    assert macs is not None
    # 3,296 + 32·P a token (module doc)
    assert macs.python() == "3296*batch_size + 32*batch_size*past_decoder_sequence_length"
    assert r.prefill.macs == 31232  # the branch without the cache at N = 8 (module doc)
    # the same figures as the two files it joins: the prompt from the one without the cache,
    # every step from the one with it
    alone = onnxcost.analyze(T5_WITHOUT, dims={**ENC, "decoder_sequence_length": 8})
    assert (r.prefill.macs, r.prefill.flops, r.prefill.bytes_read, r.prefill.bytes_written) == (
        alone.totals.macs,
        alone.totals.flops,
        alone.totals.bytes_read,
        alone.totals.bytes_written,
    )
    assert r.prefill_activations_bytes == alone.totals.peak_activation_bytes
    with_past = llm_report(T5_WITH_PAST, prompt=8, generate=4, dims=ENC)
    assert r.decode_formula_texts == with_past.decode_formula_texts
    assert (r.decode_first, r.decode_last, r.decode_total) == (
        with_past.decode_first,
        with_past.decode_last,
        with_past.decode_total,
    )
    assert r.decode_first_read == with_past.decode_first_read
    assert r.last_activations_bytes == with_past.last_activations_bytes
    assert r.kv_cache_bytes_per_token == with_past.kv_cache_bytes_per_token == 128
    # the formulas hold from a cache of 1: no line says so (every step has one)
    assert not [w for w in r.warnings if "first step of optimum's merged decoder" in w]


def test_gpt2_merged_by_optimum_the_mask_covers_the_cache_and_the_new_tokens() -> None:
    # merge_decoders declares the inputs of the decoder without the cache: the mask
    # [batch_size, sequence_length], which the branch with the cache reads at past + seq
    a = onnxcost.analyze(GPT2, dims={"past_sequence_length": 3})
    shapes = {i.name: i.shape for i in a.inputs}
    assert shapes["attention_mask"] == (1, 4)  # 3 cached + 1 new, was (1, 1)
    assert a.totals.macs == 3712  # 3,616 + 32 x 3 (module doc)
    assert any(
        w.startswith(
            "input 'attention_mask': its length 'sequence_length' is taken as "
            "past_sequence_length + sequence_length"
        )
        for w in a.warnings
    )
    first = onnxcost.analyze(GPT2, dims={"past_sequence_length": 0, "sequence_length": 8})
    assert {i.name: i.shape for i in first.inputs}["attention_mask"] == (1, 8)
    assert first.totals.macs == 30720  # the prompt: 3,584 x 8 + 32 x 8 x 8 (module doc)
    for analysis, runs in ((a, "then_branch"), (first, "else_branch")):
        assert not [r for r in _branch(analysis, runs) if r.status == "unknown_shape"]
    # the branch without the cache does not fit a mask of 4 beside 1 new token, and does not
    # run there: its node without a shape is no warning (it counts nothing either way)
    assert [r.name for r in _branch(a, "else_branch") if r.status == "unknown_shape"]
    assert not [w for w in a.warnings if "could not be resolved" in w]


def test_gpt2_each_branch_costs_what_it_does_as_a_model_of_its_own() -> None:
    # The branch lifted out of the If: its nodes, the outer inputs (the mask of the branch
    # with the cache over past + seq, as its own file declares it), every initializer.
    proto = onnx.load(GPT2)
    node = proto.graph.node[0]
    for past, branch in ((3, "then_branch"), (0, "else_branch")):
        body = next(a.g for a in node.attribute if a.name == branch)
        inputs = [vi for vi in proto.graph.input if vi.name != "use_cache_branch"]
        if branch == "then_branch":
            mask = next(vi for vi in inputs if vi.name == "attention_mask")
            length = mask.type.tensor_type.shape.dim[1]
            length.dim_param = "past_sequence_length + sequence_length"
        graph = onnx.helper.make_graph(
            list(body.node),
            branch,
            inputs,
            list(body.output),
            [*proto.graph.initializer, *body.initializer],
        )
        alone_proto = onnx.helper.make_model(
            graph, opset_imports=list(proto.opset_import), ir_version=proto.ir_version
        )
        dims = {"past_sequence_length": past, "sequence_length": 1 if past else 8}
        merged = onnxcost.analyze(GPT2, dims=dims)
        alone = onnxcost.analyze(alone_proto, dims=dims)
        assert _same_nodes(_branch(merged, branch), alone) == []
        for field in _TOTALS:
            assert getattr(merged.totals, field) == getattr(alone.totals, field), (branch, field)


def test_llm_on_gpt2_merged() -> None:
    r = llm_report(GPT2, prompt=8, generate=4)
    macs = r.decode_formulas["macs"]
    assert macs is not None
    assert macs.python() == "3616*batch_size + 32*batch_size*past_sequence_length"
    assert r.prefill.macs == 30720
    assert r.kv_cache_bytes_per_token == 128  # K and V x 2 heads x 8 x 4 bytes


def test_symbolic_gives_the_formulas_of_the_branch_with_the_cache() -> None:
    a = onnxcost.analyze(T5, dims=ENC, symbolic=True)
    b = onnxcost.analyze(T5_WITH_PAST, dims=ENC, symbolic=True)
    assert a.symbolic is not None
    assert b.symbolic is not None
    for key in ("macs", "flops", "bytes_read", "bytes_written"):
        f, g = a.symbolic.totals[key], b.symbolic.totals[key]
        assert f is not None
        assert g is not None
        assert f.python() == g.python(), key
    assert a.symbolic.zero_allowed["past_decoder_sequence_length"] is False
    assert (
        "past_decoder_sequence_length=0 is the first step of optimum's merged decoder, which "
        "runs its branch without the cache there (use_cache_branch false): the formulas are "
        "those of the branch with the cache, for past_decoder_sequence_length >= 1 (analyze "
        "--dim past_decoder_sequence_length=0 for the first step)"
    ) in a.warnings
    # by hand (module doc), in s new tokens: 3,072·s + 32·s·(P + s) + 32·s·E at E = 6
    macs = a.symbolic.totals["macs"]
    assert macs is not None
    assert (
        macs.evaluate(
            {"batch_size": 1, "decoder_sequence_length": 1, "past_decoder_sequence_length": 3}
        )
        == 3392
    )


@pytest.mark.parametrize(("past", "flag"), [(0, False), (3, True)])
def test_bench_feeds_the_branch_the_analysis_counts(past: int, flag: bool) -> None:
    from onnxcost.bench.inputs import input_specs, make_inputs
    from onnxcost.bench.session import prepare_model
    from onnxcost.load.kv import cache_branch_symbol

    # optimum runs the branch without the cache at the first step (past 0) and the one with
    # it after; the analysis counts that branch. The bench fed use_cache_branch at random
    # (forced true for one element): at past 0 it timed the branch with the cache.
    dims = {**ENC, "batch_size": 1, "decoder_sequence_length": 1}
    a = onnxcost.analyze(T5, dims={**dims, "past_decoder_sequence_length": past})
    branch = cache_branch_symbol(onnx.load(str(T5), load_external_data=False).graph)
    assert branch == ("use_cache_branch", "past_decoder_sequence_length")
    specs = input_specs(a.inputs, prepare_model(str(T5)).inputs, a.nodes, branch)
    for seed in range(4):
        assert make_inputs(specs, seed)["use_cache_branch"].tolist() == [flag]
