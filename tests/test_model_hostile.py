"""Hostile model files (issue 11): the loader refuses each with one ModelLoadError line,
before reading anything it should not, and never hangs or leaks another exception."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

import onnxcost
from onnxcost.cli.app import app
from onnxcost.errors import ModelLoadError

DATA_BYTES = 64 * 64 * 4  # a 64x64 float tensor


def _external(name: str, location: str, offset: str | None, length: str | None) -> TensorProto:
    """A 64x64 float tensor whose bytes live in ``location``, with the entries as given."""
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[64, 64])
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            e = t.external_data.add()
            e.key, e.value = key, value
    return t


def _save(
    tmp_path: Path,
    location: str = "m.data",
    offset: str | None = "0",
    length: str | None = str(DATA_BYTES),
) -> Path:
    """x [1,64] @ w [64,64], w external: a data file m.data of DATA_BYTES beside the model."""
    (tmp_path / "m.data").write_bytes(b"\0" * DATA_BYTES)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        [_external("w", location, offset, length)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def test_the_well_formed_model_loads(tmp_path: Path) -> None:
    a = onnxcost.analyze(_save(tmp_path))
    # MatMul [1,64] x [64,64]: 64 x 64 = 4,096 MACs
    assert a.totals.macs == 4_096


@pytest.mark.parametrize("key", ["offset", "length"])
@pytest.mark.parametrize("value", ["abc", "1.5", "1e3", "-1", "", " 12", "1_0", "\u00b2"])
def test_offset_and_length_must_be_whole_numbers(tmp_path: Path, key: str, value: str) -> None:
    path = _save(tmp_path, **{key: value})  # type: ignore[arg-type]
    with pytest.raises(ModelLoadError, match=f"external-data {key} .* not a non-negative whole"):
        onnxcost.analyze(path)


def test_offset_and_length_past_the_file_are_refused(tmp_path: Path) -> None:
    path = _save(tmp_path, offset="1", length=str(DATA_BYTES))
    with pytest.raises(ModelLoadError, match=f"needs bytes up to {DATA_BYTES + 1}"):
        onnxcost.analyze(path)


@pytest.mark.parametrize(
    ("location", "problem"),
    [
        ("", "names no file"),
        (".", "names no file"),
        ("m\x00.data", "holds a NUL"),
        ("/etc/passwd", "path traversal"),
        ("../m.data", "path traversal"),
        ("sub/../../m.data", "path traversal"),
    ],
)
def test_bad_locations(tmp_path: Path, location: str, problem: str) -> None:
    path = _save(tmp_path, location=location)
    with pytest.raises(ModelLoadError, match=problem):
        onnxcost.analyze(path)


def test_a_missing_location_is_refused(tmp_path: Path) -> None:
    path = _save(tmp_path, location="m.data")
    m = onnx.load(path, load_external_data=False)
    entries = m.graph.initializer[0].external_data
    del entries[0]  # the location entry
    path.write_bytes(m.SerializeToString())
    with pytest.raises(ModelLoadError, match="names no file"):
        onnxcost.analyze(path)


def test_a_location_that_is_not_utf8(tmp_path: Path) -> None:
    path = _save(tmp_path, location="LOCX.data")
    data = path.read_bytes()
    assert data.count(b"LOCX") == 1
    path.write_bytes(data.replace(b"LOCX", b"\xffOCX"))
    with pytest.raises(ModelLoadError, match="not valid UTF-8"):
        onnxcost.analyze(path)


def test_a_symlink_loop(tmp_path: Path) -> None:
    path = _save(tmp_path, location="loop_a")
    (tmp_path / "loop_a").symlink_to("loop_b")
    (tmp_path / "loop_b").symlink_to("loop_a")
    with pytest.raises(ModelLoadError, match="cannot be resolved"):
        onnxcost.analyze(path)


def test_a_symlink_out_of_the_folder(tmp_path: Path) -> None:
    inner = tmp_path / "model"
    inner.mkdir()
    path = _save(inner, location="link.data")
    (inner / "link.data").symlink_to(tmp_path / "outside.data")
    (tmp_path / "outside.data").write_bytes(b"\0" * DATA_BYTES)
    with pytest.raises(ModelLoadError, match="path traversal"):
        onnxcost.analyze(path)


def test_a_location_that_is_a_folder(tmp_path: Path) -> None:
    path = _save(tmp_path, location="sub")
    (tmp_path / "sub").mkdir()
    with pytest.raises(ModelLoadError, match="not a regular file"):
        onnxcost.analyze(path)


def _if_model(tmp_path: Path, location: str, offset: str = "0") -> Path:
    """An If whose then-branch holds an external initializer (and whose else-branch a
    Constant with an external tensor), both at ``location``."""
    (tmp_path / "m.data").write_bytes(b"\0" * DATA_BYTES)
    out = [helper.make_tensor_value_info("r", TensorProto.FLOAT, [64, 64])]
    then = helper.make_graph(
        [helper.make_node("Identity", ["w"], ["r"])],
        "then",
        [],
        out,
        [_external("w", location, offset, str(DATA_BYTES))],
    )
    const = helper.make_node("Constant", [], ["r"])
    const.attribute.add().CopyFrom(
        helper.make_attribute("value", _external("c", "m.data", "0", str(DATA_BYTES)))
    )
    other = helper.make_graph([const], "else", [], out)
    graph = helper.make_graph(
        [helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)],
        "g",
        [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 64])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def test_subgraph_external_data_is_checked(tmp_path: Path) -> None:
    onnxcost.analyze(_if_model(tmp_path, "m.data"))  # well formed: loads
    with pytest.raises(ModelLoadError, match="'w' points its external data outside"):
        onnxcost.analyze(_if_model(tmp_path, "../outside.data"))
    with pytest.raises(ModelLoadError, match="missing"):
        onnxcost.analyze(_if_model(tmp_path, "gone.data"))
    with pytest.raises(ModelLoadError, match="'w' has external-data offset '-1'"):
        onnxcost.analyze(_if_model(tmp_path, "m.data", offset="-1"))


def test_a_subgraph_constant_is_checked(tmp_path: Path) -> None:
    path = _if_model(tmp_path, "m.data")
    (tmp_path / "m.data").write_bytes(b"\0" * 100)  # both tensors need 16,384 bytes
    with pytest.raises(ModelLoadError, match="truncated"):
        onnxcost.analyze(path)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null", "/dev/urandom"])
def test_a_device_is_refused_before_reading(device: str) -> None:
    if not os.path.exists(device):
        pytest.skip(f"no {device} here")
    with pytest.raises(ModelLoadError, match="not a regular file"):
        onnxcost.analyze(device)


def test_a_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "m.onnx"
    os.mkfifo(fifo)

    def unblock() -> None:  # a loader that waits for a writer gets one, then end of file
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        except OSError:
            pass  # no reader waiting: nothing to unblock

    timer = threading.Timer(2.0, unblock)
    timer.start()
    try:
        with pytest.raises(ModelLoadError, match="not a regular file"):
            onnxcost.analyze(fifo)
    finally:
        timer.cancel()


def test_the_cli_says_one_line(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["analyze", str(_save(tmp_path, offset="1e3"))])
    assert r.exit_code == 1
    assert len(r.output.strip().splitlines()) == 1
    assert "offset '1e3'" in r.output
