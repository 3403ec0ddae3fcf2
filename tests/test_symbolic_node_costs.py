"""Every node's costs over symbolic shapes in one walk (``onnxcost.symbolic.node_costs``, issue
22): MACs, FLOPs, bytes read and written (both traffic modes) and params, equal node for node
to a concrete analysis at random points on every model in models/, tests/data and the
built-ins; classes sound and shared; by hand on small graphs."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path

import onnx
import pytest

import onnxcost
from onnxcost.analysis.traffic import Traffic
from onnxcost.prepare import PreparedModel, prepare
from onnxcost.symbolic.dims import model_symbols, with_derived
from onnxcost.symbolic.node_costs import NodeCosts, node_costs
from onnxcost.symdim import Dim, SymDim

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted(
    [*ROOT.glob("models/*.onnx"), *ROOT.glob("tests/data/**/*.onnx")], key=lambda p: str(p)
)
_SMALL = {"layers": 2, "hidden": 256, "heads": 4, "vocab": 100}
_SMALL_KV = {**_SMALL, "kv_cache": "true"}
BUILT: list[tuple[str, dict[str, str | int]]] = [
    ("mlp", {}),
    ("resnet20_cifar", {}),
    ("resnet18", {"image_size": 64}),
    ("resnet50", {"image_size": 64}),
    ("mobilenet_v2", {"image_size": 64}),
    ("vit_b_16", {"layers": 1, "image_size": 64, "hidden": 64, "heads": 2, "mlp_dim": 128}),
    ("bert_base", {**_SMALL, "intermediate": 512}),
    ("gpt2", _SMALL),
    ("gpt2", _SMALL_KV),
    ("llama", {**_SMALL_KV, "kv_heads": 2, "intermediate": 512}),
]
FIELDS = ("macs", "flops", "bytes_read", "bytes_written")


def _at(d: Dim | None, values: Mapping[str, int]) -> int | None:
    return d if d is None or isinstance(d, int) else d.evaluate(values)


def _symbols(found: NodeCosts, prepared: PreparedModel) -> list[str]:
    """The model's symbols, and any other name in the formulas (a dim_param that is no
    identifier: one symbol of its own)."""
    names = dict.fromkeys(model_symbols(prepared.proto, {}, {}))
    for field in FIELDS:
        for d in getattr(found, field):
            if isinstance(d, SymDim):
                names.update(dict.fromkeys(sorted(d.symbols)))
    return list(names)


def _points(symbols: Sequence[str], seed: int = 0) -> list[dict[str, int]]:
    rng = random.Random(seed)
    return [{s: rng.randint(2, 9) for s in symbols} for _ in range(2)]


def _check(prepared: PreparedModel, traffic: Traffic) -> NodeCosts:
    """Every node with a formula equals the concrete analysis at two random points, in every
    field; params node for node, param bytes in total; nodes of one class evaluate alike."""
    found = node_costs(prepared, traffic=traffic)
    view = prepared.view
    symbols = _symbols(found, prepared)
    for values in _points(symbols):
        analysis = onnxcost.analyze(
            prepared, dims=with_derived(prepared.proto, {}, values), traffic=traffic
        )
        # A model with If/Loop/Scan records its bodies' nodes too: matched by name.
        records = {r.name: r for r in analysis.nodes if r.graph == ""}
        assert len(records) == len(view.names)
        if len(records) == len(analysis.nodes):  # no bodies: node i is the analysis' node i
            assert [r.name for r in analysis.nodes] == list(view.names)
        by_class: dict[int, tuple[int | None, ...]] = {}
        for i, name in enumerate(view.names):
            record = records[name]
            assert found.params[i] == record.params, (name, values)
            got = tuple(_at(getattr(found, f)[i], values) for f in FIELDS)
            if found.macs[i] is not None:
                assert got[:2] == (record.macs, record.flops), (name, values)
            if found.bytes_read[i] is not None:
                assert got[2:] == (record.bytes_read, record.bytes_written), (name, values)
            else:
                assert i in found.reasons, name
            if found.classes[i] >= 0:
                assert by_class.setdefault(found.classes[i], got) == got, name
        # a body's weights count at its nodes, which the walk of the main graph has not (a
        # model with bodies is sampled whole): optimum's merged decoders keep theirs outside
        if not view.outer_reads:
            assert sum(found.param_bytes) == analysis.totals.param_bytes
    return found


@pytest.mark.parametrize("traffic", ["runtime", "all-inputs"])
@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_matches_a_concrete_analysis(path: Path, traffic: Traffic) -> None:
    _check(prepare(path), traffic)


@pytest.mark.parametrize("path", sorted(ROOT.glob("models/*.onnx")), ids=lambda p: p.name)
def test_every_export_in_models_is_carried_whole(path: Path) -> None:
    found = node_costs(prepare(path))
    assert all(b is not None for b in found.bytes_read), found.reasons
    assert sum(m is None for m in found.macs) <= 2  # Softmax / ReduceMean: concrete dims


@pytest.mark.parametrize("traffic", ["runtime", "all-inputs"])
@pytest.mark.parametrize(("name", "params"), BUILT, ids=lambda v: str(v))
def test_built_ins_match_a_concrete_analysis(
    name: str, params: dict[str, str | int], traffic: Traffic
) -> None:
    found = _check(prepare(name, params=params), traffic)
    assert all(b is not None for b in found.bytes_read), found.reasons


def test_repeated_layers_are_one_class_each() -> None:
    """GPT-2's layers repeat: a deeper model has more nodes but not one class more."""
    two = node_costs(prepare("gpt2", params={**_SMALL, "layers": 2}))
    four = node_costs(prepare("gpt2", params={**_SMALL, "layers": 4}))
    assert len(four.classes) > len(two.classes) + 100
    assert len(set(four.classes)) == len(set(two.classes))
    assert len(set(four.classes)) < len(four.classes) // 3


def _proto(text: str, **weights: Sequence[int]) -> PreparedModel:
    """The model of ``text`` with float initializers of the shapes in ``weights``."""
    proto = onnx.parser.parse_model(text)
    for name, shape in weights.items():
        size = 1
        for d in shape:
            size *= d
        proto.graph.initializer.append(
            onnx.helper.make_tensor(name, onnx.TensorProto.FLOAT, shape, [0.0] * size)
        )
    return prepare(proto)


def test_matmul_and_conv_by_hand() -> None:
    found = node_costs(
        _proto(
            """<ir_version: 8, opset_import: ["" : 17]>
            g (float[b, s, 64] x, float[b, 3, h, h] img) => (float[b, s, 32] y, float[b, 8, p, p] c)
            {
                y = MatMul(x, w)
                c = Conv<strides = [2, 2], pads = [1, 1, 1, 1]>(img, k)
            }""",
            w=[64, 32],
            k=[8, 3, 3, 3],
        )
    )
    b, s, h = SymDim.of("b"), SymDim.of("s"), SymDim.of("h")
    # MatMul: numel(Y) x K = b*s*32 x 64 = 2,048*b*s MACs; FLOPs 2 x MACs.
    assert found.macs[0] == 2048 * b * s
    assert found.flops[0] == 4096 * b * s
    # Reads x (b*s*64 floats: 256*b*s bytes) and w (64*32*4 = 8,192 bytes), writes y
    # (b*s*32 floats: 128*b*s bytes); w is a weight of 2,048 params, 8,192 bytes.
    assert found.bytes_read[0] == 256 * b * s + 8192
    assert found.bytes_written[0] == 128 * b * s
    assert (found.params[0], found.param_bytes[0]) == (2048, 8192)
    # Conv: out side (h + 2 - 2 - 1) // 2 + 1 = (h - 1) // 2 + 1; MACs = numel(out) x 3*3*3
    # = b * 8 * side**2 * 27; at b = 2, h = 224: side 112, 2 * 8 * 12,544 * 27 = 5,419,008.
    side = (h - 1) // 2 + 1
    assert found.macs[1] == b * 8 * side * side * 27
    macs = found.macs[1]
    assert isinstance(macs, SymDim)
    assert macs.evaluate({"b": 2, "h": 224}) == 5_419_008
    assert found.params[1] == 8 * 3 * 3 * 3  # 216


def test_a_node_with_more_inputs_than_the_cached_bits_reads_them_all() -> None:
    """The traffic rule is asked with one bit per input (``node_costs._bits``, 64 of them
    kept): a Concat of 70 inputs reads every one."""
    names = [f"x{k}" for k in range(70)]
    inputs = ", ".join(f"float[b, 1] {n}" for n in names)
    found = node_costs(
        _proto(
            f"""<ir_version: 8, opset_import: ["" : 17]>
            g ({inputs}) => (float[b, 70] y) {{ y = Concat<axis = 1>({", ".join(names)}) }}"""
        )
    )
    b = SymDim.of("b")
    # 70 inputs of b floats each: 70 x 4·b = 280·b bytes read; y is b x 70 floats, 280·b.
    assert found.bytes_read[0] == 280 * b
    assert found.bytes_written[0] == 280 * b


_KV = """<ir_version: 8, opset_import: ["" : 17]>
g (float[b, 4, past, 8] past_key, float[b, 4, s, 8] k, int64[b, s] ids,
   int64[b, "past + s"] attention_mask)
  => (float[b, 4, "past + s", 8] present_key, float[b, s, 16] emb, float[b, "past + s"] m) {
    present_key = Concat<axis = 2>(past_key, k)
    emb = Gather(table, ids)
    m = Cast<to = 1>(attention_mask)
}
"""


def _kv(**kwargs: object) -> NodeCosts:
    return node_costs(_proto(_KV, table=[100, 16]), **kwargs)  # type: ignore[arg-type]


def test_kv_concat_gather_and_a_derived_input_dim_by_hand() -> None:
    found = _kv()
    b, s, past = SymDim.of("b"), SymDim.of("s"), SymDim.of("past")
    # Concat of the cache: reads past (b*4*past*8 floats = 128*b*past bytes) and the new keys
    # (128*b*s), writes the present cache whole, 128*b*(past + s).
    assert found.bytes_read[0] == 128 * b * past + 128 * b * s
    assert found.bytes_written[0] == 128 * b * (past + s)
    # Gather (runtime): the rows it selects, b*s*16 floats = 64*b*s bytes, and its indices,
    # b*s int64 = 8*b*s: 72*b*s; the table's 1,600 params are counted there.
    assert found.bytes_read[1] == 72 * b * s
    assert found.params[1] == 1600
    # The mask [b, past + s] (a derived dim, optimum's naming): int64 in, float out.
    assert found.bytes_read[2] == 8 * b * (past + s)
    assert found.bytes_written[2] == 4 * b * (past + s)
    # all-inputs: the Gather reads its whole table, 100*16*4 = 6,400 bytes, and the indices.
    assert _kv(traffic="all-inputs").bytes_read[1] == 6400 + 8 * b * s


def test_fixed_dims_and_input_shapes() -> None:
    s = SymDim.of("s")
    # --dim b=2 past=5: the Concat reads 128*2*5 + 128*2*s = 1,280 + 256*s bytes.
    assert _kv(fixed={"b": 2, "past": 5}).bytes_read[0] == 1280 + 256 * s
    # --input-shape ids=3x7 sets b = 3 and s = 7 on every input (as a concrete analysis):
    # the mask is 3 x (past + 7) int64: 24*past + 168 bytes.
    past = SymDim.of("past")
    assert _kv(input_shapes={"ids": [3, 7]}).bytes_read[2] == 24 * past + 168


@pytest.mark.parametrize("convention", ["onnxcost", "torch", "fvcore"])
def test_conventions_match_a_concrete_analysis(convention: str) -> None:
    prepared = prepare("gpt2", params=_SMALL)
    found = node_costs(prepared, convention=convention)  # type: ignore[arg-type]
    values = {"batch": 3, "seq": 5}
    analysis = onnxcost.analyze(prepared, dims=values, convention=convention)  # type: ignore[arg-type]
    got = [_at(f, values) for f in found.flops]
    assert [g for g in got if g is not None] == [
        r.flops for r, g in zip(analysis.nodes, got, strict=True) if g is not None
    ]
    assert sum(g is not None for g in got) > len(got) - 5


def test_an_uncarried_node_stops_only_what_follows_it() -> None:
    found = node_costs(
        _proto(
            """<ir_version: 8, opset_import: ["" : 17, "custom" : 1]>
            g (float[b, 8] x) => (float[b, 8] y, float[b, 8] z) {
                u = custom.Op(x)
                y = Relu(u)
                z = Relu(x)
            }"""
        )
    )
    assert found.bytes_read[0] is None
    assert "not carried" in found.reasons[0]
    assert found.macs[1] is None
    assert "'u' has no carried shape" in found.reasons[1]
    assert found.bytes_read[2] == 32 * SymDim.of("b")  # b*8 floats
    assert found.shapes is not None
    assert len(found.shapes.uncarried) == 2


def test_control_flow_has_no_formula() -> None:
    found = node_costs(prepare(ROOT / "tests/data/ort_traces/if.onnx"))
    view = prepare(ROOT / "tests/data/ort_traces/if.onnx").view
    for i, op in enumerate(view.op_types):
        if op == "If":
            assert found.macs[i] is None
            assert "control flow" in found.reasons[i]


def test_without_counting_params_the_costs_are_the_same() -> None:
    prepared = prepare("gpt2", params=_SMALL)
    full, lean = node_costs(prepared), node_costs(prepared, count_params=False)
    assert (lean.params, lean.param_bytes) == ([], [])
    assert sum(full.params) > 0
    for field in (*FIELDS, "classes"):
        assert getattr(lean, field) == getattr(full, field)


def test_a_memo_given_to_the_next_walk_makes_alike_nodes_lookups() -> None:
    prepared = prepare("gpt2", params=_SMALL_KV)
    first = node_costs(prepared, count_params=False)
    assert first.memo is not None
    classes = len(first.memo.memo)
    again = node_costs(prepared, count_params=False, memo=first.memo)
    assert len(first.memo.memo) == classes  # every node a lookup
    for field in FIELDS:
        assert getattr(again, field) == getattr(first, field)
    # At past_seq = 0 only what reads the cache changes: the walk with the memo costs every
    # node as a fresh walk does, and adds fewer classes than a fresh walk makes.
    zero = {"past_seq": 0}
    fresh = node_costs(prepared, count_params=False, fixed=zero)
    shared = node_costs(prepared, count_params=False, fixed=zero, memo=first.memo)
    for field in FIELDS:
        assert getattr(shared, field) == getattr(fresh, field)
    assert fresh.memo is not None
    added = len(first.memo.memo) - classes
    assert 0 < added < len(fresh.memo.memo)


def test_a_memo_of_other_settings_is_not_used() -> None:
    prepared = prepare("gpt2", params=_SMALL_KV)
    runtime = node_costs(prepared, traffic="runtime")
    inputs = node_costs(prepared, traffic="all-inputs", memo=runtime.memo)
    # all-inputs: a Gather reads its whole table, runtime only the rows it selects; a memo
    # of runtime classes would give the runtime bytes
    assert inputs.bytes_read == node_costs(prepared, traffic="all-inputs").bytes_read
    assert inputs.bytes_read != runtime.bytes_read
    assert inputs.memo is not runtime.memo


def test_stop_ends_the_walk_at_the_first_node_it_does_not_carry() -> None:
    # Relu, NonZero (not carried: its shape is the data's), Relu of it: with stop, the walk
    # ends at NonZero (node 1), as the walk at a symbol's 0 asks only whether every node is
    # carried; with NonZero's and what follows it tolerated, it goes on to the end.
    proto = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[b, 4] x) => (int64[2, n] z) {
            r = Relu(x)
            y = NonZero(r)
            z = Relu(y)
        }"""
    )
    prepared = prepare(proto)
    whole = node_costs(prepared)
    assert sorted(whole.reasons) == [1, 2]
    assert len(whole.macs) == 3
    stopped = node_costs(prepared, stop=frozenset())
    assert list(stopped.reasons) == [1]
    assert len(stopped.macs) == 1  # Relu's only
    assert [name for name, _op, _why in stopped.shapes.uncarried] == ["NonZero_1"]
    tolerated = node_costs(prepared, stop=frozenset({1, 2}))
    assert sorted(tolerated.reasons) == [1, 2]
    assert len(tolerated.macs) == 3
