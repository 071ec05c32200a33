"""Which Hugging Face family expresses a config (``family_of``): the block it builds (LLaMA-style,
OLMo 2's output norms, Gemma's sandwich norms, Qwen's hybrid (1 + γ) norms), then every field
only some families read (gpt-oss's sinks and experts, DeepSeek's MLA and routing, Llama 4's
chunks and temperature, the 2025 families' own fields). The first family with nothing missing
expresses it; otherwise a ConfigError lists what each lacks. ``hf_export`` writes its keys."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ConfigError
from .hf import FAMILIES, Family

if TYPE_CHECKING:
    from .model_config import ModelConfig


GEMMA = ("gemma2", "gemma3_text")
DEEPSEEK_MOE = ("deepseek_v2", "deepseek_v3", "glm4_moe", "mistral4")  # shared experts, groups, scaling
MLA_FAMILIES = ("deepseek_v2", "deepseek_v3", "mistral4")
PARTIAL_ROPE = (
    "phi3",
    "glm4_moe",
    "qwen3_next",
    "qwen3_5_text",
    "qwen3_5_moe_text",
)  # RoPE on the first partial_rotary_factor of each head
# The block each kind of family builds, field by field: a config has one of them or no family
LLAMA_BLOCK = dict(norm_position="pre", ffn_type="swiglu", embed_scale=False, norm_plus_one=False)
OLMO2_BLOCK = {**LLAMA_BLOCK, "norm_position": "output"}  # x + norm(f(x)), no input norms
QWEN_HYBRID_BLOCK = {**LLAMA_BLOCK, "norm_plus_one": True}  # Qwen3-Next's and Qwen3.5's: (1 + γ) norms
QWEN_HYBRID = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")
GEMMA_BLOCK = dict(norm_position="sandwich", ffn_type="geglu", embed_scale=True, norm_plus_one=True)
_SHARED_BLOCK = dict(norm_type="rmsnorm", pos_encoding="rope", final_norm=True)


def _has(cfg, block: dict) -> bool:
    return all(getattr(cfg, name) == value for name, value in {**block, **_SHARED_BLOCK}.items())


def _is_gemma_block(cfg) -> bool:
    return _has(cfg, GEMMA_BLOCK)


def _gemma_only(cfg) -> dict:
    """Gemma's fields that a LLaMA or OLMo 2 block must leave at their plain values."""
    return dict(
        query_pre_attn_scalar=cfg.head_dim,
        rope_local_theta=cfg.rope_theta,
        attn_softcap=0.0,
        logit_softcap=0.0,
    )


def _block_of(cfg) -> str | None:
    """The block a config's fields build: "gemma", "olmo2" or "llama" (None: no family's)."""
    if _is_gemma_block(cfg):
        return "gemma"
    plain = all(getattr(cfg, name) == value for name, value in _gemma_only(cfg).items())
    if plain and _has(cfg, OLMO2_BLOCK):
        return "olmo2"
    if plain and _has(cfg, QWEN_HYBRID_BLOCK):
        return "qwen_hybrid"
    return "llama" if plain and _has(cfg, LLAMA_BLOCK) else None


_BLOCK_WORDS = {
    "gemma": "Gemma's block (sandwich norms, RMSNorm × (1 + γ), GeGLU, √d embeddings)",
    "olmo2": "OLMo 2's block (norms on the sublayers' outputs only, x + norm(f(x)))",
    "llama": "a LLaMA block (pre-norm RMSNorm, SwiGLU, unscaled embeddings)",
    "qwen_hybrid": "Qwen3-Next's block (pre-norm RMSNorm × (1 + γ), SwiGLU)",
}


def _has_nope_blocks(cfg) -> bool:
    """Attention blocks that skip RoPE (a Gated DeltaNet block has no RoPE to skip)."""
    return any(not rope and not linear for rope, linear in zip(cfg.rope_layer_flags, cfg.linear_layer_flags))


def _reasons(cfg, model_type: str) -> list[str]:
    """Why ``model_type`` cannot express ``cfg`` (empty: it can)."""
    blocks = {"olmo2": "olmo2", **dict.fromkeys(GEMMA, "gemma"), **dict.fromkeys(QWEN_HYBRID, "qwen_hybrid")}
    wanted = blocks.get(model_type, "llama")
    if _block_of(cfg) != wanted:
        return [f"not {_BLOCK_WORDS[wanted]}"]
    local = cfg.local_layer_flags
    window_all = not any(local) or all(local)
    same_attention_bias = cfg.qkv_bias == cfg.o_bias
    flags = cfg.moe_layer_flags
    # gpt-oss's features: no other family has them
    gpt_oss_only = [
        (cfg.attention_sinks, "attention sinks"),
        (cfg.moe_style == "gpt_oss", "gpt-oss experts"),
    ]
    # DeepSeek's MLA: no other family has it (Llama 4 rotates adjacent pairs too)
    mla_only = [
        (cfg.is_mla, "MLA"),
        (cfg.rope_interleave and model_type != "llama4_text", "interleaved RoPE"),
        (cfg.v_head_dim != cfg.head_dim, "a value head width apart"),
    ]
    # Llama 4's: chunked attention, QK-norm after RoPE, the NoPE blocks' temperature, its experts
    llama4_only = [
        (cfg.chunked_attention, "chunked attention"),
        (cfg.qk_norm and cfg.qk_norm_scope == "rope_l2", "QK-norm after RoPE"),
        (any(cfg.temperature_layer_flags), "attention temperature"),
        (cfg.moe_style == "llama4", "Llama 4 experts"),
    ]
    # DeepSeekMoE's routing: DeepSeek-V2/V3 and GLM-4.5 only
    deepseek_moe_only = [
        (cfg.n_shared_experts > 0, "shared experts"),
        (cfg.moe_scoring != "softmax", f"{cfg.moe_scoring} router scores"),
        (cfg.moe_groups > 1, "expert groups"),
        (cfg.routed_scaling != 1.0, "routed_scaling"),
    ]
    # the 2025 families' features: each only in its own family (fused keys: a checkpoint layout)
    new_fields = [
        (
            cfg.fused_keys != (model_type == "phi3"),
            "fused qkv_proj / gate_up_proj keys" if cfg.fused_keys else "separate q/k/v and gate/up keys",
        ),
        (cfg.partial_rotary_factor != 1 and model_type not in PARTIAL_ROPE, "partial RoPE"),
        (_has_nope_blocks(cfg) and model_type not in ("smollm3", "llama4_text"), "NoPE blocks"),
        (
            cfg.qk_norm and cfg.qk_norm_scope == "projection" and model_type != "olmo2",
            "QK-norm over the whole projection",
        ),
    ]
    # Qwen3-Next's and Qwen3.5's: gated attention with per-head QK-norm, Gated DeltaNet blocks,
    # the gated shared expert
    hybrid = [
        (not cfg.attn_output_gate, "no gated attention output"),
        (not (cfg.qk_norm and cfg.qk_norm_scope == "head"), "no per-head QK-norm"),
        (any(local), "a sliding window"),
        (not same_attention_bias, "q/k/v and o biases differ"),
        (cfg.mlp_bias, "MLP biases"),
        (cfg.is_moe and not cfg.shared_expert_gate, "experts without a gated shared expert"),
        (
            cfg.has_linear_attention and cfg.linear_grouped_proj != (model_type == "qwen3_next"),
            "Qwen3-Next's grouped in_proj_qkvz" if cfg.linear_grouped_proj else "Qwen3.5's split in_proj_*",
        ),
    ]
    hybrid_only = [
        (cfg.has_linear_attention, "Gated DeltaNet layers"),
        (cfg.attn_output_gate, "a gated attention output"),
        (cfg.shared_expert_gate, "a gated shared expert"),
    ]
    # DeepseekV2/V3: dense blocks first (first_k_dense_replace), then sparse ones
    first_sparse = flags.index(True) if any(flags) else cfg.n_layers
    deepseek = [
        (not cfg.is_mla, "no MLA"),
        (cfg.qk_norm, "QK-norm"),
        (any(local), "a sliding window"),
        (cfg.qkv_bias or cfg.o_bias or cfg.mlp_bias, "biases"),
        (not all(flags[first_sparse:]), "sparse blocks that are not the last ones"),
        (cfg.is_moe and not cfg.n_shared_experts, "no shared expert"),
    ]
    gemma = [
        (cfg.is_moe, "experts"),
        (not same_attention_bias, "q/k/v and o biases differ"),
        (cfg.mlp_bias, "MLP biases"),
    ]
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
        "deepseek_v2": deepseek
        + [
            (cfg.is_moe and cfg.moe_scoring != "softmax", "sigmoid router scores"),
            (cfg.is_moe and cfg.moe_renormalize, "renormalised top-k"),
            (not cfg.rope_interleave, "RoPE on halves"),
        ],
        "deepseek_v3": deepseek + [(cfg.is_moe and cfg.moe_scoring != "sigmoid", "softmax router scores")],
        # Mistral4Config: DeepSeek-V3's layout with softmax scores (groups by their two best), and
        # the temperature on every block at ⌊p / original_max_position_embeddings⌋ (or none: β 0)
        "mistral4": deepseek
        + [
            (cfg.is_moe and cfg.moe_scoring != "softmax", "sigmoid router scores"),
            (
                cfg.is_moe and cfg.moe_groups > 1 and not cfg.moe_group_top2,
                "groups ranked by their best score",
            ),
            (
                any(cfg.temperature_layer_flags) and not all(cfg.temperature_layer_flags),
                "an attention temperature on some blocks only",
            ),
            (
                any(cfg.temperature_layer_flags) and cfg.attn_temperature_offset != 0,
                "a temperature offset of 1",
            ),
        ],
        # Olmo2Config: QK-norm over the projections always, attention_bias for q/k/v/o, no MLP
        # biases, no window, no experts
        "olmo2": [
            (not (cfg.qk_norm and cfg.qk_norm_scope == "projection"), "no QK-norm over the projections"),
            (any(local), "a sliding window"),
            (cfg.is_moe, "experts"),
            (not same_attention_bias, "q/k/v and o biases differ"),
            (cfg.mlp_bias, "MLP biases"),
        ],
        # SmolLM3Config: no_rope_layers, layer_types (any layers) with one window, attention_bias
        # for q/k/v/o, mlp_bias
        "smollm3": [
            (cfg.qk_norm, "QK-norm"),
            (cfg.is_moe, "experts"),
            (not same_attention_bias, "q/k/v and o biases differ"),
        ],
        # Phi3Config: fused keys, no biases, a window on every layer or none
        "phi3": [
            (cfg.qk_norm, "QK-norm"),
            (not window_all, "a window on some layers only"),
            (cfg.is_moe, "experts"),
            (cfg.qkv_bias or cfg.o_bias or cfg.mlp_bias, "biases"),
        ],
        # Glm4MoeConfig: q/k/v biases only, per-head QK-norm or none, dense blocks first, then
        # sigmoid-routed experts with shared ones
        "glm4_moe": [
            (any(local), "a sliding window"),
            (cfg.o_bias, "an o_proj bias"),
            (cfg.mlp_bias, "MLP biases"),
            (not all(flags[first_sparse:]), "sparse blocks that are not the last ones"),
            (cfg.is_moe and not cfg.n_shared_experts, "no shared expert"),
            (cfg.is_moe and cfg.moe_scoring != "sigmoid", "softmax router scores"),
        ],
        # Gemma2Config: one RoPE base, attention_bias for q/k/v/o, no MLP biases, no QK-norm
        "gemma2": gemma
        + [
            (cfg.qk_norm, "QK-norm"),
            (cfg.rope_local_theta != cfg.rope_theta, "a RoPE base of its own on the sliding layers"),
        ],
        # Gemma3TextConfig: QK-norm on every layer; Gemma3Attention never applies a score cap
        "gemma3_text": gemma
        + [
            (not cfg.qk_norm, "no QK-norm"),
            (
                cfg.attn_softcap > 0,
                "attention soft-capping (Gemma3Attention does not apply attn_logit_softcapping in "
                "transformers 5.24)",
            ),
        ],
        # Qwen3NextConfig: experts every block but mlp_only_layers, or none
        "qwen3_next": hybrid,
        # Qwen3_5TextConfig: a dense SwiGLU on every block
        "qwen3_5_text": hybrid + [(cfg.is_moe, "experts")],
        # Qwen3_5MoeTextConfig: experts on every block, the router always renormalised
        "qwen3_5_moe_text": hybrid
        + [
            (not cfg.is_moe or not all(flags), "experts on every block"),
            (not cfg.moe_renormalize, "unnormalised top-k"),
        ],
        # Llama4TextConfig: RoPE on adjacent pairs, no window but chunks, QK-norm after RoPE or
        # none, Llama 4's expert block (one shared expert as wide as an expert), one
        # attention_bias for q/k/v/o, no MLP biases
        "llama4_text": [
            (not cfg.rope_interleave, "RoPE on halves"),
            (any(local) and not cfg.chunked_attention, "a sliding window"),
            (cfg.qk_norm and cfg.qk_norm_scope != "rope_l2", "QK-norm before RoPE"),
            (cfg.moe_style != "llama4", "no Llama 4 expert block (moe_style='llama4')"),
            (
                any(cfg.temperature_layer_flags)
                and cfg.temperature_layer_flags != tuple(not rope for rope in cfg.rope_layer_flags),
                "an attention temperature on blocks other than the NoPE ones",
            ),
            (
                any(cfg.temperature_layer_flags) and cfg.attn_temperature_offset != 1,
                "a temperature offset of 0",
            ),
            (not same_attention_bias, "q/k/v and o biases differ"),
        ],
        # GptOssConfig: sinks on every layer, gpt-oss experts on every layer (their biases:
        # mlp_bias), one attention_bias for q/k/v/o, one width for intermediate_size
        "gpt_oss": [
            (not cfg.attention_sinks, "no attention sinks"),
            (cfg.moe_style != "gpt_oss", "no gpt-oss experts (moe_style='gpt_oss')"),
            (cfg.is_moe and not all(flags), "dense layers (gpt-oss's are all sparse)"),
            (cfg.expert_ffn_hidden != cfg.ffn_hidden, "an expert width apart from ffn_hidden"),
            (not same_attention_bias, "q/k/v and o biases differ"),
            (not cfg.mlp_bias, "no MLP biases (gpt-oss's experts have them)"),
            (cfg.qk_norm, "QK-norm"),
            (
                cfg.swiglu_alpha != 1.702 and "swiglu_alpha" not in FAMILIES["gpt_oss"].defaults,
                "a swiglu_alpha this transformers' GptOssConfig cannot hold",
            ),
        ],
    }[model_type]
    if model_type != "gpt_oss":
        checks = checks + gpt_oss_only
    if model_type not in MLA_FAMILIES:
        checks = checks + mla_only
    if model_type != "mistral4":
        checks = checks + [(cfg.moe_group_top2, "softmax groups ranked by their two best scores")]
    if model_type not in DEEPSEEK_MOE:
        # Qwen's one gated shared expert and Llama 4's are n_shared_experts=1; Llama 4 weighs by σ
        own = {"shared experts"} | ({"sigmoid router scores"} if model_type == "llama4_text" else set())
        checks = checks + [
            c
            for c in deepseek_moe_only
            if model_type not in QWEN_HYBRID + ("llama4_text",) or c[1] not in own
        ]
    if model_type not in QWEN_HYBRID:
        checks = checks + hybrid_only
    if model_type != "llama4_text":
        # Mistral 4's temperature on every block is its own
        checks = checks + [
            c for c in llama4_only if model_type != "mistral4" or c[1] != "attention temperature"
        ]
    return [why for broken, why in checks + new_fields if broken]


def family_of(cfg: "ModelConfig") -> Family:
    """The first supported family that expresses ``cfg`` exactly (ConfigError: none does)."""
    if _block_of(cfg) is None:
        block = {**_SHARED_BLOCK, **LLAMA_BLOCK}
        shown = [f"{name}={getattr(cfg, name)!r}" for name in block]
        shown += [
            f"{name}={getattr(cfg, name)!r}"
            for name, plain in _gemma_only(cfg).items()
            if getattr(cfg, name) != plain
        ]
        raise ConfigError(
            "to_hf_config needs a LLaMA-style config (pre-norm, rmsnorm, rope, swiglu, final norm, "
            "unscaled embeddings, none of Gemma's fields), OLMo 2's (the same with norm_position "
            "'output') or a Gemma-style one (sandwich norms, rmsnorm × (1 + γ), rope, geglu, final "
            "norm, √d-scaled embeddings); this one has " + ", ".join(shown)
        )
    reasons = {mt: _reasons(cfg, mt) for mt in FAMILIES}
    for model_type, why in reasons.items():
        if not why:
            return FAMILIES[model_type]
    raise ConfigError(
        "no supported family expresses this config: "
        + "; ".join(f"{mt} ({', '.join(why)})" for mt, why in reasons.items())
    )
