"""Hugging Face ``config.json`` interop for the families LLaMA Lab models exactly: llama,
mistral, mixtral, qwen2, qwen3 and qwen3_moe, read the way transformers reads them. A key
matters only if the family's transformers model reads it (``KEY_TABLE``, generated from the
transformers release the tests run against by ``tools/hf_family_keys.py``): one it never reads
is a note, one it reads that LLaMA Lab does not model an error naming it. A key left out takes
the family config class's default, as ``AutoConfig.for_model`` does; a file without
``model_type`` and a family outside the list are refused by name; a multimodal wrapper is read
as its text decoder (``text_decoder``); ``quantization_config`` is the stored format
(``hf_quant``). A null is read as the config class reads it (transformers 5): "derive" or
"none" where it takes null (``Family.nullable``), an error naming the key everywhere else.
Messages show file values through ``messages.shown`` (cut, escaped) and list at most
MAX_NOTES keys or notes, then a count. Writing one: ``hf_export``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import ConfigError
from .bounds import LIMITS
from .hf_quant import stored_quant
from .messages import cap_notes, check_int, cut, name_keys, shown

if TYPE_CHECKING:
    from .model_config import ModelConfig


# What each family's transformers model reads and its config class's defaults, generated from
# the transformers release the tests run against by tools/hf_family_keys.py (checked by a test).
KEY_TABLE: Mapping[str, Any] = json.loads(Path(__file__).with_name("hf_keys.json").read_text())


def _defaults(model_type: str) -> dict[str, Any]:
    """The config class's defaults: what a key left out of a config.json becomes."""
    table = KEY_TABLE["families"][model_type]
    return {**table["defaults"], "rope_theta": table["default_theta"]}


def reads(model_type: str) -> frozenset[str]:
    """The config.json keys ``model_type``'s transformers model reads (aliases included)."""
    table = KEY_TABLE["families"][model_type]
    return frozenset(table["read"]) | frozenset(table["aliases"])


class HFConfigWarning(UserWarning):
    """A key of a Hugging Face config.json that changes nothing LLaMA Lab counts."""


@dataclass(frozen=True)
class Family:
    model_type: str
    architecture: str  # transformers' CausalLM class
    defaults: Mapping[str, Any]  # the config class's defaults of the keys read below
    keys: frozenset  # family keys modelled besides COMMON_KEYS
    # keys whose null the config class (transformers 5) takes: it derives the value (head_dim,
    # num_key_value_heads) or it means "none" (sliding_window); null anywhere else is refused
    nullable: frozenset = frozenset()


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
    if rope_scaling:
        try:
            text = json.dumps(rope_scaling, sort_keys=True)
        except (TypeError, ValueError):
            text = repr(rope_scaling)
        notes.append(
            f"rope_scaling={cut(text, 200)} is not modelled: positions use plain RoPE; "
            f"parameter, FLOP and memory counts are unaffected"
        )


def _get(data: Mapping[str, Any], family: Family, key: str) -> Any:
    """``key``'s value, or the family's default when it is absent (a null that reaches here
    is one the config class takes: ``_refuse_nulls``)."""
    if key in data:
        return data[key]
    aliases = KEY_TABLE["families"][family.model_type]["aliases"]  # the config's attribute_map
    alias = next((name for name, target in aliases.items() if target == key and name in data), None)
    return data[alias] if alias is not None else family.defaults.get(key)


def _refuse_nulls(data: Mapping[str, Any], family: Family) -> None:
    """A null is refused where the family's config class (transformers 5) refuses it; it is
    kept where the class takes it to mean "derive" or "none" (``Family.nullable``)."""
    read = (COMMON_KEYS | family.keys) - family.nullable - NULL_MEANS_UNSET
    config_class = family.architecture.replace("ForCausalLM", "Config")
    for key, value in data.items():
        if value is None and key in read:
            raise ConfigError(
                f"{key} is null; {_KIND.get(key, 'a number')} is required "
                f"(null is not a value {config_class} can use here)",
                field=key,
            )


def _bool(data: Mapping[str, Any], family: Family, key: str, default: bool = False) -> bool:
    value = _get(data, family, key)
    value = default if value is None else value
    if not isinstance(value, bool):
        raise ConfigError(f"{key}={shown(value)} must be true or false", field=key)
    return value


def _count(data: Mapping[str, Any], family: Family, key: str, low: int, high: int) -> int:
    """An integer the reader itself computes with (layer counts, steps), checked before use."""
    value = _get(data, family, key)
    check_int(key, value, low, high)
    return value


def _list(data: Mapping[str, Any], family: Family, key: str, item: type) -> list | None:
    """A list of ``item`` (str: layer kinds, int: block indices); None when null."""
    value = _get(data, family, key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, item) and not isinstance(v, bool) for v in value):
        kind = "strings" if item is str else "block indices (integers)"
        raise ConfigError(f"{key}={shown(value)} must be a list of {kind}", field=key)
    return value


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
    if act is not None and act != "silu":
        raise ConfigError(
            f"hidden_act={shown(act)} is not modelled: LLaMA Lab's gated FFN is "
            f"SwiGLU (SiLU gate), as every supported family's is",
            field="hidden_act",
        )
    return kwargs


def _qwen_windows(data: Mapping[str, Any], family: Family, n_layers: int) -> tuple[int, str]:
    """(window, local layer set) of Qwen2/Qwen3: layer_types when given, else the layers from
    max_window_layers on when use_sliding_window."""
    window = _get(data, family, "sliding_window")
    layer_types = _list(data, family, "layer_types", str)
    if layer_types is not None:
        local = [i for i, kind in enumerate(layer_types) if kind == "sliding_attention"]
        unknown = set(layer_types) - {"sliding_attention", "full_attention"}
        if unknown or len(layer_types) != n_layers:
            raise ConfigError(
                f"layer_types must name 'full_attention' or 'sliding_attention' for "
                f"each of the {n_layers} layers",
                field="layer_types",
            )
    elif _bool(data, family, "use_sliding_window") and window is not None:
        start = _count(data, family, "max_window_layers", 0, 1 << 62)
        local = list(range(min(start, n_layers), n_layers))
    else:
        local = []
    if not local or window is None:
        return 0, "all"
    return window, "all" if len(local) == n_layers else ",".join(map(str, local))


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


def _family_fields(data: Mapping[str, Any], family: Family, n_layers: int) -> dict:
    """The fields that set one family apart: biases, QK-norm, windows, experts."""
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
    return out


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


# Keys no modelling file reads that still change what is counted: transformers' loader reads
# quantization_config to store the weights in another format (``stored_quant`` reads it).
LOADER_KEYS = frozenset({"quantization_config"})


def _notes(data: Mapping[str, Any], family: Family) -> list[str]:
    """A key matters only if the family's transformers model reads it (``reads``): one it reads
    and LLaMA Lab does not model is refused by name; one it never reads is a note."""
    handled = COMMON_KEYS | QUIET_KEYS | family.keys | LOADER_KEYS  # the loader's: stored_quant
    read = reads(family.model_type) | LOADER_KEYS
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
    kwargs.update(_family_fields(data, family, n_layers))
    for name, value in kwargs.items():
        if isinstance(value, int) and value.bit_length() > 64:  # before any message prints it
            raise ConfigError(f"{name}={shown(value)} is beyond any config (more than 64 bits)", field=name)
    cfg = model_config(**kwargs)  # validates every value
    return cfg, ([wrapper] if wrapper else []) + cap_notes(notes)
