"""The config.json of Qwen3-Next (``qwen3_next``) and Qwen3.5 (``qwen3_5_text``,
``qwen3_5_moe_text``; the ``qwen3_5`` / ``qwen3_5_moe`` wrappers through their text_config), read
as their config classes and models read them (transformers 5.24): layer_types (by default every
full_attention_interval-th block full attention, the others Gated DeltaNet), the linear layers'
heads and convolution, gated attention (q_proj emits each head's output gate; QK-norm per head),
(1 + γ) RMSNorms, partial RoPE (0.25 unless given), and the experts: Qwen3-Next's per
decoder_sparse_step and mlp_only_layers, Qwen3.5-MoE's on every block, each with one shared
expert gated by σ(shared_expert_gate(x)). Called by ``hf_families.family_fields``; the keys
written back: ``qwen_hybrid_keys`` (for ``hf_export``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from ..errors import ConfigError
from ..units import each_of
from .hf_read import Family, _bool, _count, _get, _list
from .hf_rope_variants import _layer_list, _partial_rotary
from .messages import shown

if TYPE_CHECKING:
    from .model_config import ModelConfig

HYBRID = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")
LINEAR_KINDS = ("linear_attention", "full_attention")


def _linear_layers(data: Mapping[str, Any], family: Family, n_layers: int) -> list[int]:
    """The Gated DeltaNet blocks: layer_types' "linear_attention" entries, or (the config class's
    __post_init__ when layer_types is absent or null) every block but each
    full_attention_interval-th."""
    layer_types = _list(data, family, "layer_types", str)
    if layer_types is None:
        interval = data.get("full_attention_interval", 4)  # (a null: used only without layer_types)
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            raise ConfigError(
                f"full_attention_interval={shown(interval)} must be a whole number ≥ 1: "
                f"{family.architecture}'s config makes every interval-th block full attention",
                field="full_attention_interval",
            )
        return [i for i in range(n_layers) if (i + 1) % interval]
    if set(layer_types) - set(LINEAR_KINDS) or len(layer_types) != n_layers:
        raise ConfigError(
            f"layer_types must name 'linear_attention' or 'full_attention' for "
            f"{each_of(n_layers, 'layer')} ({family.architecture} builds a Gated DeltaNet or a "
            f"gated attention block from each)",
            field="layer_types",
        )
    return [i for i, kind in enumerate(layer_types) if kind == "linear_attention"]


def _experts(data: Mapping[str, Any], family: Family, n_layers: int) -> dict:
    """Qwen3-Next's sparse blocks (num_experts > 0, every decoder_sparse_step-th, not in
    mlp_only_layers) or Qwen3.5-MoE's (every block), each with a shared expert as wide as
    shared_expert_intermediate_size; softmax routing, renormalised when norm_topk_prob (always in
    Qwen3.5-MoE's router)."""
    mt = family.model_type
    experts = _count(data, family, "num_experts", 0, 1 << 20)
    if mt == "qwen3_next":
        step = _count(data, family, "decoder_sparse_step", 1, 1 << 62)
        dense = set(_list(data, family, "mlp_only_layers", int) or [])
        sparse = [i for i in range(n_layers) if experts and i not in dense and (i + 1) % step == 0]
        renormalize = _bool(data, family, "norm_topk_prob")
    else:
        if not experts:
            raise ConfigError(
                "num_experts=0: Qwen3_5MoeSparseMoeBlock on every block cannot route over no experts",
                field="num_experts",
            )
        sparse, renormalize = list(range(n_layers)), True
    if not sparse:
        return {}
    width = _get(data, family, "moe_intermediate_size")
    shared = _get(data, family, "shared_expert_intermediate_size")
    if shared != width:
        raise ConfigError(
            f"shared_expert_intermediate_size={shown(shared)} differs from moe_intermediate_size="
            f"{shown(width)}: LLaMA Lab models the shared expert as wide as a routed one (as every "
            f"published Qwen3-Next and Qwen3.5 model has it)",
            field="shared_expert_intermediate_size",
        )
    return dict(
        n_experts=experts,
        experts_per_token=_get(data, family, "num_experts_per_tok"),
        expert_ffn_hidden=width,
        n_shared_experts=1,
        shared_expert_gate=True,
        moe_layers=_layer_list(sparse, n_layers),
        moe_renormalize=renormalize,
    )


def qwen_hybrid(data: Mapping[str, Any], family: Family, n_layers: int, notes: list[str]) -> dict:
    """Qwen3NextConfig / Qwen3_5TextConfig / Qwen3_5MoeTextConfig and their CausalLM: Pre-LN
    blocks of Gated DeltaNet (Qwen3-Next's fused in_proj_qkvz / in_proj_ba, grouped per key
    head; Qwen3.5's in_proj_qkv, in_proj_z, in_proj_b, in_proj_a) or gated attention
    (attention_bias on q/k/v/o), every RMSNorm × (1 + γ), RoPE on the first
    int(head_dim × partial_rotary_factor) dimensions of each head."""
    mt = family.model_type
    attention = _bool(data, family, "attention_bias")
    out: dict[str, Any] = dict(
        qkv_bias=attention,
        o_bias=attention,
        mlp_bias=False,
        qk_norm=True,
        norm_plus_one=True,
        attn_output_gate=True,
        partial_rotary_factor=_partial_rotary(data, family),
        linear_layers=_layer_list(_linear_layers(data, family, n_layers), n_layers),
        linear_k_heads=_get(data, family, "linear_num_key_heads"),
        linear_v_heads=_get(data, family, "linear_num_value_heads"),
        linear_k_head_dim=_get(data, family, "linear_key_head_dim"),
        linear_v_head_dim=_get(data, family, "linear_value_head_dim"),
        linear_conv_kernel=_get(data, family, "linear_conv_kernel_dim"),
        linear_grouped_proj=mt == "qwen3_next",
    )
    if mt != "qwen3_5_text":
        out.update(_experts(data, family, n_layers))
    if mt == "qwen3_5_moe_text":  # no dense FFN anywhere: intermediate_size is not a field
        out["ffn_hidden"] = _get(data, family, "moe_intermediate_size")
    params = data.get("rope_parameters")
    if isinstance(params, Mapping) and ("mrope_section" in params or "mrope_interleaved" in params):
        notes.append(
            "rope_parameters' mrope_section / mrope_interleaved split the rotated pairs between "
            "the text, height and width positions of images and video; a text sequence's three "
            "positions are equal, so its RoPE is plain partial RoPE"
        )
    return out


def qwen_hybrid_keys(cfg: "ModelConfig", model_type: str) -> dict:
    """The config.json keys of ``model_type`` (Qwen3-Next's or Qwen3.5's) for ``cfg`` (what
    ``hf_export.to_hf_config`` writes beyond the common ones): layer_types, the linear layers'
    sizes, partial RoPE (folded into rope_parameters by the config class) and the experts."""
    out: dict[str, Any] = dict(
        attention_bias=cfg.qkv_bias,
        layer_types=["linear_attention" if flag else "full_attention" for flag in cfg.linear_layer_flags],
        linear_num_key_heads=cfg.linear_k_heads,
        linear_num_value_heads=cfg.linear_v_heads,
        linear_key_head_dim=cfg.linear_k_head_dim,
        linear_value_head_dim=cfg.linear_v_head_dim,
        linear_conv_kernel_dim=cfg.linear_conv_kernel,
        partial_rotary_factor=cfg.partial_rotary_factor,
    )
    if cfg.is_moe:
        out.update(
            num_experts=cfg.n_experts,
            num_experts_per_tok=cfg.experts_per_token,
            moe_intermediate_size=cfg.expert_ffn_hidden,
            shared_expert_intermediate_size=cfg.expert_ffn_hidden,
        )
    if model_type == "qwen3_next":  # its own keys: sparse blocks but mlp_only_layers, or none
        flags = cfg.moe_layer_flags
        out.update(
            num_experts=cfg.n_experts if cfg.is_moe else 0,  # the class's default is 512 experts
            decoder_sparse_step=1,
            mlp_only_layers=[i for i, sparse in enumerate(flags) if not sparse] if cfg.is_moe else [],
            norm_topk_prob=cfg.moe_renormalize,
        )
    return out
