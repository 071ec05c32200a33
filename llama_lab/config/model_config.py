"""ModelConfig: the one frozen, validated config every part of LLaMA Lab builds. Its fields and
derived sizes are ``fields.ModelFields``'; here each derived field is resolved (``DERIVED``),
every rule checked (``field_rules``, ``feature_rules``) and the per-block flags set, and a config
is read from and written to our JSON and a Hugging Face ``config.json`` (``hf``)."""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, fields
from typing import Any, Callable, Literal, Mapping, get_origin, get_type_hints

from ..errors import ConfigError
from . import feature_rules, field_rules, messages, vision_rules
from .bounds import FAMILY_LIMITS
from .families import FAMILY_LIST
from .fields import ModelFields, RopeScaling, VisionTower
from .hf.read import HFConfigWarning, read_hf_dict
from .hf.write import to_hf_config
from .messages import check_int


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


# Fields whose default is derived from others (None = derive). ``replace`` keeps a derived value
# following its source: a config whose head_dim is d_model / n_heads keeps that rule when
# d_model changes; one whose biases follow ``bias`` keeps following it.
DERIVED: dict[str, Callable[["ModelConfig"], Any]] = {
    # head_dim follows d_model / n_heads only where that divides: an explicit head_dim of a
    # width that does not divide (heads spanning less than d) stays explicit
    "head_dim": lambda c: c.d_model // c.n_heads if c.d_model % c.n_heads == 0 else None,
    "qkv_bias": lambda c: c.bias,
    "o_bias": lambda c: c.bias,
    "mlp_bias": lambda c: c.bias,
    "expert_ffn_hidden": lambda c: c.ffn_hidden,
    "v_head_dim": lambda c: c.head_dim,  # a value head as wide as a key head (all but MLA)
    "query_pre_attn_scalar": lambda c: c.head_dim,  # scores × 1/√head_dim (all but Gemma 2/3)
    # the scores' scale: 1/√query_pre_attn_scalar (all but Granite, which sets its own); left
    # unresolved while that is no positive whole number (its own rule names it)
    "attention_multiplier": lambda c: (
        c.query_pre_attn_scalar**-0.5 if _positive_int(c.query_pre_attn_scalar) else None
    ),
    "rope_local_theta": lambda c: c.rope_theta,  # windowed layers rotate as the others (not Gemma 3)
}


# Fields a file may set to null: the derived ones, rope_scaling (plain RoPE) and vision (text only)
NULLABLE = frozenset(DERIVED) | {"rope_scaling", "vision"}


@dataclass(frozen=True)
class ModelConfig(ModelFields):
    """A model's whole architecture (the fields: ``ModelFields``), checked as it is made: an
    invalid value raises ConfigError naming the field, the value and the rule."""

    def __post_init__(self) -> None:
        field_rules.check_sizes(self)
        field_rules.check_choices_and_numbers(self)
        self._resolve_and_check_family()
        field_rules.check_rope(self)
        field_rules.check_rope_scaling(self)
        vision_rules.check_vision(self)

    def _resolve_and_check_family(self) -> None:
        for name, derive in DERIVED.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, derive(self))
        for name in ("qkv_bias", "o_bias", "mlp_bias"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}={getattr(self, name)!r} must be true or false", field=name)
        check_int("head_dim", self.head_dim, 1, FAMILY_LIMITS["head_dim"])
        check_int("sliding_window", self.sliding_window, 0, FAMILY_LIMITS["sliding_window"])
        check_int("n_experts", self.n_experts, 0, FAMILY_LIMITS["n_experts"])
        check_int("expert_ffn_hidden", self.expert_ffn_hidden, 1, FAMILY_LIMITS["expert_ffn_hidden"])
        if self.n_experts:
            check_int("experts_per_token", self.experts_per_token, 1, self.n_experts)
            if self.ffn_type != "swiglu":  # geglu experts: no published model
                raise ConfigError(
                    f"n_experts={self.n_experts} needs ffn_type='swiglu' (every "
                    f"family with experts uses SwiGLU experts)",
                    field="n_experts",
                    also=("ffn_type",),
                )
        else:
            check_int("experts_per_token", self.experts_per_token, 0, FAMILY_LIMITS["experts_per_token"])
        feature_rules.check_mla(self)
        feature_rules.check_routing(self)
        feature_rules.check_gpt_oss(self)
        feature_rules.check_gemma(self)
        # both layer sets, validated and kept (every count reads them per block)
        local = field_rules.layer_set(self.local_layers, self.n_layers, "local_layers")
        sparse = field_rules.layer_set(self.moe_layers, self.n_layers, "moe_layers")
        object.__setattr__(self, "_local_flags", local if self.sliding_window else (False,) * self.n_layers)
        object.__setattr__(self, "_moe_flags", sparse if self.n_experts else (False,) * self.n_layers)
        linear = field_rules.layer_set(self.linear_layers, self.n_layers, "linear_layers")
        object.__setattr__(self, "_linear_flags", linear)
        feature_rules.check_linear(self)
        feature_rules.check_llama4(self)
        nope = field_rules.layer_set(self.nope_layers, self.n_layers, "nope_layers")
        rotated = tuple(self.pos_encoding == "rope" and not n and not lin for n, lin in zip(nope, linear))
        object.__setattr__(self, "_rope_flags", rotated)
        temperature = field_rules.layer_set(
            self.attn_temperature_layers, self.n_layers, "attn_temperature_layers"
        )
        object.__setattr__(self, "_temperature_flags", temperature)
        feature_rules.check_temperature(self)
        feature_rules.check_sparse(self)
        feature_rules.check_indexer(self)
        feature_rules.check_encoder(self)
        feature_rules.check_encoder_decoder(self)

    def replace(self, **changes: Any) -> "ModelConfig":
        """A copy with ``changes``; a derived field (DERIVED) that followed its rule keeps
        following it unless it is changed too, and a vision tower's projector the new d_model."""
        for name, derive in DERIVED.items():
            if name not in changes and getattr(self, name) == derive(self):
                changes[name] = None
        width = changes.get("d_model", self.d_model)
        if self.vision is not None and "vision" not in changes and width != self.d_model:
            # the projector keeps feeding the text decoder, whatever its width
            changes["vision"] = dataclasses.replace(self.vision, out_size=width)
        return dataclasses.replace(self, **changes)

    # ---- our JSON ------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """Every field; a derived one (DERIVED) only where it departs from its rule, so that
        ``from_dict(to_dict())`` keeps it following the rule."""
        out = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name not in DERIVED or getattr(self, f.name) != DERIVED[f.name](self)
        }
        if self.rope_scaling is not None:  # JSON's own object: the keys transformers reads
            out["rope_scaling"] = self.rope_scaling.as_dict()
        if self.vision is not None:  # JSON's own object: the tower's fields
            out["vision"] = self.vision.as_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ModelConfig":
        if not isinstance(data, Mapping):
            raise ConfigError(f"a config must be a JSON object, got {type(data).__name__}")
        unknown = [key for key in data if key not in FIELD_KINDS]
        if unknown:
            raise ConfigError(
                f"unknown config field(s) {messages.name_keys(unknown)}; "
                f"{messages.known_names(unknown[0], FIELD_KINDS)}",
                field=unknown[0],
                also=tuple(unknown[1:]),
            )
        for name, value in data.items():
            if value is None and name not in NULLABLE:
                raise ConfigError(
                    f"{name} is null; {kind_words(name)} is required (only "
                    f"{', '.join(DERIVED)} take null: follow their rule; rope_scaling: plain RoPE; "
                    "vision: text only)",
                    field=name,
                )
            if isinstance(value, int) and value.bit_length() > 64:  # before a message prints it
                raise ConfigError(
                    f"{name}={messages.shown(value)} is beyond any config (more than 64 bits)", field=name
                )
        return cls(**dict(data))

    # ---- Hugging Face config.json (llama_lab.config.hf, over the families' registry) --------
    @classmethod
    def from_hf_config(cls, data: Mapping[str, Any]) -> "ModelConfig":
        """Read a Hugging Face config.json of any family; keys it cannot model are reported as
        HFConfigWarning."""
        cfg, notes = read_hf_config(data)
        for note in notes:
            warnings.warn(note, HFConfigWarning, stacklevel=2)
        return cfg

    def to_hf_config(self) -> dict:
        """The config.json of the family that expresses this config (ConfigError: none does)."""
        return to_hf_config(self, FAMILY_LIST)


def read_hf_config(data: Mapping[str, Any]) -> tuple[ModelConfig, list[str]]:
    """A Hugging Face config.json as a ModelConfig, plus notes on keys that change nothing counted."""
    kwargs, notes = read_hf_dict(data, FAMILY_LIST)
    return ModelConfig(**kwargs), notes


def _plain(hint: Any) -> type:
    """A choice field's Literal is text; rope_scaling is read from JSON text (``--set``, the
    URL); every other field's annotation is its type."""
    objects = (RopeScaling | None, VisionTower | None)  # JSON objects
    return str if get_origin(hint) is Literal or hint in objects else hint


# Each field's value type (int, float, bool or str), from ModelConfig's resolved annotations:
# what a file's, a URL's or a --set value is read as.
_HINTS = get_type_hints(ModelConfig)
FIELD_KINDS: dict[str, type] = {f.name: _plain(_HINTS[f.name]) for f in fields(ModelConfig)}


def kind_words(name: str) -> str:
    """What field ``name`` takes, in words: "true or false", "a string" or "a number"."""
    if name in ("rope_scaling", "vision"):
        return "a JSON object"
    return {bool: "true or false", str: "a string"}.get(FIELD_KINDS[name], "a number")
