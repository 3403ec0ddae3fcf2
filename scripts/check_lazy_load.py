"""Check that parsing a model without its large inline weights changes no analysis (issue 16).

For every .onnx under models/ and tests/data/, and every built-in model saved to a file with
its (random) weights inline, writes the full JSON of ``onnxcost.analyze`` (every convention)
once with the model parsed in full and once parsed lazily (large payloads left in the file,
``onnxcost.load.wire``), and reports any difference. llama is saved with 2 layers, hidden 1024
and intermediate 2816 (its default, 7B, is too large to hold inline). Run it once after a
change to ``onnxcost.load.wire`` or ``onnxcost.load.model``:

    python scripts/check_lazy_load.py [--out DIR] [--skip-builtins]

Exit status 1 if any analysis differs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import onnxcost
from onnxcost import zoo
from onnxcost.analysis.walk import CONVENTIONS
from onnxcost.errors import OnnxcostError
from onnxcost.load import model

ROOT = Path(__file__).resolve().parent.parent
SMALLER = {"llama": {"layers": 2, "hidden": 1024, "intermediate": 2816}}


def _analyses(path: Path, lazy: bool) -> tuple[list[str], int]:
    """Every convention's analysis JSON (or error line), and how many tensors were left in the file."""
    saved = model.LAZY_MIN_BYTES
    model.LAZY_MIN_BYTES = 0 if lazy else 1 << 62
    try:
        loaded = model.load_model(path)
        virtual = sum(
            1
            for t in loaded.proto.graph.initializer
            for e in t.external_data
            if e.value == model.VIRTUAL_LOCATION_PREFIX + "inline"
        )
        out = []
        for convention in CONVENTIONS:
            try:
                out.append(onnxcost.analyze(path, convention=convention).to_json())
            except OnnxcostError as e:
                out.append(f"error: {type(e).__name__}: {e}")
        return out, virtual
    finally:
        model.LAZY_MIN_BYTES = saved


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="where to save built-in models")
    ap.add_argument("--skip-builtins", action="store_true")
    args = ap.parse_args()
    paths = sorted((ROOT / "models").rglob("*.onnx")) + sorted(
        (ROOT / "tests/data").rglob("*.onnx")
    )
    if not args.skip_builtins:
        out = args.out or Path(tempfile.mkdtemp(prefix="onnxcost-lazy-"))
        for name in zoo.names():
            path = out / f"{name}.onnx"
            if not path.exists():
                zoo.save(name, path, params=SMALLER.get(name))
            paths.append(path)
    differ = 0
    for path in paths:
        full, _ = _analyses(path, lazy=False)
        lazy, virtual = _analyses(path, lazy=True)
        same = full == lazy
        differ += not same
        size = path.stat().st_size
        print(
            f"{'same' if same else 'DIFFERENT':9} {size / 1e6:9.1f} MB  {virtual:4} tensors left "
            f"in the file  {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}"
        )
    print(f"{len(paths)} models, {len(CONVENTIONS)} conventions each: {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
