"""Presets: the lab's own (the tiny ``debug`` config the tests use, the seed's demo model and its
MHA twin, the 2017 recipe) and every family's published configs (``families``: each with its
source), as ModelConfigs; the parameter counts published for them (``PUBLISHED_PARAMS``: exact
totals; ``PUBLISHED_ROUNDED``: totals published only rounded, with the active count and the
quote; ``PUBLISHED_SPLIT``: embedding and non-embedding counts), which the tests hold every
preset's count against."""

from __future__ import annotations

from ..errors import ConfigError
from .families import FAMILY_LIST
from .hf.family import Exact, Rounded, Split
from .model_config import ModelConfig

SEED_PRESETS: dict[str, ModelConfig] = {
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
}

PRESETS: dict[str, ModelConfig] = {
    **SEED_PRESETS,
    **{name: ModelConfig(**fields) for family in FAMILY_LIST for name, fields in family.presets.items()},
}

_PUBLISHED = {name: count for family in FAMILY_LIST for name, count in family.published.items()}
# Exact totals: the seed's own figures (seed 000, section 八, "总参数" and "MHA"), then the
# families' (model cards, safetensors metadata)
PUBLISHED_PARAMS: dict[str, int] = {
    "seed-demo": 43_780_608,
    "seed-demo-mha": 45_353_472,
    **{name: count.total for name, count in _PUBLISHED.items() if isinstance(count, Exact)},
}
# (total, active per token, the quote)
PUBLISHED_ROUNDED: dict[str, tuple[float, float, str]] = {
    name: (count.total, count.active, count.quote)
    for name, count in _PUBLISHED.items()
    if isinstance(count, Rounded)
}
# (embedding, non-embedding, the unit they are rounded to, the quote)
PUBLISHED_SPLIT: dict[str, tuple[float, float, float, str]] = {
    name: (count.embedding, count.non_embedding, count.unit, count.quote)
    for name, count in _PUBLISHED.items()
    if isinstance(count, Split)
}


def get_preset(name: str) -> ModelConfig:
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; known presets: {', '.join(PRESETS)}") from None
