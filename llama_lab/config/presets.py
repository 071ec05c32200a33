"""Presets: the seed's demo model, the 2017 recipe and the published LLaMA configs, a source
comment each, with the parameter counts published for them.
"""
from __future__ import annotations

from ..errors import ConfigError
from .model_config import ModelConfig


_LLAMA = dict(vocab_size=32000, norm_eps=1e-5, rope_theta=10000.0)


_LLAMA3 = dict(vocab_size=128256, norm_eps=1e-5, rope_theta=500000.0)


PRESETS: dict[str, ModelConfig] = {
    # Tiny model for tests and quick demos.
    "debug": ModelConfig(vocab_size=256, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2,
                         ffn_hidden=172, max_seq_len=64),
    # Seed tutorial 000, section 八: LlamaModel(vocab=32000, d=512, n_layers=4, n_heads=8,
    # n_kv_heads=2, max_seq=128, ffn_hidden=1365).
    "seed-demo": ModelConfig(),
    "seed-demo-mha": ModelConfig(n_kv_heads=8),
    # Vaswani et al. 2017 recipe as a decoder-only model at the seed's size: Post-LN, LayerNorm,
    # sinusoidal positions, ReLU FFN of 4d, biases, Xavier init, no final norm.
    "transformer-2017": ModelConfig(n_kv_heads=8, ffn_hidden=2048, norm_position="post",
                                    norm_type="layernorm", pos_encoding="sinusoidal",
                                    ffn_type="relu", bias=True, final_norm=False, init="xavier",
                                    norm_eps=1e-5),
    # huggyllama/llama-7b config.json (Touvron et al. 2023, Table 2)
    "llama-7b": ModelConfig(d_model=4096, n_layers=32, n_heads=32, n_kv_heads=32,
                            ffn_hidden=11008, max_seq_len=2048, **{**_LLAMA, "norm_eps": 1e-6}),
    # meta-llama/Llama-2-7b-hf config.json
    "llama-2-7b": ModelConfig(d_model=4096, n_layers=32, n_heads=32, n_kv_heads=32,
                              ffn_hidden=11008, max_seq_len=4096, **_LLAMA),
    # meta-llama/Llama-2-13b-hf config.json
    "llama-2-13b": ModelConfig(d_model=5120, n_layers=40, n_heads=40, n_kv_heads=40,
                               ffn_hidden=13824, max_seq_len=4096, **_LLAMA),
    # meta-llama/Llama-2-70b-hf config.json (GQA, 8 KV heads)
    "llama-2-70b": ModelConfig(d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8,
                               ffn_hidden=28672, max_seq_len=4096, **_LLAMA),
    # meta-llama/Meta-Llama-3-8B config.json
    "llama-3-8b": ModelConfig(d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8,
                              ffn_hidden=14336, max_seq_len=8192, **_LLAMA3),
    # meta-llama/Meta-Llama-3-70B config.json
    "llama-3-70b": ModelConfig(d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8,
                               ffn_hidden=28672, max_seq_len=8192, **_LLAMA3),
    # meta-llama/Llama-3.1-405B config.json (rope_scaling "llama3" not modelled)
    "llama-3.1-405b": ModelConfig(d_model=16384, n_layers=126, n_heads=128, n_kv_heads=8,
                                  ffn_hidden=53248, max_seq_len=131072, **_LLAMA3),
    # TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T config.json
    "tinyllama-1.1b": ModelConfig(d_model=2048, n_layers=22, n_heads=32, n_kv_heads=4,
                                  ffn_hidden=5632, max_seq_len=2048, **_LLAMA),
}


# Parameter counts published for the released checkpoints (model cards / safetensors metadata).
PUBLISHED_PARAMS = {
    "seed-demo": 43_780_608,        # seed 000, section 八, "总参数"
    "seed-demo-mha": 45_353_472,    # seed 000, section 八, "MHA"
    "llama-7b": 6_738_415_616,
    "llama-2-7b": 6_738_415_616,
    "llama-2-13b": 13_015_864_320,
    "llama-2-70b": 68_976_648_192,
    "llama-3-8b": 8_030_261_248,
    "llama-3-70b": 70_553_706_496,
    "llama-3.1-405b": 405_853_388_800,
    "tinyllama-1.1b": 1_100_048_384,
}


def get_preset(name: str) -> ModelConfig:
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; known presets: {', '.join(PRESETS)}") from None
