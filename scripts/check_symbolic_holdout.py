"""Check ``analyze --symbolic`` on fresh exports it was not built on (issue 22), not a test.

Exports tiny transformers models (random weights) through torch's dynamo exporter, and a
detector's neck (Resize by stored scales) in (batch, h, w), ``batch``
and ``seq`` symbolic for the text models, ``batch`` for the image models and ``batch`` and
``length`` for wav2vec2, and checks each as tests/test_symbolic_property.py does: every
total's and every node's formula against a concrete analysis at three random points, at
every symbol = 1 and at each allowed 0. Prints one line a model: its nodes, how the formulas
were found (1 analysis: the one walk; more: sampled, with the warning that says why),
formulas that are null, and mismatches (there should be none). Needs torch, onnxscript and
transformers; an export that fails is one line, not a stop.

    python scripts/check_symbolic_holdout.py [NAME ...] [--save DIR]
    python scripts/check_symbolic_holdout.py --dir DIR

``--dir DIR`` checks every .onnx file in DIR the same way instead (another framework's
exports: scripts/export_holdout_frameworks.py writes TensorFlow/Keras and scikit-learn ones,
scripts/export_holdout_torch.py TorchScript, dynamo and optimum ones); it needs no torch.

tests/data/exports/ holds two of them, written with ``--save`` (``bert``: its GatherElements;
``neck``: its Resizes), and five of scripts/export_holdout_frameworks.py's (``keras_gru``:
tf2onnx's Loops for a Keras GRU; ``sk_logistic``, ``sk_pca_svc``, ``sk_random_forest``,
``sk_gradient_boosting``: skl2onnx's ai.onnx.ml ops) and one of
scripts/export_holdout_torchvision.py's (``tv_tiny_swin_script``: Swin's F.pad and shifted
windows as the TorchScript exporter writes them), so that the property test covers them
where torch, TensorFlow, scikit-learn and torchvision are absent.

Exit status 1 if any formula misses a concrete analysis.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import onnx

import onnxcost
from onnxcost.prepare import PreparedModel, prepare

Case = tuple[Any, tuple[Any, ...], tuple[dict[int, Any], ...]]


def _cases() -> dict[str, Callable[[], Case]]:
    import torch
    import transformers as tr

    dim = torch.export.Dim
    text_dims = ({0: dim("batch", min=1, max=8), 1: dim("seq", min=2, max=32)},)

    def wrapped(model: Any, call: Callable[[Any, Any], Any]) -> Any:
        class Wrapped(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.m = model.eval()

            def forward(self, x: Any) -> Any:
                return call(self.m, x)

        return Wrapped()

    def text(cls: Any, config: Any, logits: bool = False) -> Case:
        def call(m: Any, ids: Any) -> Any:
            out = m(input_ids=ids)
            return out.logits if logits else out[0]

        return wrapped(cls(config), call), (torch.randint(0, 90, (2, 8)),), text_dims

    def image(cls: Any, config: Any) -> Case:
        model = wrapped(cls(config), lambda m, x: m(pixel_values=x)[0])
        return model, (torch.randn(2, 3, 32, 32),), ({0: dim("batch", min=1, max=8)},)

    def audio(cls: Any, config: Any) -> Case:
        model = wrapped(cls(config), lambda m, x: m(x)[0])
        shapes = ({0: dim("batch", min=1, max=8), 1: dim("length", min=200, max=2000)},)
        return model, (torch.randn(2, 400),), shapes

    def neck() -> Case:
        """A detector's neck: stride-2 Conv, x 2 back up (nearest and bilinear), joined, in
        (batch, h, w): Resize by stored scales."""

        class Neck(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.down = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
                self.head = torch.nn.Conv2d(16, 4, 3, padding=1)

            def forward(self, x: Any) -> Any:
                d = self.down(x)
                near = torch.nn.functional.interpolate(d, scale_factor=2.0, mode="nearest")
                smooth = torch.nn.functional.interpolate(d, scale_factor=2.0, mode="bilinear")
                return self.head(torch.cat([near, smooth], dim=1))

        hw = {2: dim("h", min=2, max=256), 3: dim("w", min=2, max=256)}
        return Neck().eval(), (torch.randn(2, 3, 16, 12),), ({0: dim("batch"), **hw},)

    small = {
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "vocab_size": 100,
        "max_position_embeddings": 64,
    }
    gqa = {**small, "num_key_value_heads": 1, "use_cache": False}
    vit = {**small, "image_size": 32, "patch_size": 8}
    del vit["vocab_size"], vit["max_position_embeddings"]
    return {
        "neck": neck,
        "bert": lambda: text(tr.BertModel, tr.BertConfig(**small)),
        "roberta": lambda: text(
            tr.RobertaModel, tr.RobertaConfig(**{**small, "max_position_embeddings": 70})
        ),
        "distilbert": lambda: text(
            tr.DistilBertModel,
            tr.DistilBertConfig(
                dim=32,
                n_layers=2,
                n_heads=2,
                hidden_dim=64,
                vocab_size=100,
                max_position_embeddings=64,
            ),
        ),
        "albert": lambda: text(tr.AlbertModel, tr.AlbertConfig(**small, embedding_size=16)),
        "electra": lambda: text(tr.ElectraModel, tr.ElectraConfig(**small, embedding_size=16)),
        "llama": lambda: text(tr.LlamaForCausalLM, tr.LlamaConfig(**gqa), logits=True),
        "mistral": lambda: text(
            tr.MistralForCausalLM, tr.MistralConfig(**gqa, sliding_window=None), logits=True
        ),
        "qwen2": lambda: text(tr.Qwen2ForCausalLM, tr.Qwen2Config(**gqa), logits=True),
        "gemma": lambda: text(tr.GemmaForCausalLM, tr.GemmaConfig(**gqa, head_dim=16), logits=True),
        "gpt_neox": lambda: text(
            tr.GPTNeoXForCausalLM, tr.GPTNeoXConfig(**small, use_cache=False), logits=True
        ),
        "phi": lambda: text(tr.PhiForCausalLM, tr.PhiConfig(**small, use_cache=False), logits=True),
        "opt": lambda: text(
            tr.OPTForCausalLM,
            tr.OPTConfig(
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=2,
                ffn_dim=64,
                vocab_size=100,
                max_position_embeddings=64,
                word_embed_proj_dim=32,
                use_cache=False,
            ),
            logits=True,
        ),
        "bloom": lambda: text(
            tr.BloomForCausalLM,
            tr.BloomConfig(hidden_size=32, n_layer=2, n_head=2, vocab_size=100, use_cache=False),
            logits=True,
        ),
        "falcon": lambda: text(
            tr.FalconForCausalLM,
            tr.FalconConfig(
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=2,
                vocab_size=100,
                use_cache=False,
            ),
            logits=True,
        ),
        "vit": lambda: image(tr.ViTModel, tr.ViTConfig(**vit)),
        "deit": lambda: image(tr.DeiTModel, tr.DeiTConfig(**vit)),
        "resnet": lambda: image(
            tr.ResNetModel,
            tr.ResNetConfig(
                embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic"
            ),
        ),
        "convnext": lambda: image(
            tr.ConvNextModel, tr.ConvNextConfig(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2)
        ),
        "segformer": lambda: image(
            tr.SegformerModel,
            tr.SegformerConfig(
                num_encoder_blocks=2,
                depths=[1, 1],
                sr_ratios=[2, 1],
                hidden_sizes=[16, 32],
                num_attention_heads=[1, 2],
                patch_sizes=[7, 3],
                strides=[4, 2],
                mlp_ratios=[2, 2],
            ),
        ),
        "wav2vec2": lambda: audio(
            tr.Wav2Vec2Model,
            tr.Wav2Vec2Config(
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=64,
                conv_dim=(16, 16),
                conv_stride=(5, 2),
                conv_kernel=(10, 3),
                num_conv_pos_embeddings=16,
                num_conv_pos_embedding_groups=2,
            ),
        ),
    }


def _check(name: str, model: PreparedModel) -> bool:
    """One line for ``model`` (and its sampling warnings and first misses); True if a formula
    misses a concrete analysis."""
    from test_symbolic_property import _mismatches

    start = time.perf_counter()
    try:
        a = onnxcost.analyze(model, symbolic=True)
    except onnxcost.OnnxcostError as e:
        print(f"{name}: refused in one line: {e}", flush=True)
        return False
    seconds = time.perf_counter() - start
    costs: Any = a.symbolic
    misses = _mismatches(name, model, a)
    nulls = sum(f is None for formulas in costs.nodes for f in formulas.values())
    null_totals = [k for k, f in costs.totals.items() if f is None]
    print(
        f"{name}: {len(model.view.order)} nodes, symbols {', '.join(costs.symbols)}, "
        f"{costs.analyses} analyses, {seconds:.2f} s, null formulas: {nulls} of the "
        f"nodes', totals {null_totals or 'none'}; mismatches {len(misses)}",
        flush=True,
    )
    for w in a.warnings:
        if "sampled" in w or "no exact formula" in w:
            print(f"    {w}")
    for miss in misses[:3]:
        print(f"    MISS {miss}")
    return bool(misses)


def _check_dir(folder: Path) -> int:
    """Every .onnx file in ``folder`` (sorted; not its subfolders), as the torch exports are
    checked; a file onnxcost cannot load is one line."""
    files = sorted(folder.glob("*.onnx"))
    if not files:
        print(f"no .onnx file in {folder}", file=sys.stderr)
        return 1
    failed = False
    for path in files:
        try:
            model = prepare(path)
        except onnxcost.OnnxcostError as e:
            print(f"{path.name}: refused in one line: {e}", flush=True)
            continue
        failed |= _check(path.name, model)
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="models to check (default: all)")
    parser.add_argument("--save", type=Path, help="also write each export there, as NAME.onnx")
    parser.add_argument(
        "--dir",
        type=Path,
        help="check every .onnx file in DIR instead of exporting (needs no torch)",
    )
    args = parser.parse_args()
    if args.dir is not None:
        if args.names or args.save is not None:
            parser.error("--dir checks the files in DIR: give no NAME and no --save with it")
        return _check_dir(args.dir)
    import torch

    torch.manual_seed(0)
    cases = _cases()
    unknown = [n for n in args.names if n not in cases]
    if unknown:
        parser.error(f"unknown model {', '.join(unknown)}; known: {', '.join(cases)}")
    failed = False
    for name in args.names or cases:
        try:
            module, example, shapes = cases[name]()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                program = torch.onnx.export(
                    module,
                    example,
                    input_names=["x"],
                    dynamic_shapes=shapes,
                    dynamo=True,
                    verbose=False,
                )
        except Exception as e:  # the exporter's failure, not onnxcost's
            print(f"{name}: the export failed ({type(e).__name__})", flush=True)
            continue
        if args.save is not None:
            args.save.mkdir(parents=True, exist_ok=True)
            onnx.save(program.model_proto, args.save / f"{name}.onnx")
        failed |= _check(name, prepare(program.model_proto))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
