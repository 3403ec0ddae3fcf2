"""``llm --bench --cache device|host`` (issue 24 item 2): the device loop keeps the KV cache in
onnxruntime's OrtValues (IO binding) and generates the host loop's tokens; only the logits are
read on the host."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from onnxcost.bench.session import SessionConfig
from onnxcost.cli.app import app
from onnxcost.llm.cost import llm_report
from onnxcost.llm.loop import LoopTiming, device_of, run_llm_loop
from onnxcost.prepare import PreparedModel, prepare

pytestmark = pytest.mark.ort
ort = pytest.importorskip("onnxruntime")

runner = CliRunner()
MODELS = Path(__file__).resolve().parents[1] / "models"
TINY_GPT2 = {"layers": "2", "hidden": "32", "heads": "4", "vocab": "64", "max_positions": "32"}
"""The built-in GPT-2, small: its weights are written from seed 0, so the argmax is fixed."""
ONE_THREAD = SessionConfig(intra_op_threads=1)


def _gpt2() -> PreparedModel:
    return prepare("gpt2", weights=True, params={**TINY_GPT2, "kv_cache": "true"})


def _loop(model: PreparedModel, cache: str, *, prompt: int, generate: int, batch: int) -> Any:
    layout = llm_report(model, prompt=prompt, generate=generate, batch=batch).layout
    return run_llm_loop(
        model,
        layout,
        prompt=prompt,
        generate=generate,
        batch=batch,
        config=ONE_THREAD,
        cache=cache,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("model", "batch"),
    [("gpt2", 2), ("decoder_kv_torch_script.onnx", 1), ("decoder_kv_torch_dynamo.onnx", 1)],
)
def test_device_loop_generates_the_host_loops_tokens(model: str, batch: int) -> None:
    prepared = _gpt2() if model == "gpt2" else prepare(MODELS / model, weights=True)
    device = _loop(prepared, "device", prompt=6, generate=8, batch=batch)
    host = _loop(prepared, "host", prompt=6, generate=8, batch=batch)
    assert (device.cache, host.cache) == ("device", "host")
    assert len(device.tokens) == batch
    assert all(len(row) == 8 for row in device.tokens)  # M = 8 tokens, the first the prefill's
    assert device.tokens == host.tokens
    assert len({t for row in device.tokens for t in row}) > 1  # not one token over and over


def test_device_loop_tokens_are_the_uncached_models_argmax() -> None:
    """Against no loop of onnxcost's: the whole sequence at past 0 in one plain run. Its
    logits at position N - 1 + i pick the token the cached loop made at step i."""
    prepared = _gpt2()
    timing = _loop(prepared, "device", prompt=5, generate=6, batch=2)
    rng = np.random.default_rng(0)  # run_llm_loop's prompt: seed 0, ids below the vocab of 64
    prompt = rng.integers(0, 64, size=(2, 5), dtype=np.int64)
    made = np.array(timing.tokens, dtype=np.int64)
    ids = np.concatenate([prompt, made[:, :-1]], axis=1)  # N + M - 1 = 10 positions
    session = ort.InferenceSession(prepared.proto.SerializeToString())
    feeds: dict[str, np.ndarray] = {}
    for i in session.get_inputs():
        if i.name.startswith("past"):
            feeds[i.name] = np.zeros((2, 4, 0, 8), np.float32)  # 4 heads of 32 / 4 = 8
        elif "mask" in i.name:
            feeds[i.name] = np.ones((2, 10), np.int64)
        elif "position" in i.name:
            feeds[i.name] = np.tile(np.arange(10, dtype=np.int64), (2, 1))
        else:
            feeds[i.name] = ids
    logits = session.run(["logits"], feeds)[0]
    assert logits.shape == (2, 10, 64)
    assert (logits[:, 4:, :].argmax(axis=-1) == made).all()


def test_the_cache_never_leaves_onnxruntime(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each step's past inputs are the previous step's present OrtValues (same buffers), no
    session.run (numpy feeds), and the only values read on the host are the logits."""
    prepared = _gpt2()
    ortvalue = ort.OrtValue
    binding_cls = type(ort.InferenceSession(prepared.proto.SerializeToString()).io_binding())
    read: list[list[int]] = []
    presents: set[int] = set()
    pasts: list[tuple[str, int, list[int]]] = []

    def numpy(self: Any) -> np.ndarray:
        read.append(list(self.shape()))
        return real_numpy(self)

    def get_outputs(self: Any) -> list[Any]:
        values: list[Any] = real_get_outputs(self)
        presents.update(v.data_ptr() for v in values if len(v.shape()) == 4)
        return values

    def bind(self: Any, name: str, value: Any) -> None:
        if name.startswith("past"):
            pasts.append((name, value.data_ptr(), list(value.shape())))
        real_bind(self, name, value)

    def no_run(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("session.run with numpy feeds: the cache went through the host")

    real_numpy, real_get_outputs = ortvalue.numpy, binding_cls.get_outputs
    real_bind = binding_cls.bind_ortvalue_input
    monkeypatch.setattr(ortvalue, "numpy", numpy)
    monkeypatch.setattr(binding_cls, "get_outputs", get_outputs)
    monkeypatch.setattr(binding_cls, "bind_ortvalue_input", bind)
    monkeypatch.setattr(ort.InferenceSession, "run", no_run)
    _loop(prepared, "device", prompt=6, generate=5, batch=2)
    # Warm-up (2 tokens) and the timed loop (5): 7 steps, each reads its logits
    # [batch 2, seq, vocab 64] (seq 6 at a prefill, else 1) and nothing else.
    assert read == [[2, 6, 64], [2, 1, 64], [2, 6, 64]] + [[2, 1, 64]] * 4
    # 2 layers x (key, value) = 4 past inputs a step; past length 0 at each prefill, else
    # bound from a present output.
    assert len(pasts) == 7 * 4
    carried = [(n, p) for n, p, shape in pasts if shape[2] > 0]
    assert len(carried) == 5 * 4  # steps 2 of the warm-up, 2..5 of the timed loop
    assert all(p in presents for _n, p in carried)


def test_device_of_the_provider() -> None:
    assert device_of(SessionConfig()) == ("cpu", 0)
    cuda = SessionConfig("CUDAExecutionProvider", (("device_id", "1"),))
    assert device_of(cuda) == ("cuda", 1)
    assert device_of(SessionConfig("CUDAExecutionProvider")) == ("cuda", 0)


def test_a_cache_loop_of_no_name_is_refused() -> None:
    from onnxcost.errors import UsageError

    prepared = _gpt2()
    with pytest.raises(UsageError, match="device, host"):
        _loop(prepared, "gpu", prompt=2, generate=2, batch=1)


# --- the command line ------------------------------------------------------------------------

GPT2_ARGS = ["llm", "gpt2", *(f"--param={k}={v}" for k, v in TINY_GPT2.items())]
GPT2_ARGS += ["--param=kv_cache=true", "--prompt", "4", "--generate", "3", "--threads", "1"]


@pytest.mark.parametrize(("flags", "cache"), [([], "device"), (["--cache", "host"], "host")])
def test_json_bench_says_which_loop_ran(flags: list[str], cache: str) -> None:
    r = runner.invoke(app, [*GPT2_ARGS, "--bench", *flags, "-f", "json"])
    assert r.exit_code == 0, r.output
    bench = json.loads(r.stdout)["bench"]
    assert bench["cache"] == cache
    assert list(bench) == [
        "provider",
        "cache",
        "ttft_ms",
        "decode_median_ms",
        "decode_p90_ms",
        "decode_steps",
        "total_ms",
        "tokens_per_s",
    ]


@pytest.mark.parametrize(
    ("cache", "line"),
    [
        ("device", "loop: KV cache kept on the device (IO binding; only the logits to the host)"),
        ("host", "loop: KV cache copied through the host every step (numpy feeds)"),
    ],
)
def test_table_says_which_loop_ran(cache: str, line: str) -> None:
    r = runner.invoke(app, [*GPT2_ARGS, "--bench", "--cache", cache], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert line in r.output


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--bench", "--cache", "nosuch"], "--cache must be device or host, not 'nosuch'"),
        (["--cache", "host"], "--cache chooses the --bench loop; add --bench or drop --cache"),
    ],
)
def test_bad_cache_flags_are_one_line(flags: list[str], message: str) -> None:
    r = runner.invoke(app, [*GPT2_ARGS, *flags])
    assert r.exit_code == 2, r.output
    assert r.output.count("\n") == 1, r.output
    assert message in r.output
    assert "Traceback" not in r.output


def test_device_cache_on_a_model_without_one() -> None:
    args = ["llm", "mlp", "--prompt", "2", "--generate", "2", "--bench", "--cache", "device"]
    r = runner.invoke(app, args)
    assert r.exit_code == 1, r.output
    assert r.output.count("\n") == 1, r.output
    assert "no KV cache found" in r.output


@pytest.mark.gpu
def test_device_loop_on_cuda_matches_the_host_loop() -> None:
    """On a lent GPU: the cache in CUDA memory, the same tokens as the host loop."""
    from onnxcost.bench.providers import CUDA, probe_provider

    if not probe_provider(CUDA).loads:
        pytest.skip("the CUDA execution provider does not load on this machine")
    prepared = _gpt2()
    layout = llm_report(prepared, prompt=6, generate=8, batch=2).layout
    runs: dict[str, LoopTiming] = {}
    for cache in ("device", "host"):
        runs[cache] = run_llm_loop(
            prepared,
            layout,
            prompt=6,
            generate=8,
            batch=2,
            config=SessionConfig(CUDA),
            cache=cache,  # type: ignore[arg-type]
        )
    assert runs["device"].tokens == runs["host"].tokens
