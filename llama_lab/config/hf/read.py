"""Reading a Hugging Face ``config.json`` the way transformers reads it, for every family of a
registry (``read_hf_dict``; the families: ``llama_lab.config.families``, passed in). A key
matters only if the family's transformers model reads it (``keys.json``, generated from the
transformers release the tests run against by ``tools/hf_family_keys.py``): one it never reads
is a note, one it reads that LLaMA Lab does not model an error naming it. A key left out takes
the family config class's default, as ``AutoConfig.for_model`` does; a file without
``model_type`` and a family outside the registry are refused by name; a multimodal wrapper is
read as its text decoder (``text_decoder``); ``quantization_config`` is the stored format
(``quant``). A null is read as the config class reads it (transformers 5): "derive" or "none"
where it takes null (``ModelType.nullable``), an error naming the key everywhere else (and where
the class takes a null its model cannot run with: ``ModelType.null_why``). What every family
shares is read here (sizes, heads, norms, one RoPE base: ``common_fields``, ``read_rope``); each
family reads its own fields (``Family.read``). Messages show file values through
``messages.shown`` (cut, escaped) and list at most MAX_NOTES keys or notes, then a count."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import ConfigError
from ..bounds import LIMITS
from ..fields import ROPE_SCALING_KEYS
from ..messages import cap_notes, cut, name_keys, shown
from .family import Family, Wrapper
from .keys import KEY_TABLE, ModelType, config_class, default_rope
from .quant import stored_quant
from .reader import Reader
from .table import COMMON_KEYS, KIND, LOADER_KEYS, NULL_MEANS_UNSET, QUIET_KEYS, READ_WHERE_READ, REFUSED
from .vision import read_vision

TEXT_DECODER = "the text decoder of"  # how the note on a multimodal wrapper begins


class HFConfigWarning(UserWarning):
    """A key of a Hugging Face config.json that changes nothing LLaMA Lab counts."""


def read_rope(r: Reader, kwargs: dict[str, Any]) -> None:
    """RoPE's base and scaling as the config class builds rope_parameters (transformers 5,
    ``convert_rope_params_to_dict``): a legacy ``rope_scaling`` object, when given, takes the
    place of ``rope_parameters``; its ``rope_theta``, else the top-level ``rope_theta``, else the
    class's default; a scaled RoPE (``rope_scaling_entry``) as ModelConfig's rope_scaling."""
    theta = r.get("rope_theta")
    kwargs["rope_theta"] = r.model_type.defaults.get("rope_theta") if theta is None else theta
    rope_parameters = r.data.get("rope_parameters")
    rope_scaling = r.data.get("rope_scaling")
    label = "rope_scaling"
    if isinstance(rope_scaling, Mapping) and rope_scaling:
        if rope_scaling.get("rope_theta") is not None:
            kwargs["rope_theta"] = rope_scaling["rope_theta"]
        if isinstance(rope_parameters, Mapping) and rope_parameters:
            r.note(
                f"rope_parameters={cut(json.dumps(rope_parameters, sort_keys=True, default=repr), 200)} "
                f"is not used: {r.model_type.config_class} takes rope_scaling in its place"
            )
    elif isinstance(rope_parameters, Mapping):
        if rope_parameters.get("rope_theta") is not None:
            kwargs["rope_theta"] = rope_parameters["rope_theta"]
        rope_scaling, label = rope_parameters, "rope_parameters"
    elif rope_parameters is not None:
        r.note(f"rope_parameters={shown(rope_parameters)} is not an object; ignored")
    if rope_parameters is None and not rope_scaling:
        # neither key given: the config class's own default RoPE (GptOssConfig's is YaRN)
        rope_scaling, label = default_rope(r.name), f"{r.model_type.config_class}'s default rope_parameters"
    if isinstance(rope_scaling, Mapping):
        kwargs["rope_scaling"] = rope_scaling_entry(r, rope_scaling, label)


# rope_parameters keys that are not the scaling's: ModelConfig's own fields, the legacy name of
# rope_type, and a temperature a family reads itself (Mistral 4's llama_4_scaling_beta)
NOT_SCALING = frozenset({"rope_type", "type", "rope_theta", "partial_rotary_factor", "llama_4_scaling_beta"})


def rope_scaling_entry(
    r: Reader, entry: Mapping[str, Any], where: str, *, nested: bool = False, original: Any = None
) -> dict[str, Any] | None:
    """A rope_parameters entry (or legacy rope_scaling object) as ModelConfig's rope_scaling, as
    the config class standardises it (``standardize_rope_params``): rope_type (legacy ``type``),
    the keys that type reads (others a note: transformers ignores them), and for llama3, yarn and
    longrope original_max_position_embeddings — ``original`` where the config class keeps its own
    (Phi3Config), else the entry's, else max_position_embeddings. None for plain RoPE (type
    default, or linear at factor 1). ``nested``: an entry of a RoPE per layer type, whose
    ``truncate`` YaRN never reads (it reads the top level's). ModelConfig checks the values."""
    kind = entry.get("rope_type", entry.get("type", "default"))
    if kind == "default" or plain_linear(entry):
        return None
    out: dict[str, Any] = {"rope_type": kind}
    required, optional = ROPE_SCALING_KEYS.get(kind, (frozenset(entry), frozenset()))
    ignored = []
    for key, value in entry.items():
        if key in NOT_SCALING:
            continue
        if key in required | optional and not (nested and key == "truncate"):
            out[key] = value
        else:
            ignored.append(key)
    if kind in ("llama3", "yarn", "longrope"):
        if original is not None:
            out["original_max_position_embeddings"] = original
        out.setdefault("original_max_position_embeddings", r.get("max_position_embeddings"))
    if ignored:
        r.note(f"{where} key(s) {name_keys(ignored)} are not read by its {kind} RoPE; ignored")
    return out


def scaling_by_layer_type(scalings: Mapping[str, Any], used: Mapping[str, bool]) -> dict[str, Any]:
    """ModelConfig's rope_scaling and rope_scaling_local of a RoPE per layer type (Gemma 3,
    Olmo 3): ``scalings`` each layer type's (``rope_scaling_entry``), ``used`` whether a layer
    has it. One scaling on every layer, or on the full-attention layers only; a different one on
    the sliding layers is refused."""
    full = scalings.get("full_attention") if used["full_attention"] else None
    local = scalings.get("sliding_attention") if used["sliding_attention"] else None
    if not used["full_attention"] or full == local:
        return {"rope_scaling": local} if local else {}
    if local is None:
        return {"rope_scaling": full, "rope_scaling_local": False} if full else {}
    raise ConfigError(
        f"rope_parameters['sliding_attention'] scales RoPE ({local['rope_type']}) otherwise than "
        f"the full_attention layers: not modelled (LLaMA Lab scales every layer alike, or the "
        f"full-attention layers only)",
        field="rope_parameters",
    )


def plain_linear(rope: Mapping[str, Any]) -> bool:
    """A linear RoPE scaling of factor 1: positions as plain RoPE has them."""
    kind = rope.get("rope_type", rope.get("type"))
    return kind == "linear" and rope.get("factor") == 1


def refuse_nulls(r: Reader) -> None:
    """A null is refused where the family's config class (transformers 5) refuses it; it is
    kept where the class takes it to mean "derive" or "none" (``ModelType.nullable``), and where
    the class has no such field (Gemma's hidden_act: any value is kept and never read)."""
    mt = r.model_type
    fieldless = {key for key in READ_WHERE_READ if key not in mt.defaults}
    # a config class without the common keys (MarianConfig) keeps a null one it never reads
    common = COMMON_KEYS if mt.common else COMMON_KEYS & mt.reads
    read = (common | mt.keys) - mt.nullable - NULL_MEANS_UNSET - fieldless
    for key, value in r.data.items():
        if value is None and key in read:
            why = mt.null_why.get(key, f"null is not a value {mt.config_class} can use here")
            raise ConfigError(f"{key} is null; {KIND.get(key, 'a number')} is required ({why})", field=key)


# What a family's FFN runs (ModelType.hidden_act), as a refused hidden_act's message says it
ACTIVATION_WORDS = {
    "silu": "LLaMA Lab's gated FFN is SwiGLU (SiLU gate), as every supported family's is",
    "gelu": "LLaMA Lab's BERT FFN runs the exact (erf) GELU, hidden_act 'gelu'",
}


def common_fields(r: Reader) -> dict[str, Any]:
    """The fields every family reads alike: sizes, heads, the norm's epsilon, the tied head, and
    a LLaMA block (pre-norm RMSNorm, RoPE, SwiGLU, final norm) that a family's reader changes."""
    heads = r.get("num_attention_heads")
    kv_heads = r.get("num_key_value_heads")
    kwargs: dict[str, Any] = dict(
        norm_position="pre",
        norm_type="rmsnorm",
        pos_encoding="rope",
        ffn_type="swiglu",
        final_norm=True,
        init="normal",
        vocab_size=r.get("vocab_size"),
        d_model=r.get("hidden_size"),
        n_layers=r.n_layers,
        n_heads=heads,
        n_kv_heads=heads if kv_heads is None else kv_heads,
        ffn_hidden=r.get("intermediate_size"),
        max_seq_len=r.get("max_position_embeddings"),
        norm_eps=r.get("rms_norm_eps"),
        tie_embeddings=r.flag("tie_word_embeddings", r.model_type.defaults["tie_word_embeddings"]),
        head_dim=r.get("head_dim"),
    )
    act = r.get("hidden_act")
    if "hidden_act" not in r.model_type.defaults:  # Gemma's classes have no such field: a note
        pass
    elif "hidden_act" not in r.model_type.reads:  # gpt_oss: a note (key_notes), if a string
        if not isinstance(act, str):
            raise ConfigError(f"hidden_act={shown(act)} must be a string", field="hidden_act")
    elif act is not None and act != r.model_type.hidden_act:
        raise ConfigError(
            f"hidden_act={shown(act)} is not modelled: {ACTIVATION_WORDS[r.model_type.hidden_act]}",
            field="hidden_act",
        )
    return kwargs


def key_notes(r: Reader) -> None:
    """A key matters only if the family's transformers model reads it (``ModelType.reads``):
    one it reads and LLaMA Lab does not model is refused by name; one it never reads is a note."""
    mt = r.model_type
    read = mt.reads | LOADER_KEYS
    # the loader's: stored_quant; a common key the model never reads (hidden_act of gpt_oss): a note
    handled = (COMMON_KEYS - (READ_WHERE_READ - read)) | QUIET_KEYS | mt.keys | LOADER_KEYS
    unmodelled = [key for key in r.data if key in read and key not in handled]
    if unmodelled:
        raise ConfigError(
            f"config.json key(s) {name_keys(unmodelled)} are read by transformers for "
            f"{mt.architecture} and not modelled by LLaMA Lab; it refuses rather than count "
            f"the model wrong",
            field=unmodelled[0],
            also=tuple(unmodelled[1:]),
        )
    unread = [key for key in r.data if key not in read and key not in handled]
    if unread:
        r.note(
            f"not read by {mt.name}'s model ({mt.architecture}, transformers "
            f"{KEY_TABLE['transformers']}): {name_keys(unread)}; ignored"
        )
    for key in ("attention_dropout", "router_jitter_noise", "resid_pdrop"):
        if r.data.get(key) not in (None, 0, 0.0):
            r.note(f"{key}={shown(r.data[key])} is training-time noise, not modelled (no dropout)")


def _find(families: Sequence[Family], model_type: Any) -> tuple[Family, ModelType] | None:
    if not isinstance(model_type, str):
        return None
    return next(((f, mt) for f in families for mt in f.model_types if mt.name == model_type), None)


def supported(families: Sequence[Family]) -> list[str]:
    """The model types of every family, in the registry's order."""
    return [mt.name for family in families for mt in family.model_types]


def _missing(model_type: Any) -> str:
    """ " (not modelled: …)" for a known family the registry does not hold yet, else ""."""
    return (
        f" (not modelled: {REFUSED[model_type]})"
        if isinstance(model_type, str) and model_type in REFUSED
        else ""
    )


def _alias(data: Mapping[str, Any], families: Sequence[Family]) -> tuple[Mapping[str, Any], str | None]:
    """``data`` with an aliased model_type (a checkpoint naming its own model_type for a
    supported family's code: Kimi K2's) replaced by its family's, and a note saying so."""
    model_type = data.get("model_type")
    for family in families:
        if isinstance(model_type, str) and model_type in family.aliases:
            ours = family.aliases[model_type]
            return {**data, "model_type": ours}, (
                f"model_type {model_type!r} runs {family.model_type(ours).architecture} (its remote code "
                f"is {family.name}'s): read as {ours}"
            )
    return data, None


def _model_type(data: Any, families: Sequence[Family]) -> tuple[Family, ModelType]:
    if not isinstance(data, Mapping):
        raise ConfigError(f"a config.json must be a JSON object, got {type(data).__name__}")
    if "model_type" not in data:
        raise ConfigError(
            "this config.json has no model_type: transformers picks the model's family by it "
            f"(AutoConfig), and LLaMA Lab will not guess one (it models {', '.join(supported(families))})",
            field="model_type",
        )
    found = _find(families, data["model_type"])
    if found is None:
        raise ConfigError(
            f"model_type={shown(data['model_type'])} is not supported{_missing(data['model_type'])}; LLaMA "
            f"Lab models {', '.join(supported(families))} exactly and refuses the rest",
            field="model_type",
        )
    return found


def wrapper_of(data: Any, families: Sequence[Family]) -> Wrapper | None:
    """The registry's multimodal wrapper a config.json's model_type names (None: not one)."""
    outer_type = data.get("model_type") if isinstance(data, Mapping) else None
    return next(
        (
            w
            for family in families
            for w in family.wrappers
            if isinstance(outer_type, str) and w.model_type == outer_type
        ),
        None,
    )


def text_decoder(data: Any, families: Sequence[Family]) -> tuple[Any, str | None]:
    """A multimodal wrapper's text decoder (its ``text_config``) and a note saying what of the
    wrapper is counted; any other config.json as it is, with no note. A fixed wrapper
    (``Wrapper``: gemma3's) builds its text config with one class whatever text_config says, and
    with that class's defaults when it is absent or null; its own tie_word_embeddings ties the
    head. Qwen2.5-VL's text keys may sit at the file's top level (no text_config)."""
    if not isinstance(data, Mapping):
        return data, None
    outer_type = data.get("model_type")
    wrapper = wrapper_of(data, families)
    inner = data.get("text_config")
    if inner is None and wrapper is None:
        return data, None
    outer = shown(outer_type if outer_type is not None else "unnamed")
    at_top = inner is None and wrapper is not None and wrapper.text_at_top
    if at_top:
        inner = {k: v for k, v in data.items() if k not in ("vision_config", "architectures")}
        inner["model_type"] = f"{outer_type}_text"
    inner = {} if inner is None else inner
    if not isinstance(inner, Mapping):
        raise ConfigError(f"text_config={shown(inner)} must be a JSON object", field="text_config")
    inner_type = inner.get("model_type")
    said = ""
    if wrapper is not None and not wrapper.fixed:  # AutoConfig: the text_config's own class
        inner_type = inner_type if inner_type is not None else wrapper.text
        tie = data.get("tie_word_embeddings", wrapper.tie_default) or (
            wrapper.tie_from_text and inner.get("tie_word_embeddings", False)
        )
        inner = {**inner, "model_type": inner_type, "tie_word_embeddings": bool(tie)}
    elif wrapper is not None:
        inner_type = wrapper.text
        own = f"{wrapper.model_type}_text"  # Qwen2.5-VL's own text config, read as Qwen2's
        if inner_type != own:
            said = f"; read as {inner_type} ({own}'s decoder builds the same layers)"
        if inner.get("model_type") not in (inner_type, own):
            named = f"model_type {shown(inner['model_type'])}" if "model_type" in inner else "no model_type"
            said += (
                f"; text_config names {named}, but {wrapper.config_class} builds a "
                f"{config_class(inner_type)} whatever it says"
            )
        tie = data.get("tie_word_embeddings", wrapper.tie_default)
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
    if _find(families, inner_type) is None:
        raise ConfigError(
            f"model_type={outer} wraps a text decoder of model_type={shown(inner_type)}, a family "
            f"LLaMA Lab does not model{_missing(inner_type)}; it models {', '.join(supported(families))} "
            f"exactly and refuses the rest",
            field="model_type",
        )
    whole = wrapper is not None and wrapper.vision is not None
    if whole and not said:  # the whole model counted: nothing to say
        return inner, None
    counted = (
        "the vision tower and the projector counted beside it"
        if whole
        else "the vision tower and the projector are not counted"
    )
    where = "its text keys, at the top level" if at_top else "its text_config"
    return inner, f"{TEXT_DECODER} a {outer} model ({where}, model_type {inner_type!r}); {counted}{said}"


def read_hf_dict(data: Mapping[str, Any], families: Sequence[Family]) -> tuple[dict[str, Any], list[str]]:
    """A Hugging Face config.json of a family of ``families`` (or a multimodal wrapper around
    one: its text decoder) as ModelConfig's fields, plus notes on the keys that change nothing
    counted (at most MAX_NOTES, then one summary). A key left out takes the family config
    class's default, as ``AutoConfig.for_model`` would."""
    wrapper = wrapper_of(data, families)
    outer = data
    data, wrapped = text_decoder(data, families)
    data, alias = _alias(data, families)
    family, model_type = _model_type(data, families)
    r = Reader(data, model_type, notes=[alias] if alias else [])
    key_notes(r)
    if family.key_notes is not None:
        family.key_notes(r)
    if data.get("pretraining_tp") not in (None, 1):
        r.note(
            f"pretraining_tp={shown(data['pretraining_tp'])} only changes how the training "
            f"run sharded the matmuls; the maths is the same"
        )
    quant = stored_quant(data)
    if quant is not None:
        r.notes.insert(0, f"quantization_config: {quant.describe()}: the weights' stored format")
    refuse_nulls(r)
    kwargs: dict[str, Any] = {}
    if model_type.common:  # (else the family reads every key itself: Marian's)
        r.n_layers = r.count("num_hidden_layers", 1, LIMITS["n_layers"])
        kwargs = common_fields(r)
        if not model_type.rope_by_layer_type:  # one RoPE base (one per layer type: the family's)
            read_rope(r, kwargs)
    kwargs.update(family.read(r))
    if wrapper is not None and wrapper.vision is not None:
        kwargs["vision"] = read_vision(outer, wrapper.vision, kwargs["d_model"])
    for name, value in kwargs.items():
        if isinstance(value, int) and value.bit_length() > 64:  # before any message prints it
            raise ConfigError(f"{name}={shown(value)} is beyond any config (more than 64 bits)", field=name)
    return kwargs, ([wrapped] if wrapped else []) + cap_notes(r.notes)
