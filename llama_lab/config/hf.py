"""Hugging Face ``config.json`` interop: read a LlamaConfig-style dict, write one back.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import ConfigError
from .bounds import INIT_STD

if TYPE_CHECKING:
    from .model_config import ModelConfig


class HFConfigWarning(UserWarning):
    """A key of a Hugging Face config.json that LLaMA Lab does not model."""


# HF keys that describe tokenisation, serving or bookkeeping, not the architecture: read quietly.
_HF_METADATA_KEYS = {
    "architectures", "model_type", "torch_dtype", "dtype", "transformers_version",
    "bos_token_id", "eos_token_id", "pad_token_id", "use_cache", "_name_or_path",
    "initializer_range", "attention_dropout", "pretraining_tp", "tokenizer_class",
}


_HF_FIELD_MAP = {
    "vocab_size": "vocab_size",
    "hidden_size": "d_model",
    "num_hidden_layers": "n_layers",
    "num_attention_heads": "n_heads",
    "num_key_value_heads": "n_kv_heads",
    "intermediate_size": "ffn_hidden",
    "max_position_embeddings": "max_seq_len",
    "rms_norm_eps": "norm_eps",
    "rope_theta": "rope_theta",
    "tie_word_embeddings": "tie_embeddings",
}


_HF_REQUIRED = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size")


def _read_rope(data: Mapping[str, Any], kwargs: dict, notes: list[str]) -> None:
    """RoPE's base from ``rope_theta`` or transformers ≥ 5's ``rope_parameters``
    ({"rope_theta": ..., "rope_type": ...}); scaling is noted as not modelled."""
    rope_parameters = data.get("rope_parameters")
    rope_scaling = data.get("rope_scaling")
    if isinstance(rope_parameters, Mapping):
        if rope_parameters.get("rope_theta") is not None:
            kwargs["rope_theta"] = rope_parameters["rope_theta"]
        extra = {k: v for k, v in rope_parameters.items() if k != "rope_theta"}
        if extra.get("rope_type", "default") != "default":
            rope_scaling = extra
    elif rope_parameters is not None:
        notes.append(f"rope_parameters={rope_parameters!r} is not an object; ignored")
    if rope_scaling:
        notes.append(f"rope_scaling={json.dumps(rope_scaling, sort_keys=True)} is not modelled: "
                     f"positions use plain RoPE; parameter, FLOP and memory counts are unaffected")


def read_hf_dict(data: Mapping[str, Any], model_config: type) -> tuple["ModelConfig", list[str]]:
    """Translate a HF config.json dict into a ModelConfig plus human-readable notes about every
    key that was not modelled (rope scaling, unknown keys, a different head_dim, ...).
    ``model_config`` is the ModelConfig class (passed in: this module sits below it)."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"a config.json must be a JSON object, got {type(data).__name__}")
    missing = [k for k in _HF_REQUIRED if k not in data]
    if missing:
        raise ConfigError(f"HF config.json lacks required key(s) {', '.join(missing)}")
    notes: list[str] = []
    kwargs: dict[str, Any] = dict(norm_position="pre", norm_type="rmsnorm", pos_encoding="rope",
                                  ffn_type="swiglu", final_norm=True, init="normal",
                                  tie_embeddings=False, norm_eps=1e-6, rope_theta=10000.0)
    for hf_key, field in _HF_FIELD_MAP.items():
        if hf_key in data and data[hf_key] is not None:
            kwargs[field] = data[hf_key]
    kwargs.setdefault("n_kv_heads", kwargs["n_heads"])
    kwargs.setdefault("max_seq_len", 2048)
    attention_bias, mlp_bias = data.get("attention_bias", False), data.get("mlp_bias", False)
    for key, value in (("attention_bias", attention_bias), ("mlp_bias", mlp_bias)):
        if not isinstance(value, bool):
            raise ConfigError(f"{key}={value!r} must be true or false")
    if attention_bias != mlp_bias:
        notes.append(f"attention_bias={attention_bias} and mlp_bias={mlp_bias} differ; LLaMA Lab "
                     f"has one 'bias' switch and uses {bool(attention_bias or mlp_bias)}")
    kwargs["bias"] = bool(attention_bias or mlp_bias)

    model_type = data.get("model_type", "llama")
    if model_type not in ("llama", "mistral"):
        notes.append(f"model_type={model_type!r} is read as a LLaMA-style decoder")
    act = data.get("hidden_act", "silu")
    if act != "silu":
        notes.append(f"hidden_act={act!r} is not modelled; the FFN uses SwiGLU (SiLU gate)")
    _read_rope(data, kwargs, notes)
    for key in ("attention_dropout",):
        if data.get(key) not in (None, 0, 0.0):
            notes.append(f"{key}={data[key]} is not modelled (no dropout)")
    if data.get("pretraining_tp") not in (None, 1):
        notes.append(f"pretraining_tp={data['pretraining_tp']} only changes how Meta sharded "
                     f"the matmuls; the maths is the same")
    handled = set(_HF_FIELD_MAP) | _HF_METADATA_KEYS | {
        "attention_bias", "mlp_bias", "hidden_act", "rope_scaling", "rope_parameters", "head_dim"}
    for key in sorted(set(data) - handled):
        notes.append(f"unknown key {key!r} ignored")
    cfg = model_config(**kwargs)                     # validates every value first
    if data.get("head_dim") not in (None, cfg.head_dim):
        notes.append(f"head_dim={data['head_dim']!r} differs from hidden_size/num_attention_heads="
                     f"{cfg.head_dim}; LLaMA Lab uses the latter")
    return cfg, notes


def to_hf_config(self: "ModelConfig") -> dict:
    """A LlamaConfig-style config.json for a LLaMA-style config (ConfigError otherwise)."""
    if not self.is_llama_style:
        raise ConfigError(
            "to_hf_config needs a LLaMA-style config (pre-norm, rmsnorm, rope, swiglu, "
            f"final norm); this one has norm_position={self.norm_position!r}, "
            f"norm_type={self.norm_type!r}, pos_encoding={self.pos_encoding!r}, "
            f"ffn_type={self.ffn_type!r}, final_norm={self.final_norm}")
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": self.vocab_size,
        "hidden_size": self.d_model,
        "intermediate_size": self.ffn_hidden,
        "num_hidden_layers": self.n_layers,
        "num_attention_heads": self.n_heads,
        "num_key_value_heads": self.n_kv_heads,
        "head_dim": self.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": self.max_seq_len,
        "rms_norm_eps": self.norm_eps,
        "rope_theta": self.rope_theta,
        "rope_scaling": None,
        "tie_word_embeddings": self.tie_embeddings,
        "attention_bias": self.bias,
        "mlp_bias": self.bias,
        "initializer_range": INIT_STD,
    }
