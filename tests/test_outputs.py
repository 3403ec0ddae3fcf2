"""--output and every other file onnxcost writes: never over an input, never half a file."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from onnxcost import zoo
from onnxcost.cli.app import app
from onnxcost.errors import OutputError
from onnxcost.load.outputs import check_output, looks_like_model, model_files, write_atomic

MODELS = Path(__file__).resolve().parent.parent / "models"
runner = CliRunner()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A real export copied where the test may try to destroy it."""
    path = tmp_path / "resnet20.onnx"
    shutil.copy(MODELS / "resnet20_keras.onnx", path)
    return path


@pytest.mark.parametrize("fmt", ["table", "json", "csv", "markdown"])
def test_analyze_refuses_to_write_over_its_input(model: Path, fmt: str) -> None:
    before = _digest(model)
    r = runner.invoke(app, ["analyze", str(model), "-f", fmt, "-o", str(model)])
    assert r.exit_code == 1
    assert "is the input model; refusing to overwrite it" in r.output
    assert "Traceback" not in r.output
    assert _digest(model) == before


def test_refused_through_symbolic_and_hard_links(model: Path, tmp_path: Path) -> None:
    before = _digest(model)
    soft = tmp_path / "report.txt"
    soft.symlink_to(model)
    hard = tmp_path / "hard.txt"
    os.link(model, hard)
    for target in (soft, hard):
        r = runner.invoke(app, ["analyze", str(model), "-o", str(target), "--force"])
        assert r.exit_code == 1, r.output
        assert "is the input model" in r.output
    assert _digest(model) == before


def test_compare_refuses_either_input(model: Path, tmp_path: Path) -> None:
    other = tmp_path / "torch.onnx"
    shutil.copy(MODELS / "resnet20_torch_dynamo.onnx", other)
    before = _digest(other)
    r = runner.invoke(app, ["compare", str(model), str(other), "-f", "json", "-o", str(other)])
    assert r.exit_code == 1
    assert "is the input model" in r.output
    assert _digest(other) == before


def test_bench_refuses_output_and_trace_before_any_work(model: Path) -> None:
    before = _digest(model)
    for flags in (["-o", str(model)], ["--trace", str(model)]):
        r = runner.invoke(app, ["bench", str(model), "--runs", "1", *flags])
        assert r.exit_code == 1, r.output
        assert "is the input model" in r.output
    assert _digest(model) == before


def test_llm_refuses_to_write_over_its_input(tmp_path: Path) -> None:
    decoder = tmp_path / "decoder.onnx"
    shutil.copy(MODELS / "decoder_kv_torch_dynamo.onnx", decoder)
    before = _digest(decoder)
    r = runner.invoke(
        app, ["llm", str(decoder), "--prompt", "8", "--generate", "4", "-o", str(decoder)]
    )
    assert r.exit_code == 1, r.output
    assert "is the input model" in r.output
    assert _digest(decoder) == before


def test_external_data_of_the_input_is_protected(tmp_path: Path) -> None:
    path = zoo.save("mlp", tmp_path / "m.onnx", weights=False)
    data = tmp_path / "m.weights"
    assert model_files(path) == [path, data]
    size = data.stat().st_size
    r = runner.invoke(app, ["analyze", str(path), "-o", str(data), "--force"])
    assert r.exit_code == 1
    assert "is external data of the input model" in r.output
    assert data.stat().st_size == size


def test_another_model_is_never_replaced_by_a_report(model: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.bin"  # a model whatever its name
    shutil.copy(MODELS / "mlp_keras.onnx", other)
    before = _digest(other)
    for flags in ([], ["--force"]):
        r = runner.invoke(app, ["analyze", str(model), "-o", str(other), *flags])
        assert r.exit_code == 1
        assert "is an existing ONNX model; a report never replaces a model" in r.output
    assert _digest(other) == before


def test_a_non_model_named_onnx_needs_force(model: Path, tmp_path: Path) -> None:
    target = tmp_path / "notes.onnx"
    target.write_text("not a model\n")
    r = runner.invoke(app, ["analyze", str(model), "-o", str(target)])
    assert r.exit_code == 1
    assert "named like a model; pass --force" in r.output
    assert target.read_text() == "not a model\n"
    r = runner.invoke(app, ["analyze", str(model), "-f", "json", "-o", str(target), "--force"])
    assert r.exit_code == 0, r.output
    assert target.read_text().startswith("{")


def test_last_runs_report_is_replaced_keeping_its_mode(model: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text("old\n")
    report.chmod(0o640)
    r = runner.invoke(app, ["analyze", str(model), "-f", "json", "-o", str(report)])
    assert r.exit_code == 0, r.output
    assert '"schema": "onnxcost.analysis/1"' in report.read_text()
    assert report.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_link_to_a_report_is_written_through(model: Path, tmp_path: Path) -> None:
    real = tmp_path / "real.md"
    real.write_text("old\n")
    link = tmp_path / "link.md"
    link.symlink_to(real)
    r = runner.invoke(app, ["analyze", str(model), "-f", "markdown", "-o", str(link)])
    assert r.exit_code == 0, r.output
    assert link.is_symlink()
    assert real.read_text().startswith("#")


def test_a_failed_write_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = tmp_path / "report.json"
    report.write_text("old\n")

    def disk_full(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(
        OutputError, match=r"No space left on device.*old file, if any, is unchanged"
    ):
        write_atomic(report, "new\n")
    assert report.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_an_interrupted_render_leaves_no_file(tmp_path: Path) -> None:
    from onnxcost.load.outputs import replacing

    target = tmp_path / "new.txt"

    def render() -> None:
        with replacing(target) as tmp:
            tmp.write_text("half")
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        render()
    assert list(tmp_path.iterdir()) == []


def test_unusable_paths_are_one_line(model: Path, tmp_path: Path) -> None:
    for target, message in (
        (tmp_path, "is a directory; name a file inside it"),
        (tmp_path / "missing" / "r.txt", "does not exist; create it first"),
    ):
        r = runner.invoke(app, ["analyze", str(model), "-o", str(target)])
        assert r.exit_code == 1
        assert message in r.output
        assert len(r.output.strip().splitlines()) == 1


def test_zoo_save_replaces_a_model_only_with_force(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    shutil.copy(MODELS / "mlp_keras.onnx", path)
    before = _digest(path)
    r = runner.invoke(app, ["zoo", "save", "mlp", str(path)])
    assert r.exit_code == 1
    assert "existing ONNX model; pass --force to replace it" in r.output
    assert _digest(path) == before
    r = runner.invoke(app, ["zoo", "save", "mlp", str(path), "--force"])
    assert r.exit_code == 0, r.output
    assert _digest(path) != before
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]


def test_zoo_save_keeps_a_foreign_weights_file(tmp_path: Path) -> None:
    (tmp_path / "m.weights").write_bytes(b"someone else's")
    with pytest.raises(OutputError, match=r"weights file .* already exists; pass --force"):
        zoo.save("mlp", tmp_path / "m.onnx", weights=False)
    assert (tmp_path / "m.weights").read_bytes() == b"someone else's"
    assert not (tmp_path / "m.onnx").exists()


def test_every_shipped_model_is_recognised_as_a_model() -> None:
    shipped = sorted(MODELS.glob("*.onnx"))
    assert shipped
    assert all(looks_like_model(p) for p in shipped)
    assert not looks_like_model(MODELS / "README.md")


def test_check_output_accepts_a_new_file_beside_the_model(model: Path) -> None:
    new = model.with_name("report.txt")
    assert check_output(new, inputs=[str(model)]) == new
    assert check_output(new, inputs=["resnet18"]) == new  # a built-in name has no files


def test_a_fifo_or_device_is_refused_without_blocking(model: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for target in (fifo, Path("/dev/null")):
        r = runner.invoke(app, ["analyze", str(model), "-o", str(target), "--force"])
        assert r.exit_code == 1, r.output
        assert "is not a regular file" in r.output
    assert Path("/dev/null").is_char_device()
