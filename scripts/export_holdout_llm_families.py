"""Write hold-out decoders of families ``onnxcost llm`` was not built on (tiny, random weights).

For checking onnxcost on files as users make them; not a test. Phi, Gemma, Gemma2, Gemma3,
Qwen3, GPT-NeoX, Falcon (rotary, ALiBi, falcon-40b's layout), BLOOM, OPT, GPT-J, GPT-BigCode,
StableLM, Phi-3, Mixtral, Qwen2-MoE and Mamba; docs/llm.md ("More decoder families") has what
each gave and the hand counts.

TorchScript and dynamo exports (``NAME_kv_script.onnx``, ``NAME_kv_dynamo.onnx``) run in the
project's main venv (torch, onnxscript, transformers 5, onnxruntime), each with its KV cache
as explicit inputs and outputs in optimum's names, as scripts/export_holdout_torch.py's
``*_kv`` (its ``_decoder_kv``), and each checked in onnxruntime against eager torch at its
example point and at a second one (other batch, seq and past). Mamba, which has no KV cache,
is exported over (batch, seq) without one (``mamba_script.onnx``, ``mamba_dynamo.onnx``).

optimum's exports (``optimum_NAME/model.onnx``, task ``text-generation-with-past``, copied
beside the others as ``optimum_NAME.onnx``; optimum-cli checks each in onnxruntime against
torch itself, its default, and a mismatch is its failure) need the separate venv with
optimum-onnx (transformers 4.57), given as ``--optimum-python``::

    python scripts/export_holdout_llm_families.py --out /tmp/llmfam \\
        [--optimum-python /work/optenv/bin/python] [--exporter script|dynamo|both] [NAME ...]

Every config: 2 layers, hidden 64, vocab 1000; ``tiny_mixtral`` (1 layer, 16 wide, vocab 32)
is tests/data/exports/tiny_mixtral_kv_script.onnx, written with ``--exporter script
tiny_mixtral``. An export that fails is one printed line, not
a stop. Each written file's hand figures (params, KV-cache bytes per token, a decode step's
MACs) are in docs/llm.md's hold-out section.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

COMMON = {"vocab_size": 1000, "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0}
"""Every family's vocabulary and special tokens (ids in range)."""


MOE: dict[str, Any] = {}
"""The MoE configs' extra arguments: in transformers 5, ``experts_implementation``
'batched_mm' (each token's top-k experts' weights gathered, then one batched matmul: its
default 'grouped_mm' reaches aten::histc, which neither exporter converts, and 'eager' loops
over the experts hit, a loop the tracer fixes); transformers 4 (optimum's) has one, a loop."""


def _families() -> dict[str, tuple[Callable[[], Any], int, int]]:
    """Each family: a builder of its tiny causal LM (in the running transformers), its KV
    heads and head dim (the cache's [batch, kv_heads, past, head_dim]); 0 heads: no cache."""
    import transformers as tr

    llama_like = {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "max_position_embeddings": 128,
        **COMMON,
    }
    return {
        # partial rotary (half of each head), a parallel attention and MLP, a dense's bias
        "phi": (
            lambda: tr.PhiForCausalLM(tr.PhiConfig(**llama_like, partial_rotary_factor=0.5)),
            4,
            16,
        ),
        # tied head, sqrt(hidden) embedding scale, multi-query (1 KV head)
        "gemma": (
            lambda: tr.GemmaForCausalLM(
                tr.GemmaConfig(**llama_like, num_key_value_heads=1, head_dim=16)
            ),
            1,
            16,
        ),
        # attention and final-logit soft-capping, sliding window every other layer
        "gemma2": (
            lambda: tr.Gemma2ForCausalLM(
                tr.Gemma2Config(
                    **llama_like,
                    num_key_value_heads=2,
                    head_dim=16,
                    sliding_window=64,
                    attn_logit_softcapping=50.0,
                    final_logit_softcapping=30.0,
                )
            ),
            2,
            16,
        ),
        # local (sliding 16) and global layers, q and k norms, tied head, sqrt(hidden) scale
        "gemma3": (
            lambda: tr.Gemma3ForCausalLM(
                tr.Gemma3TextConfig(
                    **llama_like,
                    num_key_value_heads=2,
                    head_dim=16,
                    sliding_window=16,
                    layer_types=["sliding_attention", "full_attention"],
                )
            ),
            2,
            16,
        ),
        # q and k RMSNorm per head, GQA (Qwen3)
        "qwen3": (
            lambda: tr.Qwen3ForCausalLM(
                tr.Qwen3Config(**llama_like, num_key_value_heads=2, head_dim=16)
            ),
            2,
            16,
        ),
        # multi-query attention with a fused [k; v] cache (StarCoder 1, SantaCoder)
        "gpt_bigcode": (
            lambda: tr.GPTBigCodeForCausalLM(
                tr.GPTBigCodeConfig(
                    n_embd=64, n_layer=2, n_head=4, n_positions=128, multi_query=True, **COMMON
                )
            ),
            1,
            16,
        ),
        # parallel residual, rotary on a quarter of each head, fused qkv
        "gpt_neox": (
            lambda: tr.GPTNeoXForCausalLM(
                tr.GPTNeoXConfig(**llama_like, rotary_pct=0.25, use_parallel_residual=True)
            ),
            4,
            16,
        ),
        # multi-query, rotary, parallel attention and MLP (falcon-7b's layout)
        "falcon": (
            lambda: tr.FalconForCausalLM(
                tr.FalconConfig(
                    hidden_size=64,
                    num_hidden_layers=2,
                    num_attention_heads=4,
                    multi_query=True,
                    new_decoder_architecture=False,
                    parallel_attn=True,
                    alibi=False,
                    max_position_embeddings=128,
                    **COMMON,
                )
            ),
            1,
            16,
        ),
        # ALiBi instead of rotary, multi-query
        "falcon_alibi": (
            lambda: tr.FalconForCausalLM(
                tr.FalconConfig(
                    hidden_size=64,
                    num_hidden_layers=2,
                    num_attention_heads=4,
                    multi_query=True,
                    new_decoder_architecture=False,
                    parallel_attn=True,
                    alibi=True,
                    **COMMON,
                )
            ),
            1,
            16,
        ),
        # falcon-40b's layout: grouped KV heads (2), two LayerNorms a layer; transformers
        # caches the keys and values repeated to every query head (4)
        "falcon_gqa": (
            lambda: tr.FalconForCausalLM(
                tr.FalconConfig(
                    hidden_size=64,
                    num_hidden_layers=2,
                    num_attention_heads=4,
                    num_kv_heads=2,
                    new_decoder_architecture=True,
                    max_position_embeddings=128,
                    **COMMON,
                )
            ),
            4,
            16,
        ),
        # ALiBi position bias, no position embedding, embedding LayerNorm, tied head
        "bloom": (
            lambda: tr.BloomForCausalLM(
                tr.BloomConfig(hidden_size=64, n_layer=2, n_head=4, **COMMON)
            ),
            4,
            16,
        ),
        # learned positions with an offset of 2, tied head
        "opt": (
            lambda: tr.OPTForCausalLM(
                tr.OPTConfig(
                    hidden_size=64,
                    num_hidden_layers=2,
                    num_attention_heads=4,
                    ffn_dim=128,
                    max_position_embeddings=128,
                    word_embed_proj_dim=64,
                    **COMMON,
                )
            ),
            4,
            16,
        ),
        # rotary on 8 of each head's 16 dims (interleaved), parallel attention and MLP
        "gptj": (
            lambda: tr.GPTJForCausalLM(
                tr.GPTJConfig(
                    n_embd=64, n_layer=2, n_head=4, rotary_dim=8, n_positions=128, **COMMON
                )
            ),
            4,
            16,
        ),
        # partial rotary (a quarter), grouped-query attention, LayerNorm
        "stablelm": (
            lambda: tr.StableLmForCausalLM(
                tr.StableLmConfig(**llama_like, num_key_value_heads=2, partial_rotary_factor=0.25)
            ),
            2,
            16,
        ),
        # fused qkv and fused gate_up projections
        "phi3": (
            lambda: tr.Phi3ForCausalLM(tr.Phi3Config(**llama_like, num_key_value_heads=2)),
            2,
            16,
        ),
        # mixture of experts: 4 experts, top-2
        "mixtral": (
            lambda: tr.MixtralForCausalLM(
                tr.MixtralConfig(
                    **llama_like,
                    num_key_value_heads=2,
                    num_local_experts=4,
                    num_experts_per_tok=2,
                    **MOE,
                )
            ),
            2,
            16,
        ),
        # mixture of experts: 4 experts, top-2, and a shared expert
        "qwen2_moe": (
            lambda: tr.Qwen2MoeForCausalLM(
                tr.Qwen2MoeConfig(
                    **llama_like,
                    num_key_value_heads=2,
                    num_experts=4,
                    num_experts_per_tok=2,
                    moe_intermediate_size=64,
                    shared_expert_intermediate_size=128,
                    decoder_sparse_step=1,
                    **MOE,
                )
            ),
            2,
            16,
        ),
        # small enough for tests/data/exports (1 layer, 16 wide, 32 tokens and positions)
        "tiny_mixtral": (
            lambda: tr.MixtralForCausalLM(
                tr.MixtralConfig(
                    hidden_size=16,
                    num_hidden_layers=1,
                    num_attention_heads=4,
                    num_key_value_heads=2,
                    intermediate_size=32,
                    max_position_embeddings=32,
                    num_local_experts=4,
                    num_experts_per_tok=2,
                    **{**COMMON, "vocab_size": 32},
                    **MOE,
                )
            ),
            2,
            4,
        ),
        # a state-space model: no KV cache
        "mamba": (
            lambda: tr.MambaForCausalLM(
                tr.MambaConfig(
                    hidden_size=64, num_hidden_layers=2, state_size=16, expand=2, **COMMON
                )
            ),
            0,
            0,
        ),
    }


def _torch_exports(out: Path, names: list[str], exporter: str) -> None:
    import export_holdout_torch as ht
    import torch

    MOE["experts_implementation"] = "batched_mm"

    families = _families()
    exporters = {"script": [False], "dynamo": [True], "both": [False, True]}[exporter]
    for name in names or list(families):
        build, kv_heads, head_dim = families[name]
        for dynamo in exporters:
            label = f"{name}{'_kv' if kv_heads else ''}_{'dynamo' if dynamo else 'script'}"
            torch.manual_seed(0)
            try:
                model = ht._randomised(build())
                if kv_heads:
                    layers, vocab = model.config.num_hidden_layers, model.config.vocab_size
                    case = ht._decoder_kv(model, layers, kv_heads, head_dim, vocab)
                else:
                    case = ht._text(model, model.config.vocab_size, logits=True)
                data = ht._export(case, dynamo)
            except Exception as e:  # the exporter's failure, not onnxcost's
                line = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
                print(f"{label}: the export failed ({type(e).__name__}: {line})", flush=True)
                continue
            path = out / f"{label}.onnx"
            path.write_bytes(data)
            params = sum(p.numel() for p in case.module.parameters())
            try:
                checked = ht._max_difference(path, case)
            except Exception as e:  # onnxruntime refuses the file itself
                checked = f"onnxruntime refuses it ({str(e).strip().splitlines()[0][-160:]})"
            print(f"{label}: {len(data):,} bytes, torch params {params:,}; {checked}", flush=True)


def _optimum_only(out: Path, names: list[str]) -> None:
    import torch

    os.environ["HF_HUB_OFFLINE"] = "1"
    cli = Path(sys.executable).with_name("optimum-cli")
    families = _families()
    for name in names or list(families):
        torch.manual_seed(0)
        target, saved = out / f"optimum_{name}", out / "pretrained" / name
        shutil.rmtree(target, ignore_errors=True)
        try:
            model = families[name][0]()
            with torch.no_grad():
                for p in model.parameters():
                    p.normal_(0.0, 0.02)
            model.save_pretrained(saved)
        except Exception as e:
            print(f"optimum_{name}: save_pretrained failed ({type(e).__name__}: {e})")
            continue
        params = sum(p.numel() for p in model.parameters())
        command = [str(cli), "export", "onnx", "--model", str(saved)]
        command += ["--task", "text-generation-with-past", str(target)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not (target / "model.onnx").exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            print(f"optimum_{name}: optimum-cli failed ({done.returncode}): {tail[0][:200]}")
            continue
        shutil.copyfile(target / "model.onnx", out / f"optimum_{name}.onnx")
        print(f"optimum_{name}: optimum_{name}.onnx, torch params {params:,}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="families to export (default: all)")
    parser.add_argument("--out", type=Path, required=True, help="folder for the .onnx files")
    parser.add_argument(
        "--exporter", choices=("script", "dynamo", "both", "none"), default="both", help="torch's"
    )
    parser.add_argument("--optimum-python", type=Path, help="a python with optimum-onnx")
    parser.add_argument("--optimum-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.optimum_only:
        _optimum_only(args.out, args.names)
        return 0
    if args.exporter != "none":
        _torch_exports(args.out, args.names, args.exporter)
    if args.optimum_python is not None:
        command = [str(args.optimum_python), __file__, "--out", str(args.out), "--optimum-only"]
        subprocess.run([*command, *args.names], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
