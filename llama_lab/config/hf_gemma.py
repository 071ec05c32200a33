"""Gemma 2 and Gemma 3's config.json, read as Gemma2Config / Gemma3TextConfig and their models
read it: the sandwich (1 + γ) RMSNorm block, GeGLU, √d embeddings, QK-norm (Gemma 3), the score
scale, the sliding layers (layer_types or the pattern), Gemma 3's RoPE per layer type and the
soft caps (``_gemma``, called by ``hf_families.family_fields``)."""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import ConfigError
from .bounds import FAMILY_LIMITS
from .hf_read import (
    KEY_TABLE,
    LAYER_KINDS,
    Family,
    _bool,
    _count,
    _get,
    _json,
    _layer_types,
    _number,
    _windows,
    config_class,
)
from .messages import check_int, name_keys, shown

GELU_TANH = "gelu_pytorch_tanh"  # transformers' tanh-approximated GELU: the gate of Gemma's GeGLU
GEMMA3_PATTERN = 6  # Gemma3TextConfig.__post_init__: kwargs.get("sliding_window_pattern", 6)


def _softcap(data: Mapping[str, Any], family: Family, key: str) -> float:
    """A soft cap, ``cap · tanh(x / cap)``: a positive number; null is none (0)."""
    value = _get(data, family, key)
    if value is None:
        return 0.0
    number = _number(value)
    if number is None or number <= 0:
        what = "scores" if key.startswith("attn") else "logits"
        raise ConfigError(
            f"{key}={shown(value)} must be a positive number or null (no cap): "
            f"{family.architecture} divides the {what} by it",
            field=key,
        )
    return number


def _gemma_local(data: Mapping[str, Any], family: Family, n_layers: int, notes: list[str]) -> list[int]:
    """The sliding layers: layer_types when given, else the config class's pattern (Gemma2Config:
    sliding when (i + 1) % 2; Gemma3TextConfig: when (i + 1) % sliding_window_pattern, 6)."""
    gemma3 = family.model_type == "gemma3_text"
    layer_types = _layer_types(data, family, n_layers)
    if layer_types is not None:
        if gemma3 and "sliding_window_pattern" in data:
            notes.append(
                f"sliding_window_pattern={shown(data['sliding_window_pattern'])} is not used: "
                f"layer_types names each layer's kind (Gemma3TextConfig derives them from the "
                f"pattern only when layer_types is absent)"
            )
        return [i for i, kind in enumerate(layer_types) if kind == "sliding_attention"]
    if not gemma3:
        return [i for i in range(n_layers) if (i + 1) % 2]
    pattern = data.get("sliding_window_pattern", GEMMA3_PATTERN)
    check_int("sliding_window_pattern", pattern, 1, 1 << 62)  # null, 0: Gemma3TextConfig raises
    return [i for i in range(n_layers) if (i + 1) % pattern]


_ROPE_SOURCES = (
    ("full_attention", "rope_theta", "global"),
    ("sliding_attention", "rope_local_base_freq", "local"),
)


def _gemma3_rope(
    data: Mapping[str, Any], family: Family, local: list[int], n_layers: int, notes: list[str]
) -> tuple[float, float]:
    """(rope_theta, rope_local_theta): the full-attention and the sliding layers' RoPE bases as
    Gemma3TextConfig.convert_rope_params_to_dict builds rope_parameters (transformers 5): the
    file's rope_parameters keyed by layer type, rope_scaling merged into its full_attention
    entry, then an entry's missing rope_theta from rope_theta (full) or rope_local_base_freq
    (sliding), else default_theta (global 1e6, local 1e4). A scaled RoPE is a note (not
    modelled); a base no layer uses is not checked (Gemma3RotaryEmbedding builds only the layer
    types layer_types names)."""
    given = data.get("rope_parameters")
    if given is not None and not isinstance(given, Mapping):
        raise ConfigError(
            f"rope_parameters={shown(given)} must be an object keyed by layer type "
            f"('full_attention', 'sliding_attention')",
            field="rope_parameters",
        )
    params = dict(given or {})
    scaling = data.get("rope_scaling")
    if scaling is not None and not isinstance(scaling, Mapping):
        raise ConfigError(f"rope_scaling={shown(scaling)} must be an object or null", field="rope_scaling")
    ignored = [key for key in params if key not in LAYER_KINDS]
    if ignored:
        notes.append(
            f"rope_parameters key(s) {name_keys(ignored)} are not read: {config_class(family.model_type)} "
            f"keeps RoPE per layer type and Gemma3RotaryEmbedding reads only 'full_attention' and "
            f"'sliding_attention'; ignored"
        )
    defaults = KEY_TABLE["families"][family.model_type]["default_theta"]
    used = {"sliding_attention": bool(local), "full_attention": len(local) < n_layers}
    thetas = {}
    for kind, legacy, scope in _ROPE_SOURCES:
        entry = params.get(kind)
        if entry is not None and not isinstance(entry, Mapping):
            raise ConfigError(
                f"rope_parameters['{kind}']={shown(entry)} must be an object (its rope_type and "
                f"rope_theta) or null",
                field="rope_parameters",
            )
        # an entry left out or null is {"rope_type": "default"}, as Gemma3TextConfig fills it (so a
        # legacy rope_scaling {"type": ...} merged into it keeps rope_type "default", as there)
        entry = {"rope_type": "default"} if entry is None else dict(entry)
        field, source = "rope_parameters", f"rope_parameters['{kind}']['rope_theta']"
        if kind == "full_attention" and scaling is not None:
            if given is not None and params.get(kind) is None:
                raise ConfigError(
                    "rope_scaling is merged into rope_parameters['full_attention'], which this "
                    "file's rope_parameters lacks (Gemma3TextConfig raises)",
                    field="rope_scaling",
                )
            entry.update(scaling)
            if "rope_theta" in scaling:
                field, source = "rope_scaling", "rope_scaling['rope_theta']"
        if "rope_theta" not in entry:
            entry["rope_theta"] = data.get(legacy, defaults[scope])
            field = source = legacy
        elif data.get(legacy) not in (None, entry["rope_theta"]):
            notes.append(f"{legacy}={shown(data[legacy])} is not used: {source} gives the base")
        theta, number = entry["rope_theta"], _number(entry["rope_theta"])
        if not used[kind]:  # no layer of this kind: its base is never read
            thetas[kind] = number if number is not None and number > 0 else defaults[scope]
            continue
        if theta is None:
            raise ConfigError(
                f"{source} is null: {config_class(family.model_type)} keeps it as the {kind} "
                f"layers' RoPE base, and Gemma3RotaryEmbedding cannot rotate with none",
                field=field,
            )
        if number is None or number <= 0:
            raise ConfigError(
                f"{source}={shown(theta)} must be a positive number (the {kind} layers' RoPE base)",
                field=field,
            )
        if entry.get("rope_type", entry.get("type", "default")) != "default":
            # (rope_scaling: merged into the full-attention entry, as Gemma3TextConfig merges it)
            label = "rope_scaling" if kind == "full_attention" and scaling else f"rope_parameters['{kind}']"
            scaled = {k: v for k, v in entry.items() if k != "rope_theta"}
            notes.append(
                f"{label}={_json(scaled)} (the {kind} layers') is not modelled: positions use "
                f"plain RoPE; parameter, FLOP and memory counts are unaffected"
            )
        thetas[kind] = number
    return thetas["full_attention"], thetas["sliding_attention"]


def _gemma(data: Mapping[str, Any], family: Family, n_layers: int, notes: list[str]) -> dict:
    """Gemma2Config / Gemma3TextConfig and their CausalLM (transformers 5): every block is
    x + post_norm(f(pre_norm(x))) for attention and MLP (input_layernorm, post_attention_layernorm,
    pre_feedforward_layernorm, post_feedforward_layernorm), every RMSNorm scales by (1 + weight)
    (Gemma3 also on q and k: q_norm, k_norm), the embeddings are × √hidden_size, the MLP gates
    through ACT2FN[hidden_activation] (GeGLU, no biases), the scores are ×
    query_pre_attn_scalar^-½, q/k/v/o carry attention_bias. Gemma2Attention soft-caps the scores
    (softcap=attn_logit_softcapping); Gemma3Attention keeps attn_logit_softcapping but never
    passes it to the attention function (transformers 5.24): a note. Both ForCausalLM soft-cap
    the logits (final_logit_softcapping). Gemma 3's RoPE: ``_gemma3_rope``."""
    gemma3 = family.model_type == "gemma3_text"
    act = _get(data, family, "hidden_activation")
    if act != GELU_TANH:
        raise ConfigError(
            f"hidden_activation={shown(act)} is not modelled: LLaMA Lab's GeGLU gates through "
            f"tanh-approximated GELU, {GELU_TANH!r} (every Gemma 2/3 checkpoint's; "
            f"{family.architecture}'s MLP runs ACT2FN[hidden_activation])",
            field="hidden_activation",
        )
    if _bool(data, family, "use_bidirectional_attention"):  # null: off (the model's `not`)
        raise ConfigError(
            f"use_bidirectional_attention=true is not modelled: LLaMA Lab's decoders are causal "
            f"({family.architecture} would let every token attend to the later ones too)",
            field="use_bidirectional_attention",
        )
    local = _gemma_local(data, family, n_layers, notes)
    # a window of 0 would mask every key of a sliding layer (transformers keeps k > q - W)
    window = _count(data, family, "sliding_window", 1, FAMILY_LIMITS["sliding_window"]) if local else None
    sliding_window, local_layers = _windows(window, local, n_layers)
    attention = _bool(data, family, "attention_bias")
    attn_softcap = _softcap(data, family, "attn_logit_softcapping")
    if gemma3 and attn_softcap:
        notes.append(
            f"attn_logit_softcapping={shown(_get(data, family, 'attn_logit_softcapping'))} is not "
            f"applied by Gemma3Attention in transformers {KEY_TABLE['transformers']} (it keeps the "
            f"value and never passes it to the attention function): ignored"
        )
        attn_softcap = 0.0
    out = dict(
        norm_position="sandwich",
        norm_type="rmsnorm",
        norm_plus_one=True,
        ffn_type="geglu",
        embed_scale=True,
        qkv_bias=attention,
        o_bias=attention,
        mlp_bias=False,
        qk_norm=gemma3,
        query_pre_attn_scalar=_count(
            data, family, "query_pre_attn_scalar", 1, FAMILY_LIMITS["query_pre_attn_scalar"]
        ),
        sliding_window=sliding_window,
        local_layers=local_layers,
        attn_softcap=attn_softcap,
        logit_softcap=_softcap(data, family, "final_logit_softcapping"),
    )
    if gemma3:
        out["rope_theta"], out["rope_local_theta"] = _gemma3_rope(data, family, local, n_layers, notes)
    return out
