"""Hugging Face ``config.json`` interop for the families LLaMA Lab models exactly: llama,
mistral, mixtral, qwen2, qwen3, qwen3_moe, deepseek_v2, deepseek_v3, gpt_oss, gemma2,
gemma3_text, olmo2, smollm3, phi3 and glm4_moe, read the way transformers reads them (the
families and their keys: ``hf_table``; each family's own fields: ``hf_families``; the key table,
``Family`` and the typed getters: ``hf_read``). A key matters only if the family's
transformers model reads it (``KEY_TABLE``, generated from the transformers release the tests
run against by ``tools/hf_family_keys.py``): one it never reads is a note, one it reads that
LLaMA Lab does not model an error naming it. A key left out takes the family config class's
default, as ``AutoConfig.for_model`` does; a file without ``model_type`` and a family outside
the list are refused by name; a multimodal wrapper is read as its text decoder
(``text_decoder``); ``quantization_config`` is the stored format (``hf_quant``). A null is read
as the config class reads it (transformers 5): "derive" or "none" where it takes null
(``Family.nullable``), an error naming the key everywhere else (and where the class takes a null
its model cannot run with: ``NULL_WHY``). Messages show file values through ``messages.shown``
(cut, escaped) and list at most MAX_NOTES keys or notes, then a count. Writing one:
``hf_export``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import ConfigError
from .bounds import LIMITS
from .hf_families import family_fields
from .hf_quant import stored_quant
from .hf_read import KEY_TABLE, Family, _bool, _count, _get, config_class, default_rope, reads
from .hf_table import (
    COMMON_KEYS,
    FAMILIES,
    KIND,
    NOT_MODELLED,
    NULL_MEANS_UNSET,
    NULL_WHY,
    QUIET_KEYS,
    READ_WHERE_READ,
    WRAPPED_TEXT,
)
from .messages import cap_notes, cut, name_keys, shown

if TYPE_CHECKING:
    from .model_config import ModelConfig

__all__ = [
    "COMMON_KEYS",
    "FAMILIES",
    "KEY_TABLE",
    "NULL_MEANS_UNSET",
    "QUIET_KEYS",
    "TEXT_DECODER",
    "Family",
    "HFConfigWarning",
    "read_hf_dict",
    "reads",
    "text_decoder",
]


class HFConfigWarning(UserWarning):
    """A key of a Hugging Face config.json that changes nothing LLaMA Lab counts."""


def _read_rope(data: Mapping[str, Any], family: Family, kwargs: dict, notes: list[str]) -> None:
    """RoPE's base as the config class builds rope_parameters (transformers 5,
    ``convert_rope_params_to_dict``): a legacy ``rope_scaling`` object, when given, takes the
    place of ``rope_parameters``; its ``rope_theta``, else the top-level ``rope_theta``, else the
    class's default. Scaling is noted as not modelled."""
    theta = _get(data, family, "rope_theta")
    kwargs["rope_theta"] = family.defaults["rope_theta"] if theta is None else theta
    rope_parameters = data.get("rope_parameters")
    rope_scaling = data.get("rope_scaling")
    if isinstance(rope_scaling, Mapping) and rope_scaling:
        if rope_scaling.get("rope_theta") is not None:
            kwargs["rope_theta"] = rope_scaling["rope_theta"]
        if isinstance(rope_parameters, Mapping) and rope_parameters:
            notes.append(
                f"rope_parameters={cut(json.dumps(rope_parameters, sort_keys=True, default=repr), 200)} "
                f"is not used: {config_class(family.model_type)} takes rope_scaling in its place"
            )
        if rope_scaling.get("rope_type", rope_scaling.get("type", "default")) == "default":
            rope_scaling = None  # plain RoPE spelled the legacy way
    elif isinstance(rope_parameters, Mapping):
        if rope_parameters.get("rope_theta") is not None:
            kwargs["rope_theta"] = rope_parameters["rope_theta"]
        extra = {k: v for k, v in rope_parameters.items() if k != "rope_theta"}
        if extra.get("rope_type", extra.get("type", "default")) != "default":
            rope_scaling = extra
    elif rope_parameters is not None:
        notes.append(f"rope_parameters={shown(rope_parameters)} is not an object; ignored")
    label = "rope_scaling="
    if isinstance(rope_scaling, Mapping) and _plain_linear(rope_scaling):
        rope_scaling = None  # linear at factor 1: plain RoPE (Mistral 4's export writes it so)
    if rope_parameters is None and not rope_scaling:
        # neither key given: the config class's own default RoPE (GptOssConfig's is YaRN)
        default = default_rope(family.model_type)
        if default.get("rope_type", "default") != "default":
            rope_scaling = {k: v for k, v in default.items() if k != "rope_theta"}
            label = f"no rope_parameters: {config_class(family.model_type)}'s default "
    if rope_scaling:
        try:
            text = json.dumps(rope_scaling, sort_keys=True)
        except (TypeError, ValueError):
            text = repr(rope_scaling)
        notes.append(
            f"{label}{cut(text, 200)} is not modelled: positions use plain RoPE; "
            f"parameter, FLOP and memory counts are unaffected"
        )


def _plain_linear(rope: Mapping[str, Any]) -> bool:
    """A linear RoPE scaling of factor 1: positions as plain RoPE has them."""
    kind = rope.get("rope_type", rope.get("type"))
    return kind == "linear" and rope.get("factor") == 1


def _refuse_nulls(data: Mapping[str, Any], family: Family) -> None:
    """A null is refused where the family's config class (transformers 5) refuses it; it is
    kept where the class takes it to mean "derive" or "none" (``Family.nullable``), and where
    the class has no such field (Gemma's hidden_act: any value is kept and never read)."""
    fieldless = {key for key in READ_WHERE_READ if key not in family.defaults}
    read = (COMMON_KEYS | family.keys) - family.nullable - NULL_MEANS_UNSET - fieldless
    name = config_class(family.model_type)
    for key, value in data.items():
        if value is None and key in read:
            why = NULL_WHY.get((family.model_type, key), f"null is not a value {name} can use here")
            raise ConfigError(f"{key} is null; {KIND.get(key, 'a number')} is required ({why})", field=key)


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
    if "hidden_act" not in family.defaults:  # Gemma's classes have no such field: a note (_notes)
        pass
    elif "hidden_act" not in reads(family.model_type):  # gpt_oss: a note (_notes), if a string
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
    handled = (COMMON_KEYS - (READ_WHERE_READ - read)) | QUIET_KEYS | family.keys | LOADER_KEYS
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
    for key in ("attention_dropout", "router_jitter_noise", "resid_pdrop"):
        if data.get(key) not in (None, 0, 0.0):
            notes.append(f"{key}={shown(data[key])} is training-time noise, not modelled (no dropout)")
    mtp = data.get("num_nextn_predict_layers", data.get("num_mtp_layers"))
    if family.model_type == "deepseek_v3" and mtp:
        notes.append(
            f"num_nextn_predict_layers={shown(mtp)}: the multi-token-prediction module(s) are "
            f"not part of {family.architecture} (its loader skips them): not counted. DeepSeek-V3's "
            f"685B on the Hub = 671B main model + 14B MTP module"
        )
    if family.model_type == "glm4_moe" and mtp:
        notes.append(
            f"num_nextn_predict_layers={shown(mtp)}: the multi-token-prediction layer(s) are not "
            f"part of {family.architecture} (its loader skips model.layers.46 / 92, the MTP layer "
            f"of GLM-4.5-Air / GLM-4.5): not counted"
        )
    if data.get("pretraining_tp") not in (None, 1):
        notes.append(
            f"pretraining_tp={shown(data['pretraining_tp'])} only changes how the training "
            f"run sharded the matmuls; the maths is the same"
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
            f"model_type={shown(model_type)} is not supported{_what_is_missing(model_type)}; LLaMA Lab "
            f"models {', '.join(FAMILIES)} exactly and refuses the rest",
            field="model_type",
        )
    return FAMILIES[model_type]


def _what_is_missing(model_type: Any) -> str:
    """ " (not modelled: …)" for a known family after the supported ones, else ""."""
    return f" (not modelled: {NOT_MODELLED[model_type]})" if model_type in NOT_MODELLED else ""


def text_decoder(data: Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
    """A multimodal wrapper's text decoder (its ``text_config``) and a note saying that only it
    is counted; any other config.json as it is, with no note. A wrapper of ``WRAPPED_TEXT``
    (gemma3) builds its text config with one class whatever text_config says, and with that
    class's defaults when it is absent or null; its own tie_word_embeddings ties the head."""
    if not isinstance(data, Mapping):
        return data, None
    outer_type = data.get("model_type")
    fixed = WRAPPED_TEXT.get(outer_type) if isinstance(outer_type, str) else None
    inner = data.get("text_config")
    if inner is None and fixed is None:
        return data, None
    outer = shown(outer_type if outer_type is not None else "unnamed")
    inner = {} if inner is None else inner
    if not isinstance(inner, Mapping):
        raise ConfigError(f"text_config={shown(inner)} must be a JSON object", field="text_config")
    inner_type = inner.get("model_type")
    said = ""
    if fixed is not None:
        inner_type, wrapper_class, tie_default = fixed
        if inner.get("model_type") != inner_type:
            named = f"model_type {shown(inner['model_type'])}" if "model_type" in inner else "no model_type"
            said = (
                f"; text_config names {named}, but {wrapper_class} builds a "
                f"{config_class(inner_type)} whatever it says"
            )
        tie = data.get("tie_word_embeddings", tie_default)
        if tie is not None and not isinstance(tie, bool):
            raise ConfigError(
                f"tie_word_embeddings={shown(tie)} must be true or false", field="tie_word_embeddings"
            )
        tie = bool(tie)  # null: PreTrainedModel.tie_weights reads it as false
        if inner.get("tie_word_embeddings", tie) != tie:
            said += (
                f"; its text_config's tie_word_embeddings={shown(inner['tie_word_embeddings'])} is not what "
                f"ties the head: the wrapper's ({str(tie).lower()}) does"
            )
        inner = {**inner, "model_type": inner_type, "tie_word_embeddings": tie}
    if not isinstance(inner_type, str) or inner_type not in FAMILIES:
        raise ConfigError(
            f"model_type={outer} wraps a text decoder of model_type={shown(inner_type)}, a family "
            f"LLaMA Lab does not model{_what_is_missing(inner_type)}; it models {', '.join(FAMILIES)} "
            f"exactly and refuses the rest",
            field="model_type",
        )
    return inner, (
        f"{TEXT_DECODER} a {outer} model (its text_config, model_type {inner_type!r}); "
        f"the vision tower and the projector are not counted{said}"
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
    if "rope_theta" in family.defaults:  # one RoPE base (Gemma 3's per layer type: family_fields)
        _read_rope(data, family, kwargs, notes)
    kwargs.update(family_fields(data, family, n_layers, notes))
    for name, value in kwargs.items():
        if isinstance(value, int) and value.bit_length() > 64:  # before any message prints it
            raise ConfigError(f"{name}={shown(value)} is beyond any config (more than 64 bits)", field=name)
    cfg = model_config(**kwargs)  # validates every value
    return cfg, ([wrapper] if wrapper else []) + cap_notes(notes)
