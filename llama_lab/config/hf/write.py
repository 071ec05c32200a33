"""Writing a Hugging Face ``config.json``: the keys every family writes alike (``common_keys``)
and the family that expresses the config (``select.family_of``) with its own keys
(``Family.write``), read back by transformers as the same model. A scaled RoPE is written as
transformers 5 holds it, in rope_parameters with its rope_theta (``rope_parameters``); a family
whose config class defaults to a scaled RoPE writes plain RoPE explicitly."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import ConfigError
from ..bounds import INIT_STD
from ..fields import ModelFields, RopeScaling
from .family import Family
from .keys import ModelType
from .select import family_of
from .vision import write_vision


def rope_parameters(theta: float, scaling: RopeScaling | None) -> dict[str, Any]:
    """One rope_parameters entry: the base and the scaling's keys, or plain RoPE."""
    return {**(scaling.as_dict() if scaling else {"rope_type": "default"}), "rope_theta": theta}


def rope_by_layer_type(cfg: ModelFields) -> dict[str, Any]:
    """rope_parameters keyed by layer type (Gemma 3, Olmo 3): each type's base and scaling."""
    local_scaling = cfg.rope_scaling if cfg.rope_scaling_local else None
    return {
        "full_attention": rope_parameters(cfg.rope_theta, cfg.rope_scaling),
        "sliding_attention": rope_parameters(cfg.rope_local_theta, local_scaling),
    }


def nested_truncate(cfg: ModelFields) -> list[tuple[bool, str]]:
    """What a RoPE per layer type cannot write: YaRN's truncate=false (transformers reads it
    from the top level of rope_parameters, never from a layer type's entry)."""
    scaling = cfg.rope_scaling
    return [(scaling is not None and scaling.truncate is False, "YaRN's truncate=false")]


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
        **({"hidden_act": model_type.hidden_act} if "hidden_act" in model_type.reads else {}),
        "max_position_embeddings": cfg.max_seq_len,
        "rms_norm_eps": cfg.norm_eps,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": None,
        **(
            {"rope_parameters": rope_parameters(cfg.rope_theta, cfg.rope_scaling)} if cfg.rope_scaling else {}
        ),
        "tie_word_embeddings": cfg.tie_embeddings,
        "initializer_range": INIT_STD,
    }


def to_hf_config(cfg: ModelFields, families: Sequence[Family]) -> dict[str, Any]:
    """The config.json of the family of ``families`` that expresses ``cfg`` (ConfigError when
    none does)."""
    if cfg.sparse_pattern is not None:
        raise ConfigError(
            "no supported family writes a sparse attention pattern (global_tokens, random_blocks, "
            "dilation): transformers' decoders take a plain sliding window only"
        )
    family, model_type = family_of(cfg, families)
    if not model_type.common:  # the family writes every key of its own config class (Marian's)
        named = {"architectures": [model_type.architecture], "model_type": model_type.name}
        return {**named, **family.write(cfg, model_type.name)}
    out = {**common_keys(cfg, model_type), **family.write(cfg, model_type.name)}
    for key in model_type.drops:
        out.pop(key, None)
    defaults = model_type.defaults
    if "intermediate_size" not in defaults:  # Qwen3_5MoeTextConfig: no dense FFN to size
        del out["intermediate_size"]
    if "rope_theta" not in defaults and not model_type.drops:  # one base per layer type:
        del out["rope_theta"], out["rope_scaling"]  # rope_parameters says both
    pad = defaults.get("pad_token_id")
    if isinstance(pad, int) and pad >= cfg.vocab_size:
        # the class's default padding row (Phi3Config's 32000, SmolLM3Config's 128004) lies outside
        # a smaller vocabulary, where nn.Embedding refuses it: no padding row (LLaMA Lab has none)
        out["pad_token_id"] = None
    return out if cfg.vision is None else write_vision(cfg.vision, out)
