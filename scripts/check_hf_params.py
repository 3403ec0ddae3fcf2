"""Params of Hugging Face families through both torch exporters, against torch (not a timed
test): tiny configs, random init, each architecture's ``sum(p.numel())`` against ``onnxcost
analyze`` of its export by the dynamo exporter (static shapes, torch's default) and by the
TorchScript exporter (opset 17). docs/zoo.md's "Hugging Face families" table comes from it.

Needs torch and transformers (``pip install -e '.[torch]' transformers``). Each export runs in
a child process with a time limit (an architecture that fails to build or export is reported
as such, not fatal); about 15 minutes for all on 2 cores.

Usage: python scripts/check_hf_params.py [--out DIR] [--models mistral,gemma,...]
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
import transformers as T  # noqa: N812

B, S = 2, 8
V = 500


def ids(n=S, v=V):
    g = torch.Generator().manual_seed(1)
    return torch.randint(3, v, (B, n), generator=g)


def pix(size=32, c=3):
    g = torch.Generator().manual_seed(2)
    return torch.randn(B, c, size, size, generator=g)


def od(**kw):
    return collections.OrderedDict(kw)


DEC = {
    "vocab_size": V,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "max_position_embeddings": 64,
}
ENC = {
    "vocab_size": V,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "max_position_embeddings": 64,
}
S2S = {
    "vocab_size": V,
    "d_model": 64,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "encoder_ffn_dim": 128,
    "decoder_ffn_dim": 128,
    "max_position_embeddings": 64,
}


def causal(cls, cfg):
    m = cls(cfg)
    return m, od(input_ids=ids())


def s2s(cls, cfg):
    m = cls(cfg)
    return m, od(input_ids=ids(), decoder_input_ids=ids(6))


BUILDERS = {
    # decoders
    "mistral": lambda: causal(T.MistralForCausalLM, T.MistralConfig(**DEC, num_key_value_heads=2)),
    "phi": lambda: causal(T.PhiForCausalLM, T.PhiConfig(**DEC)),
    "phi3": lambda: causal(
        T.Phi3ForCausalLM,
        T.Phi3Config(
            **DEC,
            num_key_value_heads=4,
            original_max_position_embeddings=64,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
        ),
    ),
    "gemma": lambda: causal(
        T.GemmaForCausalLM,
        T.GemmaConfig(
            **DEC,
            num_key_value_heads=1,
            head_dim=16,
            pad_token_id=0,
            bos_token_id=2,
            eos_token_id=1,
        ),
    ),
    "gemma2": lambda: causal(
        T.Gemma2ForCausalLM,
        T.Gemma2Config(
            **DEC,
            num_key_value_heads=2,
            head_dim=16,
            sliding_window=32,
            query_pre_attn_scalar=16,
            pad_token_id=0,
            bos_token_id=2,
            eos_token_id=1,
        ),
    ),
    "falcon": lambda: causal(
        T.FalconForCausalLM,
        T.FalconConfig(
            vocab_size=V,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            bos_token_id=1,
            eos_token_id=2,
        ),
    ),
    "gpt_neox": lambda: causal(
        T.GPTNeoXForCausalLM, T.GPTNeoXConfig(**DEC, bos_token_id=1, eos_token_id=2)
    ),
    "opt": lambda: causal(
        T.OPTForCausalLM,
        T.OPTConfig(
            vocab_size=V,
            hidden_size=64,
            num_hidden_layers=2,
            ffn_dim=128,
            num_attention_heads=4,
            max_position_embeddings=64,
            word_embed_proj_dim=64,
            pad_token_id=1,
            bos_token_id=2,
            eos_token_id=2,
        ),
    ),
    "bloom": lambda: causal(
        T.BloomForCausalLM,
        T.BloomConfig(
            vocab_size=V, hidden_size=64, n_layer=2, n_head=4, bos_token_id=1, eos_token_id=2
        ),
    ),
    "gptj": lambda: causal(
        T.GPTJForCausalLM,
        T.GPTJConfig(
            vocab_size=V,
            n_positions=64,
            n_embd=64,
            n_layer=2,
            n_head=4,
            rotary_dim=8,
            bos_token_id=1,
            eos_token_id=2,
        ),
    ),
    "codegen": lambda: causal(
        T.CodeGenForCausalLM,
        T.CodeGenConfig(
            vocab_size=V,
            n_positions=64,
            n_ctx=64,
            n_embd=64,
            n_layer=2,
            n_head=4,
            rotary_dim=8,
            bos_token_id=1,
            eos_token_id=2,
        ),
    ),
    "mpt": lambda: causal(
        T.MptForCausalLM,
        T.MptConfig(d_model=64, n_heads=4, n_layers=2, vocab_size=V, max_seq_len=64),
    ),
    "qwen2_moe": lambda: causal(
        T.Qwen2MoeForCausalLM,
        T.Qwen2MoeConfig(
            **DEC,
            num_key_value_heads=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=64,
            num_experts=4,
            num_experts_per_tok=2,
            experts_implementation="batched_mm",
        ),
    ),
    "mixtral": lambda: causal(
        T.MixtralForCausalLM,
        T.MixtralConfig(
            **DEC,
            num_key_value_heads=2,
            num_local_experts=4,
            num_experts_per_tok=2,
            experts_implementation="batched_mm",
        ),
    ),
    # encoders
    "deberta_v2": lambda: (
        T.DebertaV2Model(
            T.DebertaV2Config(
                **ENC,
                relative_attention=True,
                pos_att_type=["p2c", "c2p"],
                position_buckets=16,
                position_biased_input=False,
                norm_rel_ebd="layer_norm",
                share_att_key=True,
                max_relative_positions=-1,
            )
        ),
        od(input_ids=ids()),
    ),
    "xlm_roberta": lambda: (
        T.XLMRobertaModel(
            T.XLMRobertaConfig(**{**ENC, "max_position_embeddings": 66}, pad_token_id=1)
        ),
        od(input_ids=ids()),
    ),
    "electra": lambda: (
        T.ElectraModel(T.ElectraConfig(**ENC, embedding_size=32)),
        od(input_ids=ids()),
    ),
    "albert": lambda: (
        T.AlbertModel(T.AlbertConfig(**ENC, embedding_size=32)),
        od(input_ids=ids()),
    ),
    "mobilebert": lambda: (
        T.MobileBertModel(
            T.MobileBertConfig(
                **{**ENC, "intermediate_size": 64},
                embedding_size=32,
                intra_bottleneck_size=32,
                true_hidden_size=32,
                num_feedforward_networks=2,
            )
        ),
        od(input_ids=ids()),
    ),
    "squeezebert": lambda: (
        T.SqueezeBertModel(
            T.SqueezeBertConfig(
                **ENC,
                embedding_size=64,
                q_groups=4,
                k_groups=4,
                v_groups=4,
                post_attention_groups=1,
                intermediate_groups=4,
                output_groups=4,
            )
        ),
        od(input_ids=ids()),
    ),
    "longformer": lambda: (
        T.LongformerModel(
            T.LongformerConfig(
                **{**ENC, "max_position_embeddings": 66}, attention_window=[4, 4], pad_token_id=1
            )
        ),
        od(input_ids=ids()),
    ),
    # seq2seq
    "mbart": lambda: s2s(T.MBartForConditionalGeneration, T.MBartConfig(**S2S)),
    "marian": lambda: s2s(
        T.MarianMTModel,
        T.MarianConfig(
            **S2S, decoder_vocab_size=V, pad_token_id=0, decoder_start_token_id=0, eos_token_id=1
        ),
    ),
    "pegasus": lambda: s2s(T.PegasusForConditionalGeneration, T.PegasusConfig(**S2S)),
    "blenderbot": lambda: s2s(T.BlenderbotForConditionalGeneration, T.BlenderbotConfig(**S2S)),
    # vision
    "swin": lambda: (
        T.SwinModel(
            T.SwinConfig(
                image_size=32,
                patch_size=2,
                embed_dim=16,
                depths=[1, 1],
                num_heads=[2, 2],
                window_size=4,
            )
        ),
        od(pixel_values=pix(32)),
    ),
    "convnext": lambda: (
        T.ConvNextModel(
            T.ConvNextConfig(num_stages=2, hidden_sizes=[16, 32], depths=[1, 1], image_size=32)
        ),
        od(pixel_values=pix(32)),
    ),
    "mobilevit": lambda: (
        T.MobileViTModel(
            T.MobileViTConfig(
                image_size=64,
                patch_size=2,
                hidden_sizes=[16, 24, 32],
                neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 64],
                num_attention_heads=2,
            )
        ),
        od(pixel_values=pix(64)),
    ),
    "segformer": lambda: (
        T.SegformerModel(
            T.SegformerConfig(
                num_encoder_blocks=2,
                depths=[1, 1],
                sr_ratios=[2, 1],
                hidden_sizes=[16, 32],
                patch_sizes=[7, 3],
                strides=[4, 2],
                num_attention_heads=[1, 2],
                mlp_ratios=[2, 2],
                decoder_hidden_size=32,
            )
        ),
        od(pixel_values=pix(64)),
    ),
    "beit": lambda: (
        T.BeitModel(
            T.BeitConfig(
                image_size=32,
                patch_size=4,
                hidden_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=128,
                use_relative_position_bias=True,
            )
        ),
        od(pixel_values=pix(32)),
    ),
    "deit": lambda: (
        T.DeiTModel(
            T.DeiTConfig(
                image_size=32,
                patch_size=4,
                hidden_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=128,
            )
        ),
        od(pixel_values=pix(32)),
    ),
    "dinov2": lambda: (
        T.Dinov2Model(
            T.Dinov2Config(
                image_size=32,
                patch_size=4,
                hidden_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                mlp_ratio=2,
            )
        ),
        od(pixel_values=pix(32)),
    ),
    "yolos": lambda: (
        T.YolosModel(
            T.YolosConfig(
                image_size=[32, 32],
                patch_size=4,
                hidden_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=128,
                num_detection_tokens=10,
            )
        ),
        od(pixel_values=pix(32)),
    ),
    "wav2vec2": lambda: (
        T.Wav2Vec2Model(
            T.Wav2Vec2Config(
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=64,
                conv_dim=(16, 16),
                conv_stride=(5, 2),
                conv_kernel=(10, 3),
                num_conv_pos_embeddings=16,
                num_conv_pos_embedding_groups=2,
                vocab_size=32,
            )
        ),
        od(input_values=torch.randn(B, 400, generator=torch.Generator().manual_seed(3))),
    ),
    "detr": lambda: (
        T.DetrModel(
            T.DetrConfig(
                use_timm_backbone=False,
                use_pretrained_backbone=False,
                backbone_config=T.ResNetConfig(
                    embedding_size=16,
                    hidden_sizes=[16, 32],
                    depths=[1, 1],
                    layer_type="basic",
                    out_features=["stage2"],
                ),
                d_model=32,
                encoder_layers=1,
                decoder_layers=1,
                encoder_attention_heads=2,
                decoder_attention_heads=2,
                encoder_ffn_dim=64,
                decoder_ffn_dim=64,
                num_queries=10,
            )
        ),
        od(pixel_values=pix(64)),
    ),
}


class Wrap(torch.nn.Module):
    """Calls the model by keyword and returns its first output tensor."""

    def __init__(self, m, names, mask=False):
        super().__init__()
        self.m = m
        self.names = list(names)
        # TorchScript export: transformers' packed-sequence check (torch.diff, no ONNX symbolic)
        # runs when a causal LM gets no attention_mask; give it a mask of ones made in the graph.
        self.mask = mask and type(m).__name__.endswith("ForCausalLM")

    def forward(self, *xs):
        kw = dict(zip(self.names, xs, strict=True))
        if self.mask:
            kw["attention_mask"] = torch.ones_like(kw["input_ids"])
        try:
            out = self.m(**kw, use_cache=False, return_dict=True)
        except TypeError:
            out = self.m(**kw, return_dict=True)
        # every tensor output (a pooler's output too, so no module is dead code);
        # a causal LM's logits only (its other outputs are None with use_cache=False)
        outs = tuple(v for v in out.values() if isinstance(v, torch.Tensor))
        return outs if len(outs) > 1 else outs[0]


def _rand_tables(name):
    m, i = BUILDERS[name]()
    g = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for n, p in m.named_parameters():
            if n.endswith("relative_position_bias_table"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
    return m, i


BUILDERS["swin_randbias"] = lambda: _rand_tables("swin")
BUILDERS["beit_randbias"] = lambda: _rand_tables("beit")


def build(name: str) -> tuple[Any, dict[str, Any]]:
    torch.manual_seed(0)
    m, inputs = BUILDERS[name]()
    return m.eval(), inputs


def export(name: str, mode: str, path: Path) -> None:
    """Export ``name`` by the dynamo exporter (``dyn``) or TorchScript's (``ts``) to ``path``."""
    m, inputs = build(name)
    wrapped = Wrap(m, inputs.keys(), mask=mode == "ts").eval()
    with torch.no_grad():
        if mode == "dyn":
            torch.onnx.export(
                wrapped, tuple(inputs.values()), path, dynamo=True, input_names=list(inputs)
            )
        else:
            torch.onnx.export(
                wrapped,
                tuple(inputs.values()),
                path,
                dynamo=False,
                opset_version=17,
                input_names=list(inputs),
            )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=None, help="where the exports go (a temp dir)")
    ap.add_argument("--models", default=",".join(BUILDERS))
    ap.add_argument("--one", nargs=3, metavar=("NAME", "MODE", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:  # the child: one export
        export(args.one[0], args.one[1], Path(args.one[2]))
        return
    import onnxcost

    out = args.out or Path(tempfile.mkdtemp(prefix="hf_params_"))
    out.mkdir(parents=True, exist_ok=True)
    print("| model | torch | dynamo | diff | TorchScript | diff |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in args.models.split(","):
        try:
            torch_params = sum(p.numel() for p in build(name)[0].parameters())
        except Exception as e:
            print(f"| {name} | build failed: {type(e).__name__} | | | | |")
            continue
        cells = []
        for mode in ("dyn", "ts"):
            path = out / f"{name}_{mode}.onnx"
            command = [sys.executable, __file__, "--one", name, mode, str(path)]
            try:
                done = subprocess.run(command, capture_output=True, timeout=300, check=False)
                failed = done.returncode != 0
            except subprocess.TimeoutExpired:
                failed = True
            if failed or not path.exists():
                cells += ["export failed", ""]
                continue
            params = onnxcost.analyze(path).totals.params
            cells += [f"{params:,}", f"{params - torch_params:+,}"]
        print(f"| {name} | {torch_params:,} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
