"""The fuzzer in the normal suite: a few hundred derandomized cases (the same every run)
against ``onnxcost.analyze`` and the CLI, in worker processes under a timeout and a memory
limit. Only onnxcost's own errors may come out; no case may hang or change its input.

scripts/fuzz.py runs the same strategies for as many cases as asked (the README gives the
last long run). The harness tests at the end show the pool does catch each kind of finding.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import fuzzing
import onnx
import onnx.inliner
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import onnxcost


def _cases(strategy: st.SearchStrategy[fuzzing.Case], n: int) -> list[fuzzing.Case]:
    cases: list[fuzzing.Case] = []

    @fuzzing.generation_settings(n, derandomize=True)
    @given(strategy)
    def collect(case: fuzzing.Case) -> None:
        cases.append(case)

    collect()
    return cases


@pytest.fixture(scope="module")
def pool() -> Iterator[fuzzing.Pool]:
    with fuzzing.Pool(workers=2, timeout_s=30.0) as p:
        yield p


def _findings(results: list[tuple[fuzzing.Case, fuzzing.Outcome]]) -> list[str]:
    return [
        f"{o.kind}: {o.signature} ({c.label} {c.cli or ''})\n{o.detail[-800:]}"
        for c, o in results
        if o.kind != "ok"
    ]


def test_in_process_cases_raise_only_onnxcost_errors(pool: fuzzing.Pool) -> None:
    cases = _cases(fuzzing.models(), 250)
    assert len(cases) >= 200
    results = fuzzing.run_all(cases, pool)
    assert len(results) == len(cases)
    assert _findings(results) == []


def test_cli_cases_exit_cleanly(pool: fuzzing.Pool) -> None:
    cases = _cases(fuzzing.cli_cases(process=0.0), 30)
    results = fuzzing.run_all(cases, pool)
    assert len(results) == len(cases)
    assert _findings(results) == []


def test_cli_case_as_a_real_process(pool: fuzzing.Pool) -> None:
    case = fuzzing.Case(
        "conv", fuzzing.SEEDS["conv"], cli=("analyze", "{model}", "-f", "json"), process=True
    )
    assert fuzzing.run_all([case], pool)[0][1].kind == "ok"


def test_every_seed_analyses() -> None:
    # The seeds themselves are valid models (mutations start from something that works).
    for name, data in fuzzing.SEEDS.items():
        analysis = onnxcost.analyze(data)
        assert analysis.nodes, name
        assert all(n.status != "error" for n in analysis.nodes), name


def test_seeds_include_every_model_file() -> None:
    names = fuzzing.file_seeds()
    assert any(n.startswith("models/") for n in names)
    assert any(n.startswith("tests/data/") for n in names)


def test_byte_mutator_changes_bytes() -> None:
    data = fuzzing.SEEDS["conv"]
    changed = 0

    @settings(max_examples=30, derandomize=True, database=None, deadline=None)
    @given(st.data())
    def check(draw: st.DataObject) -> None:
        nonlocal changed
        changed += fuzzing.mutate_bytes(data, fuzzing._Draw(draw.draw)) != data

    check()
    assert changed >= 25


# --- the harness catches what it claims to (the worker is forked after the patch) -------------


def _one(case: fuzzing.Case, timeout_s: float = 10.0) -> fuzzing.Outcome:
    with fuzzing.Pool(workers=1, timeout_s=timeout_s) as p:
        return fuzzing.run_all([case], p)[0][1]


def _case() -> fuzzing.Case:
    return fuzzing.Case("conv", fuzzing.SEEDS["conv"])


def test_harness_reports_an_uncaught_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(source: object) -> None:
        raise KeyError("boom")

    monkeypatch.setattr(onnxcost, "analyze", broken)
    outcome = _one(_case())
    assert outcome.kind == "crash"
    assert outcome.signature.startswith("KeyError at ")


def test_harness_reports_a_hang_and_replaces_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    real = onnxcost.analyze

    def stuck_on_marker(source: str) -> onnxcost.Analysis:
        if Path(source).read_bytes() == b"hang":
            time.sleep(60)
        return real(source)

    monkeypatch.setattr(onnxcost, "analyze", stuck_on_marker)
    with fuzzing.Pool(workers=1, timeout_s=2.0) as p:
        first = fuzzing.run_all([fuzzing.Case("marker", b"hang")], p)[0][1]
        assert first.kind == "hang"
        # The replacement worker answers the next case.
        assert fuzzing.run_all([_case()], p)[0][1].kind == "ok"


def test_harness_reports_a_modified_input(monkeypatch: pytest.MonkeyPatch) -> None:
    def scribble(source: str) -> None:
        Path(source).write_bytes(b"not a model")

    monkeypatch.setattr(onnxcost, "analyze", scribble)
    outcome = _one(_case())
    assert (outcome.kind, outcome.signature) == ("modified", "modified model.onnx")


def test_harness_bounds_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    def hog(source: object) -> None:
        bytearray(8 * 2**30)

    monkeypatch.setattr(onnxcost, "analyze", hog)
    outcome = _one(_case())
    assert outcome.kind == "crash"
    assert outcome.signature.startswith("MemoryError")


def test_harness_replaces_a_worker_left_out_of_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    # The case takes the worker's whole address space and keeps it (mapped, never touched:
    # no real memory), as a case that ends in MemoryError may. Before, every later case in
    # that worker failed in the harness itself ('harness: OSError ... Cannot allocate memory').
    import mmap

    real = onnxcost.analyze
    kept: list[mmap.mmap] = []

    def hog_on_marker(source: str, **kwargs: object) -> onnxcost.Analysis:
        if Path(source).read_bytes() == b"hog":
            for size in (64 * 2**20, 2**20, 2**16):  # down to the last 64 KiB
                with contextlib.suppress(OSError, MemoryError):
                    while True:
                        kept.append(mmap.mmap(-1, size))
            raise MemoryError("address space kept")
        return real(source)

    monkeypatch.setattr(onnxcost, "analyze", hog_on_marker)
    with fuzzing.Pool(workers=1, timeout_s=20.0) as p:
        first = fuzzing.run_all([fuzzing.Case("marker", b"hog")], p)[0][1]
        assert first.signature.startswith("MemoryError")
        assert [o.kind for _, o in fuzzing.run_all([_case(), _case()], p)] == ["ok", "ok"]


def test_hostile_model_paths_end(tmp_path: Path) -> None:
    # A FIFO, /dev/zero, a symlink loop, a folder: each refused or failed, never waited on.
    for where in fuzzing.HOSTILE_PATHS:
        outcome = _one(fuzzing.Case("path", b"", model_path=where), timeout_s=20.0)
        assert outcome.kind == "ok", (where, outcome)


def test_seed_models_parse() -> None:
    for data in fuzzing.SEEDS.values():
        onnx.ModelProto().ParseFromString(data)


# --- the families of issue 27: each generator makes the model it claims ----------------------


def _load(data: bytes) -> onnx.ModelProto:
    model = onnx.ModelProto()
    model.ParseFromString(data)
    return model


def _dims(vi: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]


def test_derived_dims_model_declares_the_expression() -> None:
    expr = "+".join(["seq"] * 3000)  # 3,000 terms: 'seq+seq+...', 11,999 characters
    model = _load(fuzzing.derived_dims_model(expr))
    onnx.checker.check_model(model)
    mask = next(vi for vi in model.graph.input if vi.name == "attention_mask")
    assert _dims(mask) == ["batch", expr]
    # the names of the derived dim are the decoder's own input dims
    own = {d for vi in model.graph.input for d in _dims(vi) if isinstance(d, str)}
    assert {"batch", "seq", "past_seq"} <= own
    assert len(fuzzing.derived_dims_model(expr)) < 200_000


@pytest.mark.parametrize("depth", [300, 30_000])
def test_deep_scope_model_names_have_the_depth(depth: int) -> None:
    data = fuzzing.deep_scope_model(depth, nodes=1)
    model = _load(data)
    onnx.checker.check_model(model)
    # '/blk' repeated depth times, then '/Relu_0': depth + 1 separators
    assert [n.name.count("/") for n in model.graph.node] == [depth + 1]
    assert len(data) < 200_000


def test_nested_functions_model_chains_calls() -> None:
    # F0 = Relu; F1 calls F0 twice, F2 calls F1 twice: inlined 2 * 2 = 4 Relus
    model = _load(fuzzing.nested_functions_model(3, 2))
    onnx.checker.check_model(model)
    assert [f.name for f in model.functions] == ["F0", "F1", "F2"]
    assert [[n.op_type for n in f.node] for f in model.functions] == [
        ["Relu"],
        ["F0", "F0", "Identity"],
        ["F1", "F1", "Identity"],
    ]
    inlined = onnx.inliner.inline_local_functions(model)
    assert [n.op_type for n in inlined.graph.node].count("Relu") == 4


def test_nested_functions_model_hostile_variants() -> None:
    recursive = _load(fuzzing.nested_functions_model(3, 2, recursive="self"))
    assert [n.op_type for n in recursive.functions[2].node] == ["F2", "F2", "Identity"]
    mutual = _load(fuzzing.nested_functions_model(3, 1, recursive="mutual"))
    assert mutual.functions[0].node[0].op_type == "F2"  # F0 -> F2 -> F1 -> F0
    assert list(_load(fuzzing.nested_functions_model(2, missing="body")).functions[0].node) == []
    undefined = _load(fuzzing.nested_functions_model(2, missing="function"))
    assert undefined.functions[1].node[0].op_type == "Nowhere"
    wide = _load(fuzzing.nested_functions_model(1, arity=5))
    assert list(wide.graph.node[0].input) == ["x"] * 5  # F0 declares one input


@pytest.mark.parametrize(
    ("what", "declared"),
    [
        ("vocab0", ["batch", "seq", 0]),
        ("vocab_symbolic", ["batch", "seq", "vocab"]),
        ("scalar", []),
        ("batch_vocab", ["batch", 16]),
    ],
)
def test_hostile_decoder_declares_its_logits(what: str, declared: list[int | str]) -> None:
    model = _load(fuzzing.hostile_decoder(what))
    logits = next(o for o in model.graph.output if o.name == "logits")
    assert _dims(logits) == declared
    assert any(vi.name.startswith("past") for vi in model.graph.input)


def test_hostile_decoder_without_cache_and_with_a_name_not_utf8() -> None:
    bare = _load(fuzzing.hostile_decoder("no_cache"))
    assert not any(vi.name.startswith("past") for vi in bare.graph.input)
    half = _load(fuzzing.hostile_decoder("no_cache_inputs"))
    assert not any(vi.name.startswith("past") for vi in half.graph.input)
    assert any(vo.name.startswith("present") for vo in half.graph.output)
    broken = _load(fuzzing.hostile_decoder("name_not_utf8"))
    assert broken.graph.name == b"\xffRAPHNAME"  # protobuf hands out bytes for it


@pytest.mark.parametrize("what", ["const", "matmul"])
def test_ort_peak_model_is_tiny_and_claims_a_huge_constant(what: str) -> None:
    data = fuzzing.ort_peak_model(what, 16384, chain=8)
    model = _load(data)
    onnx.checker.check_model(model)
    assert len(data) < 1000  # the file; the constant is 16384 * 16384 * 4 bytes = 1 GiB
    const = next(n for n in model.graph.node if n.op_type == "Constant")
    assert list(const.attribute[0].ints) == [16384, 16384]
    matmuls = [n for n in model.graph.node if n.op_type == "MatMul"]
    assert len(matmuls) == (9 if what == "matmul" else 0)  # 8 of the constant, 1 of x


def test_many_symbols_model_has_distinct_symbols() -> None:
    model = _load(fuzzing.many_symbols_model(16, 16))
    onnx.checker.check_model(model)
    symbols = [d for vi in model.graph.input for d in _dims(vi)]
    assert len(symbols) == len(set(symbols)) == 16 * 16  # 256 symbols, none shared
    assert len(model.graph.node) == 16


def _proto_fields(data: bytes) -> list[int]:
    return [number for number, _, _ in fuzzing._fields(data)]


def test_reversed_fields_load_unchanged_in_another_order(tmp_path: Path) -> None:
    canonical, _ = fuzzing.external_model()
    reordered = fuzzing.reversed_fields(canonical)
    assert reordered != canonical
    assert len(reordered) == len(canonical)
    path = tmp_path / "m.onnx"
    path.write_bytes(reordered)
    loaded = onnx.load(str(path), load_external_data=False)
    assert loaded.SerializeToString() == canonical  # onnx.save writes fields in number order
    # ModelProto: graph (7) and opset_import (8) before ir_version (1)
    fields = _proto_fields(reordered)
    assert fields.index(8) < fields.index(7) < fields.index(1)
    assert reordered[0] != 0x08  # no longer starts with ir_version's key
    # the external-data entry: value (2) before key (1), 'weights.bin' before 'location'
    assert b"\x12\x0bweights.bin\x0a\x08location" in reordered
    assert b"\x0a\x08location\x12" not in reordered


def test_shuffled_fields_keep_repeated_entries_in_order() -> None:
    for name, data in fuzzing.SEEDS.items():
        for ranks in ({1: 3, 7: 0, 8: 2}, {1: 0, 7: 5, 8: 1, 5: 9, 11: 0}):
            shuffled = fuzzing.reorder_fields(data, lambda n, r=ranks: r.get(n, 4))
            assert _load(shuffled).SerializeToString() == data, name


def test_family_cases_draw_every_family() -> None:
    cases = _cases(fuzzing.family_cases(), 120)
    labels = {c.label.split(":")[0] for c in cases}
    assert labels == set(fuzzing.FAMILIES)
    assert all(len(c.model) < 200_000 for c in cases)
    for c in cases:
        _load(c.model)  # each a model protobuf parses, whatever it claims


def test_reordered_models_and_their_weights_survive_every_output(pool: fuzzing.Pool) -> None:
    # analyze/annotate/bench/compare/llm -o onto a reordered model's weights.bin, onto another
    # reordered model, or onto the model itself, with and without --force: each refused (or
    # a report written elsewhere), every file hashed unchanged. Failed before 58247ef.
    cases = _cases(fuzzing.family_cases(("reordered",)), 16)
    assert {c.cli[-1] if c.cli else "" for c in cases} & {"--force"}
    results = fuzzing.run_all(cases, pool)
    assert len(results) == len(cases)
    assert _findings(results) == []


def test_json_with_nan_is_a_finding() -> None:
    # Python's json writes float('nan') as NaN, which JSON (RFC 8259) has no word for.
    assert fuzzing._non_finite_json('{"ridge": NaN}')
    assert fuzzing._non_finite_json('{"a": [1, -Infinity]}')
    assert not fuzzing._non_finite_json('{"ridge": 1.5, "s": "NaN"}')
    assert fuzzing._json_on_stdout(["llm", "m", "--format", "json"])
    assert not fuzzing._json_on_stdout(["llm", "m", "-f", "json", "-o", "r.json"])
