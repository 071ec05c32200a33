"""The fields that set each supported family apart, read from its config.json as its
transformers config class and model read them (``family_fields``): biases, QK-norm, sliding
windows (Mistral's on every layer, Qwen's, gpt-oss's and Gemma's per ``layer_types``), experts
(Mixtral, Qwen3-MoE), MLA and DeepSeekMoE (DeepSeek-V2/V3), gpt-oss's sinks and expert block,
Gemma 2/3's layer (sandwich norms, GeGLU, soft caps) and Gemma 3's RoPE per layer type, OLMo 2's
output norms and QK-norm over the projection, SmolLM3's NoPE layers, Phi-3's fused projections
and partial RoPE, GLM-4.5's partial RoPE and DeepSeekMoE-style experts. The shared fields
(sizes, heads, norms, one RoPE base) are ``hf``'s."""

from __future__ import annotations

import json
import math
from typing import Any, Mapping

from ..errors import ConfigError
from .bounds import FAMILY_LIMITS
from .hf_read import KEY_TABLE, Family, _bool, _count, _get, _list, config_class
from .messages import check_int, cut, name_keys, shown

LAYER_KINDS = ("sliding_attention", "full_attention")


def _layer_types(data: Mapping[str, Any], family: Family, n_layers: int) -> list[str] | None:
    """``layer_types`` checked (one known kind per layer), None when absent or null."""
    layer_types = _list(data, family, "layer_types", str)
    if layer_types is not None and (set(layer_types) - set(LAYER_KINDS) or len(layer_types) != n_layers):
        raise ConfigError(
            f"layer_types must name 'full_attention' or 'sliding_attention' for "
            f"each of the {n_layers} layers",
            field="layer_types",
        )
    return layer_types


def _windows(window: int | None, local: list[int], n_layers: int) -> tuple[int, str]:
    """(sliding_window, local_layers) of the layers in ``local``; (0, "all") for none."""
    if not local or window is None:
        return 0, "all"
    return window, "all" if len(local) == n_layers else ",".join(map(str, local))


def _qwen_windows(data: Mapping[str, Any], family: Family, n_layers: int) -> tuple[int, str]:
    """(window, local layer set) of Qwen2/Qwen3: layer_types when given, else the layers from
    max_window_layers on when use_sliding_window."""
    window = _get(data, family, "sliding_window")
    layer_types = _layer_types(data, family, n_layers)
    if layer_types is not None:
        local = [i for i, kind in enumerate(layer_types) if kind == "sliding_attention"]
    elif _bool(data, family, "use_sliding_window") and window is not None:
        start = _count(data, family, "max_window_layers", 0, 1 << 62)
        local = list(range(min(start, n_layers), n_layers))
    else:
        local = []
    return _windows(window, local, n_layers)


def _experts(data: Mapping[str, Any], family: Family, n_layers: int) -> dict:
    """The expert fields of Mixtral and Qwen3-MoE."""
    if family.model_type == "mixtral":
        return dict(
            n_experts=_get(data, family, "num_local_experts"),
            experts_per_token=_get(data, family, "num_experts_per_tok"),
            moe_renormalize=True,
        )
    experts = _get(data, family, "num_experts")
    if "num_experts" not in data and "num_local_experts" in data:
        experts = data["num_local_experts"]  # Qwen3MoeConfig's attribute_map
    step = _count(data, family, "decoder_sparse_step", 0, 1 << 62)
    dense = set(_list(data, family, "mlp_only_layers", int) or [])
    sparse = [i for i in range(n_layers) if i not in dense and step and (i + 1) % step == 0]
    return dict(
        n_experts=experts,
        experts_per_token=_get(data, family, "num_experts_per_tok"),
        expert_ffn_hidden=_get(data, family, "moe_intermediate_size"),
        moe_renormalize=_bool(data, family, "norm_topk_prob"),
        moe_layers="all" if len(sparse) == n_layers else ",".join(map(str, sparse)) or "none",
    )


def _deepseek(data: Mapping[str, Any], family: Family, n_layers: int) -> dict:
    """MLA and DeepSeekMoE of DeepSeek-V2 and V3. transformers' config sets head_dim to
    qk_rope_head_dim (the rotary width) whatever the file says; LLaMA Lab's head_dim is a q/k
    head's whole width, qk_nope_head_dim + qk_rope_head_dim."""
    v3 = family.model_type == "deepseek_v3"
    for key in ("attention_bias",) + (() if v3 else ("mlp_bias",)):
        if _bool(data, family, key):
            raise ConfigError(
                f"{key}=true is not modelled for {family.model_type} (no published DeepSeek "
                f"model sets it); LLaMA Lab refuses rather than count the model wrong",
                field=key,
            )
    nope = _count(data, family, "qk_nope_head_dim", 0, 1 << 20)
    rope = _count(data, family, "qk_rope_head_dim", 0, 1 << 20)
    experts = _count(data, family, "n_routed_experts", 0, 1 << 20)
    first_dense = _count(data, family, "first_k_dense_replace", 0, 1 << 62)
    top_k = _get(data, family, "num_experts_per_tok")
    if experts and first_dense < n_layers and top_k is None:
        raise ConfigError(
            f"num_experts_per_tok is null: {family.architecture}'s router needs it (how many of "
            f"the {experts} experts each token uses)",
            field="num_experts_per_tok",
        )
    groups, topk_groups = _get(data, family, "n_group"), _get(data, family, "topk_group")
    if not v3:
        method = _get(data, family, "topk_method")
        if method not in ("greedy", "group_limited_greedy"):
            raise ConfigError(
                f"topk_method={shown(method)} must be 'greedy' or 'group_limited_greedy' "
                f"(the two DeepseekV2TopkRouter runs)",
                field="topk_method",
            )
        if method == "greedy":
            groups = topk_groups = 1
        elif groups is None or topk_groups is None:
            raise ConfigError(
                "topk_method='group_limited_greedy' needs n_group and topk_group (DeepseekV2's "
                "router keeps the best topk_group of n_group expert groups)",
                field="n_group" if groups is None else "topk_group",
            )
    sparse = experts > 0 and first_dense < n_layers
    return dict(
        kv_lora_rank=_get(data, family, "kv_lora_rank"),
        q_lora_rank=_get(data, family, "q_lora_rank") or 0,
        qk_rope_head_dim=rope,
        head_dim=nope + rope,
        v_head_dim=_get(data, family, "v_head_dim"),
        rope_interleave=_bool(data, family, "rope_interleave") if v3 else True,
        n_experts=experts if sparse else 0,
        experts_per_token=top_k if sparse else 0,
        expert_ffn_hidden=_get(data, family, "moe_intermediate_size"),
        n_shared_experts=_get(data, family, "n_shared_experts") if sparse else 0,
        moe_layers=f"from:{first_dense}" if sparse else "all",
        moe_renormalize=_bool(data, family, "norm_topk_prob") if v3 else False,
        moe_scoring="sigmoid" if v3 else "softmax",
        moe_groups=1 if groups is None else groups,
        moe_topk_groups=1 if topk_groups is None else topk_groups,
        routed_scaling=_get(data, family, "routed_scaling_factor"),
    )


def _gpt_oss(data: Mapping[str, Any], family: Family, n_layers: int) -> dict:
    """GptOssConfig / GptOssForCausalLM: every layer's attention has q/k/v/o biases when
    attention_bias and one sink logit per query head (GptOssAttention.sinks); layer_types
    (default: sliding on even layers, ``(i + 1) % 2``) picks the layers that attend through
    sliding_window; every layer's MLP is the gpt-oss expert block: a router with a bias (softmax
    over the top-k logits), num_local_experts experts of intermediate_size with biases
    (gate_up_proj_bias, down_proj_bias) and the clamped SwiGLU (swiglu_limit, swiglu_alpha)."""
    attention = _bool(data, family, "attention_bias")
    layer_types = _layer_types(data, family, n_layers)
    if layer_types is None:  # GptOssConfig.__post_init__
        layer_types = [LAYER_KINDS[0] if (i + 1) % 2 else LAYER_KINDS[1] for i in range(n_layers)]
    local = [i for i, kind in enumerate(layer_types) if kind == "sliding_attention"]
    # a window of 0 would mask every key of a sliding layer (transformers keeps k > q - W)
    window = _count(data, family, "sliding_window", 1, FAMILY_LIMITS["sliding_window"]) if local else None
    sliding_window, local_layers = _windows(window, local, n_layers)
    width = _get(data, family, "intermediate_size")
    return dict(
        qkv_bias=attention,
        o_bias=attention,
        mlp_bias=True,  # the experts' biases (every layer is sparse: no dense FFN to carry one)
        attention_sinks=True,
        sliding_window=sliding_window,
        local_layers=local_layers,
        n_experts=_get(data, family, "num_local_experts"),
        experts_per_token=_get(data, family, "num_experts_per_tok"),
        expert_ffn_hidden=width,
        moe_layers="all",
        moe_style="gpt_oss",
        moe_renormalize=True,
        moe_scoring="softmax",
        swiglu_limit=_get(data, family, "swiglu_limit"),
        swiglu_alpha=_get(data, family, "swiglu_alpha"),
    )


GELU_TANH = "gelu_pytorch_tanh"  # transformers' tanh-approximated GELU: the gate of Gemma's GeGLU
GEMMA3_PATTERN = 6  # Gemma3TextConfig.__post_init__: kwargs.get("sliding_window_pattern", 6)


def _number(value: Any) -> float | None:
    """``value`` as a finite float; None for a bool, text, ±inf, NaN or an int beyond a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _json(value: Any) -> str:
    try:
        return cut(json.dumps(value, sort_keys=True), 200)
    except (TypeError, ValueError):
        return shown(value, 200)


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


def _floor_head_dim(data: Mapping[str, Any], family: Family) -> dict:
    """OLMo 2's, SmolLM3's, Phi-3's and GLM-4.5's attention take ``getattr(config, "head_dim",
    hidden_size // num_attention_heads)`` (their config classes have no head_dim field): a file
    without one gets the floor, which ModelConfig's own rule (d_model / n_heads, exact) derives
    only where it divides."""
    if "head_dim" in data:
        return {}
    hidden, heads = _get(data, family, "hidden_size"), _get(data, family, "num_attention_heads")
    numbers = all(isinstance(v, int) and not isinstance(v, bool) for v in (hidden, heads))
    if not numbers or heads < 1 or hidden < heads or hidden % heads == 0:
        return {}  # ModelConfig names what is wrong, or derives the same width
    return dict(head_dim=hidden // heads)


def _partial_rotary(data: Mapping[str, Any], family: Family) -> float:
    """The share of each head RoPE rotates, as Phi3RotaryEmbedding and Glm4MoeRotaryEmbedding
    read it: ``rope_parameters.get("partial_rotary_factor", 1.0)`` after the config class built
    rope_parameters (``rope_scaling or rope_parameters``, then ``setdefault`` of the top-level
    key: Phi3Config.convert_rope_params_to_dict's ``kwargs.get(..., 1.0)``, Glm4MoeConfig's
    ``kwargs.setdefault(..., 0.5)``, which PreTrainedConfig folds in only when it is not null)."""
    scaling, params = data.get("rope_scaling"), data.get("rope_parameters")
    source = scaling if scaling else params
    if isinstance(source, Mapping) and "partial_rotary_factor" in source:
        where = "rope_scaling" if source is scaling else "rope_parameters"
        key, value = f"{where}['partial_rotary_factor']", source["partial_rotary_factor"]
    else:
        key = "partial_rotary_factor"
        value = data.get(key, 0.5 if family.model_type == "glm4_moe" else 1.0)
        if value is None and family.model_type == "glm4_moe":
            return 1.0  # not folded in: Glm4MoeRotaryEmbedding's .get(..., 1.0)
    number = _number(value)
    if number is None or not 0 < number <= 1:
        raise ConfigError(
            f"{key}={shown(value)} must be a number in (0, 1]: {family.architecture}'s RoPE rotates "
            f"int(head_dim × it) dimensions of each head",
            field="partial_rotary_factor",
        )
    return number


def _layer_list(indices: list[int], n_layers: int) -> str:
    """A layer-set string of ``indices``: "none", "all" or the comma list."""
    if not indices:
        return "none"
    return "all" if len(indices) == n_layers else ",".join(map(str, indices))


def _olmo2(data: Mapping[str, Any], family: Family) -> dict:
    """Olmo2Config / Olmo2ForCausalLM: Olmo2DecoderLayer has no input norms, x +
    post_attention_layernorm(attn(x)) then x + post_feedforward_layernorm(mlp(x)); Olmo2Attention
    normalises all of q (q_norm over H·head_dim) and of k (k_norm over G·head_dim) before RoPE;
    attention_bias on q/k/v/o, an MLP without biases."""
    attention = _bool(data, family, "attention_bias")
    return dict(
        norm_position="output",
        qk_norm=True,
        qk_norm_scope="projection",
        qkv_bias=attention,
        o_bias=attention,
        mlp_bias=False,
        **_floor_head_dim(data, family),
    )


def _smollm3(data: Mapping[str, Any], family: Family, n_layers: int, notes: list[str]) -> dict:
    """SmolLM3Config / SmolLM3ForCausalLM: SmolLM3Attention rotates q and k only where
    ``no_rope_layers[layer]`` is non-zero (SmolLM3Config.__post_init__: 0 on every
    no_rope_layer_interval-th layer when the list is null); the layers layer_types marks
    "sliding_attention" get the sliding-window mask (SmolLM3Config: the NoPE layers, when
    use_sliding_window and sliding_window is set); attention_bias on q/k/v/o, mlp_bias on the MLP."""
    attention, mlp = _bool(data, family, "attention_bias"), _bool(data, family, "mlp_bias")
    rope = _list(data, family, "no_rope_layers", int)
    if rope is None:
        interval = _count(data, family, "no_rope_layer_interval", 1, 1 << 62)  # 0: ZeroDivisionError
        rope = [int((i + 1) % interval != 0) for i in range(n_layers)]
    else:
        if len(rope) < n_layers:
            raise ConfigError(
                f"no_rope_layers has {len(rope)} entries for {n_layers} layers: SmolLM3Attention "
                f"reads no_rope_layers[layer_idx] for every layer (IndexError)",
                field="no_rope_layers",
            )
        if len(rope) > n_layers:
            notes.append(
                f"no_rope_layers has {len(rope)} entries for {n_layers} layers: the entries after "
                f"the last layer are never read; ignored"
            )
        given = data.get("no_rope_layer_interval")
        if isinstance(given, int) and given > 0 and not isinstance(given, bool):
            derived = [int((i + 1) % given != 0) for i in range(n_layers)]
            if [bool(r) for r in rope[:n_layers]] != [bool(r) for r in derived]:
                notes.append(
                    f"no_rope_layer_interval={given} is not used: no_rope_layers names each "
                    f"layer (SmolLM3Config derives it from the interval only when it is absent)"
                )
    nope = [i for i in range(n_layers) if not rope[i]]
    window = _get(data, family, "sliding_window")
    use_window = _bool(data, family, "use_sliding_window")
    layer_types = _layer_types(data, family, n_layers)
    if layer_types is None:  # SmolLM3Config.__post_init__
        local = nope if use_window and window is not None else []
    else:
        local = [i for i, kind in enumerate(layer_types) if kind == "sliding_attention"]
        if local and window is None:
            raise ConfigError(
                "layer_types names sliding layers but sliding_window is null: SmolLM3Model "
                "builds their sliding-window mask from it",
                field="sliding_window",
            )
        if local and not use_window:
            notes.append(
                "layer_types names sliding layers while use_sliding_window is false: SmolLM3Model "
                "still gives them the sliding-window mask (eager and SDPA attention window them; "
                "only flash attention reads use_sliding_window): read as windowed"
            )
    if local:
        window = _count(data, family, "sliding_window", 1, FAMILY_LIMITS["sliding_window"])
    sliding_window, local_layers = _windows(window, local, n_layers)
    return dict(
        qkv_bias=attention,
        o_bias=attention,
        mlp_bias=mlp,
        nope_layers=_layer_list(nope, n_layers),
        sliding_window=sliding_window,
        local_layers=local_layers,
        **_floor_head_dim(data, family),
    )


def _phi3_rope(data: Mapping[str, Any], family: Family, factor: float) -> None:
    """Phi3Config.validate_rope: the RoPE type (rope_scaling's, else rope_parameters') must be
    'default' or 'longrope' ('su' and 'yarn' are renamed longrope), and a longrope short_factor
    or long_factor must hold one number per rotated pair of int(hidden_size /
    num_attention_heads × factor) dimensions; Phi3Config raises otherwise."""
    scaling, params = data.get("rope_scaling"), data.get("rope_parameters")
    source = scaling if scaling else params
    if not isinstance(source, Mapping):
        return
    field = "rope_scaling" if source is scaling else "rope_parameters"
    kind = source.get("rope_type", source.get("type", "default"))
    kind = "longrope" if kind in ("su", "yarn") else kind
    if kind not in ("default", "longrope"):
        raise ConfigError(
            f"{field} names RoPE type {shown(kind)}: Phi3Config takes only 'default' or 'longrope' "
            f"('su' and 'yarn' read as longrope) and raises on any other",
            field=field,
        )
    hidden, heads = _get(data, family, "hidden_size"), _get(data, family, "num_attention_heads")
    if kind != "longrope" or not all(isinstance(v, int) and not isinstance(v, bool) for v in (hidden, heads)):
        return
    pairs = int(hidden // max(heads, 1) * factor) // 2
    for name in ("short_factor", "long_factor"):
        value = source.get(name)
        if value is not None and (
            not isinstance(value, list) or len(value) != pairs or any(_number(v) is None for v in value)
        ):
            raise ConfigError(
                f"{field}['{name}'] must be a list of {pairs} numbers (one per rotated pair of "
                f"dimensions); Phi3Config raises otherwise",
                field=field,
            )


def _phi3(data: Mapping[str, Any], family: Family) -> dict:
    """Phi3Config / Phi3ForCausalLM: one qkv_proj (q, then k, then v) and one gate_up_proj (gate
    first), no biases anywhere (Phi3Attention and Phi3MLP take none: attention_bias and mlp_bias
    are never read); RoPE on the first int(head_dim × partial_rotary_factor) dimensions; every
    layer attends through sliding_window unless it is null (Phi3Model builds the sliding mask for
    all layers)."""
    window = _get(data, family, "sliding_window")
    if window is not None:  # a window of 0 would mask every key (transformers keeps k > q - W)
        window = _count(data, family, "sliding_window", 1, FAMILY_LIMITS["sliding_window"])
    factor = _partial_rotary(data, family)
    _phi3_rope(data, family, factor)
    return dict(
        fused_keys=True,
        qkv_bias=False,
        o_bias=False,
        mlp_bias=False,
        sliding_window=window or 0,
        partial_rotary_factor=factor,
        **_floor_head_dim(data, family),
    )


def _glm4_moe(data: Mapping[str, Any], family: Family, n_layers: int) -> dict:
    """Glm4MoeConfig / Glm4MoeForCausalLM: q/k/v carry attention_bias and o_proj never has one;
    q_norm and k_norm per head when use_qk_norm; RoPE on the first int(head_dim ×
    partial_rotary_factor) dimensions; blocks from first_k_dense_replace on are Glm4MoeMoE:
    Glm4MoeTopkRouter (sigmoid scores plus e_score_correction_bias choose the top-k among the
    best topk_group of n_group groups, renormalised when norm_topk_prob, × routed_scaling_factor)
    over n_routed_experts experts of moe_intermediate_size, plus one shared MLP of
    moe_intermediate_size × n_shared_experts; the blocks before are dense (intermediate_size)."""
    experts = _count(data, family, "n_routed_experts", 0, 1 << 20)
    first_dense = _count(data, family, "first_k_dense_replace", 0, 1 << 62)
    sparse = first_dense < n_layers
    if sparse and not experts:
        raise ConfigError(
            f"n_routed_experts=0 with sparse blocks from first_k_dense_replace={first_dense} on: "
            f"Glm4MoeTopkRouter cannot route over no experts",
            field="n_routed_experts",
        )
    out: dict[str, Any] = dict(
        qkv_bias=_bool(data, family, "attention_bias"),
        o_bias=False,
        mlp_bias=False,
        qk_norm=_bool(data, family, "use_qk_norm"),
        partial_rotary_factor=_partial_rotary(data, family),
        **_floor_head_dim(data, family),
    )
    if sparse:
        out.update(
            n_experts=experts,
            experts_per_token=_get(data, family, "num_experts_per_tok"),
            expert_ffn_hidden=_get(data, family, "moe_intermediate_size"),
            n_shared_experts=_get(data, family, "n_shared_experts"),
            moe_layers=f"from:{first_dense}",
            moe_renormalize=_bool(data, family, "norm_topk_prob"),
            moe_scoring="sigmoid",
            moe_groups=_get(data, family, "n_group"),
            moe_topk_groups=_get(data, family, "topk_group"),
            routed_scaling=_get(data, family, "routed_scaling_factor"),
        )
    return out


def family_fields(data: Mapping[str, Any], family: Family, n_layers: int, notes: list[str]) -> dict:
    """The fields that set one family apart: biases, QK-norm, windows, experts, MLA, sinks,
    Gemma's layer, output norms, NoPE layers, partial RoPE, fused keys; what they note (keys read
    and ignored) goes to ``notes``."""
    mt = family.model_type
    out: dict[str, Any] = {}
    if mt == "llama":
        attention, mlp = _bool(data, family, "attention_bias"), _bool(data, family, "mlp_bias")
        out.update(qkv_bias=attention, o_bias=attention, mlp_bias=mlp)
    elif mt == "qwen2":
        out.update(qkv_bias=True, o_bias=False, mlp_bias=False)
    elif mt in ("qwen3", "qwen3_moe"):
        attention = _bool(data, family, "attention_bias")
        out.update(qkv_bias=attention, o_bias=attention, mlp_bias=False, qk_norm=True)
    if mt in ("mistral", "mixtral") or (mt == "qwen3_moe" and _bool(data, family, "use_sliding_window")):
        out.update(sliding_window=_get(data, family, "sliding_window") or 0)
    elif mt in ("qwen2", "qwen3"):
        out["sliding_window"], out["local_layers"] = _qwen_windows(data, family, n_layers)
    if mt in ("mixtral", "qwen3_moe"):
        out.update(_experts(data, family, n_layers))
    if mt in ("deepseek_v2", "deepseek_v3"):
        out.update(_deepseek(data, family, n_layers))
    if mt == "gpt_oss":
        out.update(_gpt_oss(data, family, n_layers))
    if mt in ("gemma2", "gemma3_text"):
        out.update(_gemma(data, family, n_layers, notes))
    if mt == "olmo2":
        out.update(_olmo2(data, family))
    if mt == "smollm3":
        out.update(_smollm3(data, family, n_layers, notes))
    if mt == "phi3":
        out.update(_phi3(data, family))
    if mt == "glm4_moe":
        out.update(_glm4_moe(data, family, n_layers))
    return out
