"""Write every output the shipped models allow, in every format, for a before/after diff.

Analyses: every .onnx under models/ and tests/data/, and every built-in model (default
parameters): the JSON of the API in each convention, and the CLI's output in every format
(table at 80 and 200 columns, --tree, markdown, csv, json, html, netron), plus --symbolic for
the models of models/ and the built-ins. Comparisons: each pair of exports of one
architecture in models/, the source and optimized pairs in tests/data/optimized/, and two pairs
of built-in models, as JSON and in the CLI's formats. `llm` on the built-in KV decoders and
the KV exports of models/; `ops` and `zoo list` (table, markdown, csv). A model that cannot be
analysed gets its error line instead. Measured figures (bench) are not written: they are not
reproducible.
Run it on two checkouts and diff the folders:

    python scripts/snapshot_outputs.py OUT_BEFORE
    python scripts/snapshot_outputs.py OUT_AFTER
    diff -r OUT_BEFORE OUT_AFTER
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path

import onnxcost
from onnxcost import zoo
from onnxcost.analysis.walk import CONVENTIONS
from onnxcost.compare import compare
from onnxcost.errors import OnnxcostError

ROOT = Path(__file__).resolve().parent.parent

COMPARE_PAIRS: tuple[tuple[str, str], ...] = (
    ("models/mlp_keras.onnx", "models/mlp_torch_dynamo.onnx"),
    ("models/mlp_torch_script.onnx", "models/mlp_torch_dynamo.onnx"),
    ("models/resnet20_keras.onnx", "models/resnet20_torch_dynamo.onnx"),
    ("models/encoder_keras.onnx", "models/encoder_torch_dynamo.onnx"),
    ("tests/data/optimized/gpt2_tiny_source.onnx", "tests/data/optimized/gpt2_tiny_optimized.onnx"),
    ("tests/data/optimized/llama_mlp_source.onnx", "tests/data/optimized/llama_mlp_optimized.onnx"),
    ("tests/data/optimized/mlp_nbits4.onnx", "tests/data/optimized/mlp_nbits8.onnx"),
    ("tests/data/optimized/cnn_qdq.onnx", "tests/data/optimized/cnn_qoperator.onnx"),
    ("resnet18", "resnet50"),
    ("mlp", "resnet20_cifar"),
)


def _write(out: Path, name: str, make: Callable[[], str]) -> None:
    try:
        text = make()
    except OnnxcostError as e:
        text = f"error: {type(e).__name__}: {e}"
    (out / (re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".txt")).write_text(text + "\n")


def _path(source: str) -> str:
    return str(ROOT / source) if "/" in source else source


def _cli(args: list[str], columns: int = 200) -> str:
    """The CLI's output (stdout and stderr) and exit code for ``args``, at ``columns``."""
    from typer.testing import CliRunner

    from onnxcost.cli.app import app as cli_app

    app = getattr(cli_app, "app", cli_app)
    runner = CliRunner()
    result = runner.invoke(app, args, env={"COLUMNS": str(columns), "NO_COLOR": "1"})
    return f"exit {result.exit_code}\n{result.output}".replace(str(ROOT), "<root>")


def _cli_file(args: list[str], out: Path, suffix: str) -> str:
    """Run the CLI with ``-o`` to a scratch file and return what it wrote."""
    target = out / f"_scratch{suffix}"
    target.unlink(missing_ok=True)
    head = _cli([*args, "-o", str(target)])
    body = target.read_text(encoding="utf-8") if target.exists() else ""
    target.unlink(missing_ok=True)
    return (head + body).replace(str(out), "<out>").replace(str(ROOT), "<root>")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    args = ap.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    files = sorted((ROOT / "models").rglob("*.onnx")) + sorted(
        (ROOT / "tests/data").rglob("*.onnx")
    )
    sources = [str(p.relative_to(ROOT)) for p in files] + zoo.names()
    for source in sources:
        for convention in CONVENTIONS:
            _write(
                out,
                f"analyze_{convention}_{source}",
                lambda s=source, c=convention: (
                    onnxcost.analyze(_path(s), convention=c).to_json().replace(str(ROOT), "<root>")
                ),
            )
        path = _path(source)
        for fmt in ("json", "csv", "markdown"):
            _write(
                out,
                f"cli_analyze_{fmt}_{source}",
                lambda p=path, f=fmt: _cli(["analyze", p, "-f", f]),
            )
        for cols in (80, 200):
            _write(
                out,
                f"cli_analyze_table{cols}_{source}",
                lambda p=path, c=cols: _cli(["analyze", p, "--top", "0"], columns=c),
            )
        _write(out, f"cli_analyze_tree_{source}", lambda p=path: _cli(["analyze", p, "--tree"]))
        _write(
            out,
            f"cli_analyze_html_{source}",
            lambda p=path: _cli_file(["analyze", p, "-f", "html"], out, ".html"),
        )
        _write(
            out,
            f"cli_analyze_netron_{source}",
            lambda p=path: _cli_file(["analyze", p, "-f", "netron"], out, ".json"),
        )
        if source.startswith("models/") or "/" not in source:
            for fmt in ("table", "json"):
                _write(
                    out,
                    f"cli_symbolic_{fmt}_{source}",
                    lambda p=path, f=fmt: _cli(["analyze", p, "--symbolic", "-f", f]),
                )
    for a, b in COMPARE_PAIRS:
        _write(
            out,
            f"compare_{a}_vs_{b}",
            lambda a=a, b=b: compare([_path(a), _path(b)]).to_json().replace(str(ROOT), "<root>"),
        )
        for fmt in ("table", "markdown", "json"):
            _write(
                out,
                f"cli_compare_{fmt}_{a}_vs_{b}",
                lambda a=a, b=b, f=fmt: _cli(["compare", _path(a), _path(b), "-f", f]),
            )
        _write(
            out,
            f"cli_compare_html_{a}_vs_{b}",
            lambda a=a, b=b: _cli_file(["compare", _path(a), _path(b), "-f", "html"], out, ".html"),
        )
    llm_cases = [
        ["gpt2", "-p", "kv_cache=true", "--prompt", "128", "--generate", "32"],
        ["llama", "-p", "kv_cache=true", "--prompt", "512", "--generate", "64"],
        [str(ROOT / "models/decoder_kv_torch_dynamo.onnx"), "--prompt", "16", "--generate", "8"],
        [str(ROOT / "models/decoder_kv_torch_script.onnx"), "--prompt", "16", "--generate", "8"],
    ]
    for case in llm_cases:
        name = Path(case[0]).name
        for fmt in ("table", "json", "markdown"):
            _write(out, f"cli_llm_{fmt}_{name}", lambda c=case, f=fmt: _cli(["llm", *c, "-f", f]))
        _write(
            out,
            f"cli_llm_html_{name}",
            lambda c=case: _cli_file(["llm", *c, "-f", "html"], out, ".html"),
        )
    _write(out, "cli_ops", lambda: _cli(["ops"]))
    _write(out, "cli_zoo_list", lambda: _cli(["zoo", "list"]))
    for fmt in ("markdown", "csv"):
        _write(out, f"cli_ops_{fmt}", lambda f=fmt: _cli(["ops", "-f", f]))
        _write(out, f"cli_zoo_list_{fmt}", lambda f=fmt: _cli(["zoo", "list", "-f", f]))
    print(f"wrote {len(list(out.iterdir()))} files to {out}")


if __name__ == "__main__":
    main()
