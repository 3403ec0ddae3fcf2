"""Random inputs, vocabulary bounds from Gather tables, and --inputs FILE.npz validation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from onnxcost.analysis.records import NodeRecord, TensorRecord
from onnxcost.bench.inputs import (
    INT_HIGH,
    INT_LOW,
    InputSpec,
    concrete_shape,
    index_bounds,
    input_specs,
    load_inputs_file,
    make_inputs,
    random_array,
)
from onnxcost.errors import BenchError, UsageError


def rec(
    name: str,
    op: str,
    inputs: tuple[str, ...],
    outputs: tuple[str, ...],
    shapes: tuple[object, ...],
) -> NodeRecord:
    return NodeRecord(name, op, "", "ok", 0, 0, 0, 0, 0, shapes, (), inputs, outputs)  # type: ignore[arg-type]


BERT_LIKE = (
    rec("cast", "Cast", ("input_ids",), ("ids64",), ((2, 8),)),
    rec("word", "Gather", ("word_emb", "ids64"), ("we",), ((30522, 64), (2, 8))),
    rec("unsq", "Unsqueeze", ("input_ids", "axes"), ("ids3",), ((2, 8), (1,))),
    rec("word2", "Gather", ("small_emb", "ids3"), ("we2",), ((1000, 64), (2, 1, 8))),
    rec("type", "Gather", ("type_emb", "token_type_ids"), ("te",), ((2, 64), (2, 8))),
    rec("mask", "Cast", ("attention_mask",), ("m",), ((2, 8),)),
    rec("gather_data", "Gather", ("input_ids", "idx"), ("g",), ((2, 8), (1,))),
)


def test_index_bounds_follow_casts_and_take_the_smallest_table() -> None:
    bounds = index_bounds(BERT_LIKE, ["input_ids", "token_type_ids", "attention_mask"])
    # input_ids feeds word (30522 rows, via Cast) and word2 (1000 rows, via Unsqueeze): 1000.
    # As Gather *data* (gather_data) it bounds nothing. The mask feeds no lookup.
    assert bounds == {"input_ids": 1000, "token_type_ids": 2}


def test_random_data_ranges() -> None:
    rng = np.random.default_rng(0)
    floats = random_array(InputSpec("x", "float16", (64, 64)), rng)
    assert floats.dtype == np.float16
    assert floats.std() == pytest.approx(1.0, abs=0.05)
    ints = random_array(InputSpec("n", "int32", (1000,)), rng)
    assert ints.dtype == np.int32
    assert (int(ints.min()), int(ints.max())) == (INT_LOW, INT_HIGH - 1)
    ids = random_array(InputSpec("ids", "int64", (5000,), high=30), rng)
    assert (int(ids.min()), int(ids.max())) == (0, 29)
    flags = random_array(InputSpec("b", "bool", (1000,)), rng)
    assert flags.dtype == np.bool_
    assert 0 < int(flags.sum()) < 1000


@pytest.mark.parametrize("seed", range(20))
def test_never_all_zeros(seed: int) -> None:
    rng = np.random.default_rng(seed)
    # one id below 2 is 0 half the time, one bool False half the time: both are forced.
    assert random_array(InputSpec("ids", "int64", (1,), high=2), rng).tolist() == [1]
    assert random_array(InputSpec("b", "bool", (1,)), rng).tolist() == [True]


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_scalar_inputs_are_arrays(dtype: str) -> None:
    arr = random_array(InputSpec("s", dtype, ()), np.random.default_rng(0))
    assert isinstance(arr, np.ndarray)
    assert arr.shape == ()
    assert arr.dtype == np.dtype(dtype)
    assert arr.item()


def test_uint8_bound_is_clipped_to_the_dtype() -> None:
    arr = random_array(InputSpec("ids", "uint8", (4000,), high=1000), np.random.default_rng(0))
    assert int(arr.max()) == 255


def test_same_seed_same_data() -> None:
    specs = [InputSpec("x", "float32", (3, 4)), InputSpec("ids", "int64", (8,), high=10)]
    a, b = make_inputs(specs, seed=7), make_inputs(specs, seed=7)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["x"], make_inputs(specs, seed=8)["x"])


@pytest.mark.parametrize(
    ("dtype", "match"), [("string", "--inputs FILE.npz"), ("bfloat16", "cannot feed")]
)
def test_dtypes_without_random_data(dtype: str, match: str) -> None:
    with pytest.raises(BenchError, match=match):
        random_array(InputSpec("s", dtype, (2,)), np.random.default_rng(0))


def test_concrete_shape_names_the_flag_to_set() -> None:
    assert concrete_shape(TensorRecord("x", "float32", (1, 3))) == (1, 3)
    with pytest.raises(UsageError, match="--dim batch=N"):
        concrete_shape(TensorRecord("x", "float32", ("batch", 3)))
    with pytest.raises(UsageError, match="--input-shape x=DIMS"):
        concrete_shape(TensorRecord("x", "float32", (None, 3)))
    with pytest.raises(UsageError, match="unknown rank"):
        concrete_shape(TensorRecord("x", "float32", None))


def test_input_specs_take_resolved_shapes_and_bounds() -> None:
    declared = (
        TensorRecord("input_ids", "int64", ("B", "S")),
        TensorRecord("token_type_ids", "int64", ("B", "S")),
    )
    resolved = (
        TensorRecord("input_ids", "int64", (2, 8)),
        TensorRecord("token_type_ids", "int64", (2, 8)),
    )
    assert input_specs(resolved, declared, BERT_LIKE) == (
        InputSpec("input_ids", "int64", (2, 8), 1000),
        InputSpec("token_type_ids", "int64", (2, 8), 2),
    )


DECLARED = (
    TensorRecord("x", "float32", ("B", 3, 4)),
    TensorRecord("mask", "int64", ("B", None)),
)


def npz(tmp_path: Path, **arrays: np.ndarray) -> Path:
    path = tmp_path / "inputs.npz"
    np.savez(path, **arrays)  # type: ignore[arg-type]
    return path


def test_npz_that_fits(tmp_path: Path) -> None:
    path = npz(tmp_path, x=np.zeros((2, 3, 4), np.float32), mask=np.ones((2, 7), np.int64))
    got = load_inputs_file(path, DECLARED)
    assert list(got) == ["x", "mask"]
    assert got["mask"].shape == (2, 7)


@pytest.mark.parametrize(
    ("arrays", "match"),
    [
        ({"x": np.zeros((2, 3, 4), np.float32)}, "no array for 'mask'"),
        (
            {
                "x": np.zeros((2, 3, 4), np.float32),
                "mask": np.ones((2, 7), np.int64),
                "y": np.zeros(1),
            },
            "'y' is not an input",
        ),
        (
            {"x": np.zeros((2, 3, 4), np.float64), "mask": np.ones((2, 7), np.int64)},
            r"float64 but the model wants float32.*astype",
        ),
        ({"x": np.zeros((2, 3), np.float32), "mask": np.ones((2, 7), np.int64)}, "wants rank 3"),
        (
            {"x": np.zeros((2, 5, 4), np.float32), "mask": np.ones((2, 7), np.int64)},
            "fixes dim 1 to 3",
        ),
        (
            {"x": np.zeros((2, 3, 4), np.float32), "mask": np.ones((3, 7), np.int64)},
            "dim 'B' is 2 in 'x' but 3 in 'mask'",
        ),
    ],
)
def test_npz_mismatches(tmp_path: Path, arrays: dict[str, np.ndarray], match: str) -> None:
    with pytest.raises(BenchError, match=match):
        load_inputs_file(npz(tmp_path, **arrays), DECLARED)


def test_npz_missing_or_unreadable(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file"):
        load_inputs_file(tmp_path / "nope.npz", DECLARED)
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(UsageError, match=r"numpy\.savez"):
        load_inputs_file(bad, DECLARED)
