"""Every operator of the installed onnx's default domain has a formula or an explicit zero entry,
so a new ONNX release that adds an op fails here until someone decides how to count it."""

from __future__ import annotations

import onnx.defs
import pytest

from onnxcost.costs import REGISTRY
from onnxcost.errors import RegistryError

# ImageDecoder decodes a JPEG/PNG byte stream: its cost depends on the compressed data,
# not on shapes, so it is listed as unsupported rather than given a made-up number.
DELIBERATELY_UNSUPPORTED = {"ImageDecoder"}

CONTRIB = [
    "FusedConv", "FusedMatMul", "FusedGemm", "Gelu", "FastGelu", "BiasGelu", "QuickGelu",
    "SkipLayerNormalization", "SkipSimplifiedLayerNormalization", "SimplifiedLayerNormalization",
    "Attention", "MultiHeadAttention", "GroupQueryAttention", "RotaryEmbedding", "MatMulNBits",
    "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QLinearAdd", "QLinearMul", "BiasAdd",
    "NhwcConv", "GatherBlockQuantized",
    # the rest of onnxruntime's transformer-optimizer fusions (issue 27)
    "EmbedLayerNormalization", "BiasSplitGelu", "BiasSoftmax", "BiasDropout", "GemmFastGelu",
    "DecoderMaskedMultiHeadAttention", "DecoderMaskedSelfAttention", "PackedAttention",
    "PackedMultiHeadAttention", "GroupNorm", "SkipGroupNorm", "TransposeMatMul",
]  # fmt: skip


@pytest.mark.parametrize("op", CONTRIB)
def test_contrib_ops_from_the_issue_have_shape_rules(op: str) -> None:
    # onnx has no schema for them: without onnxcost's own rule every node after one is
    # unknown_shape (SimplifiedLayerNormalization is in the default domain, as onnxruntime
    # registers it)
    from onnxcost.shapes.rules import has_rule

    domain = "" if op == "SimplifiedLayerNormalization" else "com.microsoft"
    assert has_rule(domain, op)


def _default_domain_ops() -> list[tuple[str, int]]:
    latest: dict[str, int] = {}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain in ("", "ai.onnx") and not s.deprecated:
            latest[s.name] = max(latest.get(s.name, 0), s.since_version)
    return sorted(latest.items())


@pytest.mark.parametrize(("op", "since"), _default_domain_ops())
def test_every_default_domain_op_is_decided(op: str, since: int) -> None:
    if op in DELIBERATELY_UNSUPPORTED:
        assert REGISTRY.lookup("", op, since) is None
        return
    assert REGISTRY.lookup("", op, since) is not None, (
        f"{op} (opset {since}) has no formula or zero entry"
    )


@pytest.mark.parametrize("op", CONTRIB)
def test_contrib_ops_from_the_issue_have_formulas(op: str) -> None:
    assert REGISTRY.lookup("com.microsoft", op, 1) is not None


def test_every_formula_states_itself() -> None:
    missing = [f"{s.domain}::{s.op_type}" for s in REGISTRY.specs() if not s.summary]
    assert not missing


def test_duplicate_registration_is_an_error() -> None:
    from onnxcost.costs._registry import register

    with pytest.raises(RegistryError, match="already registered"):

        @register("Conv")
        def again(ctx: object) -> object:  # pragma: no cover - never called
            raise AssertionError
