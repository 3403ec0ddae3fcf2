"""Write hold-out exports from torch's TorchScript exporter, its dynamo exporter and Hugging
Face optimum (tiny configs, random weights), for checking onnxcost on files as users make them.

TorchScript and dynamo exports (``NAME_script.onnx``, ``NAME_dynamo.onnx``) need torch,
onnxscript, transformers and onnxruntime: the project's main venv. Decoders with a KV cache
(``*_kv``) take ``input_ids``, ``attention_mask`` and ``past_key_values.{i}.{key,value}`` and
return ``logits`` and ``present.{i}.{key,value}`` (optimum's names), dims ``batch``, ``seq``,
``past_seq``, ``total_seq``. Each file is run in onnxruntime against eager torch at its
example point and at a second one (other batch, seq and past): a tracer that fixed a size
shows as a difference there.

optimum's exports (``optimum_NAME/model.onnx``, task ``text-generation-with-past``; seq2seq
models ``--task text2text-generation-with-past``) need a separate venv with optimum-onnx (its
transformers pin differs from the main venv's), given as ``--optimum-python``::

    python3 -m venv /work/optenv
    /work/optenv/bin/pip install torch==2.13.0  # the CPU build; a plain torch pulls CUDA's
    /work/optenv/bin/pip install optimum-onnx onnxruntime  # optimum 2.1, transformers 4.57
    python scripts/export_holdout_torch.py --out /tmp/holdout_torch \\
        [--optimum-python /work/optenv/bin/python] [NAME ...]

tests/data/exports/tiny_*_kv_*.onnx were written with ``--out tests/data/exports
--drop-metadata tiny_gpt2_kv tiny_llama_kv``; tests/data/exports/optimum_tiny_*.onnx (T5's
decoders, GPT-2's merged decoder and the two it joins) with ``--out DIR --optimum-python
/work/optenv/bin/python tiny_t5 tiny_gpt2_merged``, then copied from DIR (the encoder left).

The script then runs itself under that python with ``--optimum-only``: each model is saved
with ``save_pretrained`` and exported with ``optimum-cli export onnx`` (offline), into
``optimum_NAME/``, each file copied beside the others as ``optimum_NAME[_FILE].onnx``. An
export that fails is one printed line, not a stop. Not a test.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

OPSET = 17
"""The TorchScript exporter's opset (optimum's default for these models is 14 to 18)."""


class Export:
    """One model to export: a module, its example inputs (by name), the dims of each input and
    output that are symbolic, and a second input set (other sizes) to check the file on."""

    def __init__(
        self,
        module: Any,
        inputs: dict[str, Any],
        outputs: list[str],
        dims: dict[str, dict[int, str]],
        second: dict[str, Any],
    ) -> None:
        self.module, self.inputs, self.outputs = _randomised(module).eval(), inputs, outputs
        self.dims, self.second = dims, second


def _randomised(module: Any) -> Any:
    """``module`` with every parameter drawn from N(0, 0.02): transformers' initial weights
    have equal biases (0) and norm scales (1), which the dynamo exporter stores once for all
    their users, so its files would count fewer parameters than a trained model's. Tied
    parameters stay tied (one tensor)."""
    import torch

    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0.0, 0.02)
    return module


def _with_cache(feed: dict[str, Any], layers: int, shape: tuple[int, ...]) -> dict[str, Any]:
    """``feed`` and each layer's past keys and values of ``shape``, in optimum's names."""
    import torch

    for i in range(layers):
        for kind in ("key", "value"):
            feed[f"past_key_values.{i}.{kind}"] = torch.randn(*shape)
    return feed


def _cache_io(dims: dict[str, dict[int, str]], layers: int) -> list[str]:
    """Add each layer's past and present keys and values to ``dims`` (batch, past_seq and
    total_seq); returns the outputs: logits, then the presents."""
    outputs = ["logits"]
    for i in range(layers):
        for kind in ("key", "value"):
            dims[f"past_key_values.{i}.{kind}"] = {0: "batch", 2: "past_seq"}
            dims[f"present.{i}.{kind}"] = {0: "batch", 2: "total_seq"}
            outputs.append(f"present.{i}.{kind}")
    return outputs


def _decoder_kv(model: Any, layers: int, kv_heads: int, head_dim: int, vocab: int) -> Export:
    """A causal LM with its KV cache as explicit inputs and outputs (optimum's names)."""
    import torch
    import transformers as tr

    class WithPast(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model.eval()

        def forward(self, input_ids: Any, attention_mask: Any, *past: Any) -> Any:
            cache = tr.DynamicCache(config=model.config)
            for i in range(layers):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.m(
                input_ids=input_ids,
                attention_mask=attention_mask,
                past_key_values=cache,
                use_cache=True,
            )
            presents = out.past_key_values
            flat = [out.logits]
            for i in range(layers):
                flat += [presents.layers[i].keys, presents.layers[i].values]
            return tuple(flat)

    def feeds(batch: int, seq: int, past: int) -> dict[str, Any]:
        feed = {
            "input_ids": torch.randint(0, vocab, (batch, seq)),
            "attention_mask": torch.ones(batch, past + seq, dtype=torch.int64),
        }
        return _with_cache(feed, layers, (batch, kv_heads, past, head_dim))

    dims: dict[str, dict[int, str]] = {
        "input_ids": {0: "batch", 1: "seq"},
        "attention_mask": {0: "batch", 1: "total_seq"},
        "logits": {0: "batch", 1: "seq"},
    }
    outputs = _cache_io(dims, layers)
    return Export(WithPast(), feeds(2, 3, 4), outputs, dims, feeds(3, 5, 7))


def _text(model: Any, vocab: int, logits: bool = False, mask: bool = True) -> Export:
    """An encoder or a causal LM without a cache over (batch, seq): input_ids and an
    attention_mask (transformers' mask code reaches aten::diff, which the TorchScript
    exporter has no rule for, when the mask is None)."""
    import torch

    class Text(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model.eval()

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            out = self.m(input_ids=input_ids, attention_mask=attention_mask)
            return out.logits if logits else out[0]

    def feeds(batch: int, seq: int) -> dict[str, Any]:
        return {
            "input_ids": torch.randint(0, vocab, (batch, seq)),
            "attention_mask": torch.ones(batch, seq, dtype=torch.int64),
        }

    name = "logits" if logits else "last_hidden_state"
    dims = {n: {0: "batch", 1: "seq"} for n in ("input_ids", "attention_mask", name)}
    return Export(Text(), feeds(2, 5), [name], dims, feeds(3, 9))


def _single(
    module: Any, name: str, example: Any, second: Any, dims: dict[int, str], out: str
) -> Export:
    """A model of one input (images, audio features): ``module(x)[0]`` or its tensor."""
    import torch

    class One(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = module.eval()

        def forward(self, x: Any) -> Any:
            y = self.m(x)
            return y if isinstance(y, torch.Tensor) else y[0]

    out_dims = {0: "batch"} if 0 in dims else {}
    return Export(One(), {name: example}, [out], {name: dims, out: out_dims}, {name: second})


def _cases() -> dict[str, Callable[[], Export]]:
    import torch
    import transformers as tr
    from torch import nn

    small = {
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "vocab_size": 100,
        "max_position_embeddings": 64,
    }
    gqa = {**small, "num_attention_heads": 4, "num_key_value_heads": 2}

    def gpt2_config() -> Any:
        return tr.GPT2Config(
            n_layer=2,
            n_embd=32,
            n_head=2,
            n_positions=64,
            vocab_size=100,
            bos_token_id=0,
            eos_token_id=0,
        )

    def cnn() -> Export:
        class Cnn(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.body = nn.Sequential(
                    nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False),
                    nn.BatchNorm2d(8),
                    nn.ReLU(),
                    nn.MaxPool2d(2),
                    nn.Conv2d(8, 16, 3, padding=1),
                    nn.ReLU(),
                    nn.AdaptiveAvgPool2d(1),
                    nn.Flatten(),
                    nn.Linear(16, 10),
                )

            def forward(self, x: Any) -> Any:
                return self.body(x)

        dims = {0: "batch", 2: "height", 3: "width"}
        return _single(Cnn(), "x", torch.randn(2, 3, 32, 24), torch.randn(3, 3, 40, 36), dims, "y")

    def vit() -> Export:
        config = tr.ViTConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            image_size=32,
            patch_size=8,
        )
        x, x2 = torch.randn(2, 3, 32, 32), torch.randn(3, 3, 32, 32)
        return _single(tr.ViTModel(config), "pixel_values", x, x2, {0: "batch"}, "hidden")

    def whisper_encoder() -> Export:
        config = tr.WhisperConfig(
            d_model=32,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            num_mel_bins=16,
            max_source_positions=32,
            max_target_positions=32,
            vocab_size=100,
            pad_token_id=0,
            bos_token_id=0,
            eos_token_id=0,
            decoder_start_token_id=0,
        )
        encoder = tr.WhisperModel(config).get_encoder()
        x, x2 = torch.randn(2, 16, 64), torch.randn(3, 16, 64)
        return _single(encoder, "input_features", x, x2, {0: "batch"}, "hidden")

    def t5_encoder() -> Export:
        config = tr.T5Config(
            d_model=32,
            d_kv=16,
            d_ff=64,
            num_layers=2,
            num_heads=2,
            vocab_size=100,
            decoder_start_token_id=0,
        )
        return _text(tr.T5EncoderModel(config), 100)

    def t5_decoder_kv() -> Export:
        """T5's decoder over the encoder's states, with its self-attention cache as inputs
        (the cross-attention's keys and values computed again each step)."""
        config = tr.T5Config(
            d_model=32,
            d_kv=16,
            d_ff=64,
            num_layers=2,
            num_heads=2,
            vocab_size=100,
            decoder_start_token_id=0,
            is_decoder=True,
            is_encoder_decoder=False,
        )
        decoder = tr.T5ForConditionalGeneration(config).eval()
        layers = 2

        class Step(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.m = decoder

            def forward(self, input_ids: Any, encoder_hidden_states: Any, *past: Any) -> Any:
                cache = tr.EncoderDecoderCache(tr.DynamicCache(), tr.DynamicCache())
                for i in range(layers):
                    cache.self_attention_cache.update(past[2 * i], past[2 * i + 1], i)
                out = self.m.decoder(
                    input_ids=input_ids,
                    encoder_hidden_states=encoder_hidden_states,
                    past_key_values=cache,
                    use_cache=True,
                )
                hidden = out.last_hidden_state * (self.m.model_dim**-0.5)
                flat = [self.m.lm_head(hidden)]
                selfs = out.past_key_values.self_attention_cache
                for i in range(layers):
                    flat += [selfs.layers[i].keys, selfs.layers[i].values]
                return tuple(flat)

        def feeds(batch: int, seq: int, past: int, source: int) -> dict[str, Any]:
            feed = {
                "input_ids": torch.randint(0, 100, (batch, seq)),
                "encoder_hidden_states": torch.randn(batch, source, 32),
            }
            return _with_cache(feed, layers, (batch, 2, past, 16))

        dims: dict[str, dict[int, str]] = {
            "input_ids": {0: "batch", 1: "seq"},
            "encoder_hidden_states": {0: "batch", 1: "source"},
            "logits": {0: "batch", 1: "seq"},
        }
        outputs = _cache_io(dims, layers)
        return Export(Step(), feeds(2, 3, 4, 6), outputs, dims, feeds(3, 5, 7, 9))

    return {
        "cnn": cnn,
        "bert": lambda: _text(tr.BertModel(tr.BertConfig(**small)), 100),
        "distilbert": lambda: _text(
            tr.DistilBertModel(
                tr.DistilBertConfig(
                    dim=32,
                    n_layers=2,
                    n_heads=2,
                    hidden_dim=64,
                    vocab_size=100,
                    max_position_embeddings=64,
                )
            ),
            100,
        ),
        "gpt2": lambda: _text(tr.GPT2LMHeadModel(gpt2_config()), 100, logits=True),
        "gpt2_kv": lambda: _decoder_kv(tr.GPT2LMHeadModel(gpt2_config()), 2, 2, 16, 100),
        "llama_kv": lambda: _decoder_kv(
            tr.LlamaForCausalLM(tr.LlamaConfig(**gqa, bos_token_id=0, eos_token_id=0)),
            2,
            2,
            8,
            100,
        ),
        "qwen2_kv": lambda: _decoder_kv(
            tr.Qwen2ForCausalLM(tr.Qwen2Config(**gqa, bos_token_id=0, eos_token_id=0)),
            2,
            2,
            8,
            100,
        ),
        "mistral_kv": lambda: _decoder_kv(
            tr.MistralForCausalLM(
                tr.MistralConfig(**gqa, sliding_window=None, bos_token_id=0, eos_token_id=0)
            ),
            2,
            2,
            8,
            100,
        ),
        # small enough for tests/data/exports (1 layer, 16 wide, 32 tokens and positions)
        "tiny_gpt2_kv": lambda: _decoder_kv(
            tr.GPT2LMHeadModel(
                tr.GPT2Config(
                    n_layer=1,
                    n_embd=16,
                    n_head=2,
                    n_positions=32,
                    vocab_size=32,
                    bos_token_id=0,
                    eos_token_id=0,
                )
            ),
            1,
            2,
            8,
            32,
        ),
        "tiny_llama_kv": lambda: _decoder_kv(
            tr.LlamaForCausalLM(
                tr.LlamaConfig(
                    hidden_size=16,
                    num_hidden_layers=1,
                    num_attention_heads=4,
                    num_key_value_heads=2,
                    intermediate_size=32,
                    vocab_size=32,
                    max_position_embeddings=32,
                    bos_token_id=0,
                    eos_token_id=0,
                )
            ),
            1,
            2,
            4,
            32,
        ),
        "t5_encoder": t5_encoder,
        "t5_decoder_kv": t5_decoder_kv,
        "vit": vit,
        "whisper_encoder": whisper_encoder,
    }


def _export(case: Export, dynamo: bool) -> bytes:
    import torch

    names = list(case.inputs)
    args = tuple(case.inputs.values())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporters' deprecation and tracer warnings
        if dynamo:
            # one torch.export.Dim a symbol (the TorchScript exporter's dynamic_axes do not
            # convert where a dim is a sum: attention_mask's total_seq, left to torch)
            made: dict[str, Any] = {}
            for symbol in {s for n in names for s in case.dims[n].values()}:
                made[symbol] = torch.export.Dim(symbol, max=1024)
            made["total_seq"] = torch.export.Dim.AUTO
            flat = [{k: made[s] for k, s in case.dims[n].items()} for n in names]
            fixed = _named_parameters(case.module)  # then *past, one group to torch.export
            shapes = (*flat[:fixed], tuple(flat[fixed:])) if fixed < len(flat) else tuple(flat)
            program = torch.onnx.export(
                case.module,
                args,
                input_names=names,
                output_names=case.outputs,
                dynamic_shapes=shapes,
                dynamo=True,
                verbose=False,
            )
            assert program is not None
            buffer = io.BytesIO()
            program.save(buffer)
            return buffer.getvalue()
        buffer = io.BytesIO()
        torch.onnx.export(
            case.module,
            args,
            buffer,
            input_names=names,
            output_names=case.outputs,
            dynamic_axes=case.dims,
            dynamo=False,
            opset_version=OPSET,
        )
        return buffer.getvalue()


def _named_parameters(module: Any) -> int:
    """How many of ``module.forward``'s parameters come before its ``*args``, if any."""
    import inspect

    kinds = [p.kind for p in inspect.signature(module.forward).parameters.values()]
    star = inspect.Parameter.VAR_POSITIONAL
    return kinds.index(star) if star in kinds else len(kinds)


def _max_difference(path: Path, case: Export) -> str:
    """The largest |onnxruntime - torch| over the outputs, at the example and second point."""
    import numpy as np
    import onnxruntime as ort
    import torch

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    worst = []
    for feed in (case.inputs, case.second):
        with torch.no_grad():
            expected = case.module(*feed.values())
        expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
        try:
            got = session.run(None, {k: v.numpy() for k, v in feed.items() if k in wanted})
        except Exception as e:  # a size the tracer fixed
            return f"onnxruntime fails at {_sizes(feed)}: {str(e).splitlines()[0][:120]}"
        if [g.shape for g in got] != [tuple(e.shape) for e in expected]:
            return f"shapes differ at {_sizes(feed)}"
        worst.append(
            max(
                float(np.max(np.abs(g - e.numpy()), initial=0.0))
                for g, e in zip(got, expected, strict=True)
            )
        )
    return f"max |ort - torch| {worst[0]:.1e} at the example, {worst[1]:.1e} at the second point"


def _sizes(feed: dict[str, Any]) -> str:
    return ", ".join(f"{k} {list(v.shape)}" for k, v in list(feed.items())[:3])


# --- optimum (run under the optimum venv's python) ---------------------------------------------

OPTIMUM = {
    "gpt2": "text-generation-with-past",
    "llama": "text-generation-with-past",
    "qwen2": "text-generation-with-past",
    "t5": "text2text-generation-with-past",
    "gpt2_merged": "merged",
    "tiny_t5": "text2text-generation-with-past",
    "tiny_gpt2_merged": "merged",
}
"""Each model's optimum-cli task; 'merged': a decoder-only merged decoder, which optimum-cli no
longer writes (it exports one model.onnx with the cache), made as optimum 1.x made it for
every decoder: the decoder without the cache and the one with it exported by optimum's own
exporter (``optimum.exporters.onnx.export``, its config with ``use_past_in_inputs`` false,
then true) and joined by its ``optimum.onnx.merge_decoders`` into ``decoder_model_merged.onnx``
(one If on ``use_cache_branch``)."""


def _optimum_model(name: str) -> Any:
    import transformers as tr

    small = {
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "intermediate_size": 64,
        "vocab_size": 100,
        "max_position_embeddings": 64,
        "bos_token_id": 0,
        "eos_token_id": 0,
    }
    if name in ("gpt2", "gpt2_merged"):
        config = tr.GPT2Config(
            n_layer=2,
            n_embd=32,
            n_head=2,
            n_positions=64,
            vocab_size=100,
            bos_token_id=0,
            eos_token_id=0,
        )
        return tr.GPT2LMHeadModel(config)
    if name == "tiny_gpt2_merged":  # small enough for tests/data/exports, as tiny_gpt2_kv
        config = tr.GPT2Config(
            n_layer=1,
            n_embd=16,
            n_head=2,
            n_positions=32,
            vocab_size=32,
            bos_token_id=0,
            eos_token_id=0,
        )
        return tr.GPT2LMHeadModel(config)
    if name == "tiny_t5":
        config = tr.T5Config(
            d_model=16,
            d_kv=8,
            d_ff=32,
            num_layers=1,
            num_heads=2,
            vocab_size=32,
            relative_attention_num_buckets=8,
            decoder_start_token_id=0,
        )
        return tr.T5ForConditionalGeneration(config)
    if name == "llama":
        config = tr.LlamaConfig(**small, num_attention_heads=4, num_key_value_heads=2)
        return tr.LlamaForCausalLM(config)
    if name == "qwen2":
        config = tr.Qwen2Config(**small, num_attention_heads=4, num_key_value_heads=2)
        return tr.Qwen2ForCausalLM(config)
    config = tr.T5Config(
        d_model=32,
        d_kv=16,
        d_ff=64,
        num_layers=2,
        num_heads=2,
        vocab_size=100,
        decoder_start_token_id=0,
    )
    return tr.T5ForConditionalGeneration(config)


def _optimum_only(out: Path, names: list[str]) -> int:
    import torch

    os.environ["HF_HUB_OFFLINE"] = "1"
    torch.manual_seed(0)
    cli = Path(sys.executable).with_name("optimum-cli")
    for name in names or OPTIMUM:
        target = out / f"optimum_{name}"
        saved = out / "pretrained" / name
        shutil.rmtree(target, ignore_errors=True)
        try:
            _randomised(_optimum_model(name)).save_pretrained(saved)
        except Exception as e:
            print(f"optimum_{name}: save_pretrained failed ({type(e).__name__}: {e})")
            continue
        if OPTIMUM[name] == "merged":
            failed = _merged_decoder(saved, target)
        else:
            command = [str(cli), "export", "onnx", "--model", str(saved), "--task", OPTIMUM[name]]
            done = subprocess.run(
                [*command, str(target)], capture_output=True, text=True, check=False
            )
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            failed = f"optimum-cli failed ({done.returncode}): {tail[0][:200]}"
            failed = "" if done.returncode == 0 else failed
        files = sorted(p.name for p in target.glob("*.onnx")) if target.is_dir() else []
        if failed or not files:
            print(f"optimum_{name}: {failed or 'no file written'}")
            continue
        copies = []  # beside the others, for check_symbolic_holdout.py --dir
        for file in files:
            stem = Path(file).stem
            copy = out / (
                f"optimum_{name}.onnx" if stem == "model" else f"optimum_{name}_{stem}.onnx"
            )
            shutil.copyfile(target / file, copy)
            copies.append(copy.name)
        print(f"optimum_{name}: {', '.join(copies)} ({OPTIMUM[name]})")
    return 0


def _merged_decoder(saved: Path, target: Path) -> str:
    """Write ``decoder_model.onnx``, ``decoder_with_past_model.onnx`` and their merge
    ``decoder_model_merged.onnx`` of the causal LM saved in ``saved`` (``OPTIMUM``'s 'merged');
    the failure in one line, or ''."""
    import transformers as tr
    from optimum.exporters.onnx import export
    from optimum.exporters.tasks import TasksManager
    from optimum.onnx import merge_decoders

    target.mkdir(parents=True, exist_ok=True)
    try:
        model = tr.AutoModelForCausalLM.from_pretrained(saved).eval()
        make = TasksManager.get_exporter_config_constructor(
            "onnx", model, task="text-generation-with-past"
        )
        for stem, past in (("decoder_model", False), ("decoder_with_past_model", True)):
            config = make(model.config, use_past=True, use_past_in_inputs=past)
            export(model, config, target / f"{stem}.onnx", opset=OPSET_OPTIMUM)
        merge_decoders(
            target / "decoder_model.onnx",
            target / "decoder_with_past_model.onnx",
            save_path=target / "decoder_model_merged.onnx",
        )
    except Exception as e:  # the exporter's failure, not onnxcost's
        return f"the merged export failed ({type(e).__name__}: {str(e)[:160]})"
    return ""


OPSET_OPTIMUM = 18
"""The opset of the merged decoders' exports: optimum-cli's for these models."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="models to export (default: all)")
    parser.add_argument("--out", type=Path, required=True, help="folder for the .onnx files")
    parser.add_argument(
        "--exporter", choices=("script", "dynamo", "both"), default="both", help="torch's"
    )
    parser.add_argument(
        "--drop-metadata",
        action="store_true",
        help="remove each node's metadata_props (the dynamo exporter's: most of a tiny file)",
    )
    parser.add_argument("--optimum-python", type=Path, help="a python with optimum-onnx")
    parser.add_argument("--optimum-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.optimum_only:
        return _optimum_only(args.out, args.names)

    import torch

    cases = _cases()
    names = [n for n in args.names if n in cases] if args.names else list(cases)
    exporters = {"script": [False], "dynamo": [True], "both": [False, True]}[args.exporter]
    for name in names:
        for dynamo in exporters:
            label = f"{name}_{'dynamo' if dynamo else 'script'}"
            torch.manual_seed(0)
            try:
                case = cases[name]()
                data = _export(case, dynamo)
            except Exception as e:  # the exporter's failure, not onnxcost's
                line = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
                print(f"{label}: the export failed ({type(e).__name__}: {line})", flush=True)
                continue
            path = args.out / f"{label}.onnx"
            if args.drop_metadata:
                import onnx

                proto = onnx.load_from_string(data)
                for node in proto.graph.node:
                    del node.metadata_props[:]
                data = proto.SerializeToString()
            path.write_bytes(data)
            print(f"{label}: {len(data):,} bytes; {_max_difference(path, case)}", flush=True)
    if args.optimum_python is not None:
        chosen = [n for n in args.names if n in OPTIMUM]
        if not args.names or chosen:
            command = [str(args.optimum_python), __file__, "--out", str(args.out)]
            subprocess.run([*command, "--optimum-only", *chosen], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
