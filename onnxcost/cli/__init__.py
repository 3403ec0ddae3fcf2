"""The ``onnxcost`` command line: ``app`` (the typer app and ``main``), one module per command,
``options`` (the flags several commands share), ``render`` (every format of every result) and
``guard`` (errors to exit codes).

The only package that imports typer. Unlike the rest of onnxcost, its modules evaluate
annotations where they are written (no ``from __future__ import annotations``): typer reads
every command's parameter annotations at each start, and as strings it would compile and
evaluate each of them twice, a tenth of ``onnxcost analyze``'s start-up.
"""
