"""One serializer with declared layouts (``records.to_jsonable`` and ``JSON_LAYOUT``), and the
key order of every published JSON contract, written out here as the contracts define them:
``onnxcost.analysis/1`` (with and without formulas), ``onnxcost.compare/1`` (with and without
a bench) and ``onnxcost.llm/1`` (with and without a bench). ``onnxcost.bench/1`` is pinned in
tests/bench/test_bench_report.py."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from onnxcost_testing import key_paths, parse

from onnxcost.analysis.records import Const, Group, Layout, Merge, When, to_jsonable
from onnxcost.api import analyze
from onnxcost.bench.roofline import Ceilings
from onnxcost.compare import BenchSummary, compare
from onnxcost.compare.entry import compare_analysed
from onnxcost.llm.cost import llm_report
from onnxcost.llm.loop import LoopTiming

MODELS = Path(__file__).resolve().parents[1] / "models"


# --- the layout itself ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Size:
    w: int
    h: int

    @property
    def area(self) -> int:
        return self.w * self.h


@dataclass(frozen=True)
class Box:
    name: str
    size: Size
    inner: Size | None
    tags: tuple[str, ...]
    extra: Size | None = None

    JSON_LAYOUT: ClassVar[Layout] = (
        ("kind", Const("box")),
        "name",
        ("width", "size.w"),
        ("dims", Group(("w", ("height", "h"), "area"), of="size")),
        ("inner", Group(("w", "h"), of="inner")),
        ("inner_w", "inner.w"),
        ("labels", Group((("first", "name"), "tags"))),
        Merge("extra"),
        When("tags", (("tag_count", "tag_count"),)),
    )

    @property
    def tag_count(self) -> int:
        return len(self.tags)


def test_layout_spells_out_the_object_key_by_key() -> None:
    d = to_jsonable(Box("b", Size(3, 4), Size(1, 2), ("x", "y"), Size(5, 6)))
    assert d == {
        "kind": "box",
        "name": "b",
        "width": 3,
        "dims": {"w": 3, "height": 4, "area": 12},  # area = 3 * 4
        "inner": {"w": 1, "h": 2},
        "inner_w": 1,
        "labels": {"first": "b", "tags": ["x", "y"]},
        "w": 5,  # Size(5, 6) merged in: its fields
        "h": 6,
        "tag_count": 2,
    }
    keys = ["kind", "name", "width", "dims", "inner", "inner_w", "labels", "w", "h", "tag_count"]
    assert list(d) == keys


def test_layout_none_and_empty() -> None:
    d = to_jsonable(Box("b", Size(3, 4), None, ()))
    # A Group of None is null, a path through None is null, a Merge of None adds nothing, and
    # the keys When an empty tuple is set are left out.
    assert d["inner"] is None
    assert d["inner_w"] is None
    assert list(d) == ["kind", "name", "width", "dims", "inner", "inner_w", "labels"]


# --- onnxcost.analysis/1 ------------------------------------------------------------------------

MATMUL_RELU = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x) => (float[N, 2] y)
<float[4, 2] w = {1, 2, 3, 4, 5, 6, 7, 8}>
{
    h = MatMul(x, w)
    y = Relu(h)
}
"""

ANALYSIS_MAPS = frozenset({"model.opsets", "model.params_by_dtype"})
TENSOR = ["name", "dtype", "shape"]
SUMS = ["count", "macs", "flops", "params", "bytes_read", "bytes_written"]
TRAFFIC = ["bytes_read_weights", "bytes_read_kv_cache", "bytes_written_kv_cache"]
TRAFFIC += ["bytes_read_activations", "bytes_written_activations"]
ANALYSIS = [
    "schema",
    "convention",
    "traffic",
    "model",
    *(f"model.{k}" for k in ("path", "ir_version", "opsets", "producer", "producer_version")),
    *(f"model.{k}" for k in ("graph_name", "node_count", "model_bytes", "params_by_dtype")),
    "inputs",
    *(f"inputs[].{k}" for k in TENSOR),
    "outputs",
    *(f"outputs[].{k}" for k in TENSOR),
    "totals",
    *(f"totals.{k}" for k in ("macs", "flops", "params", "param_bytes", "stat_params")),
    *(f"totals.{k}" for k in ("bytes_read", "bytes_written", "peak_activation_bytes")),
    "totals.quant_params",
    "totals.peak_activation_bytes_ort",
    *(f"totals.{k}" for k in TRAFFIC),
    "nodes",
    *(f"nodes[].{k}" for k in ("name", "op_type", "domain", "status", "macs", "flops")),
    *(f"nodes[].{k}" for k in ("params", "bytes_read", "bytes_written", "input_shapes")),
    *(f"nodes[].{k}" for k in ("output_shapes", "graph", "note")),
    *(f"nodes[].{k}" for k in TRAFFIC),
    "by_op_type",
    *(f"by_op_type[].{k}" for k in [*SUMS, "op_type", "domain"]),
    "by_dtype",
    *(f"by_dtype[].{k}" for k in [*SUMS, "dtype"]),
    "peak_activation",
    *(f"peak_activation.{k}" for k in ("bytes", "node_index", "node", "live")),
    *(f"peak_activation.live[].{k}" for k in ("tensor", "producer", "bytes")),
    "peak_activation.live_count",
    "peak_activation_ort",
    "unsupported",
    "warnings",
]
NODE_FORMULAS = ["macs", "flops", "bytes_read", "bytes_written"]
TOTAL_FORMULAS = [*NODE_FORMULAS, "params", "param_bytes", "peak_activation_bytes"]


def test_analysis_keys() -> None:
    d = analyze(parse(MATMUL_RELU), dims={"N": 2}).to_dict()
    assert key_paths(d, ANALYSIS_MAPS) == ANALYSIS
    assert d["schema"] == "onnxcost.analysis/1"
    # MatMul [2, 4] x [4, 2]: 2 * 4 * 2 = 16 MACs
    assert d["nodes"][0]["macs"] == d["totals"]["macs"] == 16


def test_symbolic_analysis_keys() -> None:
    d = analyze(parse(MATMUL_RELU), symbolic=True).to_dict()
    node_end = ANALYSIS.index("nodes[].bytes_written_activations") + 1
    expected = [
        *ANALYSIS[:node_end],
        "nodes[].formulas",
        *(f"nodes[].formulas.{k}" for k in NODE_FORMULAS),
        *ANALYSIS[node_end:],
        "symbols",
        "formulas",
        *(f"formulas.{k}" for k in TOTAL_FORMULAS),
    ]
    assert key_paths(d, ANALYSIS_MAPS) == expected
    # MatMul [N, 4] x [4, 2]: 4 * 2 = 8 MACs per row of N
    assert d["symbols"] == ["N"]
    assert d["formulas"]["macs"] == d["nodes"][0]["formulas"]["macs"] == "8*N"


# --- onnxcost.compare/1 -------------------------------------------------------------------------

TOTALS = ["macs", "flops", "params", "param_bytes", "stat_params", "bytes_read", "bytes_written"]
TOTALS += ["peak_activation_bytes", "quant_params", "peak_activation_bytes_ort", *TRAFFIC]
COMPUTE_NODE = ["name", "op_type", "domain", "macs", "input_shape", "weight_shape"]
COMPUTE_NODE += ["output_shape", "bias", "attributes"]
MODEL = [
    "models",
    *(f"models[].{k}" for k in ("label", "path", "inputs")),
    *(f"models[].inputs[].{k}" for k in TENSOR),
    "models[].outputs",
    *(f"models[].outputs[].{k}" for k in TENSOR),
    "models[].totals",
    *(f"models[].totals.{k}" for k in TOTALS),
    *(f"models[].{k}" for k in ("node_count", "compute_nodes", "op_counts", "warnings")),
]
COMPARE_MAPS = frozenset({"models[].op_counts", "alignment[].a[].attributes"})
COMPARE_TAIL = [
    "totals_diff",
    *(f"totals_diff[].{k}" for k in ("metric", "label", "values", "diff_percent")),
    "by_op_type",
    *(f"by_op_type[].{k}" for k in ("op_type", "domain", "count", "macs", "flops")),
    "alignment",
    *(f"alignment[].{k}" for k in ("baseline", "candidate", "kind", "a")),
    *(f"alignment[].a[].{k}" for k in COMPUTE_NODE),
    "alignment[].b",
    *(f"alignment[].b[].{k}" for k in COMPUTE_NODE),
    *(f"alignment[].{k}" for k in ("macs_a", "macs_b", "differences")),
    "only_in",
    *(f"only_in[].{k}" for k in ("baseline", "candidate", "model", "op_type", "domain")),
    *(f"only_in[].{k}" for k in ("count", "other_count", "role", "nodes")),
    "findings",
    "inputs_differ",
]
BENCH_SUMMARY = ["provider", "latency_ms", "throughput_per_s", "runs", "noisy", "warnings"]


def _compare_mlps() -> tuple[str, str]:
    return str(MODELS / "mlp_keras.onnx"), str(MODELS / "mlp_torch_dynamo.onnx")


def test_compare_keys() -> None:
    c = compare(list(_compare_mlps()))
    assert c.only_in, "the two exports differ in their non-compute ops (only_in has rows)"
    d = c.to_dict()
    maps = COMPARE_MAPS | {"alignment[].b[].attributes"}
    assert key_paths(d, maps) == ["schema", "convention", "traffic", *MODEL, *COMPARE_TAIL]
    assert d["schema"] == "onnxcost.compare/1"


def test_compare_keys_with_a_bench() -> None:
    c = compare(list(_compare_mlps()))
    latency = dict.fromkeys(("min", "mean", "median", "p90", "p95", "p99", "max", "std"), 1.0)
    summary = BenchSummary("CPUExecutionProvider", latency, 1000.0, 10, False, {"Gemm": (3, 2.5)})
    benched = [dataclasses.replace(m, bench=summary) for m in c.models]
    d = compare_analysed(benched, c.convention).to_dict()
    maps = COMPARE_MAPS | {"alignment[].b[].attributes", "models[].bench.latency_ms"}
    model = [*MODEL, "models[].bench", *(f"models[].bench.{k}" for k in BENCH_SUMMARY)]
    bench_rows = ["bench_by_op_type", "bench_by_op_type[].op_type"]
    bench_rows += ["bench_by_op_type[].count", "bench_by_op_type[].mean_us"]
    assert key_paths(d, maps) == [
        "schema",
        "convention",
        "traffic",
        *model,
        *COMPARE_TAIL,
        *bench_rows,
    ]
    assert d["bench_by_op_type"] == [{"op_type": "Gemm", "count": [3, 3], "mean_us": [2.5, 2.5]}]


# --- onnxcost.llm/1 -----------------------------------------------------------------------------

TINY_GPT2 = {"layers": 2, "hidden": 32, "heads": 4, "vocab": 64, "max_positions": 32}
STEP = ["macs", "flops", "bytes_read"]
LLM = [
    "schema",
    "model",
    "batch",
    "prompt",
    "generate",
    "traffic",
    "symbols",
    "symbols.batch",
    "symbols.seq",
    "symbols.past",
    "weights_bytes",
    "kv_cache_bytes_per_token",
    "kv_cache_bytes",
    "prefill",
    *(f"prefill.{k}" for k in [*STEP, "bytes_written"]),
    "decode",
    "decode.formulas",
    *(f"decode.formulas.{k}" for k in STEP),
    "decode.first",
    *(f"decode.first.{k}" for k in STEP),
    "decode.first_read",
    *(f"decode.first_read.{k}" for k in ("weights", "kv_cache", "activations")),
    "decode.last",
    *(f"decode.last.{k}" for k in STEP),
    "generation",
    *(f"generation.{k}" for k in STEP),
    "memory",
    *(f"memory.{k}" for k in ("prefill_activations_bytes", "decode_activations_formula")),
    *(f"memory.{k}" for k in ("last_activations_bytes", "peak_bytes")),
    "roofline",
    "roofline.prefill_flops_per_byte",
    "roofline.decode_flops_per_byte",
    "roofline.ceiling",
    *(f"roofline.ceiling.{k}" for k in ("source", "peak_flops_per_s", "bandwidth_bytes_per_s")),
    "roofline.ceiling.ridge_flops_per_byte",
    "roofline.prefill_bound",
    "roofline.decode_bound",
    "warnings",
]
LOOP = [
    "provider",
    "cache",
    "ttft_ms",
    "decode_median_ms",
    "decode_p90_ms",
    "decode_steps",
    "total_ms",
]
LOOP += ["tokens_per_s"]


def test_llm_keys_with_a_ceiling_and_a_bench() -> None:
    ceilings = Ceilings(1e12, 5e10, "flags", "flags")
    report = llm_report(
        "gpt2",
        prompt=4,
        generate=3,
        params={**TINY_GPT2, "kv_cache": "true"},
        ceilings=ceilings,
    )
    d = report.to_dict()
    assert key_paths(d) == LLM
    assert d["schema"] == "onnxcost.llm/1"
    assert d["symbols"] == {"batch": "batch", "seq": "seq", "past": "past_seq"}
    # ridge = 1e12 / 5e10 = 20 FLOP/B
    assert d["roofline"]["ceiling"]["ridge_flops_per_byte"] == 20.0
    timing = LoopTiming("CPUExecutionProvider", "device", 1, 4, 3, 2.0, (1.0, 3.0))
    benched = dataclasses.replace(report, bench=timing).to_dict()
    assert key_paths(benched) == [*LLM, "bench", *(f"bench.{k}" for k in LOOP)]
    # 2 + 1 + 3 = 6 ms for 1 x 3 tokens: 500 tokens/s
    assert benched["bench"]["tokens_per_s"] == 500.0


def test_llm_keys_of_one_token_without_a_ceiling() -> None:
    d = llm_report("gpt2", prompt=4, generate=1, params={**TINY_GPT2, "kv_cache": "true"}).to_dict()
    # No decode step: first and last are null; no ceiling: its object and the bounds are null.
    steps = ("decode.first.", "decode.first_read.", "decode.last.")
    no_steps = [k for k in LLM if not k.startswith(steps)]
    no_ceiling = [k for k in no_steps if not k.startswith("roofline.ceiling.")]
    assert key_paths(d) == no_ceiling
    assert (d["decode"]["first"], d["decode"]["last"]) == (None, None)
    assert d["roofline"]["ceiling"] is None
    assert (d["roofline"]["prefill_bound"], d["roofline"]["decode_bound"]) == (None, None)
