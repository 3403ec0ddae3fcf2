"""The zoo API: names, parameters, dtypes, opsets, errors, and saving with or without weights."""

from __future__ import annotations

import itertools
import math
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from onnxcost import zoo
from onnxcost.errors import OutputError, UsageError

TINY_BERT = {
    "layers": 1,
    "hidden": 32,
    "heads": 2,
    "intermediate": 64,
    "vocab": 50,
    "max_positions": 16,
}


def test_names_in_catalogue_order() -> None:
    assert zoo.names() == [
        "mlp",
        "resnet20_cifar",
        "resnet18",
        "resnet50",
        "mobilenet_v2",
        "vit_b_16",
        "bert_base",
        "gpt2",
        "llama",
    ]
    assert list(zoo.MODELS) == zoo.names()


def test_model_entries_describe_defaults() -> None:
    llama = zoo.MODELS["llama"]
    assert llama.params["layers"] == 32
    assert llama.params["kv_heads"] == 32
    assert llama.params["seq"] == "seq"
    assert zoo.MODELS["resnet18"].params == {
        "batch": "batch",
        "image_size": 224,
        "num_classes": 1000,
    }
    assert all(m.summary and m.inputs for m in zoo.MODELS.values())


def test_unknown_model_lists_names() -> None:
    with pytest.raises(UsageError, match="resnet18, resnet50"):
        zoo.build("resnet19")


def test_unknown_param_lists_valid_ones() -> None:
    with pytest.raises(UsageError, match="image_size, num_classes"):
        zoo.build("resnet18", params={"depth": 18})


@pytest.mark.parametrize("dtype", ["fp64", "float16", "int8"])
def test_bad_dtype(dtype: str) -> None:
    with pytest.raises(UsageError, match="fp32, fp16, bf16"):
        zoo.build("mlp", dtype=dtype)


@pytest.mark.parametrize("opset", [12, 24])
def test_opset_out_of_range(opset: int) -> None:
    with pytest.raises(UsageError, match="from 13 to 23"):
        zoo.build("mlp", opset=opset)


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("resnet18", {"image_size": "big"}, "pass an integer"),
        ("resnet18", {"image_size": 0}, "positive integer"),
        ("bert_base", {"hidden": 100}, "not divisible by heads"),
        ("llama", {"heads": 32, "kv_heads": 5}, "not divisible by kv_heads"),
        ("gpt2", {"seq": 2048}, "maximum 1024"),
        ("vit_b_16", {"image_size": 100}, "multiple of patch_size"),
        ("mlp", {"batch": "2x"}, "symbol name"),
    ],
)
def test_bad_param_values(name: str, params: dict[str, int | str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        zoo.build(name, params=params, weights=False)


def test_string_params_from_the_cli() -> None:
    model = zoo.build("resnet18", params={"image_size": "64", "batch": "8"}, weights=False)
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [8, 3, 64, 64]
    model = zoo.build("bert_base", params={**TINY_BERT, "seq": "tokens"}, weights=False)
    assert model.graph.input[0].type.tensor_type.shape.dim[1].dim_param == "tokens"


def test_dtype_applies_to_weights_and_float_inputs() -> None:
    model = zoo.build("mlp", dtype="fp16")
    assert model.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT16
    assert model.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT16
    assert {t.data_type for t in model.graph.initializer} == {TensorProto.FLOAT16}
    # 104,938 parameters x 2 bytes.
    assert sum(len(t.raw_data) for t in model.graph.initializer) == 209_876


def test_bf16_values_round_to_nearest_even() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    fp32 = zoo.build("mlp", seed=3)
    bf16 = zoo.build("mlp", seed=3, dtype="bf16")
    for t32, t16 in zip(fp32.graph.initializer, bf16.graph.initializer, strict=True):
        want = onnx.numpy_helper.to_array(t32).astype(ml_dtypes.bfloat16).view(np.uint16)
        got = np.frombuffer(t16.raw_data, dtype="<u2").reshape(want.shape)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", zoo.names())
def test_bf16_builds_type_check_at_default_opset(name: str) -> None:
    small = {
        "resnet18": {"image_size": 32},
        "resnet50": {"image_size": 32},
        "mobilenet_v2": {"image_size": 32},
        "vit_b_16": {"image_size": 32, "layers": 1, "hidden": 32, "heads": 2, "mlp_dim": 64},
        "bert_base": TINY_BERT,
        "gpt2": {"layers": 1, "hidden": 32, "heads": 2, "vocab": 50, "max_positions": 16},
        "llama": {
            "layers": 1,
            "hidden": 32,
            "heads": 2,
            "kv_heads": 1,
            "intermediate": 64,
            "vocab": 50,
        },
    }
    model = zoo.build(name, dtype="bf16", params=small.get(name, {}))
    onnx.checker.check_model(model, full_check=True)


def test_bf16_needing_a_later_opset_says_which() -> None:
    with pytest.raises(UsageError, match="pass opset 22 or later"):
        zoo.build("resnet20_cifar", dtype="bf16", opset=17)


def test_layer_norm_decomposed_below_opset_17() -> None:
    ops16 = {n.op_type for n in zoo.build("bert_base", params=TINY_BERT, opset=16).graph.node}
    ops17 = {n.op_type for n in zoo.build("bert_base", params=TINY_BERT, opset=17).graph.node}
    assert "LayerNormalization" not in ops16
    assert {"ReduceMean", "Sqrt", "Pow"} <= ops16
    assert "LayerNormalization" in ops17


# --------------------------------------------------------------------------- no weights
def test_no_weights_references_aligned_external_ranges() -> None:
    model = zoo.build("resnet18", weights=False)
    ranges = []
    for t in model.graph.initializer:
        assert t.data_location == TensorProto.EXTERNAL
        assert not t.raw_data
        info = {e.key: e.value for e in t.external_data}
        assert info["location"] == "resnet18.weights"
        offset, length = int(info["offset"]), int(info["length"])
        assert offset % 4096 == 0
        assert length == math.prod(t.dims) * 4
        ranges.append((offset, offset + length))
    ranges.sort()
    assert all(end <= nxt for (_, end), (nxt, _) in itertools.pairwise(ranges))


@pytest.mark.parametrize("name", ["resnet18", "gpt2"])
def test_no_weights_keeps_dims_and_dtypes(name: str) -> None:
    with_data = zoo.build(name, params={"image_size": 32} if name == "resnet18" else {"layers": 1})
    without = zoo.build(
        name, weights=False, params={"image_size": 32} if name == "resnet18" else {"layers": 1}
    )
    assert [(t.name, t.data_type, list(t.dims)) for t in with_data.graph.initializer] == [
        (t.name, t.data_type, list(t.dims)) for t in without.graph.initializer
    ]
    assert [n.name for n in with_data.graph.node] == [n.name for n in without.graph.node]


def test_save_llama_7b_without_weights_is_fast_and_sparse(tmp_path: Path) -> None:
    start = time.perf_counter()
    path = zoo.save("llama", tmp_path / "llama7b.onnx", weights=False)
    elapsed = time.perf_counter() - start
    assert elapsed < 2.0
    data = tmp_path / "llama7b.weights"
    model = onnx.load(path, load_external_data=False)
    ends = [
        int(info["offset"]) + int(info["length"])
        for info in ({e.key: e.value for e in t.external_data} for t in model.graph.initializer)
    ]
    assert data.stat().st_size == max(ends)
    # 6.7e9 fp32 weights (27 GB) in the file's apparent size, almost nothing on disk.
    assert data.stat().st_size > 26_000_000_000
    on_disk = sum(p.stat().st_blocks * 512 for p in (path, data))
    assert on_disk < 8 * 2**20
    assert {
        e.value for t in model.graph.initializer for e in t.external_data if e.key == "location"
    } == {"llama7b.weights"}


def test_save_again_replaces_the_weights_file_only_with_force(tmp_path: Path) -> None:
    first = zoo.save("mlp", tmp_path / "m.onnx", weights=False)
    size = (tmp_path / "m.weights").stat().st_size
    with pytest.raises(OutputError, match="existing ONNX model; pass --force"):
        zoo.save("mlp", first, weights=False)
    zoo.save("mlp", first, weights=False, force=True)
    assert (tmp_path / "m.weights").stat().st_size == size


# --------------------------------------------------------------------------- with weights
@pytest.mark.ort
def test_saved_model_runs_like_the_built_one(tmp_path: Path) -> None:
    import onnxruntime as ort

    path = zoo.save("resnet20_cifar", tmp_path / "r20.onnx", seed=5)
    assert not (tmp_path / "r20.weights").exists()
    x = np.random.default_rng(0).standard_normal((3, 3, 32, 32)).astype(np.float32)
    saved = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    built = ort.InferenceSession(
        zoo.build("resnet20_cifar", seed=5).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    np.testing.assert_array_equal(
        saved.run(None, {"input": x})[0], built.run(None, {"input": x})[0]
    )


@pytest.mark.ort
def test_large_models_save_weights_externally(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import onnxruntime as ort

    monkeypatch.setattr(zoo, "EXTERNAL_DATA_THRESHOLD", 1000)
    path = zoo.save("mlp", tmp_path / "mlp.onnx")
    # The three weight matrices, 784*128 + 128*32 + 32*10 = 104,768 floats = 419,072 bytes,
    # went to the weights file; biases under 1 KiB stay inline (onnx's size_threshold).
    assert (tmp_path / "mlp.weights").stat().st_size == 419_072
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (logits,) = session.run(None, {"input": np.ones((2, 784), np.float32)})
    assert logits.shape == (2, 10)


def test_save_rejects_unwritable_paths(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="does not exist; create it first"):
        zoo.save("mlp", tmp_path / "missing" / "m.onnx")
    with pytest.raises(UsageError, match=r"\.onnx path"):
        zoo.save("mlp", tmp_path / "m.weights")
