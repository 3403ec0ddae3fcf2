"""Write the full JSON of every analysis and comparison the shipped models allow, for a before/after diff.

Analyses: every .onnx under models/ and tests/data/, and every built-in model (default
parameters). Comparisons: each pair of exports of one architecture in models/, the source
and optimized pairs in tests/data/optimized/, and two pairs of built-in models. A model that
cannot be analysed gets its error line instead. Run it on two checkouts and diff the folders:

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
from onnxcost.analyze import CONVENTIONS
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
    (out / (re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".json")).write_text(text + "\n")


def _path(source: str) -> str:
    return str(ROOT / source) if "/" in source else source


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
    for a, b in COMPARE_PAIRS:
        _write(
            out,
            f"compare_{a}_vs_{b}",
            lambda a=a, b=b: compare([_path(a), _path(b)]).to_json().replace(str(ROOT), "<root>"),
        )
    print(f"wrote {len(list(out.iterdir()))} files to {out}")


if __name__ == "__main__":
    main()
