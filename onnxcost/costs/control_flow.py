"""Control flow and constants: If, Loop, Scan, SequenceMap, Constant.

Subgraph ops are costed by the analyzer, which walks their bodies (see analyze.py); the
entries here declare them and state the rule that ``onnxcost ops`` prints.
"""

from __future__ import annotations

from onnxcost.costs._context import OpContext
from onnxcost.costs._registry import Cost, register, register_zero
from onnxcost.load.tensors import SUBGRAPH_OPS as SUBGRAPH_OPS  # re-exported


def _walked_by_analyzer(ctx: OpContext) -> Cost:
    raise AssertionError(f"{ctx.op_type} is costed by walking its subgraphs, not by a formula")


@register("If")
def if_(ctx: OpContext) -> Cost:
    """max(then_branch, else_branch): both branches listed, totals take the larger."""
    return _walked_by_analyzer(ctx)


@register("Loop", meta_inputs=(0, 1))
def loop(ctx: OpContext) -> Cost:
    """body x trip count M when M is static, else one iteration (with a warning)."""
    return _walked_by_analyzer(ctx)


@register("Scan")
def scan(ctx: OpContext) -> Cost:
    """body x iterations (length of the scanned axis of the first scan input)."""
    return _walked_by_analyzer(ctx)


@register("SequenceMap")
def sequence_map(ctx: OpContext) -> Cost:
    """body x sequence length; the length is rarely static, so usually one iteration (with a warning)."""
    return _walked_by_analyzer(ctx)


register_zero("Constant", reason="no arithmetic: its tensor is a weight, counted in params")
