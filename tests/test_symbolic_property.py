"""The proof that ``--symbolic`` is exact (issue 22, item 3): on every model in models/ and
tests/data, every built-in and fresh torch exports of both exporters, ``analyze(symbolic=True)``
runs once and each formula that is not None (the totals through ``a.at``, every node's through
``a.symbolic.nodes[k]``) equals a concrete ``analyze(dims=point)`` at three seeded random points
(symbols in 1..12, within the model's position table), at every symbol = 1, and at each symbol
= 0 with the others random where the model analyses there (``zero_allowed``). The expected
values are the concrete analyses, never the formulas' own route; and the totals that have a
formula today are listed, so a formula that turns to None fails here.
"""

from __future__ import annotations

import io
import random
import warnings
from pathlib import Path
from typing import Any

import onnx
import pytest

import onnxcost
from onnxcost import zoo
from onnxcost.prepare import PreparedModel, prepare
from onnxcost.symbolic.dims import with_derived

TOTAL_KEYS = (
    "macs",
    "flops",
    "bytes_read",
    "bytes_written",
    "params",
    "param_bytes",
    "peak_activation_bytes",
)
NODE_KEYS = ("macs", "flops", "bytes_read", "bytes_written")
"""The formulas' keys, as docs/symbolic.md gives them for the totals and for each node."""

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("models/*.onnx")) + sorted(
    p.relative_to(ROOT).as_posix() for p in (ROOT / "tests" / "data").rglob("*.onnx")
)
DOES_NOT_ANALYSE: dict[str, str] = {}
"""Files of models/ and tests/data that ``analyze(symbolic=True)`` refuses, and why: skipped.
None today (all 61 analyse); a file that starts failing fails here until it is listed."""

_DECODER = {"layers": 1, "hidden": 32, "heads": 2, "vocab": 50, "max_positions": 16}
"""16 positions: a decoder in two symbols needs 15 for the search's check point past its grid;
with a KV cache, a quarter of the draws in 1..12 (36 of the 144 pairs) have seq + past_seq
> 16 and are drawn again, so the position limit is exercised."""
BUILT_INS: list[tuple[str, dict[str, str | int]]] = [
    ("mlp", {"in_features": 12, "hidden1": 8, "hidden2": 6, "num_classes": 3}),
    ("resnet20_cifar", {"num_classes": 3}),
    ("resnet18", {"image_size": 32, "num_classes": 3}),
    ("resnet50", {"image_size": 32, "num_classes": 3}),
    ("mobilenet_v2", {"image_size": 32, "num_classes": 3}),
    ("vit_b_16", {"image_size": 32, "layers": 1, "hidden": 32, "heads": 2, "mlp_dim": 48}),
    ("bert_base", {**_DECODER, "intermediate": 48}),
    ("gpt2", _DECODER),
    ("gpt2", {**_DECODER, "kv_cache": "true"}),
    ("llama", {**_DECODER, "kv_heads": 1, "intermediate": 48}),
    ("llama", {**_DECODER, "kv_heads": 1, "intermediate": 48, "kv_cache": "true"}),
]

_GRU = "tests/data/exports/keras_gru.onnx"
_ZIPMAP = ("tests/data/exports/sk_logistic.onnx", "tests/data/exports/sk_random_forest.onnx")
_T5 = "tests/data/exports/optimum_tiny_t5_decoder"
_MERGED = (
    f"{_T5}_model_merged.onnx",
    "tests/data/exports/optimum_tiny_gpt2_merged_decoder_model_merged.onnx",
)
NO_TOTAL_FORMULA: dict[str, tuple[str, ...]] = {
    # a Keras GRU's Loop over seq: the last step's slice, x[-1:], reads min(1, seq) rows
    _GRU: ("bytes_read", "bytes_written", "peak_activation_bytes"),
    # the peak comes from the one walk only: a sampled model (below) has none
    **dict.fromkeys((*_ZIPMAP, *_MERGED), ("peak_activation_bytes",)),
    # T5's decoders: no 8 steps are proven to bound the others' live bytes; the merged one's
    # FLOPs hold a max(0, ...) at encoder_sequence_length = 0 (the walk of the decoder with
    # the cache finds it, the sampler does not: the cross-attention's Softmax)
    f"{_T5}_model.onnx": ("peak_activation_bytes",),
    f"{_T5}_with_past_model.onnx": ("peak_activation_bytes",),
    _MERGED[0]: ("flops", "peak_activation_bytes"),
}
"""The totals without a formula today, per case; every case has all of ``TOTAL_KEYS`` (the
CNNs' Conv and pooling sizes in height and width are floors, ``(height - 1) // 2 + 1``: their
formulas are the walk's expressions with floors, ``Formula.expression``)."""
SAMPLED: set[str] = {_GRU, *_ZIPMAP, *_MERGED}
"""The cases whose formulas the sampler finds (a node the walk does not carry: a Loop,
scikit-learn's ZipMap, whose sequence of maps has no tensor shape, optimum's merged decoders'
If); every other case is walked once."""
NODE_FORMULAS_MISSING: dict[str, int] = {_GRU: 3, _MERGED[0]: 1}  # T5's: its If's FLOPs
"""How many (node, key) formulas are None today, per case; 0 for every case not listed."""


def _points(costs: Any, seed: str) -> list[dict[str, int]]:
    """Three random points, every symbol at 1 (or at its least value, where it has one above
    1: ``costs.least``), and each symbol at 0 (where the model analyses there) with the others
    random; every point keeps the position symbols' sum within the model's position table.
    Seeded by the case's name (``random.Random(str)`` is stable)."""
    rng = random.Random(seed)
    symbols, limit = costs.symbols, costs.limit
    least = {s: costs.least.get(s, 1) for s in symbols}

    def draw() -> dict[str, int]:
        for _ in range(1000):
            point = {s: least[s] - 1 + rng.randint(1, 12) for s in symbols}
            if limit is None or sum(point[s] for s in limit.symbols) <= limit.budget:
                return point
        raise AssertionError(f"no point in 1..12 within {limit}")

    points = [draw() for _ in range(3)]
    points.append(least)
    points += [{**draw(), s: 0} for s in symbols if costs.zero_allowed[s]]
    unique = {tuple(sorted(p.items())): p for p in points}  # no symbols: one point, {}
    return list(unique.values())


def _mismatches(label: str, model: PreparedModel, a: onnxcost.Analysis) -> list[str]:
    """Every formula that is not None against a concrete analysis at each of ``_points``:
    one line per miss (case, point, key, concrete value, formula's value)."""
    costs: Any = a.symbolic
    assert costs is not None
    assert len(costs.nodes) == len(a.nodes)
    misses = []
    for point in _points(costs, label):
        concrete = onnxcost.analyze(model, dims=with_derived(model.proto, {}, point))
        at = a.at(**point)
        for key in TOTAL_KEYS:
            if costs.totals[key] is None:
                continue
            want, got = getattr(concrete.totals, key), getattr(at, key)
            if got != want:
                misses.append(f"{label} at {point}: total {key}: concrete {want}, formula {got}")
        assert [n.name for n in concrete.nodes] == [n.name for n in a.nodes], (label, point)
        for k, (node, formulas) in enumerate(zip(concrete.nodes, costs.nodes, strict=True)):
            for key in NODE_KEYS:
                f = formulas[key]
                if f is None:
                    continue
                want, got = getattr(node, key), f.evaluate(point)
                if got != want:
                    misses.append(
                        f"{label} at {point}: node {k} {node.name!r} ({node.op_type}) {key}: "
                        f"concrete {want}, formula {got}"
                    )
    return misses


def _check(label: str, model: PreparedModel) -> None:
    """The formulas of ``model`` hold at every point of ``_points``, and the totals and node
    formulas present today are present."""
    a = onnxcost.analyze(model, symbolic=True)
    misses = _mismatches(label, model, a)
    assert not misses, "\n".join(misses[:20]) + f"\n({len(misses)} in all)"
    costs: Any = a.symbolic
    expected = [k for k in TOTAL_KEYS if k not in NO_TOTAL_FORMULA.get(label, ())]
    assert [k for k in expected if costs.totals[k] is not None] == expected, a.warnings
    missing = sum(f is None for formulas in costs.nodes for f in formulas.values())
    assert missing <= NODE_FORMULAS_MISSING.get(label, 0), a.warnings
    # from the one walk, not the sampler (more analyses, and a warning that names the node)
    assert costs.analyses == 1 or label in SAMPLED, a.warnings


# --- models/ and tests/data --------------------------------------------------------------------


@pytest.mark.parametrize("file", FILES)
def test_formulas_are_exact_on_every_stored_model(file: str) -> None:
    if file in DOES_NOT_ANALYSE:
        pytest.skip(DOES_NOT_ANALYSE[file])
    _check(file, prepare(ROOT / file))


def test_the_stored_models_are_all_found() -> None:
    # 9 in models/ and 52 in tests/data (15 exports, 4 fusions, 5 fuzz, 12 optimized, 4
    # ort_traces, 12 training) today: a glob that finds fewer would pass vacuously.
    assert len(FILES) >= 9 + 15 + 4 + 5 + 12 + 4 + 12


# --- every built-in --------------------------------------------------------------------------


def test_every_built_in_is_covered() -> None:
    assert {name for name, _ in BUILT_INS} == set(zoo.names())


@pytest.mark.parametrize(("name", "params"), BUILT_INS, ids=lambda v: str(v))
def test_formulas_are_exact_on_every_built_in(name: str, params: dict[str, str | int]) -> None:
    _check(f"{name} {params}", prepare(zoo.build(name, params=params)))


@pytest.mark.parametrize(
    ("name", "params"),
    [("gpt2", {"kv_cache": "true"}), ("llama", {"layers": 8, "kv_cache": "true"})],
    ids=["gpt2-small-kv", "llama-8-layers-kv"],
)
def test_formulas_are_exact_on_full_width_decoders(
    tmp_path: Path, name: str, params: dict[str, str | int]
) -> None:
    # The shapes issue 22's speed targets are measured on: GPT-2 small and an 8-layer
    # LLaMA-7B shape, both with a KV cache (weights=False: external references, no data).
    path = zoo.save(name, tmp_path / f"{name}.onnx", weights=False, params=params)
    _check(f"{name} {params}", prepare(path))


# --- where the walk loses nodes ---------------------------------------------------------------

LOSING: list[tuple[str, dict[str, str | int], str]] = [
    ("gpt2", _DECODER, "Softmax"),
    ("llama", {**_DECODER, "kv_heads": 1, "intermediate": 48, "kv_cache": "true"}, "Softmax"),
    ("bert_base", {**_DECODER, "intermediate": 48}, "LayerNormalization"),
    ("resnet18", {"image_size": 32, "num_classes": 3}, "MaxPool"),
    ("vit_b_16", {"image_size": 32, "layers": 1, "hidden": 32, "heads": 2, "mlp_dim": 48}, "Gemm"),
]
"""Built-ins with every node of one op made one the walk does not carry: the nodes lost are
those and what follows them, sampled alone (``symbolic/lost.py``) or with the whole model."""


@pytest.mark.parametrize(("name", "params", "op"), LOSING, ids=lambda v: str(v))
def test_formulas_are_exact_where_the_walk_loses_nodes(
    monkeypatch: pytest.MonkeyPatch, name: str, params: dict[str, str | int], op: str
) -> None:
    from onnxcost.symbolic import node_costs
    from onnxcost.symbolic.shapes import _UncarriedError

    carry = node_costs._carry

    def losing(out: Any, node: onnx.NodeProto, *args: Any, **kwargs: Any) -> Any:
        if node.op_type == op:
            raise _UncarriedError("made one the walk does not carry, by the test")
        return carry(out, node, *args, **kwargs)

    monkeypatch.setattr(node_costs, "_carry", losing)
    label = f"{name} {params} without {op}"
    model = prepare(zoo.build(name, params=params))
    a = onnxcost.analyze(model, symbolic=True)
    assert any("were sampled" in w and op in w for w in a.warnings), a.warnings
    misses = _mismatches(label, model, a)
    assert not misses, "\n".join(misses[:20]) + f"\n({len(misses)} in all)"
    costs: Any = a.symbolic
    # every total but the peak has its formula (the peak is the whole walk's only), and the
    # whole model was analysed once: the lost nodes were sampled alone
    assert [k for k in TOTAL_KEYS if costs.totals[k] is None] == ["peak_activation_bytes"]
    assert costs.analyses == 1, a.warnings


# --- fresh torch exports, both exporters -------------------------------------------------------


TORCH_DIMS = {
    "mlp": {0: "batch"},
    "cnn": {0: "batch", 2: "height", 3: "width"},
    "block": {0: "batch", 1: "seq"},
    "upsample": {0: "batch", 2: "height", 3: "width"},
    "downsample": {0: "batch", 2: "height", 3: "width"},
    "unet": {0: "batch", 2: "height", 3: "width"},
}
"""The dims of input x each torch model exports as symbols."""


def _torch_case(which: str) -> tuple[Any, tuple[Any, ...]]:
    """(module, example args) for ``which``; its input's symbolic dims are ``TORCH_DIMS``."""
    import torch
    from torch import nn

    torch.manual_seed(0)

    class Cnn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.pool = nn.MaxPool2d(3, stride=2, padding=1)
            self.head = nn.Linear(8, 5)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.pool(torch.relu(self.conv(x))).mean(dim=(2, 3)))

    class Upsample(nn.Module):
        """A detector's neck: stride-2 Conv, then x 2 back up (nearest and bilinear), joined."""

        def __init__(self) -> None:
            super().__init__()
            self.down = nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.head = nn.Conv2d(16, 4, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            d = self.down(x)
            smooth = nn.functional.interpolate(d, scale_factor=2.0, mode="bilinear")
            return self.head(torch.cat([self.up(d), smooth], dim=1))

    class Downsample(nn.Module):
        """An input downsampled by 0.5 before its convolutions (nn.Upsample and interpolate):
        each Resize's size is floor(h * 0.5), 0 at h = 1, which the guard against ONNX's
        truncation refused until the walk wrote the truncation itself."""

        def __init__(self) -> None:
            super().__init__()
            self.down = nn.Upsample(scale_factor=0.5, mode="nearest")
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.strided = nn.Conv2d(8, 4, 3, stride=2, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            d = self.conv(self.down(x))
            return self.strided(nn.functional.interpolate(d, scale_factor=0.5, mode="bilinear"))

    class Unet(nn.Module):
        """A UNet level: a stride-2 Conv down, back up by two ConvTransposes (2x2 stride 2;
        3x3 stride 2, pad 1, output_padding 1: a decoder's), each cropped to the input's
        height and width (odd sizes), joined with the skip, then a Conv."""

        def __init__(self) -> None:
            super().__init__()
            self.down = nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
            self.up3 = nn.ConvTranspose2d(8, 2, 3, stride=2, padding=1, output_padding=1)
            self.head = nn.Conv2d(9, 4, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            d = torch.relu(self.down(x))
            h, w = x.shape[2], x.shape[3]
            ups = [self.up(d)[:, :, :h, :w], self.up3(d)[:, :, :h, :w]]
            return self.head(torch.cat([*ups, x], dim=1))

    class Block(nn.Module):
        """Pre-norm attention with a causal mask made from seq, then an MLP."""

        def __init__(self, d: int = 16, heads: int = 2) -> None:
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, s, d = x.shape
            q, k, v = (
                t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2)
                for t in self.qkv(self.ln1(x)).split(d, dim=-1)
            )
            scores = q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5
            mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
            attended = scores.masked_fill(mask, float("-inf")).softmax(-1) @ v
            x = x + self.out(attended.transpose(1, 2).reshape(b, s, d))
            return x + self.mlp(self.ln2(x))

    if which == "mlp":
        mlp = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
        return mlp, (torch.randn(2, 16),)
    if which == "cnn":
        return Cnn(), (torch.randn(2, 3, 16, 12),)
    if which == "upsample":
        return Upsample(), (torch.randn(2, 3, 16, 12),)
    if which == "downsample":
        return Downsample(), (torch.randn(2, 3, 16, 12),)
    if which == "unet":
        return Unet(), (torch.randn(2, 3, 16, 12),)
    return Block(), (torch.randn(2, 5, 16),)


def _export(which: str, dynamo: bool) -> onnx.ModelProto:
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    module, args = _torch_case(which)
    dynamic = TORCH_DIMS[which]
    module.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporters' deprecation and tracer warnings
        if dynamo:
            shapes = ({k: torch.export.Dim(n, min=1, max=64) for k, n in dynamic.items()},)
            program = torch.onnx.export(
                module, args, input_names=["x"], dynamic_shapes=shapes, dynamo=True, verbose=False
            )
            return program.model_proto
        buffer = io.BytesIO()
        torch.onnx.export(
            module, args, buffer, input_names=["x"], dynamic_axes={"x": dynamic}, dynamo=False
        )
    return onnx.load_from_string(buffer.getvalue())


@pytest.mark.parametrize("which", ["mlp", "cnn", "block", "upsample", "downsample", "unet"])
@pytest.mark.parametrize("exporter", ["torch_script", "torch_dynamo"])
def test_formulas_are_exact_on_fresh_torch_exports(exporter: str, which: str) -> None:
    proto = _export(which, dynamo=exporter == "torch_dynamo")
    dims = [d.dim_param for d in proto.graph.input[0].type.tensor_type.shape.dim]
    assert [d for d in dims if d] == list(TORCH_DIMS[which].values())  # exported as symbols
    _check(f"{exporter}-{which}", prepare(proto))


@pytest.mark.slow
def test_formulas_are_exact_on_a_fresh_transformers_gpt2() -> None:
    # Hugging Face's GPT-2 (2 layers, 32 wide, 32 positions), exported as a new user would:
    # the dynamo exporter only, as the TorchScript one stops at aten::diff (transformers' mask
    # code; opset 20 has no such op). 16 s at load 2.5, most of it the import and the export.
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=2, n_positions=32, vocab_size=100, use_cache=False
    )
    gpt2 = transformers.GPT2LMHeadModel(config).eval()

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gpt2 = gpt2

        def forward(self, input_ids: Any) -> Any:
            return self.gpt2(input_ids=input_ids).logits

    dims = {0: torch.export.Dim("batch", min=1, max=16), 1: torch.export.Dim("seq", min=1, max=32)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            Logits(),
            (torch.randint(0, 100, (2, 5)),),
            input_names=["input_ids"],
            dynamic_shapes=(dims,),
            dynamo=True,
            verbose=False,
        )
    _check("transformers-gpt2-dynamo", prepare(program.model_proto))
