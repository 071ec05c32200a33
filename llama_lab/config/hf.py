"""Hugging Face ``config.json`` interop for the families LLaMA Lab models exactly: llama,
mistral, mixtral, qwen2, qwen3, qwen3_moe, deepseek_v2, deepseek_v3 and gpt_oss, read the way
transformers reads them (each family's own fields: ``hf_families``; the key table, ``Family``
and the typed getters: ``hf_read``). A key matters only if the family's transformers model
reads it (``KEY_TABLE``, generated from the transformers release the tests run against by
``tools/hf_family_keys.py``): one it never reads is a note, one it reads that LLaMA Lab does
not model an error naming it. A key left out takes the family config class's default, as
``AutoConfig.for_model`` does; a file without ``model_type`` and a family outside the list are
refused by name; a multimodal wrapper is read as its text decoder (``text_decoder``);
``quantization_config`` is the stored format (``hf_quant``). A null is read as the config
class reads it (transformers 5): "derive" or "none" where it takes null (``Family.nullable``),
an error naming the key everywhere else (and where the class takes a null its model cannot run
with: ``_NULL_WHY``). Messages show file values through ``messages.shown`` (cut, escaped) and
list at most MAX_NOTES keys or notes, then a count. Writing one: ``hf_export``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import ConfigError
from .bounds import LIMITS
from .hf_families import family_fields
from .hf_quant import stored_quant
from .hf_read import KEY_TABLE, Family, _bool, _count, _defaults, _get, default_rope, reads
from .messages import cap_notes, cut, name_keys, shown

if TYPE_CHECKING:
    from .model_config import ModelConfig


class HFConfigWarning(UserWarning):
    """A key of a Hugging Face config.json that changes nothing LLaMA Lab counts."""


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
    )
}
# Null means "not set" for these in every family (transformers 5 folds them into rope_parameters).
NULL_MEANS_UNSET = frozenset({"rope_theta", "rope_parameters", "rope_scaling"})
_KIND = {
    **dict.fromkeys(
        ("tie_word_embeddings", "attention_bias", "mlp_bias", "use_sliding_window", "norm_topk_prob"),
        "true or false",
    ),
    "hidden_act": "a string",
    "topk_method": "a string",
    **dict.fromkeys(("rope_interleave",), "true or false"),
    "layer_types": "a list",
    "mlp_only_layers": "a list",
}
# Nulls a config class takes that its model then cannot run with: refused, with the reason.
_NULL_WHY = {
    ("gpt_oss", "sliding_window"): "GptOssModel builds its sliding-window mask on every forward "
    "and raises without a window",
}
# Keys every family's config class has that count only where its model reads them (``reads``):
# gpt_oss's experts run their own clamped SwiGLU and never read hidden_act.
_READ_WHERE_READ = frozenset({"hidden_act"})


def _read_rope(data: Mapping[str, Any], family: Family, kwargs: dict, notes: list[str]) -> None:
    """RoPE's base from ``rope_theta`` or transformers ≥ 5's ``rope_parameters``
    ({"rope_theta": ..., "rope_type": ...}); scaling is noted as not modelled."""
    theta = _get(data, family, "rope_theta")
    kwargs["rope_theta"] = family.defaults["rope_theta"] if theta is None else theta
    rope_parameters = data.get("rope_parameters")
    rope_scaling = data.get("rope_scaling")
    if isinstance(rope_parameters, Mapping):
        if rope_parameters.get("rope_theta") is not None:
            kwargs["rope_theta"] = rope_parameters["rope_theta"]
        extra = {k: v for k, v in rope_parameters.items() if k != "rope_theta"}
        if extra.get("rope_type", "default") != "default":
            rope_scaling = extra
    elif rope_parameters is not None:
        notes.append(f"rope_parameters={shown(rope_parameters)} is not an object; ignored")
    label = "rope_scaling="
    if rope_parameters is None and not rope_scaling:
        # neither key given: the config class's own default RoPE (GptOssConfig's is YaRN)
        default = default_rope(family.model_type)
        if default.get("rope_type", "default") != "default":
            rope_scaling = {k: v for k, v in default.items() if k != "rope_theta"}
            label = f"no rope_parameters: {family.architecture.replace('ForCausalLM', 'Config')}'s default "
    if rope_scaling:
        try:
            text = json.dumps(rope_scaling, sort_keys=True)
        except (TypeError, ValueError):
            text = repr(rope_scaling)
        notes.append(
            f"{label}{cut(text, 200)} is not modelled: positions use plain RoPE; "
            f"parameter, FLOP and memory counts are unaffected"
        )


def _refuse_nulls(data: Mapping[str, Any], family: Family) -> None:
    """A null is refused where the family's config class (transformers 5) refuses it; it is
    kept where the class takes it to mean "derive" or "none" (``Family.nullable``)."""
    read = (COMMON_KEYS | family.keys) - family.nullable - NULL_MEANS_UNSET
    config_class = family.architecture.replace("ForCausalLM", "Config")
    for key, value in data.items():
        if value is None and key in read:
            why = _NULL_WHY.get((family.model_type, key), f"null is not a value {config_class} can use here")
            raise ConfigError(f"{key} is null; {_KIND.get(key, 'a number')} is required ({why})", field=key)


def _common(data: Mapping[str, Any], family: Family, n_layers: int) -> dict:
    heads = _get(data, family, "num_attention_heads")
    kv_heads = _get(data, family, "num_key_value_heads")
    kwargs: dict[str, Any] = dict(
        norm_position="pre",
        norm_type="rmsnorm",
        pos_encoding="rope",
        ffn_type="swiglu",
        final_norm=True,
        init="normal",
        vocab_size=_get(data, family, "vocab_size"),
        d_model=_get(data, family, "hidden_size"),
        n_layers=n_layers,
        n_heads=heads,
        n_kv_heads=heads if kv_heads is None else kv_heads,
        ffn_hidden=_get(data, family, "intermediate_size"),
        max_seq_len=_get(data, family, "max_position_embeddings"),
        norm_eps=_get(data, family, "rms_norm_eps"),
        tie_embeddings=_bool(data, family, "tie_word_embeddings", family.defaults["tie_word_embeddings"]),
        head_dim=_get(data, family, "head_dim"),
    )
    act = _get(data, family, "hidden_act")
    if "hidden_act" not in reads(family.model_type):  # gpt_oss: a note (_notes), if a string
        if not isinstance(act, str):
            raise ConfigError(f"hidden_act={shown(act)} must be a string", field="hidden_act")
    elif act is not None and act != "silu":
        raise ConfigError(
            f"hidden_act={shown(act)} is not modelled: LLaMA Lab's gated FFN is "
            f"SwiGLU (SiLU gate), as every supported family's is",
            field="hidden_act",
        )
    return kwargs


# Keys no modelling file reads that still change what is counted: transformers' loader reads
# quantization_config to store the weights in another format (``stored_quant`` reads it).
LOADER_KEYS = frozenset({"quantization_config"})


def _notes(data: Mapping[str, Any], family: Family) -> list[str]:
    """A key matters only if the family's transformers model reads it (``reads``): one it reads
    and LLaMA Lab does not model is refused by name; one it never reads is a note."""
    read = reads(family.model_type) | LOADER_KEYS
    # the loader's: stored_quant; a common key the model never reads (hidden_act of gpt_oss): a note
    handled = (COMMON_KEYS - (_READ_WHERE_READ - read)) | QUIET_KEYS | family.keys | LOADER_KEYS
    unmodelled = [key for key in data if key in read and key not in handled]
    if unmodelled:
        raise ConfigError(
            f"config.json key(s) {name_keys(unmodelled)} are read by transformers for "
            f"{family.architecture} and not modelled by LLaMA Lab; it refuses rather than count "
            f"the model wrong",
            field=unmodelled[0],
            also=tuple(unmodelled[1:]),
        )
    notes = []
    unread = [key for key in data if key not in read and key not in handled]
    if unread:
        notes.append(
            f"not read by {family.model_type}'s model ({family.architecture}, transformers "
            f"{KEY_TABLE['transformers']}): {name_keys(unread)}; ignored"
        )
    for key in ("attention_dropout", "router_jitter_noise"):
        if data.get(key) not in (None, 0, 0.0):
            notes.append(f"{key}={shown(data[key])} is training-time noise, not modelled (no dropout)")
    mtp = data.get("num_nextn_predict_layers", data.get("num_mtp_layers"))
    if family.model_type == "deepseek_v3" and mtp:
        notes.append(
            f"num_nextn_predict_layers={shown(mtp)}: the multi-token-prediction module(s) are "
            f"not part of {family.architecture} (its loader skips them): not counted. DeepSeek-V3's "
            f"685B on the Hub = 671B main model + 14B MTP module"
        )
    if data.get("pretraining_tp") not in (None, 1):
        notes.append(
            f"pretraining_tp={shown(data['pretraining_tp'])} only changes how Meta "
            f"sharded the matmuls; the maths is the same"
        )
    return notes


# Checkpoints that name their own model_type for a supported family's code (remote code that
# transformers does not ship): read as that family. Kimi K2: architectures DeepseekV3ForCausalLM.
MODEL_TYPE_ALIASES = {"kimi_k2": "deepseek_v3"}


def _alias(data: Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
    """``data`` with an aliased model_type replaced by its family's, and a note saying so."""
    model_type = data.get("model_type") if isinstance(data, Mapping) else None
    if not isinstance(model_type, str) or model_type not in MODEL_TYPE_ALIASES:
        return data, None
    family = MODEL_TYPE_ALIASES[model_type]
    return {**data, "model_type": family}, (
        f"model_type {model_type!r} runs {FAMILIES[family].architecture} (its remote code is "
        f"DeepSeek-V3's): read as {family}"
    )


def _family(data: Mapping[str, Any]) -> Family:
    if not isinstance(data, Mapping):
        raise ConfigError(f"a config.json must be a JSON object, got {type(data).__name__}")
    if "model_type" not in data:
        raise ConfigError(
            "this config.json has no model_type: transformers picks the model's family by it "
            f"(AutoConfig), and LLaMA Lab will not guess one (it models {', '.join(FAMILIES)})",
            field="model_type",
        )
    model_type = data["model_type"]
    if not isinstance(model_type, str) or model_type not in FAMILIES:
        raise ConfigError(
            f"model_type={shown(model_type)} is not supported; LLaMA Lab models "
            f"{', '.join(FAMILIES)} exactly and refuses the rest",
            field="model_type",
        )
    return FAMILIES[model_type]


def text_decoder(data: Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
    """A multimodal wrapper's text decoder (its ``text_config``) and a note saying that only it
    is counted; any other config.json as it is, with no note."""
    inner = data.get("text_config") if isinstance(data, Mapping) else None
    if inner is None:
        return data, None
    outer = shown(data.get("model_type", "unnamed"))
    if not isinstance(inner, Mapping):
        raise ConfigError(f"text_config={shown(inner)} must be a JSON object", field="text_config")
    inner_type = inner.get("model_type")
    if not isinstance(inner_type, str) or inner_type not in FAMILIES:
        raise ConfigError(
            f"model_type={outer} wraps a text decoder of model_type={shown(inner_type)}, a family "
            f"LLaMA Lab does not model; it models {', '.join(FAMILIES)} exactly and refuses the rest",
            field="model_type",
        )
    return inner, (
        f"{TEXT_DECODER} a {outer} model (its text_config, model_type {inner_type!r}); "
        f"the vision tower and the projector are not counted"
    )


TEXT_DECODER = "the text decoder of"  # how the note on a multimodal wrapper begins


def read_hf_dict(data: Mapping[str, Any], model_config: type) -> tuple["ModelConfig", list[str]]:
    """Translate a HF config.json dict of a supported family (or a multimodal wrapper around
    one: its text decoder) into a ModelConfig plus notes on the keys that change nothing
    counted (at most MAX_NOTES, then one summary). A key left out takes the family config
    class's default, as ``AutoConfig.for_model`` would. ``model_config`` is the ModelConfig
    class (passed in: this module sits below it)."""
    data, wrapper = text_decoder(data)
    data, alias = _alias(data)
    family = _family(data)
    notes = ([alias] if alias else []) + _notes(data, family)
    quant = stored_quant(data)
    if quant is not None:
        notes.insert(0, f"quantization_config: {quant.describe()}: the weights' stored format")
    _refuse_nulls(data, family)
    n_layers = _count(data, family, "num_hidden_layers", 1, LIMITS["n_layers"])
    kwargs = _common(data, family, n_layers)
    _read_rope(data, family, kwargs, notes)
    kwargs.update(family_fields(data, family, n_layers))
    for name, value in kwargs.items():
        if isinstance(value, int) and value.bit_length() > 64:  # before any message prints it
            raise ConfigError(f"{name}={shown(value)} is beyond any config (more than 64 bits)", field=name)
    cfg = model_config(**kwargs)  # validates every value
    return cfg, ([wrapper] if wrapper else []) + cap_notes(notes)
