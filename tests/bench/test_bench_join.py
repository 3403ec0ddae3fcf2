"""Mapping onnxruntime's kernels back to source nodes, and joining their times to costs.

The optimized graphs and traces are the real ones in tests/data/ort_traces; the source-node
costs are hand-made records (numbers chosen here) except where the analyzer is named.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

import onnxcost
from onnxcost.analysis.records import NodeRecord, to_jsonable
from onnxcost.bench.join import (
    GraphNode,
    by_op_type,
    join,
    map_by_name,
    map_kernels,
    untimed_sources,
)
from onnxcost.bench.profile import kernel_stats, parse_trace

Events = Callable[[str], list[dict[str, Any]]]
Graph = Callable[[str], list[dict[str, Any]]]


def rec(
    name: str,
    op: str,
    inputs: tuple[str, ...],
    outputs: tuple[str, ...],
    *,
    macs: int = 0,
    flops: int = 0,
    read: int = 0,
    written: int = 0,
    graph: str = "",
) -> NodeRecord:
    return NodeRecord(
        name, op, "", "ok", macs, flops, 0, read, written, (), (), inputs, outputs, graph
    )


# Conv+BN+Relu+Conv+Relu, with costs picked by hand.
CBR = (
    rec("conv1", "Conv", ("x", "W", "B"), ("c1",), macs=100, flops=200, read=1000, written=400),
    rec(
        "bn1",
        "BatchNormalization",
        ("c1", "scale", "bias", "mean", "var"),
        ("b1",),
        flops=50,
        read=400,
        written=400,
    ),
    rec("relu1", "Relu", ("b1",), ("r1",), flops=10, read=400, written=400),
    rec("conv2", "Conv", ("r1", "W2"), ("c2",), macs=300, flops=600, read=500, written=400),
    rec("relu2", "Relu", ("c2",), ("y",), flops=10, read=400, written=400),
)


def nodes_of(graph: Graph, name: str) -> tuple[GraphNode, ...]:
    return tuple(GraphNode.from_dict(d) for d in graph(name))


def groups_by_kernel(graph: Graph, name: str) -> dict[str, tuple[tuple[str, ...], str]]:
    return {g.kernels[0]: (g.sources, g.mapping) for g in map_kernels(nodes_of(graph, name), CBR)}


def test_nchwc_kernels_map_to_fused_source_nodes(graph_json: Graph) -> None:
    # r1_nchwc: x -> reorder_token_0, named after r1 (relu1's output).
    # y_nchwc: reorder_token_0 -> reorder_token_2, named after y.
    # ReorderOutput: reorder_token_2 -> y, inserted by the NCHWc transformer.
    assert groups_by_kernel(graph_json, "cbr_all") == {
        "r1_nchwc": (("conv1", "bn1", "relu1"), "fused"),
        "y_nchwc": (("conv2", "relu2"), "fused"),
        "ReorderOutput": ((), "inserted"),
    }


def test_fused_conv_keeps_the_conv_name(graph_json: Graph) -> None:
    assert groups_by_kernel(graph_json, "cbr_extended") == {
        "conv1": (("conv1", "bn1", "relu1"), "fused"),
        "conv2": (("conv2", "relu2"), "fused"),
    }


def test_basic_level_folds_batchnorm_into_conv(graph_json: Graph) -> None:
    assert groups_by_kernel(graph_json, "cbr_basic_noarena") == {
        "conv1": (("conv1", "bn1"), "fused"),
        "relu1": (("relu1",), "direct"),
        "conv2": (("conv2",), "direct"),
        "relu2": (("relu2",), "direct"),
    }


def test_unanchored_outputs_group_with_their_readers() -> None:
    # k1 writes a tensor the source graph never had and carries no name hint: it joins k2.
    optimized = (
        GraphNode("k1", "FusedThing", "com.acme", ("x", "W", "B"), ("tmp_99",)),
        GraphNode("k2", "Other", "com.acme", ("tmp_99", "W2"), ("y",)),
    )
    (group,) = map_kernels(optimized, CBR)
    assert group.kernels == ("k1", "k2")
    assert group.sources == ("conv1", "bn1", "relu1", "conv2", "relu2")
    assert group.mapping == "fused"


def test_copies_are_inserted_rows() -> None:
    optimized = (
        GraphNode("copy_in", "MemcpyFromHost", "", ("x",), ("x_dev",)),
        GraphNode("conv1", "Conv", "", ("x_dev", "W", "B"), ("c1",)),
    )
    groups = {g.kernels[0]: g for g in map_kernels(optimized, CBR[:1])}
    assert groups["copy_in"].mapping == "inserted"
    assert groups["conv1"].sources == ("conv1",)
    assert groups["conv1"].mapping == "direct"


def test_removed_nodes_are_walked_into_their_consumer() -> None:
    # An Identity onnxruntime removed: the Relu now reads x directly.
    sources = (
        rec("id", "Identity", ("x",), ("x1",)),
        rec("relu", "Relu", ("x1",), ("y",), flops=7),
    )
    (group,) = map_kernels((GraphNode("relu", "Relu", "", ("x",), ("y",)),), sources)
    assert group.sources == ("id", "relu")


def test_map_by_name_fallback() -> None:
    groups = map_by_name(["conv1", "r1_nchwc", "relu2_token_3", "Memcpy"], CBR)
    assert [(g.sources, g.mapping) for g in groups] == [
        (("conv1",), "direct"),
        ((), "unattributed"),  # r1 is relu1's output, but the kernel may be a fused chain
        (("relu2",), "renamed"),  # relu2 is a node name
        ((), "unattributed"),
    ]


def test_join_rows_times_costs_and_rates(events: Events, graph_json: Graph) -> None:
    stats = kernel_stats(parse_trace(events("cbr_all"), skip_runs=3))
    groups = map_kernels(nodes_of(graph_json, "cbr_all"), CBR)
    rows = {r.name: r for r in join(stats, groups, CBR)}
    assert list(rows) == ["conv1+bn1+relu1", "conv2+relu2", "ReorderOutput"]
    fused = rows["conv1+bn1+relu1"]
    assert fused.op_type == "Conv+BatchNormalization+Relu"
    assert fused.kernels == ("r1_nchwc",)
    # r1_nchwc: (20 + 18 + 18) / 3 runs.
    assert fused.mean_us == pytest.approx(56 / 3)
    # share uses medians: r1_nchwc runs 20, 18, 18 -> 18; y_nchwc 48, 48, 47 -> 48;
    # ReorderOutput 8, 8, 7 -> 8; the medians add up to 74, so 18 / 74.
    assert fused.median_us == pytest.approx(18.0)
    assert (fused.spread.p10_us, fused.spread.p90_us) == pytest.approx((18.0, 19.6))
    assert fused.share == pytest.approx(18 / 74)
    assert fused.calls == 1
    # macs 100 + 0 + 0; flops 200 + 50 + 10; bytes (1000 + 400) + (400 + 400) + (400 + 400) = 3000.
    assert (fused.macs, fused.flops, fused.bytes_total) == (100, 260, 3000)
    # rates use the median: 260 FLOPs in 18 us = 260 / (18 * 1000) GFLOP/s; 3000 bytes likewise.
    assert fused.gflops_per_s == pytest.approx(260 / 18_000)
    assert fused.gbytes_per_s == pytest.approx(3000 / 18_000)
    assert fused.arithmetic_intensity == pytest.approx(260 / 3000)
    reorder = rows["ReorderOutput"]
    assert reorder.mapping == "inserted"
    assert reorder.sources == ()
    assert (reorder.flops, reorder.gflops_per_s, reorder.gbytes_per_s) == (0, None, None)
    assert reorder.mean_us == pytest.approx(23 / 3)
    assert sum(r.share for r in rows.values()) == pytest.approx(1.0)


def test_join_without_optimized_graph_keeps_every_kernel(events: Events) -> None:
    stats = kernel_stats(parse_trace(events("cbr_all"), skip_runs=3))
    rows = join(stats, (), CBR)
    assert [(r.name, r.mapping) for r in rows] == [
        ("r1_nchwc", "unattributed"),
        ("y_nchwc", "unattributed"),
        ("ReorderOutput", "unattributed"),
    ]
    # no time is dropped: 56 + 143 + 23 over 3 runs.
    assert sum(r.mean_us for r in rows) == pytest.approx(74.0)


def test_op_types_from_the_graph_win_over_trace_args(events: Events, graph_json: Graph) -> None:
    stats = kernel_stats(parse_trace(events("cbr_all_noargs"), skip_runs=3))
    op_types = {n.name: n.kernel_type for n in nodes_of(graph_json, "cbr_all")}
    rows = join(stats, map_kernels(nodes_of(graph_json, "cbr_all"), CBR), CBR, op_types=op_types)
    assert [r.kernel_op_types for r in rows] == [
        ("nchwc.Conv",),
        ("nchwc.Conv",),
        ("nchwc.ReorderOutput",),
    ]
    assert [r.kernel_op_types for r in join(stats, (), CBR)] == [("?",), ("?",), ("?",)]


def test_by_op_type_cumulative(events: Events) -> None:
    ops = by_op_type(kernel_stats(parse_trace(events("cbr_basic_noarena"), skip_runs=3)))
    # mean per run: Conv 88/3 + 321/3 = 409/3; Relu 15/3 + 16/3 = 31/3.
    assert [(o.op_type, o.count, o.calls) for o in ops] == [("Conv", 2, 2), ("Relu", 2, 2)]
    assert ops[0].mean_us == pytest.approx(409 / 3)
    # shares use medians of the per-run sums: Conv runs 30 + 106, 29 + 107, 29 + 108 =
    # 136, 136, 137 -> 136; Relu 5 + 5, 5 + 6, 5 + 5 = 10, 11, 10 -> 10; 136 / (136 + 10).
    assert ops[0].per_run_us == (136.0, 136.0, 137.0)
    assert ops[0].median_us == pytest.approx(136.0)
    assert ops[0].share == pytest.approx(136 / 146)
    assert ops[0].cumulative_share == pytest.approx(136 / 146)
    assert ops[1].share == pytest.approx(10 / 146)
    assert ops[1].cumulative_share == pytest.approx(1.0)


def test_untimed_sources() -> None:
    rows = join([], (), CBR)
    assert rows == ()
    assert untimed_sources(rows, CBR) == ("conv1", "bn1", "relu1", "conv2", "relu2")


def test_join_with_the_analyzer_on_unnamed_nodes(
    events: Events, graph_json: Graph, emb_path: str
) -> None:
    # The analyzer names the unnamed nodes <op>_<index>, as onnxruntime's profile does.
    analysis = onnxcost.analyze(emb_path, dims={"B": 4})
    stats = kernel_stats(parse_trace(events("emb_all"), skip_runs=3))
    rows = join(stats, map_kernels(nodes_of(graph_json, "emb_all"), analysis.nodes), analysis.nodes)
    assert [(r.name, r.mapping) for r in rows] == [
        ("Gather_0", "direct"),
        ("MatMul_1+Add_2+Relu_3", "fused"),
    ]
    # MatMul [4,16] x [16,16]: 4 * 16 * 16 = 1024 MACs; Add and Relu none.
    assert rows[1].macs == 1024


def test_join_with_the_analyzer_on_nchwc(events: Events, graph_json: Graph, cbr_path: str) -> None:
    analysis = onnxcost.analyze(cbr_path, dims={"N": 1})
    stats = kernel_stats(parse_trace(events("cbr_all"), skip_runs=3))
    rows = join(stats, map_kernels(nodes_of(graph_json, "cbr_all"), analysis.nodes), analysis.nodes)
    macs = {r.name: r.macs for r in rows}
    # conv1: 16 x 32 x 32 outputs x (3 x 3 x 3) = 442368; conv2: 16 x 32 x 32 x (16 x 3 x 3) = 2359296.
    assert macs == {"conv1+bn1+relu1": 442_368, "conv2+relu2": 2_359_296, "ReorderOutput": 0}


def test_nested_kernels_do_not_count_twice(events: Events, graph_json: Graph, if_path: str) -> None:
    analysis = onnxcost.analyze(if_path)
    stats = kernel_stats(parse_trace(events("if_all"), skip_runs=3))
    groups = map_kernels(nodes_of(graph_json, "if_all"), analysis.nodes)
    rows = {r.name: r for r in join(stats, groups, analysis.nodes)}
    assert [(n, r.mapping) for n, r in rows.items()] == [
        ("the_if", "direct"),
        ("then_relu", "direct"),
        ("then_neg", "direct"),
    ]
    # top-level time per run is the If's alone: 14, 14, 18 -> median 14; then_relu is 2 us of it.
    assert rows["the_if"].share == pytest.approx(1.0)
    assert rows["then_relu"].share == pytest.approx(2 / 14)
    (only,) = by_op_type(stats)
    assert only.op_type == "If"
    assert only.cumulative_share == pytest.approx(1.0)


def test_conv_that_absorbed_the_residual_add(graph_json: Graph, res_path: str) -> None:
    # cb_nchwc is named after conv_b's output but reads r twice (input and Sum) and writes
    # Relu(conv_b(r) + r): the Add and the last Relu are in it too.
    analysis = onnxcost.analyze(res_path)
    groups = {
        g.kernels[0]: (g.sources, g.mapping)
        for g in map_kernels(nodes_of(graph_json, "res_all"), analysis.nodes)
    }
    assert groups == {
        "ReorderInput": ((), "inserted"),
        "r_nchwc": (("conv_a", "relu_a"), "fused"),
        "cb_nchwc": (("conv_b", "add", "relu_out"), "fused"),
        "ReorderOutput": ((), "inserted"),
    }


def test_kernels_of_one_source_node_share_a_row(events: Events) -> None:
    # Without an optimized graph, 'relu1' and 'relu1_token_7' both name source node relu1.
    stats = kernel_stats(parse_trace(events("cbr_basic_noarena"), skip_runs=3))
    renamed = [replace(s, name="relu1_token_7") if s.name == "relu2" else s for s in stats]
    rows = {r.name: r for r in join(renamed, (), CBR)}
    assert list(rows) == ["conv1", "relu1", "conv2"]
    # relu1 (5 + 5 + 5) plus relu2's (5 + 6 + 5) under its new name, per run: 31 / 3.
    assert rows["relu1"].kernels == ("relu1", "relu1_token_7")
    assert rows["relu1"].mean_us == pytest.approx(31 / 3)
    assert rows["relu1"].calls == 2


def test_a_row_of_a_dynamo_exports_nodes_is_shown_in_their_shared_module(
    events: Events, graph_json: Graph
) -> None:
    # The records as a torch dynamo export's: conv1 and bn1 of /m/block.0, relu1 of
    # /m/block.0/act; conv2 and relu2 of /m/head. A row's scope is the part its nodes share.
    scopes = {
        "conv1": "/m/block.0",
        "bn1": "/m/block.0",
        "relu1": "/m/block.0/act",
        "conv2": "/m/head",
        "relu2": "/n",
    }
    scoped = tuple(replace(r, scope=scopes[r.name]) for r in CBR)
    stats = kernel_stats(parse_trace(events("cbr_all"), skip_runs=3))
    rows = {
        r.name: r for r in join(stats, map_kernels(nodes_of(graph_json, "cbr_all"), scoped), scoped)
    }
    assert rows["conv1+bn1+relu1"].scope == "/m/block.0"
    assert rows["conv1+bn1+relu1"].shown_name == "/m/block.0/conv1+bn1+relu1"
    assert rows["conv2+relu2"].scope is None  # /m/head and /n share no module
    assert rows["ReorderOutput"].scope is None  # no source node
    assert to_jsonable(rows["conv1+bn1+relu1"])["scope"] == "/m/block.0"
    assert "scope" not in to_jsonable(rows["conv2+relu2"])  # the key only where there is one
