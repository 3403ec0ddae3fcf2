"""Export tiny transformers models and fuse them with onnxruntime's transformer optimizer.

Writes, for each model, ``NAME_source.onnx`` (the TorchScript export, ``dynamo=False``) and
``NAME_fused.onnx`` (what ``onnxruntime.transformers.optimizer.optimize_model`` leaves), with
random weights from a fixed seed (no download). The committed fixtures in tests/data/fusions/
come from ``python scripts/export_fused.py tests/data/fusions --fused-only``; tests/costs/test_fusions.py also calls
:func:`export` to check fresh exports.

Needs torch, transformers and onnxruntime (not in '.[dev]').
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HIDDEN, HEADS, LAYERS, FFN = 64, 4, 2, 128
VOCAB, MAX_POS = 100, 32


@dataclass(frozen=True)
class Spec:
    """One tiny model: how to build it, its inputs and the optimizer's model type."""

    name: str
    model_type: str
    build: Callable[[], Any]
    inputs: tuple[str, ...]
    dynamic: dict[str, dict[int, str]]
    example: Callable[[], tuple[Any, ...]]
    outputs: tuple[str, ...] = ("last_hidden_state",)


def _bert() -> Any:
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=FFN,
        max_position_embeddings=MAX_POS,
        attn_implementation="eager",
    )
    return BertModel(config)


def _gpt2() -> Any:
    from transformers import GPT2Config, GPT2Model

    config = GPT2Config(
        vocab_size=VOCAB,
        n_embd=HIDDEN,
        n_layer=LAYERS,
        n_head=HEADS,
        n_positions=MAX_POS,
        use_cache=False,
        attn_implementation="eager",
    )
    return GPT2Model(config)


def _vit() -> Any:
    from transformers import ViTConfig, ViTModel

    config = ViTConfig(
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=FFN,
        image_size=32,
        patch_size=8,
        num_channels=3,
        attn_implementation="eager",
    )
    return ViTModel(config, add_pooling_layer=False)


def _llama() -> Any:
    from transformers import LlamaConfig, LlamaModel

    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS // 2,
        intermediate_size=FFN,
        max_position_embeddings=MAX_POS,
        use_cache=False,
        attn_implementation="eager",
    )
    return LlamaModel(config)


def _t5() -> Any:
    from transformers import T5Config, T5Model

    config = T5Config(
        vocab_size=VOCAB,
        d_model=HIDDEN,
        d_kv=HIDDEN // HEADS,
        d_ff=FFN,
        num_layers=LAYERS,
        num_heads=HEADS,
        use_cache=False,
        attn_implementation="eager",
    )
    return T5Model(config)


def _bart() -> Any:
    from transformers import BartConfig, BartModel

    config = BartConfig(
        vocab_size=VOCAB,
        d_model=HIDDEN,
        encoder_layers=LAYERS,
        decoder_layers=LAYERS,
        encoder_attention_heads=HEADS,
        decoder_attention_heads=HEADS,
        encoder_ffn_dim=FFN,
        decoder_ffn_dim=FFN,
        max_position_embeddings=MAX_POS,
        use_cache=False,
        attn_implementation="eager",
    )
    return BartModel(config)


def _ids_mask() -> tuple[Any, ...]:
    import torch

    ids = torch.randint(0, VOCAB, (2, 16))
    return ids, torch.ones_like(ids)


def _seq2seq() -> tuple[Any, ...]:
    import torch

    ids = torch.randint(0, VOCAB, (2, 16))
    return ids, torch.ones_like(ids), ids


def _ids() -> tuple[Any, ...]:
    import torch

    ids = torch.randint(0, VOCAB, (2, 16))
    return ids, torch.ones_like(ids), torch.zeros_like(ids)


def _gpt2_inputs() -> tuple[Any, ...]:
    import torch

    ids = torch.randint(0, VOCAB, (2, 16))
    return ids, None, torch.ones_like(ids)


def _pixels() -> tuple[Any, ...]:
    import torch

    return (torch.randn(2, 3, 32, 32),)


SEQ = {0: "batch", 1: "seq"}
SPECS = {
    "bert": Spec(
        "bert",
        "bert",
        _bert,
        ("input_ids", "attention_mask", "token_type_ids"),
        {"input_ids": SEQ, "attention_mask": SEQ, "token_type_ids": SEQ},
        _ids,
        ("last_hidden_state", "pooler_output"),
    ),
    "gpt2": Spec(
        "gpt2",
        "gpt2",
        _gpt2,
        ("input_ids", "attention_mask"),
        {"input_ids": SEQ, "attention_mask": SEQ},
        _gpt2_inputs,
    ),
    "vit": Spec("vit", "vit", _vit, ("pixel_values",), {"pixel_values": {0: "batch"}}, _pixels),
    # no "llama" model type: onnxruntime fuses a Llama's norms and SiLU under "gpt2"
    "llama": Spec(
        "llama",
        "gpt2",
        _llama,
        ("input_ids", "attention_mask"),
        {"input_ids": SEQ, "attention_mask": SEQ},
        _ids_mask,
    ),
    "t5": Spec(
        "t5",
        "t5",
        _t5,
        ("input_ids", "attention_mask", "decoder_input_ids"),
        {"input_ids": SEQ, "attention_mask": SEQ, "decoder_input_ids": SEQ},
        _seq2seq,
    ),
    "bart": Spec(
        "bart",
        "bart",
        _bart,
        ("input_ids", "attention_mask", "decoder_input_ids"),
        {"input_ids": SEQ, "attention_mask": SEQ, "decoder_input_ids": SEQ},
        _seq2seq,
    ),
}
FIXTURES = ("bert", "gpt2", "vit", "llama")
"""The models whose fused form tests/data/fusions/ holds (t5 and bart only fresh, in slow tests)."""


def _wrapped(model: Any, outputs: int) -> Any:
    """``model`` returning a tuple of its first ``outputs`` outputs."""
    import torch

    class Module(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args: Any) -> Any:
            return self.inner(*args, return_dict=False)[:outputs]

    return Module(model).eval()


def export(
    name: str, folder: Path, *, opt_level: int = 1, options: dict[str, bool] | None = None
) -> tuple[Path, Path]:
    """Write NAME_source.onnx and NAME_fused.onnx into ``folder``; returns their paths.

    ``options`` sets attributes of onnxruntime's FusionOptions (``use_multi_head_attention``
    fuses BERT's attention into MultiHeadAttention after separate Q, K, V MatMuls).

    ``opt_level`` 2 lets onnxruntime's own graph fusions run first (a Llama's SiLU becomes
    QuickGelu, shape Gathers a Split)."""
    import torch
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    spec = SPECS[name]
    torch.manual_seed(0)
    module = _wrapped(spec.build(), len(spec.outputs))
    source = folder / f"{name}_source.onnx"
    fused = folder / f"{name}_fused.onnx"
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            spec.example(),
            str(source),
            input_names=list(spec.inputs),
            output_names=list(spec.outputs),
            dynamic_axes={**spec.dynamic, **{name: {0: "batch"} for name in spec.outputs}},
            opset_version=17,
            dynamo=False,
        )
    logging.getLogger("onnxruntime").setLevel(logging.ERROR)
    logging.getLogger("fusion").setLevel(logging.ERROR)
    fusion = FusionOptions(spec.model_type)
    for key, value in (options or {}).items():
        setattr(fusion, key, value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        optimized = optimize_model(
            str(source),
            model_type=spec.model_type,
            num_heads=HEADS,
            hidden_size=HIDDEN,
            opt_level=opt_level,
            optimization_options=fusion,
        )
    optimized.save_model_to_file(str(fused))
    return source, fused


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--models", nargs="*", default=list(FIXTURES), choices=sorted(SPECS))
    parser.add_argument("--fused-only", action="store_true", help="delete the sources after")
    args = parser.parse_args(argv)
    args.folder.mkdir(parents=True, exist_ok=True)
    for name in args.models:
        source, fused = export(name, args.folder)
        if args.fused_only:
            source.unlink()
        print(f"{fused}: {fused.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
