"""Presets: the seed's demo model, the 2017 recipe and the published LLaMA configs, a source
comment each, with the parameter counts published for them.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .model_config import ModelConfig

_LLAMA: dict[str, Any] = dict(vocab_size=32000, norm_eps=1e-5, rope_theta=10000.0)


_LLAMA3: dict[str, Any] = dict(vocab_size=128256, norm_eps=1e-5, rope_theta=500000.0)


PRESETS: dict[str, ModelConfig] = {
    # Tiny model for tests and quick demos.
    "debug": ModelConfig(
        vocab_size=256, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_hidden=172, max_seq_len=64
    ),
    # Seed tutorial 000, section 八: LlamaModel(vocab=32000, d=512, n_layers=4, n_heads=8,
    # n_kv_heads=2, max_seq=128, ffn_hidden=1365).
    "seed-demo": ModelConfig(),
    "seed-demo-mha": ModelConfig(n_kv_heads=8),
    # Vaswani et al. 2017 recipe as a decoder-only model at the seed's size: Post-LN, LayerNorm,
    # sinusoidal positions, ReLU FFN of 4d, biases, Xavier init, no final norm, embeddings
    # multiplied by √d (§3.4; the paper also ties them to the output layer: tie_embeddings).
    "transformer-2017": ModelConfig(
        n_kv_heads=8,
        ffn_hidden=2048,
        norm_position="post",
        norm_type="layernorm",
        pos_encoding="sinusoidal",
        ffn_type="relu",
        bias=True,
        final_norm=False,
        init="xavier",
        embed_scale=True,
        norm_eps=1e-5,
    ),
    # huggyllama/llama-7b config.json (Touvron et al. 2023, Table 2)
    "llama-7b": ModelConfig(
        d_model=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=32,
        ffn_hidden=11008,
        max_seq_len=2048,
        **{**_LLAMA, "norm_eps": 1e-6},
    ),
    # meta-llama/Llama-2-7b-hf config.json
    "llama-2-7b": ModelConfig(
        d_model=4096, n_layers=32, n_heads=32, n_kv_heads=32, ffn_hidden=11008, max_seq_len=4096, **_LLAMA
    ),
    # meta-llama/Llama-2-13b-hf config.json
    "llama-2-13b": ModelConfig(
        d_model=5120, n_layers=40, n_heads=40, n_kv_heads=40, ffn_hidden=13824, max_seq_len=4096, **_LLAMA
    ),
    # meta-llama/Llama-2-70b-hf config.json (GQA, 8 KV heads)
    "llama-2-70b": ModelConfig(
        d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8, ffn_hidden=28672, max_seq_len=4096, **_LLAMA
    ),
    # meta-llama/Meta-Llama-3-8B config.json
    "llama-3-8b": ModelConfig(
        d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8, ffn_hidden=14336, max_seq_len=8192, **_LLAMA3
    ),
    # meta-llama/Meta-Llama-3-70B config.json
    "llama-3-70b": ModelConfig(
        d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8, ffn_hidden=28672, max_seq_len=8192, **_LLAMA3
    ),
    # meta-llama/Llama-3.1-405B config.json (rope_scaling "llama3" not modelled)
    "llama-3.1-405b": ModelConfig(
        d_model=16384,
        n_layers=126,
        n_heads=128,
        n_kv_heads=8,
        ffn_hidden=53248,
        max_seq_len=131072,
        **_LLAMA3,
    ),
    # meta-llama/Llama-3.2-1B config.json (tied head, rope_scaling "llama3" not modelled)
    "llama-3.2-1b": ModelConfig(
        d_model=2048,
        n_layers=16,
        n_heads=32,
        n_kv_heads=8,
        ffn_hidden=8192,
        max_seq_len=131072,
        tie_embeddings=True,
        **_LLAMA3,
    ),
    # meta-llama/Llama-3.2-3B config.json (head_dim 128 = 3072/24)
    "llama-3.2-3b": ModelConfig(
        d_model=3072,
        n_layers=28,
        n_heads=24,
        n_kv_heads=8,
        ffn_hidden=8192,
        max_seq_len=131072,
        tie_embeddings=True,
        **_LLAMA3,
    ),
    # mistralai/Mistral-7B-v0.1 config.json: sliding_window 4096 on every layer
    "mistral-7b": ModelConfig(
        d_model=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=8,
        ffn_hidden=14336,
        max_seq_len=32768,
        sliding_window=4096,
        **_LLAMA,
    ),
    # mistralai/Mistral-Nemo-Base-2407 config.json: head_dim 128 ≠ 5120/32, vocab 131072
    "mistral-nemo-12b": ModelConfig(
        vocab_size=131072,
        d_model=5120,
        n_layers=40,
        n_heads=32,
        n_kv_heads=8,
        head_dim=128,
        ffn_hidden=14336,
        max_seq_len=1024000,
        rope_theta=1e6,
        norm_eps=1e-5,
    ),
    # mistralai/Mixtral-8x7B-v0.1 config.json: 8 experts, top-2, renormalised
    "mixtral-8x7b": ModelConfig(
        d_model=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=8,
        ffn_hidden=14336,
        max_seq_len=32768,
        n_experts=8,
        experts_per_token=2,
        **{**_LLAMA, "rope_theta": 1e6},
    ),
    # Qwen/Qwen2.5-7B config.json: q/k/v biases, o_proj none (use_sliding_window false)
    "qwen2.5-7b": ModelConfig(
        vocab_size=152064,
        d_model=3584,
        n_layers=28,
        n_heads=28,
        n_kv_heads=4,
        ffn_hidden=18944,
        max_seq_len=131072,
        qkv_bias=True,
        rope_theta=1e6,
        norm_eps=1e-6,
    ),
    # Qwen/Qwen3-8B config.json: head_dim 128, QK-norm
    "qwen3-8b": ModelConfig(
        vocab_size=151936,
        d_model=4096,
        n_layers=36,
        n_heads=32,
        n_kv_heads=8,
        head_dim=128,
        ffn_hidden=12288,
        max_seq_len=40960,
        qk_norm=True,
        rope_theta=1e6,
        norm_eps=1e-6,
    ),
    # Qwen/Qwen3-30B-A3B config.json: 128 experts of width 768, top-8, norm_topk_prob true
    "qwen3-30b-a3b": ModelConfig(
        vocab_size=151936,
        d_model=2048,
        n_layers=48,
        n_heads=32,
        n_kv_heads=4,
        head_dim=128,
        ffn_hidden=6144,
        max_seq_len=40960,
        qk_norm=True,
        n_experts=128,
        experts_per_token=8,
        expert_ffn_hidden=768,
        rope_theta=1e6,
        norm_eps=1e-6,
    ),
    # TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T config.json
    "tinyllama-1.1b": ModelConfig(
        d_model=2048, n_layers=22, n_heads=32, n_kv_heads=4, ffn_hidden=5632, max_seq_len=2048, **_LLAMA
    ),
}


# Parameter counts published for the released checkpoints (model cards / safetensors metadata).
PUBLISHED_PARAMS = {
    "seed-demo": 43_780_608,  # seed 000, section 八, "总参数"
    "seed-demo-mha": 45_353_472,  # seed 000, section 八, "MHA"
    "llama-7b": 6_738_415_616,
    "llama-2-7b": 6_738_415_616,
    "llama-2-13b": 13_015_864_320,
    "llama-2-70b": 68_976_648_192,
    "llama-3-8b": 8_030_261_248,
    "llama-3-70b": 70_553_706_496,
    "llama-3.1-405b": 405_853_388_800,
    "tinyllama-1.1b": 1_100_048_384,
    "llama-3.2-1b": 1_235_814_400,
    "llama-3.2-3b": 3_212_749_824,
    "mistral-7b": 7_241_732_096,
    "mistral-nemo-12b": 12_247_782_400,
    "mixtral-8x7b": 46_702_792_704,
    "qwen2.5-7b": 7_615_616_512,
    "qwen3-8b": 8_190_735_360,
    "qwen3-30b-a3b": 30_532_122_624,
}


def get_preset(name: str) -> ModelConfig:
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; known presets: {', '.join(PRESETS)}") from None
