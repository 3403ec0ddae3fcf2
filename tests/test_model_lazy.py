"""Inline weights are never read (issue 16): a large model file is parsed without its large
tensor payloads (onnxcost.load.wire), and every analysis is the same as with a full parse."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxcost
from onnxcost.errors import ModelLoadError
from onnxcost.load import model, wire
from onnxcost.load.model import VIRTUAL_LOCATION_PREFIX, load_model
from onnxcost.load.wire import _encode_varint as _varint
from onnxcost.shapes import folding as shapes

ROOT = Path(__file__).resolve().parent.parent
INLINE = VIRTUAL_LOCATION_PREFIX + "inline"
POISON = b"\xde\xad\xbe\xef"
"""Weight bytes a test can recognise wherever they turn up (as float32, a NaN)."""


@pytest.fixture
def lazy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file and bytes model is parsed lazily, however small."""
    monkeypatch.setattr(model, "LAZY_MIN_BYTES", 0)


def _full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model, "LAZY_MIN_BYTES", 1 << 62)


def _inline(t: TensorProto) -> dict[str, str] | None:
    """The virtual reference the loader gave ``t``, or None if its data was kept."""
    info = {e.key: e.value for e in t.external_data}
    return info if info.get("location") == INLINE else None


def _matmul(n: int, weight: TensorProto, elem: int = TensorProto.FLOAT) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", weight.name], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", elem, [1, n])],
        [helper.make_tensor_value_info("y", elem, [1, n])],
        [weight],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "models").rglob("*.onnx")) + sorted((ROOT / "tests/data").rglob("*.onnx")),
    ids=lambda p: p.name,
)
def test_lazy_and_full_parse_give_the_same_analysis(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _full(monkeypatch)
    full = onnxcost.analyze(path).to_json()
    monkeypatch.setattr(model, "LAZY_MIN_BYTES", 0)
    assert onnxcost.analyze(path).to_json() == full


def test_the_shipped_mlp_loses_its_large_weight(lazy: None) -> None:
    """The comparison above covers the lazy path: mlp_torch_script's 784x128 weight is cut."""
    proto = load_model(ROOT / "models/mlp_torch_script.onnx").proto
    cut = [t for t in proto.graph.initializer if _inline(t)]
    assert [tuple(t.dims) for t in cut] in ([(128, 784)], [(784, 128)])


def test_an_inline_weight_is_never_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    n = 1024
    payload = POISON * (n * n)  # 1024 x 1024 float32: 4 MiB
    weight = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[n, n], raw_data=payload)
    path = tmp_path / "m.onnx"
    path.write_bytes(_matmul(n, weight).SerializeToString())
    onnxcost.analyze(_matmul(4, numpy_helper.from_array(np.ones((4, 4), np.float32), "w")))

    def peak_bytes() -> int:
        tracemalloc.start()
        try:
            a = onnxcost.analyze(path)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            # MatMul [1,1024] x [1024,1024]: 1024 x 1024 = 1,048,576 MACs and params;
            # param bytes 1,048,576 x 4 = 4,194,304
            assert (a.totals.macs, a.totals.params) == (1_048_576, 1_048_576)
            assert a.totals.param_bytes == 4_194_304

    _full(monkeypatch)
    assert peak_bytes() > len(payload)  # the measurement sees a payload that is read
    monkeypatch.setattr(model, "LAZY_MIN_BYTES", 0)
    assert peak_bytes() < len(payload) // 8
    loaded = load_model(path)
    assert POISON * 4 not in loaded.proto.SerializeToString()
    assert loaded.model_bytes == path.stat().st_size


def test_the_reference_points_at_the_payload(tmp_path: Path, lazy: None) -> None:
    raw = np.arange(64 * 64, dtype=np.float32).tobytes()
    weight = TensorProto(name="w", data_type=TensorProto.DOUBLE, dims=[64, 32], raw_data=raw)
    path = tmp_path / "m.onnx"
    path.write_bytes(_matmul(64, weight).SerializeToString())
    t = load_model(path).proto.graph.initializer[0]
    info = _inline(t)
    assert info is not None
    offset, length = int(info["offset"]), int(info["length"])
    assert path.read_bytes()[offset : offset + length] == raw
    assert (t.name, t.data_type, tuple(t.dims)) == ("w", TensorProto.DOUBLE, (64, 32))
    assert t.data_location == TensorProto.EXTERNAL
    assert not t.raw_data


def test_bench_reads_the_weights(tmp_path: Path, lazy: None) -> None:
    raw = POISON * (64 * 64)  # a 64 x 32 double tensor: not a type folding reads
    weight = TensorProto(name="w", data_type=TensorProto.DOUBLE, dims=[64, 32], raw_data=raw)
    path = tmp_path / "m.onnx"
    path.write_bytes(_matmul(64, weight).SerializeToString())
    assert load_model(path, weights=True).proto.graph.initializer[0].raw_data == raw
    assert load_model(path.read_bytes(), weights=True).proto.graph.initializer[0].raw_data == raw
    assert _inline(load_model(path.read_bytes()).proto.graph.initializer[0])


def _kept_and_cut(tensors: list[TensorProto]) -> tuple[list[str], list[str]]:
    data = _matmul(4, numpy_helper.from_array(np.ones((4, 4), np.float32), "w"))
    data.graph.initializer.extend(tensors)
    proto = load_model(data.SerializeToString()).proto
    kept = [t.name for t in proto.graph.initializer if not _inline(t) and t.name != "w"]
    cut = [t.name for t in proto.graph.initializer if _inline(t)]
    return kept, cut


def test_what_is_kept_and_what_is_cut(lazy: None) -> None:
    def arr(name: str, a: np.ndarray) -> TensorProto:
        return numpy_helper.from_array(a, name)

    kept, cut = _kept_and_cut(
        [
            arr("small_f16", np.ones(2000, np.float16)),  # 4,000 B: under SMALL_BYTES
            arr("shape_i64", np.arange(4000, dtype=np.int64)),  # 32 KB, foldable
            arr("table_f32", np.ones(65536, np.float32)),  # 256 KB, foldable (at the limit)
            arr("big_i64", np.arange(65537, dtype=np.int64)),  # past the fold limit
            arr("weight_f16", np.ones(4096, np.float16)),  # 8 KB, not a type folding reads
            helper.make_tensor("typed_f64", TensorProto.DOUBLE, [1000], [1.5] * 1000),
            helper.make_tensor("typed_i64", TensorProto.INT64, [70000], [7] * 70000),
        ]
    )
    assert kept == ["small_f16", "shape_i64", "table_f32"]
    assert cut == ["big_i64", "weight_f16", "typed_f64", "typed_i64"]


def test_folding_reads_every_type_the_lazy_parse_keeps() -> None:
    # A tensor of each kept type, 3 elements [1, 0, 2], reads back as those values.
    for elem in sorted(wire.FOLDABLE_TYPES):
        dtype = helper.tensor_dtype_to_np_dtype(elem)
        t = numpy_helper.from_array(np.array([1, 0, 2], dtype=dtype), "t")
        assert t.data_type == elem
        value = shapes._tensor_to_array(t)
        assert value is not None, elem
        assert value.tolist() == np.array([1, 0, 2], dtype=dtype).tolist()


def test_fields_in_any_order(lazy: None) -> None:
    """Concatenated messages merge: here the payload comes before dims and type."""
    raw = POISON * 2048  # 64 x 64 float16
    tensor = (
        TensorProto(raw_data=raw).SerializeToString()
        + TensorProto(name="w", data_type=TensorProto.FLOAT16, dims=[64, 64]).SerializeToString()
        + TensorProto(data_location=TensorProto.DEFAULT).SerializeToString()
    )
    m = _matmul(64, TensorProto(name="w"), TensorProto.FLOAT16)
    del m.graph.initializer[:]
    graph = m.graph.SerializeToString() + bytes([5 << 3 | 2]) + _varint(len(tensor)) + tensor
    data = bytes([7 << 3 | 2]) + _varint(len(graph)) + graph
    data = m.SerializeToString().replace(
        bytes([7 << 3 | 2]) + _varint(m.graph.ByteSize()) + m.graph.SerializeToString(), data
    )
    t = load_model(data).proto.graph.initializer[0]
    assert _inline(t)
    assert (t.name, tuple(t.dims)) == ("w", (64, 64))
    assert onnxcost.analyze(data).totals.macs == 64 * 64  # [1,64] x [64,64]


def test_unpacked_typed_data(lazy: None) -> None:
    """proto2 parsers accept a repeated double written one field per element."""
    values = b"".join(bytes([10 << 3 | 1]) + np.float64(i).tobytes() for i in range(600))
    tensor = TensorProto(name="d", data_type=TensorProto.DOUBLE, dims=[600]).SerializeToString()
    kept, cut = _kept_and_cut([TensorProto.FromString(tensor + values)])
    assert (kept, cut) == ([], ["d"])


def _nested_model() -> onnx.ModelProto:
    """Large tensors in an If branch's initializers, a Constant inside the other branch,
    and a Constant in a model-local function."""
    big = numpy_helper.from_array(np.full((64, 64), 2.0, np.float16), "big")
    out = [helper.make_tensor_value_info("r", TensorProto.FLOAT16, [64, 64])]
    then = helper.make_graph([helper.make_node("Identity", ["big"], ["r"])], "t", [], out, [big])
    other = helper.make_graph([helper.make_node("Constant", [], ["r"], value=big)], "e", [], out)
    fn = helper.make_function(
        "local",
        "F",
        ["a"],
        ["b"],
        [
            helper.make_node("Constant", [], ["c"], value=big),
            helper.make_node("Add", ["a", "c"], ["b"]),
        ],
        [helper.make_opsetid("", 17)],
    )
    graph = helper.make_graph(
        [
            helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other),
            helper.make_node("F", ["y"], ["z"], domain="local"),
        ],
        "g",
        [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT16, [64, 64])],
    )
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
        functions=[fn],
    )


def test_subgraphs_and_functions_are_cut_too(lazy: None, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _nested_model().SerializeToString()
    proto = load_model(data).proto
    branches = {a.name: a.g for a in proto.graph.node[0].attribute}
    then, other = branches["then_branch"], branches["else_branch"]
    assert _inline(then.initializer[0])
    assert _inline(other.node[0].attribute[0].t)
    assert _inline(proto.functions[0].node[0].attribute[0].t)
    lazy_json = onnxcost.analyze(data).to_json()
    _full(monkeypatch)
    assert onnxcost.analyze(data).to_json() == lazy_json


def test_a_broken_file_says_what_a_full_parse_says(tmp_path: Path, lazy: None) -> None:
    raw = POISON * 4096
    weight = TensorProto(name="w", data_type=TensorProto.DOUBLE, dims=[64, 32], raw_data=raw)
    data = _matmul(64, weight, TensorProto.DOUBLE).SerializeToString()
    assert wire.strip_payloads(data, INLINE) is not None
    for broken in (data[: len(data) - 100], data + b"\x0b"):  # truncated; a group opened
        with pytest.raises(wire.WireError):
            wire.strip_payloads(broken, INLINE)
        with pytest.raises(ModelLoadError, match="not a valid ONNX model"):
            load_model(broken)


def test_a_model_without_large_tensors_is_returned_as_none() -> None:
    data = _matmul(4, numpy_helper.from_array(np.ones((4, 4), np.float32), "w"))
    assert wire.strip_payloads(data.SerializeToString(), INLINE) is None


def test_nesting_deeper_than_protobuf_parses(lazy: None) -> None:
    """If bodies nested 120 deep (written field by field: onnx's helpers refuse to), each
    holding a large weight: the walk stops where protobuf's parse would (100 messages deep)
    and the full parse says what is wrong."""
    big = numpy_helper.from_array(np.zeros(4096, np.float16), "big")
    graph = helper.make_graph([helper.make_node("Identity", ["big"], ["r"])], "b", [], [], [big])
    data = graph.SerializeToString()
    for _ in range(120):
        attr = helper.make_attribute("then_branch", graph).SerializeToString()
        attr = attr.replace(wire._length_delimited(6, graph.SerializeToString()), b"")
        attr += wire._length_delimited(6, data)
        node = helper.make_node("If", ["cond"], ["r"]).SerializeToString()
        node += wire._length_delimited(5, attr)
        data = onnx.GraphProto(name="b", initializer=[big]).SerializeToString()
        data += wire._length_delimited(1, node)
    model = helper.make_model(onnx.GraphProto(), opset_imports=[helper.make_opsetid("", 17)])
    data = model.SerializeToString() + wire._length_delimited(7, data)
    with pytest.raises(wire.WireError, match="nested"):
        wire.strip_payloads(data, INLINE)
    with pytest.raises(ModelLoadError):
        load_model(data)


def test_a_file_that_cannot_be_mapped_is_read(
    tmp_path: Path, lazy: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = POISON * 4096
    weight = TensorProto(name="w", data_type=TensorProto.DOUBLE, dims=[64, 32], raw_data=raw)
    path = tmp_path / "m.onnx"
    path.write_bytes(_matmul(64, weight, TensorProto.DOUBLE).SerializeToString())

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(19, "No such device")  # what mmap says on a file system without it

    monkeypatch.setattr(model.mmap, "mmap", refuse)
    assert load_model(path).proto.graph.initializer[0].raw_data == raw
