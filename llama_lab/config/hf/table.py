"""The keys of a Hugging Face ``config.json`` that every family reads alike (``COMMON_KEYS``),
the keys read quietly (``QUIET_KEYS``: tokenisation, serving, bookkeeping) or by the loader
(``LOADER_KEYS``), the null policy shared by every family (``NULL_MEANS_UNSET``), the kind of
value a key takes (``KIND``, for messages), and the families not modelled yet, refused with what
they need (``REFUSED``). Each family's own keys are its module's (``llama_lab.config.families``)."""

from __future__ import annotations

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
# Families after the supported ones, refused with what is not modelled (their transformers
# classes name it)
_DSA = "DeepSeek Sparse Attention, whose indexer ({}) picks the keys each query attends"
REFUSED = {
    # deepseek_v32's indexer is modelled (families/deepseek_v32.py); GLM-5's differs
    "glm_moe_dsa": _DSA.format("GlmMoeDsaIndexer")
    + ", with RoPE on adjacent pairs, and layers that reuse an earlier layer's top-k "
    "(indexer_types 'shared')",
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
# Keys common to the families that count only where the model reads them (``reads``): gpt_oss's
# experts run their own clamped SwiGLU and never read hidden_act; Gemma's config classes do not
# even have it (their MLP reads hidden_activation).
# Qwen3_5MoeTextConfig has no intermediate_size (no dense FFN anywhere): a note, its null kept.
READ_WHERE_READ = frozenset({"hidden_act", "intermediate_size"})


# Keys no modelling file reads that still change what is counted: transformers' loader reads
# quantization_config to store the weights in another format (``quant.stored_quant`` reads it).
LOADER_KEYS = frozenset({"quantization_config"})
