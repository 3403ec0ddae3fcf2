"""The fuzzer in the normal suite: a few hundred derandomized cases (the same every run)
against ``onnxcost.analyze`` and the CLI, in worker processes under a timeout and a memory
limit. Only onnxcost's own errors may come out; no case may hang or change its input.

scripts/fuzz.py runs the same strategies for as many cases as asked (the README gives the
last long run). The harness tests at the end show the pool does catch each kind of finding.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import fuzzing
import onnx
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


def test_hostile_model_paths_end(tmp_path: Path) -> None:
    # A FIFO, /dev/zero, a symlink loop, a folder: each refused or failed, never waited on.
    for where in fuzzing.HOSTILE_PATHS:
        outcome = _one(fuzzing.Case("path", b"", model_path=where), timeout_s=20.0)
        assert outcome.kind == "ok", (where, outcome)


def test_seed_models_parse() -> None:
    for data in fuzzing.SEEDS.values():
        onnx.ModelProto().ParseFromString(data)
