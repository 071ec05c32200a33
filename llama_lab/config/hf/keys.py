"""What transformers knows of each model type LLaMA Lab reads, generated from the transformers
release the tests run against by ``tools/hf_family_keys.py`` into ``keys.json`` (checked by a
test): the config.json keys its model reads, its config class's name and defaults, the RoPE a
file naming none gets, the attribute map's aliases. ``ModelType`` is one config class / CausalLM
as a family module declares it, with the table's facts as properties."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

KEY_TABLE: Mapping[str, Any] = json.loads(Path(__file__).with_name("keys.json").read_text())


def _table(model_type: str) -> Mapping[str, Any]:
    return KEY_TABLE["families"][model_type]


def reads(model_type: str) -> frozenset[str]:
    """The config.json keys ``model_type``'s transformers model reads (aliases included)."""
    table = _table(model_type)
    return frozenset(table["read"]) | frozenset(table["aliases"])


def config_class(model_type: str) -> str:
    """The name of ``model_type``'s transformers config class (Gemma3TextConfig for gemma3_text)."""
    return str(_table(model_type)["config_class"])


def default_rope(model_type: str) -> Mapping[str, Any]:
    """The RoPE a file naming neither rope_parameters nor rope_scaling gets from the config
    class (its ``__post_init__``): {"rope_type": "default", ...} for all but gpt_oss (YaRN) and
    Mistral 4."""
    return _table(model_type).get("default_rope") or {"rope_type": "default"}


def default_theta(model_type: str) -> Any:
    """The config class's ``default_theta``: one number, or one per layer type (Gemma 3)."""
    return _table(model_type)["default_theta"]


def class_defaults(model_type: str) -> dict[str, Any]:
    """The config class's defaults: what a key left out of a config.json becomes (rope_theta:
    the class's default_theta, where it is one number; a family keeping one per layer type
    reads it itself; none for a class without RoPE, BertConfig, whose default_rope is null)."""
    theta = default_theta(model_type)
    rotary = _table(model_type)["default_rope"] is not None and not isinstance(theta, Mapping)
    return {**_table(model_type)["defaults"], **({"rope_theta": theta} if rotary else {})}


def aliases(model_type: str) -> Mapping[str, str]:
    """The config class's attribute_map: a key a file may use in place of another."""
    return _table(model_type)["aliases"]


@dataclass(frozen=True)
class ModelType:
    """One ``model_type`` a family reads: its transformers config class and CausalLM."""

    name: str  # the config.json's model_type
    architecture: str  # transformers' CausalLM class
    keys: frozenset[str]  # the keys the family models beyond table.COMMON_KEYS
    # keys whose null the config class (transformers 5) takes: it derives the value (head_dim,
    # num_key_value_heads) or it means "none" (sliding_window); a null anywhere else is refused
    nullable: frozenset[str] = frozenset()
    # nulls the config class takes that its model then cannot run with: refused, with the reason
    null_why: Mapping[str, str] = field(default_factory=dict)
    block: str = "llama"  # the block its layers build (hf.select.BLOCKS)
    holds: frozenset[str] = frozenset()  # the features (Family.features) it can write
    # its config class keeps a RoPE base per layer type, which the family's reader reads (Gemma 3,
    # Olmo 3); every other one's single base is read alike (read.read_rope)
    rope_by_layer_type: bool = False
    module: str = ""  # transformers/models/<module>/ when not named after it (the key tool)
    hidden_act: str = "silu"  # the activation its FFN runs (a file's hidden_act must name it)
    # common keys (table.COMMON_KEYS) its config class has no field for, left out of a written
    # config.json (BERT: no RoPE, no RMSNorm, no KV heads of their own)
    drops: frozenset[str] = frozenset()
    # its config class takes the decoder keys every LLaMA-like family shares (hidden_size,
    # num_hidden_layers, one RoPE base: read.common_fields, write.common_keys); False (Marian's
    # d_model, encoder_layers, decoder_layers): the family reads and writes every key itself
    common: bool = True

    @cached_property
    def defaults(self) -> dict[str, Any]:
        return class_defaults(self.name)

    @property
    def config_class(self) -> str:
        return config_class(self.name)

    @property
    def reads(self) -> frozenset[str]:
        return reads(self.name)
