"""The output guard parses models: fields written in any order (protobuf allows it, and
``onnx.load`` reads such a model unchanged) still mark a file as a model or as its weights."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxcost.cli.app import app
from onnxcost.load.outputs import looks_like_model, model_files

runner = CliRunner()


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _len_field(number: int, payload: bytes) -> bytes:
    """A length-delimited field: key (number << 3 | 2), length, bytes."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _int_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _external_weight(name: str, location: str, size: int) -> bytes:
    """A TensorProto [16, 16] FLOAT whose data is external, each ``external_data`` entry
    written value (field 2) before key (field 1), the reverse of ``onnx.save``'s order."""
    entries = (("location", location), ("offset", "0"), ("length", str(size)))
    return (
        _int_field(1, 16)  # dims
        + _int_field(1, 16)
        + _int_field(2, TensorProto.FLOAT)  # data_type
        + _len_field(8, name.encode())  # name
        + b"".join(
            _len_field(13, _len_field(2, value.encode()) + _len_field(1, key.encode()))
            for key, value in entries
        )
        + _int_field(14, TensorProto.EXTERNAL)  # data_location
    )


def _reordered(external: str | None) -> bytes:
    """Y = X @ W as a serialized ModelProto with opset_import (8) and graph (7) before
    ir_version (1); W external at ``external`` (value before key), or inline."""
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 16])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 16])
    graph = helper.make_graph([helper.make_node("MatMul", ["X", "W"], ["Y"])], "g", [x], [y])
    if external is None:
        w = np.arange(256, dtype=np.float32).reshape(16, 16)
        graph.initializer.append(onnx.numpy_helper.from_array(w, "W"))
        body = graph.SerializeToString()
    else:
        body = graph.SerializeToString() + _len_field(5, _external_weight("W", external, 1024))
    opset = helper.make_opsetid("", 17).SerializeToString()
    return _len_field(8, opset) + _len_field(7, body) + _int_field(1, 8)


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


@pytest.fixture
def external(tmp_path: Path) -> tuple[Path, Path]:
    """A model whose weights file is named with value-first entries, and that file."""
    model = tmp_path / "m.onnx"
    model.write_bytes(_reordered("w.bin"))
    weights = tmp_path / "w.bin"
    weights.write_bytes(np.ones(256, dtype=np.float32).tobytes())  # 256 * 4 = 1024 bytes
    return model, weights


def test_onnx_reads_the_hand_written_models_unchanged(external: tuple[Path, Path]) -> None:
    model, _ = external
    loaded = onnx.load(str(model), load_external_data=False)
    assert loaded.ir_version == 8
    assert loaded.opset_import[0].version == 17
    (w,) = loaded.graph.initializer
    assert {e.key: e.value for e in w.external_data} == {
        "location": "w.bin",
        "offset": "0",
        "length": "1024",
    }
    assert list(w.dims) == [16, 16]
    onnx.load(str(model))  # the external data too
    inline = onnx.load_model_from_string(_reordered(None))
    assert inline.ir_version == 8
    assert inline.graph.initializer[0].dims == [16, 16]


def test_value_first_locations_are_found(external: tuple[Path, Path]) -> None:
    model, weights = external
    assert model_files(model) == [model, weights]


def test_a_model_with_ir_version_last_is_a_model(tmp_path: Path) -> None:
    path = tmp_path / "other.model"
    path.write_bytes(_reordered(None))
    assert looks_like_model(path)


@pytest.mark.parametrize(
    "command",
    [
        ["analyze", "{model}", "-o", "{weights}", "--force"],
        ["annotate", "{model}", "{weights}", "--force"],
        ["bench", "{model}", "--runs", "1", "-o", "{weights}", "--force"],
    ],
    ids=["analyze", "annotate", "bench"],
)
def test_each_command_refuses_the_weights_of_a_reordered_model(
    external: tuple[Path, Path], command: list[str]
) -> None:
    model, weights = external
    before = (_md5(model), _md5(weights))
    args = [a.format(model=model, weights=weights) for a in command]
    r = runner.invoke(app, args)
    assert r.exit_code == 1, r.output
    assert "is external data of the input model" in r.output
    assert len(r.output.strip().splitlines()) == 1
    assert (_md5(model), _md5(weights)) == before


def test_analyze_refuses_a_reordered_model_as_output(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    onnx.save(onnx.load_model_from_string(_reordered(None)), source)
    other = tmp_path / "other.model"
    other.write_bytes(_reordered(None))
    before = _md5(other)
    r = runner.invoke(app, ["analyze", str(source), "-o", str(other)])
    assert r.exit_code == 1, r.output
    assert "is an existing ONNX model; a report never replaces a model" in r.output
    assert len(r.output.strip().splitlines()) == 1
    assert _md5(other) == before


class _Recorder:
    """Bytes that record every span read from them (``wire``'s reads: index, slice, find)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.spans: list[tuple[int, int]] = []

    def __enter__(self) -> _Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, key: int | slice) -> int | bytes:
        if isinstance(key, slice):
            start, stop, _ = key.indices(len(self.data))
            self.spans.append((start, stop))
        else:
            self.spans.append((key, key + 1))
        return self.data[key]

    def find(self, sub: bytes, start: int = 0) -> int:
        self.spans.append((start, len(self.data)))
        return self.data.find(sub, start)


def test_the_guard_never_reads_inline_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``-o`` must not page in a large model's weights (GPT-2: 683 MB resident with -o)."""
    import onnxcost.load.outputs

    payload = b"\xde\xad\xbe\xef" * 256 * 256  # W [256, 256] float32: 262,144 bytes
    model = onnx.load_model_from_string(_reordered(None))
    model.graph.initializer[0].CopyFrom(
        TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[256, 256], raw_data=payload)
    )
    path = tmp_path / "big.onnx"
    path.write_bytes(model.SerializeToString())
    data = path.read_bytes()
    first = data.index(payload)
    recorders: list[_Recorder] = []

    def mapped(p: Path) -> _Recorder:
        recorders.append(_Recorder(p.read_bytes()))
        return recorders[-1]

    monkeypatch.setattr(onnxcost.load.outputs, "_mapped", mapped)
    assert model_files(path) == [path]
    assert looks_like_model(path)
    assert len(recorders) == 2
    for recorder in recorders:
        assert recorder.spans  # the walk read the file ...
        for a, b in recorder.spans:  # ... and none of the payload
            assert b <= first or a >= first + len(payload), (a, b)
