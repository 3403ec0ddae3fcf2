"""Compare onnxcost's MACs and params on torchvision's exports with torchvision's published
figures, not a test.

Reads the folder ``scripts/export_holdout_torchvision.py`` writes: ``NAME.json`` (the default
weights' ``_ops``, in GFLOPS, which are GMACs: torchvision counts a multiply-accumulate of a
convolution or a matmul as one, as onnxcost's MACs do; ``num_params``; the input they are for)
beside ``NAME_script.onnx`` and ``NAME_dynamo.onnx``. Each file is analysed at that input
(batch 1) and printed as one row: nodes, onnxcost's MACs, the published GFLOPS x 1e9 (printed
to 3 decimals, so equal means within 0.0005 G), their ratio, onnxcost's params, ``num_params``
and their difference, the channels of the model's BatchNorms (each one the TorchScript
exporter folds into the convolution before it takes C params, 2 x C where that convolution
has a bias), and the nodes counted as unsupported or without shapes. Needs onnxcost
only (no torch)::

    python scripts/check_torchvision_ops.py --dir /tmp/holdout_tv [--ops] [--markdown]

``--ops`` adds each file's MACs by op type (where a figure differs, which op's count). Exit
status 1 if a file could not be analysed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import onnxcost


def _row(path: Path, figures: dict[str, Any], ops: bool) -> tuple[list[str], bool]:
    size = figures["input"]
    dims = {"batch": 1} if figures["kind"] != "detection" else {}
    try:
        a = onnxcost.analyze(path, dims=dims)
    except onnxcost.OnnxcostError as e:
        return [path.name, "", f"refused: {e}"], False
    published = round(figures["gflops"] * 1e9) if figures["gflops"] is not None else None
    macs, params = a.totals.macs, a.totals.params
    same = published is not None and abs(macs - published) <= 0.0005e9
    ratio = f"{macs / published:.4f}" if published else "-"
    statuses: dict[str, int] = {}
    for n in a.nodes:
        if n.status in ("unsupported", "unknown_shape"):
            statuses[n.status] = statuses.get(n.status, 0) + 1
    row = [
        path.name,
        f"{len(a.nodes):,}",
        "x".join(map(str, size)),
        f"{macs:,}",
        f"{published:,}" if published is not None else "-",
        ratio + ("" if same else " *"),
        f"{params:,}",
        f"{figures['num_params']:,}",
        f"{params - figures['num_params']:+,}",
        f"{figures.get('bn_channels', 0):,}",
        ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())) or "-",
    ]
    if ops:
        by_op = sorted(a.by_op_type, key=lambda s: -s.macs)
        row.append("; ".join(f"{s.op_type} {s.macs:,}" for s in by_op if s.macs))
    return row, True


HEADER = [
    "file",
    "nodes",
    "input",
    "onnxcost MACs",
    "published x 1e9",
    "ratio",
    "onnxcost params",
    "num_params",
    "params diff",
    "BN channels",
    "not counted",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True, help="the exports' folder")
    parser.add_argument("--ops", action="store_true", help="also MACs by op type")
    parser.add_argument("--markdown", action="store_true", help="a Markdown table")
    args = parser.parse_args()
    figures = sorted(args.dir.glob("*.json"))
    if not figures:
        print(
            f"no NAME.json in {args.dir}: run scripts/export_holdout_torchvision.py",
            file=sys.stderr,
        )
        return 1
    rows, ok = [], True
    for json_path in figures:
        meta = json.loads(json_path.read_text())
        for exporter in ("script", "dynamo"):
            path = args.dir / f"{json_path.stem}_{exporter}.onnx"
            if path.is_file():
                row, fine = _row(path, meta, args.ops)
                rows.append(row)
                ok &= fine
    header = HEADER + (["MACs by op"] if args.ops else [])
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        for row in [header, *rows]:
            print("  ".join(row))
    print("* : differs from the published figure beyond its 3 decimals")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
