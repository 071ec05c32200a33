"""Writing a Hugging Face ``config.json``: the keys every family writes alike (``common_keys``)
and the family that expresses the config (``select.family_of``) with its own keys
(``Family.write``), read back by transformers as the same model. RoPE is written plain (LLaMA
Lab models no scaling); a family whose config class defaults to a scaled RoPE writes it
explicitly."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..bounds import INIT_STD
from ..fields import ModelFields
from .family import Family
from .keys import ModelType
from .select import family_of


def common_keys(cfg: ModelFields, model_type: ModelType) -> dict[str, Any]:
    """The keys every family's config class takes alike, for ``cfg``."""
    return {
        "architectures": [model_type.architecture],
        "model_type": model_type.name,
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.d_model,
        "intermediate_size": cfg.ffn_hidden,
        "num_hidden_layers": cfg.n_layers,
        "num_attention_heads": cfg.n_heads,
        "num_key_value_heads": cfg.n_kv_heads,
        "head_dim": cfg.head_dim,  # (a family's own keys may replace it: DeepSeek's)
        # SwiGLU's SiLU, where the model reads it (gpt_oss's experts never do: left out)
        **({"hidden_act": "silu"} if "hidden_act" in model_type.reads else {}),
        "max_position_embeddings": cfg.max_seq_len,
        "rms_norm_eps": cfg.norm_eps,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": None,
        "tie_word_embeddings": cfg.tie_embeddings,
        "initializer_range": INIT_STD,
    }


def to_hf_config(cfg: ModelFields, families: Sequence[Family]) -> dict[str, Any]:
    """The config.json of the family of ``families`` that expresses ``cfg`` (ConfigError when
    none does)."""
    family, model_type = family_of(cfg, families)
    out = {**common_keys(cfg, model_type), **family.write(cfg, model_type.name)}
    defaults = model_type.defaults
    if "intermediate_size" not in defaults:  # Qwen3_5MoeTextConfig: no dense FFN to size
        del out["intermediate_size"]
    if "rope_theta" not in defaults:  # one base per layer type: rope_parameters says both
        del out["rope_theta"], out["rope_scaling"]
    pad = defaults.get("pad_token_id")
    if isinstance(pad, int) and pad >= cfg.vocab_size:
        # the class's default padding row (Phi3Config's 32000, SmolLM3Config's 128004) lies outside
        # a smaller vocabulary, where nn.Embedding refuses it: no padding row (LLaMA Lab has none)
        out["pad_token_id"] = None
    return out
