"""Writing a Hugging Face ``config.json``: the supported family that expresses a config
(``hf_family.family_of``) and that family's own keys (``to_hf_config``), read back by
transformers as the same model. A LLaMA block (pre-norm RMSNorm, SwiGLU) goes to the
LLaMA-style families (smollm3 for NoPE blocks, phi3 for fused qkv_proj / gate_up_proj keys,
phi3 or glm4_moe for partial RoPE, glm4_moe for DeepSeekMoE-style experts without MLA), OLMo 2's
(output norms, QK-norm over the projection) to olmo2, Gemma's (sandwich norms, RMSNorm × (1 + γ),
GeGLU, √d embeddings) to gemma2 (no QK-norm, one RoPE base, soft caps on scores and logits) or
gemma3_text (QK-norm, a RoPE base per layer type, a logit cap only: Gemma3Attention applies no
score cap in transformers 5.24). RoPE is written plain (LLaMA Lab models no scaling): gpt_oss's
explicitly, as rope_parameters, since GptOssConfig's default is YaRN; gemma3_text's as
rope_parameters keyed by layer type."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .bounds import INIT_STD
from .hf import Family, reads
from .hf_family import GEMMA, MLA_FAMILIES, QWEN_HYBRID, family_of
from .hf_gemma import GELU_TANH
from .hf_llama4 import llama4_keys
from .hf_qwen_next import qwen_hybrid_keys

if TYPE_CHECKING:
    from .model_config import ModelConfig


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
    if mt in MLA_FAMILIES:
        flags = cfg.moe_layer_flags
        out.update(
            q_lora_rank=cfg.q_lora_rank or None,
            kv_lora_rank=cfg.kv_lora_rank,
            qk_rope_head_dim=cfg.qk_rope_head_dim,
            qk_nope_head_dim=cfg.qk_nope_head_dim,
            v_head_dim=cfg.v_head_dim,
            head_dim=cfg.qk_rope_head_dim,  # transformers' config sets it so (the rotary width)
            attention_bias=False,
            n_routed_experts=cfg.n_experts,
            num_experts_per_tok=cfg.experts_per_token or None,
            moe_intermediate_size=cfg.expert_ffn_hidden,
            n_shared_experts=cfg.n_shared_experts,
            first_k_dense_replace=flags.index(True) if any(flags) else cfg.n_layers,
            routed_scaling_factor=cfg.routed_scaling,
            n_group=cfg.moe_groups,
            topk_group=cfg.moe_topk_groups,
        )
        if mt == "deepseek_v2":
            out.update(topk_method="group_limited_greedy" if cfg.moe_groups > 1 else "greedy", mlp_bias=False)
        else:
            out.update(norm_topk_prob=cfg.moe_renormalize, rope_interleave=cfg.rope_interleave)
        if mt == "mistral4":  # the temperature lives in rope_parameters; RoPE on qk_rope_head_dim
            sharpened = any(cfg.temperature_layer_flags)
            out["rope_parameters"] = {
                # linear at factor 1: plain RoPE over the rotated part (Mistral4RotaryEmbedding's
                # default rotates whole heads, which MLA's q/k split cannot take)
                "rope_type": "linear",
                "factor": 1.0,
                "rope_theta": cfg.rope_theta,
                "partial_rotary_factor": cfg.qk_rope_head_dim / cfg.head_dim,
                "llama_4_scaling_beta": cfg.attn_temperature_scale if sharpened else 0.0,
                "original_max_position_embeddings": cfg.attn_floor_scale,
            }
    if mt == "gpt_oss":
        out.update(
            attention_bias=cfg.qkv_bias,
            # a window the model can build its sliding mask with, even with no sliding layer
            sliding_window=cfg.sliding_window or family.defaults["sliding_window"],
            layer_types=["sliding_attention" if flag else "full_attention" for flag in local],
            num_local_experts=cfg.n_experts,
            num_experts_per_tok=cfg.experts_per_token,
            swiglu_limit=cfg.swiglu_limit,
            # plain RoPE: GptOssConfig's default (rope_parameters null) is YaRN
            rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_theta},
        )
        if "swiglu_alpha" in family.defaults:  # GptOssConfig holds it (transformers 5)
            out["swiglu_alpha"] = cfg.swiglu_alpha
    if mt in GEMMA:
        out.update(
            hidden_activation=GELU_TANH,
            attention_bias=cfg.qkv_bias,
            query_pre_attn_scalar=cfg.query_pre_attn_scalar,
            # a window the model can build its sliding mask with, even with no sliding layer
            sliding_window=cfg.sliding_window or family.defaults["sliding_window"],
            layer_types=["sliding_attention" if flag else "full_attention" for flag in local],
            attn_logit_softcapping=cfg.attn_softcap or None,
            final_logit_softcapping=cfg.logit_softcap or None,
        )
    if mt == "olmo2":
        out["attention_bias"] = cfg.qkv_bias
    if mt == "smollm3":
        out.update(
            attention_bias=cfg.qkv_bias,
            mlp_bias=cfg.mlp_bias,
            no_rope_layers=[int(rope) for rope in cfg.rope_layer_flags],
            use_sliding_window=any(local),
            sliding_window=cfg.sliding_window or None,
            layer_types=["sliding_attention" if flag else "full_attention" for flag in local],
        )
    if mt == "phi3":
        out.update(
            sliding_window=cfg.sliding_window if any(local) else None,
            partial_rotary_factor=cfg.partial_rotary_factor,
        )
    if mt == "glm4_moe":
        flags = cfg.moe_layer_flags
        out.update(
            attention_bias=cfg.qkv_bias,
            use_qk_norm=cfg.qk_norm,
            partial_rotary_factor=cfg.partial_rotary_factor,
            n_routed_experts=cfg.n_experts,
            num_experts_per_tok=cfg.experts_per_token,
            moe_intermediate_size=cfg.expert_ffn_hidden,
            n_shared_experts=cfg.n_shared_experts,
            first_k_dense_replace=flags.index(True) if any(flags) else cfg.n_layers,
            norm_topk_prob=cfg.moe_renormalize,
            routed_scaling_factor=cfg.routed_scaling,
            n_group=cfg.moe_groups,
            topk_group=cfg.moe_topk_groups,
            num_nextn_predict_layers=0,  # LLaMA Lab models no MTP layer
        )
    if mt in QWEN_HYBRID:
        out.update(qwen_hybrid_keys(cfg, mt))
    if mt == "llama4_text":
        out.update(llama4_keys(cfg))
        out["rope_parameters"] = {"rope_type": "default", "rope_theta": cfg.rope_theta}
    if mt == "gemma3_text":
        out["rope_parameters"] = {
            "full_attention": {"rope_type": "default", "rope_theta": cfg.rope_theta},
            "sliding_attention": {"rope_type": "default", "rope_theta": cfg.rope_local_theta},
        }
    return out


def to_hf_config(cfg: "ModelConfig") -> dict:
    """The config.json of the family that expresses ``cfg`` (ConfigError when none does)."""
    family = family_of(cfg)
    out = {
        "architectures": [family.architecture],
        "model_type": family.model_type,
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.d_model,
        "intermediate_size": cfg.ffn_hidden,
        "num_hidden_layers": cfg.n_layers,
        "num_attention_heads": cfg.n_heads,
        "num_key_value_heads": cfg.n_kv_heads,
        "head_dim": cfg.head_dim,  # (DeepSeek's own keys below replace it)
        # SwiGLU's SiLU, where the model reads it (gpt_oss's experts never do: left out)
        **({"hidden_act": "silu"} if "hidden_act" in reads(family.model_type) else {}),
        "max_position_embeddings": cfg.max_seq_len,
        "rms_norm_eps": cfg.norm_eps,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": None,
        "tie_word_embeddings": cfg.tie_embeddings,
        "initializer_range": INIT_STD,
        **_family_keys(cfg, family),
    }
    if "intermediate_size" not in family.defaults:  # Qwen3_5MoeTextConfig: no dense FFN to size
        del out["intermediate_size"]
    if "rope_theta" not in family.defaults:  # one base per layer type: rope_parameters says both
        del out["rope_theta"], out["rope_scaling"]
    pad = family.defaults.get("pad_token_id")
    if isinstance(pad, int) and pad >= cfg.vocab_size:
        # the class's default padding row (Phi3Config's 32000, SmolLM3Config's 128004) lies outside
        # a smaller vocabulary, where nn.Embedding refuses it: no padding row (LLaMA Lab has none)
        out["pad_token_id"] = None
    return out
