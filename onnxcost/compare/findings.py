"""Findings: rules that read two compared models (and their alignment) and say in words what
differs, each returning ``Finding(kind, text)``; and the only-in table of non-compute ops."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Literal

from onnxcost.analysis.records import ShapeOut
from onnxcost.compare.alignment import fmt_value
from onnxcost.compare.layers import FAMILY_OF
from onnxcost.compare.records import (
    AlignedPair,
    Alignment,
    ComparedModel,
    ComputeNode,
    Finding,
    OnlyIn,
    percent_change,
)
from onnxcost.units import shape_text

# Fused ops that another exporter may write as primitive ops: the primitives that must be
# present for the finding (one of each group) and the primitive op types it may list.
_DECOMPOSED: tuple[tuple[str, frozenset[str], tuple[frozenset[str], ...], frozenset[str]], ...] = (
    (
        "LayerNormalization",
        frozenset({"LayerNormalization", "SimplifiedLayerNormalization",
                   "SkipLayerNormalization", "SkipSimplifiedLayerNormalization"}),
        (frozenset({"ReduceMean", "GlobalAveragePool"}), frozenset({"Sqrt", "Rsqrt"})),
        frozenset({"ReduceMean", "GlobalAveragePool", "Sub", "Pow", "Mul", "Sqrt", "Div",
                   "Reciprocal", "Add", "Neg", "ReduceSumSquare"}),
    ),
    (
        "Gelu",
        frozenset({"Gelu", "FastGelu", "BiasGelu", "QuickGelu"}),
        (frozenset({"Erf", "Tanh", "Sigmoid"}),),
        frozenset({"Erf", "Tanh", "Sigmoid", "Mul", "Add", "Div", "Pow"}),
    ),
    (
        "Softmax",
        frozenset({"Softmax", "LogSoftmax"}),
        (frozenset({"Exp"}), frozenset({"ReduceSum"})),
        frozenset({"Exp", "ReduceSum", "ReduceMax", "Sub", "Div", "Log"}),
    ),
)  # fmt: skip


# Non-compute ops whose presence on one side only usually has a known cause.
_ROLES: Mapping[str, str] = {
    "Transpose": "layout",
    "BatchNormalization": "unfused BatchNorm",
    "Pad": "explicit padding",
    "Cast": "type cast",
    "Identity": "identity",
    "Reshape": "reshape",
    "Flatten": "reshape",
    "Squeeze": "reshape",
    "Unsqueeze": "reshape",
}


def only_in(base: ComparedModel, cand: ComparedModel) -> list[OnlyIn]:
    out = []
    ca, cb = base.facts.op_counts, cand.facts.op_counts
    for key in sorted(set(ca) | set(cb)):
        op = key.split("::")[-1]
        if op in FAMILY_OF:
            continue
        na, nb = ca.get(key, 0), cb.get(key, 0)
        if na == nb:
            continue
        more, count, other = (base, na, nb) if na > nb else (cand, nb, na)
        domain = key.split("::")[0] if "::" in key else ""
        out.append(
            OnlyIn(
                baseline=base.label,
                candidate=cand.label,
                model=more.label,
                op_type=op,
                domain=domain,
                count=count,
                other_count=other,
                role=_role(op, more, base if more is cand else cand),
                nodes=more.facts.nodes_by_op.get(key, ()) if other == 0 else (),
            )
        )
    return out


def _role(op: str, more: ComparedModel, fewer: ComparedModel) -> str:
    if op == "Add":

        def bias_adds(m: ComparedModel) -> int:
            return sum(1 for n in m.compute if n.bias == "add")

        if bias_adds(more) > bias_adds(fewer):
            return "bias Add after a MatMul/Conv"
    return _ROLES.get(op, "")


def _layout(perm: tuple[int, ...], at: Literal["input", "output"]) -> str:
    if perm == (0, 3, 1, 2):
        return "NHWC layout" if at == "input" else "NCHW to NHWC"
    if perm == (0, 2, 3, 1):
        return "NCHW to NHWC" if at == "input" else "NHWC layout"
    if perm == (0, 4, 1, 2, 3):
        return "NDHWC layout" if at == "input" else "NCDHW to NDHWC"
    if len(perm) >= 2 and perm[:2] == (1, 0) and list(perm[2:]) == list(range(2, len(perm))):
        return "swaps the first two axes: sequence-first"
    return "a layout change"


def io_text(m: ComparedModel) -> str:
    return ", ".join(f"{t.name}[{_shape_commas(t.shape)}] {t.dtype}" for t in m.analysis.inputs)


def _shape_commas(s: ShapeOut) -> str:
    return "?" if s is None else ",".join("?" if d is None else str(d) for d in s)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _transpose_findings(base: ComparedModel, cand: ComparedModel) -> list[Finding]:
    out = []
    for at in ("input", "output"):
        pa = base.facts.input_transposes if at == "input" else base.facts.output_transposes
        pb = cand.facts.input_transposes if at == "input" else cand.facts.output_transposes
        if len(pa) == len(pb):
            continue
        for m, perms, other in ((base, pa, pb), (cand, pb, pa)):
            if len(perms) > len(other):
                kinds = sorted(
                    {
                        f"perm {fmt_value(p)}: {_layout(p, at)}" if p else "reversed axes"
                        for _n, p in perms
                    }
                )
                rest = f"{len(other)}" if other else "none"
                out.append(
                    Finding(
                        "transpose",
                        f"{m.label} has {_plural(len(perms), 'Transpose')} at the {at} "
                        f"({'; '.join(kinds)}), {_other(m, base, cand)} {rest}",
                    )
                )
    inner_a = base.facts.op_counts.get("Transpose", 0) - len(
        {n for n, _ in base.facts.input_transposes + base.facts.output_transposes}
    )
    inner_b = cand.facts.op_counts.get("Transpose", 0) - len(
        {n for n, _ in cand.facts.input_transposes + cand.facts.output_transposes}
    )
    if inner_a != inner_b:
        out.append(
            Finding(
                "transpose",
                f"inside the graph, {base.label} has {_plural(inner_a, 'Transpose')}, "
                f"{cand.label} {inner_b}",
            )
        )
    return out


def _other(m: ComparedModel, base: ComparedModel, cand: ComparedModel) -> str:
    return cand.label if m is base else base.label


def _count_finding(base: ComparedModel, cand: ComparedModel, op: str, what: str) -> list[Finding]:
    na, nb = base.facts.op_counts.get(op, 0), cand.facts.op_counts.get(op, 0)
    if na == nb:
        return []
    more, n, other, k = (base, na, cand, nb) if na > nb else (cand, nb, base, na)
    rest = f"{other.label} has {k}" if k else f"{other.label} has none"
    return [
        Finding(
            "unfolded", f"{more.label} keeps {n} {op} node{'' if n == 1 else 's'} ({what}); {rest}"
        )
    ]


def _pad_findings(al: Alignment) -> list[Finding]:
    groups: Counter[tuple[str, str, str, str]] = Counter()
    for p in al.pairs:
        if p.kind != "match":
            continue
        x, y = p.a[0], p.b[0]
        if x.family not in ("conv", "conv_transpose") or x.op_type != y.op_type:
            continue
        pads_a = x.attrs.get("pads", x.attrs.get("auto_pad"))
        pads_b = y.attrs.get("pads", y.attrs.get("auto_pad"))
        if pads_a == pads_b:
            continue
        strides = x.attrs.get("strides")
        if isinstance(strides, tuple) and strides and len(set(strides)) == 1:
            stride = f"stride-{strides[0]}"
        else:
            stride = f"strides {fmt_value(strides)}"
        groups[(x.op_type, stride, fmt_value(pads_a), fmt_value(pads_b))] += 1
    return [
        Finding(
            "pads",
            f"{al.baseline} pads {n} {stride} {op}{'' if n == 1 else 's'} {pa}, {al.candidate} {pb}",
        )
        for (op, stride, pa, pb), n in sorted(groups.items())
    ]


def _attr_findings(al: Alignment) -> list[Finding]:
    groups: Counter[tuple[str, str, str, str]] = Counter()
    for p in al.pairs:
        if p.kind != "match":
            continue
        x, y = p.a[0], p.b[0]
        if x.op_type != y.op_type or x.domain != y.domain:
            continue
        for key in sorted(set(x.attrs) | set(y.attrs)):
            if key in ("pads", "auto_pad") and x.family in ("conv", "conv_transpose"):
                continue  # _pad_findings
            va, vb = x.attrs.get(key), y.attrs.get(key)
            if va != vb:
                groups[(x.op_type, key, fmt_value(va), fmt_value(vb))] += 1
    return [
        Finding(
            "attributes",
            f"{_plural(n, f'aligned {op} pair')} differ in {key}: {al.baseline} {va}, {al.candidate} {vb}",
        )
        for (op, key, va, vb), n in sorted(groups.items())
    ]


def _weight_layout(n: ComputeNode) -> str:
    if n.weight_shape is None or len(n.weight_shape) != 2:
        return ""
    if n.op_type in ("Gemm", "FusedGemm"):
        return "weights [out, in], transB=1" if n.attrs.get("transB") == 1 else "weights [in, out]"
    if n.op_type in ("MatMul", "FusedMatMul", "QLinearMatMul", "MatMulInteger"):
        return "weights [in, out]"
    return ""


def _op_findings(al: Alignment) -> list[Finding]:
    groups: dict[tuple[str, str], list[AlignedPair]] = {}
    for p in al.pairs:
        if p.kind == "match" and p.a[0].op_label != p.b[0].op_label:
            groups.setdefault((p.a[0].op_label, p.b[0].op_label), []).append(p)
    out = []
    for (la, lb), pairs in sorted(groups.items()):
        family = pairs[0].a[0].family
        noun = "dense layer" if family == "dense" else f"{family} layer"
        wa = {_weight_layout(p.a[0]) for p in pairs}
        wb = {_weight_layout(p.b[0]) for p in pairs}
        ta = f" ({wa.pop()})" if len(wa) == 1 and "" not in wa else ""
        tb = f" ({wb.pop()})" if len(wb) == 1 and "" not in wb else ""
        out.append(
            Finding(
                "op",
                f"{al.baseline} uses {la}{ta} for {_plural(len(pairs), noun)}, {al.candidate} {lb}{tb}",
            )
        )
    return out


def _merge_findings(al: Alignment) -> list[Finding]:
    out = []
    for p in al.pairs:
        if p.kind != "merge":
            continue
        (one_label, one), (many_label, many) = (
            ((al.baseline, p.a[0]), (al.candidate, p.b))
            if len(p.a) == 1
            else ((al.candidate, p.b[0]), (al.baseline, p.a))
        )
        ops = sorted({n.op_type for n in many})
        out.append(
            Finding(
                "merge",
                f"{one_label} does in one {one.op_type} ({one.name}, {one.macs:,} MACs"
                f"{', weight ' + shape_text(one.weight_shape) if one.weight_shape else ''}) what "
                f"{many_label} does in {len(many)} {'/'.join(ops)} nodes "
                f"({', '.join(n.name for n in many)})",
            )
        )
    return out


def _unmatched_findings(al: Alignment) -> list[Finding]:
    out = []
    for side, kind in ((al.baseline, "only_a"), (al.candidate, "only_b")):
        nodes = [n for p in al.pairs if p.kind == kind for n in (*p.a, *p.b)]
        if not nodes:
            continue
        other = al.candidate if side == al.baseline else al.baseline
        shown = ", ".join(f"{n.name} ({n.op_type}, {n.macs:,} MACs)" for n in nodes[:5])
        more = f" and {len(nodes) - 5} more" if len(nodes) > 5 else ""
        out.append(
            Finding(
                "unmatched",
                f"{side} has {_plural(len(nodes), 'compute node')} with no counterpart in {other}: "
                f"{shown}{more}",
            )
        )
    return out


def _decomposed_findings(
    base: ComparedModel, cand: ComparedModel
) -> tuple[list[Finding], set[str]]:
    out, explained = [], set()
    for name, fused, required, primitives in _DECOMPOSED:
        for whole, split in ((base, cand), (cand, base)):
            n_fused = sum(whole.facts.op_counts.get(op, 0) for op in fused)
            if not n_fused or any(split.facts.op_counts.get(op, 0) for op in fused):
                continue
            counts = split.facts.op_counts
            if not all(any(counts.get(op, 0) for op in group) for group in required):
                continue
            extra = {
                op: counts.get(op, 0) - whole.facts.op_counts.get(op, 0)
                for op in sorted(primitives)
            }
            listed = ", ".join(f"{op} {k:+d}" for op, k in extra.items() if k > 0)
            fused_ops = sorted(op for op in fused if whole.facts.op_counts.get(op, 0))
            out.append(
                Finding(
                    "decomposed",
                    f"{split.label} splits {name} into primitive ops ({listed} vs {whole.label}); "
                    f"{whole.label} has {n_fused} {'/'.join(fused_ops)} node{'' if n_fused == 1 else 's'}",
                )
            )
            explained |= {op for op, k in extra.items() if k > 0} | set(fused_ops)
    return out, explained


def _totals_finding(base: ComparedModel, cand: ComparedModel) -> Finding:
    ta, tb = base.analysis.totals, cand.analysis.totals
    parts = []
    for label, va, vb in (("MACs", ta.macs, tb.macs), ("parameters", ta.params, tb.params)):
        if va == vb:
            parts.append(f"the same {label} ({va:,})")
        else:
            pct = percent_change(va, vb)
            shown = "inf" if pct == float("inf") else f"{pct:+.2f}"
            parts.append(f"{label} {va:,} vs {vb:,} ({shown}%)")
    return Finding("totals", f"{base.label} and {cand.label}: " + " and ".join(parts))


def _status_findings(m: ComparedModel) -> list[Finding]:
    out = []
    a = m.analysis
    if a.unsupported:
        out.append(
            Finding(
                "status",
                f"{m.label} has ops with no cost formula, counted as 0: {', '.join(a.unsupported)}",
            )
        )
    unknown = sum(1 for r in a.nodes if r.status == "unknown_shape")
    if unknown:
        out.append(
            Finding(
                "status",
                f"{m.label} has {_plural(unknown, 'node')} with unresolved shapes, counted as 0; "
                f"its totals are lower bounds",
            )
        )
    return out


def _bench_findings(base: ComparedModel, cand: ComparedModel) -> list[Finding]:
    if base.bench is None or cand.bench is None:
        return []
    la, lb = base.bench.latency_ms.get("median"), cand.bench.latency_ms.get("median")
    if la is None or lb is None:
        return []
    pct = percent_change(la, lb)
    change = "" if pct is None else f" ({pct:+.2f}%)"
    noisy = [m.label for m in (base, cand) if m.bench is not None and m.bench.noisy]
    caveat = (
        f"; timings of {' and '.join(noisy)} are noisy, rerun with more --runs" if noisy else ""
    )
    return [
        Finding(
            "latency",
            f"median latency on {cand.bench.provider}: {base.label} {la:.3f} ms, "
            f"{cand.label} {lb:.3f} ms{change}{caveat}",
        )
    ]


def findings(models: Sequence[ComparedModel], alignments: Sequence[Alignment]) -> list[Finding]:
    """Every rule's findings, in the order a reader wants them: inputs, each model's status,
    then per candidate its totals, layout, folding, attributes, ops, merges, decompositions,
    unmatched layers, latency, and the op types only one model has."""
    base = models[0]
    out: list[Finding] = []
    if any(io_text(m) != io_text(base) for m in models[1:]):
        out.append(
            Finding(
                "inputs",
                "the models' inputs differ: "
                + ", ".join(f"{m.label} {io_text(m)}" for m in models),
            )
        )
    for m in models:
        out += _status_findings(m)
    for cand, al in zip(models[1:], alignments, strict=True):
        out.append(_totals_finding(base, cand))
        out += _transpose_findings(base, cand)
        out += _count_finding(base, cand, "BatchNormalization", "not folded into the convs")
        out += _pad_findings(al)
        out += _attr_findings(al)
        out += _op_findings(al)
        out += _merge_findings(al)
        decomposed, explained = _decomposed_findings(base, cand)
        out += decomposed
        out += _unmatched_findings(al)
        explained |= {"Transpose", "BatchNormalization", "Constant"}
        if _role("Add", cand, base) or _role("Add", base, cand):
            explained.add("Add")  # the bias Adds of MatMul+Add, named by _op_findings
        out += _bench_findings(base, cand)
        for m, other in ((base, cand), (cand, base)):
            only = [
                f"{op} {n}"
                for op, n in m.facts.op_counts.items()
                if op not in explained
                and op.split("::")[-1] not in FAMILY_OF
                and not other.facts.op_counts.get(op)
            ]
            if only:
                text = f"op types only in {m.label} (not in {other.label}): {', '.join(only)}"
                out.append(Finding("only_ops", text))
    return out
