"""Writing a Hugging Face ``config.json``: the supported family that expresses a config
(``family_of``: the first whose model has everything it sets, else a ConfigError listing what
each lacks) and that family's own keys (``to_hf_config``), read back by transformers as the
same model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .bounds import INIT_STD
from .hf import FAMILIES, Family

if TYPE_CHECKING:
    from .model_config import ModelConfig


def _reasons(cfg, model_type: str) -> list[str]:
    """Why ``model_type`` cannot express ``cfg`` (empty: it can)."""
    local = cfg.local_layer_flags
    window_all = not any(local) or all(local)
    same_attention_bias = cfg.qkv_bias == cfg.o_bias
    checks = {
        "llama": [
            (cfg.qk_norm, "QK-norm"),
            (any(local), "a sliding window"),
            (cfg.is_moe, "experts"),
            (not same_attention_bias, "q/k/v and o biases differ"),
        ],
        "mistral": [
            (cfg.qk_norm, "QK-norm"),
            (not window_all, "a window on some layers only"),
            (cfg.is_moe, "experts"),
            (cfg.qkv_bias or cfg.o_bias or cfg.mlp_bias, "biases"),
        ],
        "mixtral": [
            (cfg.qk_norm, "QK-norm"),
            (not window_all, "a window on some layers only"),
            (not cfg.is_moe or not all(cfg.moe_layer_flags), "experts on every layer"),
            (cfg.expert_ffn_hidden != cfg.ffn_hidden, "an expert width apart"),
            (not cfg.moe_renormalize, "unnormalised top-k"),
            (cfg.qkv_bias or cfg.o_bias or cfg.mlp_bias, "biases"),
        ],
        "qwen2": [
            (cfg.qk_norm, "QK-norm"),
            (cfg.is_moe, "experts"),
            (not (cfg.qkv_bias and not cfg.o_bias and not cfg.mlp_bias), "q/k/v biases without o/MLP biases"),
        ],
        "qwen3": [
            (not cfg.qk_norm, "QK-norm"),
            (cfg.is_moe, "experts"),
            (not same_attention_bias, "q/k/v and o biases differ"),
            (cfg.mlp_bias, "MLP biases"),
        ],
        "qwen3_moe": [
            (not cfg.qk_norm, "QK-norm"),
            (not cfg.is_moe, "experts"),
            (not window_all, "a window on some layers only"),
            (not same_attention_bias, "q/k/v and o biases differ"),
            (cfg.mlp_bias, "MLP biases"),
        ],
    }[model_type]
    return [why for broken, why in checks if broken]


def family_of(cfg: "ModelConfig") -> Family:
    """The first supported family that expresses ``cfg`` exactly (ConfigError: none does)."""
    if not cfg.is_llama_style:
        raise ConfigError(
            "to_hf_config needs a LLaMA-style config (pre-norm, rmsnorm, rope, swiglu, "
            f"final norm, unscaled embeddings); this one has norm_position={cfg.norm_position!r}, "
            f"norm_type={cfg.norm_type!r}, pos_encoding={cfg.pos_encoding!r}, "
            f"ffn_type={cfg.ffn_type!r}, final_norm={cfg.final_norm}, "
            f"embed_scale={cfg.embed_scale}"
        )
    reasons = {mt: _reasons(cfg, mt) for mt in FAMILIES}
    for model_type, why in reasons.items():
        if not why:
            return FAMILIES[model_type]
    raise ConfigError(
        "no supported family expresses this config: "
        + "; ".join(f"{mt} ({', '.join(why)})" for mt, why in reasons.items())
    )


def _family_keys(cfg: "ModelConfig", family: Family) -> dict:
    mt, local = family.model_type, cfg.local_layer_flags
    out: dict[str, Any] = {}
    if mt == "llama":
        out.update(attention_bias=cfg.qkv_bias, mlp_bias=cfg.mlp_bias)
    if mt in ("qwen3", "qwen3_moe"):
        out["attention_bias"] = cfg.qkv_bias
    if mt in ("mistral", "mixtral"):
        out["sliding_window"] = cfg.sliding_window if any(local) else None
    if mt in ("qwen2", "qwen3"):
        out.update(
            use_sliding_window=any(local),
            sliding_window=cfg.sliding_window or None,
            max_window_layers=cfg.n_layers,
            layer_types=["sliding_attention" if flag else "full_attention" for flag in local],
        )
    if mt == "qwen3_moe":
        out.update(use_sliding_window=any(local), sliding_window=cfg.sliding_window or None)
    if mt == "mixtral":
        out.update(num_local_experts=cfg.n_experts, num_experts_per_tok=cfg.experts_per_token)
    if mt == "qwen3_moe":
        flags = cfg.moe_layer_flags
        out.update(
            num_experts=cfg.n_experts,
            num_experts_per_tok=cfg.experts_per_token,
            moe_intermediate_size=cfg.expert_ffn_hidden,
            norm_topk_prob=cfg.moe_renormalize,
            decoder_sparse_step=1,
            mlp_only_layers=[i for i, sparse in enumerate(flags) if not sparse],
        )
    return out


def to_hf_config(cfg: "ModelConfig") -> dict:
    """The config.json of the family that expresses ``cfg`` (ConfigError when none does)."""
    family = family_of(cfg)
    return {
        "architectures": [family.architecture],
        "model_type": family.model_type,
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.d_model,
        "intermediate_size": cfg.ffn_hidden,
        "num_hidden_layers": cfg.n_layers,
        "num_attention_heads": cfg.n_heads,
        "num_key_value_heads": cfg.n_kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": cfg.max_seq_len,
        "rms_norm_eps": cfg.norm_eps,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": None,
        "tie_word_embeddings": cfg.tie_embeddings,
        "initializer_range": INIT_STD,
        **_family_keys(cfg, family),
    }
