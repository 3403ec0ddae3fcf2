"""``onnxcost calibrate``: measure this machine once and write a device file.

No ``from __future__ import annotations`` in cli/: typer evaluates the annotations at each
start (see onnxcost/cli/__init__.py); names imported for type checking only are quoted.
"""

import enum
from pathlib import Path
from typing import Annotated

import typer

from onnxcost.cli.guard import run_guarded
from onnxcost.cli.options import DebugOpt, ForceOpt, checked_output, provider_option
from onnxcost.cli.progress import progress_callback


class CalibrateDtype(str, enum.Enum):
    fp32 = "fp32"
    fp16 = "fp16"


def calibrate(
    output: Annotated[
        Path,
        typer.Option("--output", "-o", help="The device file to write (JSON).", show_default=False),
    ],
    provider: Annotated[str, provider_option("Execution provider: cpu, cuda, ...")] = "cpu",
    threads: Annotated[
        int | None,
        typer.Option(help="Intra-op threads (default: onnxruntime's).", min=1, show_default=False),
    ] = None,
    dtype: Annotated[
        CalibrateDtype, typer.Option("--dtype", help="Element type of the measured ops.")
    ] = CalibrateDtype.fp32,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
    force: ForceOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Measure this machine once (per op class: efficiency against size; per-node overhead,
    bandwidth, peak compute) and write a device file for `onnxcost predict --device`."""

    def go() -> None:
        from onnxcost.bench.providers import resolve_provider
        from onnxcost.bench.session import SessionConfig
        from onnxcost.predict.calibrate import calibrate_device

        out = checked_output(output, [], force)
        assert out is not None
        config = SessionConfig(resolve_provider(provider), intra_op_threads=threads)
        callback, close = progress_callback(quiet)
        try:
            device = calibrate_device(
                config,
                dtype="float32" if dtype is CalibrateDtype.fp32 else "float16",
                progress=callback,
            )
        finally:
            close()
        from onnxcost.load.outputs import write_atomic

        write_atomic(out, device.to_json())
        typer.echo(
            f"calibrated {device.name} in {device.calibration_s:.1f} s: "
            f"{device.ceilings.peak_flops_per_s / 1e9:,.1f} GFLOP/s, "
            f"{device.ceilings.bandwidth_bytes_per_s / 1e9:,.1f} GB/s, "
            f"{device.node_overhead_us:.2f} us per node; wrote {out}",
            err=True,
        )

    run_guarded(debug, go)
