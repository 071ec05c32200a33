"""The families LLaMA Lab reads from a Hugging Face ``config.json`` (``FAMILIES``: one ``Family``
each, with the keys it models besides ``COMMON_KEYS`` and the nulls its config class takes), the
keys read quietly (``QUIET_KEYS``), the null policy (``NULL_MEANS_UNSET``, ``NULL_WHY``) and the
multimodal wrappers whose text decoder is one fixed family (``WRAPPED_TEXT``). The reader that
uses them: ``hf``; each family's own fields: ``hf_families``."""

from __future__ import annotations

from .hf_read import Family, _defaults

COMMON_KEYS = frozenset(
    {
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "max_position_embeddings",
        "rms_norm_eps",
        "rope_theta",
        "rope_parameters",
        "rope_scaling",
        "tie_word_embeddings",
        "hidden_act",
    }
)
# Keys that describe tokenisation, serving or bookkeeping, not the architecture: read quietly.
QUIET_KEYS = frozenset(
    {
        "architectures",
        "model_type",
        "torch_dtype",
        "dtype",
        "transformers_version",
        "bos_token_id",
        "eos_token_id",
        "pad_token_id",
        "use_cache",
        "_name_or_path",
        "auto_map",
        "initializer_range",
        "tokenizer_class",
        "output_router_logits",
        "router_aux_loss_coef",
        "attention_dropout",
        "pretraining_tp",
        "router_jitter_noise",
        "max_window_layers",
        # transformers' PretrainedConfig bookkeeping and generation defaults (older files carry them)
        "chunk_size_feed_forward",
        "id2label",
        "label2id",
        "is_encoder_decoder",
        "problem_type",
        "output_attentions",
        "output_hidden_states",
        "return_dict",
        "torchscript",
        "use_bfloat16",
        "tf_legacy_loss",
        "pruned_heads",
        "is_decoder",
        "add_cross_attention",
        "num_labels",
        "cross_attention_hidden_size",
        "tie_encoder_decoder",
        "decoder_start_token_id",
        "sep_token_id",
        "task_specific_params",
        "finetuning_task",
        "prefix",
        "max_length",
        "min_length",
        "do_sample",
        "early_stopping",
        "num_beams",
        "temperature",
        "top_k",
        "top_p",
        "repetition_penalty",
        "length_penalty",
        "no_repeat_ngram_size",
        "num_return_sequences",
        "bad_words_ids",
        "forced_bos_token_id",
        "forced_eos_token_id",
        "remove_invalid_values",
        "output_scores",
        "return_dict_in_generate",
        "typical_p",
        "diversity_penalty",
        "num_beam_groups",
        "suppress_tokens",
        "begin_suppress_tokens",
        "exponential_decay_length_penalty",
        "encoder_no_repeat_ngram_size",
    }
)
_WINDOW_KEYS = frozenset({"sliding_window", "use_sliding_window", "max_window_layers", "layer_types"})
_DEEPSEEK_KEYS = frozenset(
    {
        "attention_bias",
        "q_lora_rank",
        "kv_lora_rank",
        "qk_rope_head_dim",
        "qk_nope_head_dim",
        "v_head_dim",
        "moe_intermediate_size",
        "n_routed_experts",
        "n_shared_experts",
        "num_experts_per_tok",
        "routed_scaling_factor",
        "n_group",
        "topk_group",
        "first_k_dense_replace",
    }
)
# Gemma2Config and Gemma3TextConfig: the keys both read (their model's hidden_activation, not
# hidden_act; attention_bias on q/k/v/o; the scale of the scores; the window and layer_types;
# the soft caps; use_bidirectional_attention)
_GEMMA_KEYS = frozenset(
    {
        "hidden_activation",
        "attention_bias",
        "query_pre_attn_scalar",
        "sliding_window",
        "layer_types",
        "attn_logit_softcapping",
        "final_logit_softcapping",
        "use_bidirectional_attention",
    }
)
# nulls the Gemma classes take: layer_types (derived), the soft caps (none), the bidirectional
# switch (off); Gemma3TextConfig's keyword arguments (sliding_window_pattern, rope_local_base_freq)
# are checked where they are used (hf_gemma._gemma); sliding_window: NULL_WHY
_GEMMA_NULLABLE = frozenset(
    {"layer_types", "attn_logit_softcapping", "final_logit_softcapping", "use_bidirectional_attention"}
)
# Qwen3-Next's and Qwen3.5's keys (hf_qwen_next); a null layer_types is derived, a null
# partial_rotary_factor rotates whole heads (never folded into rope_parameters)
_HYBRID_KEYS = frozenset(
    {
        "attention_bias",
        "layer_types",
        "full_attention_interval",
        "partial_rotary_factor",
        "linear_num_key_heads",
        "linear_num_value_heads",
        "linear_key_head_dim",
        "linear_value_head_dim",
        "linear_conv_kernel_dim",
    }
)
_HYBRID_NULLABLE = frozenset({"layer_types", "partial_rotary_factor", "full_attention_interval"})
_HYBRID_EXPERT_KEYS = frozenset(
    {"num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size"}
)
FAMILIES: dict[str, Family] = {
    f.model_type: f
    for f in (
        # transformers' LlamaConfig: attention_bias covers q, k, v and o; mlp_bias the FFN.
        Family(
            "llama",
            "LlamaForCausalLM",
            _defaults("llama"),
            frozenset({"attention_bias", "mlp_bias"}),
            frozenset({"num_key_value_heads", "head_dim"}),
        ),
        # MistralConfig: every layer attends through sliding_window (4096 unless the file says null).
        Family(
            "mistral",
            "MistralForCausalLM",
            _defaults("mistral"),
            frozenset({"sliding_window"}),
            frozenset({"head_dim", "sliding_window"}),
        ),
        # MixtralConfig: 8 experts, top-2, renormalised; no window unless given.
        Family(
            "mixtral",
            "MixtralForCausalLM",
            _defaults("mixtral"),
            frozenset({"sliding_window", "num_local_experts", "num_experts", "num_experts_per_tok"}),
            frozenset({"head_dim", "sliding_window"}),
        ),
        # Qwen2Config: q/k/v biases (o_proj has none); layers ≥ max_window_layers use the window
        # when use_sliding_window (or as layer_types says).
        Family(
            "qwen2",
            "Qwen2ForCausalLM",
            _defaults("qwen2"),
            _WINDOW_KEYS,
            frozenset({"num_key_value_heads", "head_dim", "sliding_window", "layer_types"}),
        ),
        # Qwen3Config: QK-norm, head_dim 128 unless given, attention_bias on all four projections.
        Family(
            "qwen3",
            "Qwen3ForCausalLM",
            _defaults("qwen3"),
            _WINDOW_KEYS | {"attention_bias"},
            frozenset({"num_key_value_heads", "sliding_window", "layer_types"}),
        ),
        # Qwen3MoeConfig: 128 experts of width 768, top-8, not renormalised unless norm_topk_prob;
        # sparse layers every decoder_sparse_step except mlp_only_layers; a window on every layer.
        Family(
            "qwen3_moe",
            "Qwen3MoeForCausalLM",
            _defaults("qwen3_moe"),
            frozenset(
                {
                    "attention_bias",
                    "use_sliding_window",
                    "sliding_window",
                    "num_experts",
                    "num_local_experts",
                    "num_experts_per_tok",
                    "moe_intermediate_size",
                    "norm_topk_prob",
                    "decoder_sparse_step",
                    "mlp_only_layers",
                }
            ),
            frozenset({"head_dim", "sliding_window", "mlp_only_layers"}),
        ),
        # DeepseekV2Config: MLA (q LoRA unless q_lora_rank is null), DeepSeekMoE with softmax
        # scores, greedy or group-limited top-k, never renormalised; dense blocks before
        # first_k_dense_replace; RoPE on adjacent pairs (complex multiplication).
        Family(
            "deepseek_v2",
            "DeepseekV2ForCausalLM",
            _defaults("deepseek_v2"),
            _DEEPSEEK_KEYS | {"mlp_bias", "topk_method", "num_experts"},
            # n_group and topk_group are null in a greedy file transformers writes
            frozenset({"num_key_value_heads", "head_dim", "q_lora_rank", "n_group", "topk_group"}),
        ),
        # DeepseekV3Config (DeepSeek-V3/R1, Kimi K2): MLA, sigmoid scores with the correction
        # bias choosing the top-k among the best topk_group of n_group groups, renormalised when
        # norm_topk_prob, × routed_scaling_factor; rope_interleave.
        Family(
            "deepseek_v3",
            "DeepseekV3ForCausalLM",
            _defaults("deepseek_v3"),
            _DEEPSEEK_KEYS
            | {
                "norm_topk_prob",
                "rope_interleave",
                "num_local_experts",
                "num_nextn_predict_layers",
                "num_mtp_layers",
            },
            # null norm_topk_prob and rope_interleave read as false, as its model's `if` reads them
            frozenset(
                {
                    "num_key_value_heads",
                    "head_dim",
                    "q_lora_rank",
                    "norm_topk_prob",
                    "rope_interleave",
                    "num_nextn_predict_layers",
                }
            ),
        ),
        # Mistral4Config (Mistral Small 4): DeepSeek-V3's MLA and experts, a softmax router without
        # the correction bias (groups ranked by their two best scores), renormalised when
        # norm_topk_prob, × routed_scaling_factor; every query × the Llama-4-style temperature
        # of rope_parameters' llama_4_scaling_beta and original_max_position_embeddings
        Family(
            "mistral4",
            "Mistral4ForCausalLM",
            _defaults("mistral4"),
            _DEEPSEEK_KEYS | {"norm_topk_prob", "rope_interleave", "num_local_experts"},
            # a null norm_topk_prob or rope_interleave reads as false (the model's `if`); head_dim
            # Mistral4Config sets from the q/k parts whatever the file says
            frozenset(
                {"num_key_value_heads", "head_dim", "q_lora_rank", "norm_topk_prob", "rope_interleave"}
            ),
        ),
        # GptOssConfig: q/k/v/o biases (attention_bias) and a sink per head on every layer;
        # layer_types (sliding on even layers unless given) with a window of 128; every layer
        # sparse: 128 experts of intermediate_size, top-4, softmax over the top-k logits,
        # experts with biases and the clamped SwiGLU. Its model never reads hidden_act.
        Family(
            "gpt_oss",
            "GptOssForCausalLM",
            _defaults("gpt_oss"),
            frozenset(
                {
                    "attention_bias",
                    "sliding_window",
                    "layer_types",
                    "num_local_experts",
                    "num_experts",
                    "num_experts_per_tok",
                    "swiglu_limit",
                    "swiglu_alpha",
                }
            ),
            # GptOssConfig takes a null sliding_window too, but its model cannot run with one
            # (_NULL_WHY); a null num_key_value_heads or head_dim it refuses (strict int)
            frozenset({"layer_types"}),
        ),
        # Gemma2Config: sandwich norms (input, post-attention, pre- and post-feedforward), RMSNorm
        # scaling by (1 + weight), embeddings × √hidden_size, the GeGLU of hidden_activation,
        # scores × query_pre_attn_scalar^-½ soft-capped by attn_logit_softcapping, logits by
        # final_logit_softcapping; sliding on even layers unless layer_types says; one RoPE.
        Family("gemma2", "Gemma2ForCausalLM", _defaults("gemma2"), _GEMMA_KEYS, _GEMMA_NULLABLE),
        # Gemma3TextConfig: Gemma 2's layer plus QK-norm, sliding unless (i + 1) % pattern == 0
        # (the sliding_window_pattern keyword, 6), RoPE per layer type (rope_parameters keyed by
        # full_attention / sliding_attention, or rope_theta and rope_local_base_freq)
        Family(
            "gemma3_text",
            "Gemma3ForCausalLM",
            _defaults("gemma3_text"),
            _GEMMA_KEYS | {"sliding_window_pattern", "rope_local_base_freq"},
            _GEMMA_NULLABLE | {"sliding_window_pattern", "rope_local_base_freq"},
        ),
        # Olmo2Config: every block x + post_attention_layernorm(attn(x)), then
        # x + post_feedforward_layernorm(mlp(x)) (no input norms); q_norm over all H·D of q and
        # k_norm over G·D of k, before RoPE; attention_bias on q/k/v/o; head_dim only if given.
        Family(
            "olmo2",
            "Olmo2ForCausalLM",
            _defaults("olmo2"),
            frozenset({"attention_bias"}),
            frozenset({"num_key_value_heads"}),
        ),
        # SmolLM3Config: a LLaMA block whose RoPE is skipped where no_rope_layers says 0 (by
        # default every no_rope_layer_interval-th layer, 4); attention_bias on q/k/v/o, mlp_bias;
        # layer_types (by default sliding on the NoPE layers when use_sliding_window) picks the
        # layers the mask windows; tied head by default.
        Family(
            "smollm3",
            "SmolLM3ForCausalLM",
            _defaults("smollm3"),
            frozenset(
                {
                    "attention_bias",
                    "mlp_bias",
                    "use_sliding_window",
                    "sliding_window",
                    "layer_types",
                    "no_rope_layers",
                    "no_rope_layer_interval",
                }
            ),
            frozenset({"num_key_value_heads", "sliding_window", "layer_types", "no_rope_layers"}),
        ),
        # Phi3Config (Phi-3, Phi-3.5-mini, Phi-4-mini): qkv_proj and gate_up_proj fused (gate
        # first), no biases; RoPE on the first partial_rotary_factor of each head (rope_parameters,
        # or the top-level key Phi3Config folds into it); sliding_window on every layer unless null.
        Family(
            "phi3",
            "Phi3ForCausalLM",
            _defaults("phi3"),
            frozenset(
                {"sliding_window", "partial_rotary_factor", "original_max_position_embeddings", "resid_pdrop"}
            ),
            frozenset({"num_key_value_heads", "sliding_window"}),
        ),
        # Glm4MoeConfig (GLM-4.5, GLM-4.5-Air, GLM-4.6/4.7): attention_bias on q/k/v only (o_proj
        # has none), QK-norm per head when use_qk_norm, partial RoPE (0.5 unless given); dense
        # blocks before first_k_dense_replace, then DeepSeek-V3's routing (sigmoid scores with the
        # correction bias, the best topk_group of n_group groups, norm_topk_prob,
        # routed_scaling_factor) and n_shared_experts shared experts. The MTP layer is not part of
        # Glm4MoeForCausalLM.
        Family(
            "glm4_moe",
            "Glm4MoeForCausalLM",
            _defaults("glm4_moe"),
            frozenset(
                {
                    "attention_bias",
                    "partial_rotary_factor",
                    "use_qk_norm",
                    "moe_intermediate_size",
                    "n_routed_experts",
                    "num_local_experts",
                    "n_shared_experts",
                    "num_experts_per_tok",
                    "routed_scaling_factor",
                    "n_group",
                    "topk_group",
                    "first_k_dense_replace",
                    "norm_topk_prob",
                    "num_nextn_predict_layers",
                    "num_mtp_layers",
                }
            ),
            # a null partial_rotary_factor is never folded into rope_parameters: Glm4MoeRotary-
            # Embedding rotates whole heads (its .get(..., 1.0)); the MTP count nothing reads
            frozenset({"partial_rotary_factor", "num_nextn_predict_layers"}),
        ),
        # Qwen3NextConfig (Qwen3-Next-80B-A3B): layer_types (every full_attention_interval-th
        # block gated attention, the others Gated DeltaNet), the linear heads and convolution,
        # (1 + γ) norms, partial RoPE; experts every decoder_sparse_step-th block except
        # mlp_only_layers, each with a gated shared expert
        Family(
            "qwen3_next",
            "Qwen3NextForCausalLM",
            _defaults("qwen3_next"),
            _HYBRID_KEYS | _HYBRID_EXPERT_KEYS | {"decoder_sparse_step", "mlp_only_layers", "norm_topk_prob"},
            _HYBRID_NULLABLE | {"mlp_only_layers"},
        ),
        # Qwen3_5TextConfig (Qwen3.5 dense): the same blocks with Qwen3.5's separate projections
        # (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a) and a dense SwiGLU everywhere
        Family(
            "qwen3_5_text", "Qwen3_5ForCausalLM", _defaults("qwen3_5_text"), _HYBRID_KEYS, _HYBRID_NULLABLE
        ),
        # Qwen3_5MoeTextConfig (Qwen3.5-MoE): experts with a gated shared expert on every block
        Family(
            "qwen3_5_moe_text",
            "Qwen3_5MoeForCausalLM",
            _defaults("qwen3_5_moe_text"),
            _HYBRID_KEYS
            | {
                "num_experts",
                "num_experts_per_tok",
                "moe_intermediate_size",
                "shared_expert_intermediate_size",
            },
            _HYBRID_NULLABLE | {"intermediate_size"},  # no such field: any value kept, never read
        ),
        # Llama4TextConfig (Llama 4 Scout, Maverick): NoPE blocks per no_rope_layers (every 4th by
        # default), chunked attention on the rotated blocks (attention_chunk_size), QK-norm after
        # RoPE there (use_qk_norm), the NoPE blocks' attention temperature, experts with one
        # shared expert on the moe_layers (every interleave_moe_layer_step-th), dense blocks of
        # intermediate_size_mlp
        Family(
            "llama4_text",
            "Llama4ForCausalLM",
            _defaults("llama4_text"),
            frozenset(
                {
                    "attention_bias",
                    "attention_chunk_size",
                    "layer_types",
                    "no_rope_layers",
                    "no_rope_layer_interval",
                    "use_qk_norm",
                    "attn_temperature_tuning",
                    "floor_scale",
                    "attn_scale",
                    "intermediate_size_mlp",
                    "num_local_experts",
                    "num_experts_per_tok",
                    "moe_layers",
                    "interleave_moe_layer_step",
                }
            ),
            # (a null head_dim or num_key_value_heads Llama4TextConfig refuses: strict int)
            frozenset({"no_rope_layers", "moe_layers", "layer_types", "attention_chunk_size"}),
        ),
    )
}
# Families after the supported ones, refused with what is not modelled (their transformers
# classes name it)
_DSA = "DeepSeek Sparse Attention, whose indexer ({}) picks the keys each query attends"
NOT_MODELLED = {
    "deepseek_v32": _DSA.format("DeepseekV32Indexer"),
    "glm_moe_dsa": _DSA.format("GlmMoeDsaIndexer"),
    "mistral_large4": _DSA.format("MistralLarge4TextIndexer"),
    "mistral_large4_text": _DSA.format("MistralLarge4TextIndexer"),
    "deepseek_v4": "compressed sparse attention (DeepseekV4CSACompressor, DeepseekV4HCACompressor, "
    "an indexer), hyper-connections (DeepseekV4HyperConnection) and a hash router",
}

# Null means "not set" for these in every family (transformers 5 folds them into rope_parameters).
NULL_MEANS_UNSET = frozenset({"rope_theta", "rope_parameters", "rope_scaling"})
KIND = {
    **dict.fromkeys(
        ("tie_word_embeddings", "attention_bias", "mlp_bias", "use_sliding_window", "norm_topk_prob"),
        "true or false",
    ),
    "hidden_act": "a string",
    "hidden_activation": "a string",
    "topk_method": "a string",
    **dict.fromkeys(("rope_interleave", "use_bidirectional_attention", "use_qk_norm"), "true or false"),
    "layer_types": "a list",
    "mlp_only_layers": "a list",
    "moe_layers": "a list",
    "attn_temperature_tuning": "true or false",
    "no_rope_layers": "a list",
    "full_attention_interval": "a whole number",
}
# Nulls a config class takes that its model then cannot run with: refused, with the reason.
NULL_WHY = {
    ("gpt_oss", "sliding_window"): "GptOssModel builds its sliding-window mask on every forward "
    "and raises without a window",
    ("gemma2", "sliding_window"): "Gemma2Model builds its sliding-window mask on every forward "
    "and raises without a window",
    ("gemma3_text", "sliding_window"): "Gemma3TextModel builds its sliding-window mask on every "
    "forward and raises without a window",
    # Olmo2Config, SmolLM3Config, Phi3Config and Glm4MoeConfig have no head_dim field: a file's
    # head_dim becomes an attribute, which their attention takes whenever it is there
    **{
        (model_type, "head_dim"): f"{model_type}'s attention reads head_dim whenever the key is "
        f"there and cannot size its projections with none"
        for model_type in ("olmo2", "smollm3", "phi3", "glm4_moe")
    },
    ("glm4_moe", "num_local_experts"): "Glm4MoeConfig's alias of n_routed_experts: its router and "
    "experts cannot be built for no expert count",
}
# Keys common to the families that count only where the model reads them (``reads``): gpt_oss's
# experts run their own clamped SwiGLU and never read hidden_act; Gemma's config classes do not
# even have it (their MLP reads hidden_activation).
# Qwen3_5MoeTextConfig has no intermediate_size (no dense FFN anywhere): a note, its null kept.
READ_WHERE_READ = frozenset({"hidden_act", "intermediate_size"})

# Multimodal wrappers whose config class builds its text_config with one class whatever the
# file's text_config says (a SubConfigSpec naming a config class, not AutoConfig), and builds
# that class's defaults when text_config is absent or null: Gemma3Config's Gemma3TextConfig.
# The wrapper's own tie_word_embeddings ties the head (PreTrainedModel.tie_weights reads the
# wrapper's config: Gemma3ForConditionalGeneration's), default as its class's.
WRAPPED_TEXT = {
    "gemma3": ("gemma3_text", "Gemma3Config", True),
    "qwen3_5": ("qwen3_5_text", "Qwen3_5Config", False),
    "qwen3_5_moe": ("qwen3_5_moe_text", "Qwen3_5MoeConfig", False),
    "llama4": ("llama4_text", "Llama4Config", False),
}
