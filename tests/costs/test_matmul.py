"""MatMul, Gemm, Einsum: MACs and FLOPs by hand."""

from __future__ import annotations

import pytest
from onnxcost_testing import analyze_text, only_node


def test_gemm_worked_example_from_the_issue() -> None:
    # X[25,16] . W[16,9] + b: MACs = 25 x 9 x 16 = 3,600; torch FLOPs = 2 x 3,600 = 7,200
    # onnxcost FLOPs add the bias: 7,200 + 25 x 9 = 7,425; params = 16 x 9 + 9 = 153
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[25,16] x) => (float[25,9] y) <float[16,9] w = {1.0}, float[9] b = {1.0}> {
  y = Gemm (x, w, b)
}"""
    n = only_node(text)
    assert (n.macs, n.flops, n.params) == (3_600, 7_425, 153)
    assert only_node(text, convention="torch").flops == 7_200
    assert only_node(text, convention="fvcore").flops == 3_600
    assert analyze_text(text).totals.params == 153


@pytest.mark.parametrize(
    ("attrs", "a", "b", "macs", "extra"),
    [
        # transA: A is [K=16, M=25] -> MACs = 25 x 9 x 16 = 3,600; no C, alpha 1 -> no extras
        ("transA=1", "16,25", "16,9", 3_600, 0),
        # transB: B is [N=9, K=16]; alpha 0.5 scales every output: +225
        ("transB=1, alpha=0.5", "25,16", "9,16", 3_600, 225),
    ],
)
def test_gemm_transposes_and_alpha(attrs: str, a: str, b: str, macs: int, extra: int) -> None:
    text = f"""
<ir_version: 8, opset_import: ["" : 17]>
g (float[{a}] x, float[{b}] w) => (float[25,9] y) {{
  y = Gemm <{attrs}> (x, w)
}}"""
    n = only_node(text)
    assert (n.macs, n.flops) == (macs, 2 * macs + extra)


@pytest.mark.parametrize(
    ("a", "b", "y", "macs"),
    [
        ("4,8", "8,5", "4,5", 160),  # 20 outputs x K 8
        ("8", "8,5", "5", 40),  # 1-D A: 5 outputs x 8
        ("4,8", "8", "4", 32),  # 1-D B: 4 outputs x 8
        ("2,1,4,8", "3,8,5", "2,3,4,5", 960),  # broadcast: 120 outputs x 8
    ],
)
def test_matmul_shapes(a: str, b: str, y: str, macs: int) -> None:
    text = f"""
<ir_version: 8, opset_import: ["" : 17]>
g (float[{a}] a, float[{b}] b) => (float[{y}] y) {{
  y = MatMul (a, b)
}}"""
    n = only_node(text)
    assert (n.macs, n.flops) == (macs, 2 * macs)


@pytest.mark.parametrize(
    ("eq", "shapes", "macs", "flops"),
    [
        ("bij,bjk->bik", ["2,3,4", "2,4,5"], 120, 240),  # b i j k = 2x3x4x5
        ("...ij,...jk->...ik", ["2,3,4", "2,4,5"], 120, 240),  # same, ellipsis
        ("i,i->", ["7", "7"], 7, 14),  # dot product
        ("ij->i", ["3,4"], 0, 9),  # row sums: 12 elements into 3 = 9 adds
        ("bij,bjk->bik", ["1,3,4", "2,4,5"], 120, 240),  # b broadcast: 1 yields to 2
    ],
)
def test_einsum(eq: str, shapes: list[str], macs: int, flops: int) -> None:
    names = [f"x{i}" for i in range(len(shapes))]
    decl = ", ".join(f"float[{s}] {n}" for s, n in zip(shapes, names, strict=True))
    text = f"""
<ir_version: 8, opset_import: ["" : 17]>
g ({decl}) => (float y) {{
  y = Einsum <equation="{eq}"> ({", ".join(names)})
}}"""
    n = only_node(text)
    assert (n.macs, n.flops) == (macs, flops)


def test_einsum_formula_over_a_symbolic_batch() -> None:
    # MaxViT's attention, small: "bij,bjk->bik" over [batch, 3, 4] and [batch, 4, 5] is
    # 3 x 4 x 5 = 60 MACs a batch row: 60·batch, which was 60·max(batch, 1, batch) (each
    # letter's size started at 1 and took the max of every operand's dim), 60 at batch 0
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[batch,3,4] a, float[batch,4,5] b) => (float[batch,3,5] y) {
  y = Einsum <equation="bij,bjk->bik"> (a, b)
}"""
    a = analyze_text(text, symbolic=True)
    assert str(a.formulas["macs"]) == "60*batch"
    # an empty batch does nothing: b = 0, where max(1, 0) took 1 and counted 60
    assert analyze_text(text, dims={"batch": 0}).totals.macs == 0
    assert analyze_text(text, dims={"batch": 2}).totals.macs == 120  # 2 x 60
