"""The fields that set each supported family apart, read from its config.json as its
transformers config class and model read them (``family_fields``): biases, QK-norm, sliding
windows (Mistral's on every layer, Qwen's, gpt-oss's and Gemma's per ``layer_types``), experts
(Mixtral, Qwen3-MoE), MLA and DeepSeekMoE (DeepSeek-V2/V3, Mistral 4), gpt-oss's sinks and expert block,
Gemma 2/3's layer (``hf_gemma``), OLMo 2's, SmolLM3's, Phi-3's and GLM-4.5's
(``hf_rope_variants``), Qwen3-Next's and Qwen3.5's hybrid layers (``hf_qwen_next``), Llama 4's
(``hf_llama4``). The shared
fields (sizes, heads, norms, one RoPE base) are ``hf``'s; the getters and layer-kind helpers all
of them use are ``hf_read``'s."""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import ConfigError
from .bounds import FAMILY_LIMITS
from .hf_gemma import _gemma
from .hf_llama4 import llama4
from .hf_qwen_next import HYBRID, qwen_hybrid
from .hf_read import KEY_TABLE, LAYER_KINDS, Family, _bool, _count, _get, _layer_types, _list, _windows
from .hf_rope_variants import _glm4_moe, _olmo2, _phi3, _smollm3
from .messages import shown


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
    v3 = family.model_type in ("deepseek_v3", "mistral4")  # Mistral 4: V3's keys, softmax scores
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


def _rope_number(rope: Mapping[str, Any], key: str, rule: str, whole: bool) -> float:
    """rope_parameters' ``key`` for Mistral 4's temperature, a number (``whole``: an integer ≥ 1)."""
    value = rope.get(key)
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if number is None or (whole and (number < 1 or number != int(number))):
        raise ConfigError(
            f"rope_parameters.{key}={shown(value)} must be {rule}: Mistral4Attention scales every "
            f"query by 1 + β · ln(1 + ⌊position / original_max_position_embeddings⌋)",
            field="rope_parameters",
        )
    return number


def _mistral4(data: Mapping[str, Any], family: Family, n_layers: int) -> dict:
    """Mistral4Config / Mistral4ForCausalLM (Mistral Small 4): DeepSeek-V3's MLA and expert
    layout with a softmax router (no correction bias) whose groups are ranked by their two best
    scores, and every query × 1 + β · ln(1 + ⌊p / original_max_position_embeddings⌋)
    (``get_llama_4_attn_scale``, β = rope_parameters' llama_4_scaling_beta)."""
    out = _deepseek(data, family, n_layers)
    out.update(moe_scoring="softmax", moe_group_top2=out["moe_groups"] > 1 and out["n_experts"] > 0)
    rope = data.get("rope_parameters") or data.get("rope_scaling")
    if rope is None:  # absent or null: Mistral4Config.__post_init__'s YaRN
        rope = KEY_TABLE["families"]["mistral4"].get("default_rope") or {}
    if not isinstance(rope, Mapping):
        raise ConfigError(f"rope_parameters={shown(rope)} must be an object", field="rope_parameters")
    beta = _rope_number(rope, "llama_4_scaling_beta", "a number", whole=False)
    floor = _rope_number(rope, "original_max_position_embeddings", "a whole number ≥ 1", whole=True)
    out.update(
        attn_temperature_layers="all",
        attn_temperature_scale=beta,
        attn_floor_scale=int(floor),  # (a whole number, checked)
        attn_temperature_offset=0,  # ⌊p / floor⌋
    )
    return out


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
    if mt == "mistral4":
        out.update(_mistral4(data, family, n_layers))
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
    if mt in HYBRID:
        out.update(qwen_hybrid(data, family, n_layers, notes))
    if mt == "llama4_text":
        out.update(llama4(data, family, n_layers, notes))
    return out
