"""What the config.json reader (``hf``) and the per-family readers (``hf_families``) share: the
key table generated from transformers (``KEY_TABLE``: what each family's model reads, its
config class's defaults), ``Family``, and the small typed getters that take a family's default
for a key left out (``_get``, ``_bool``, ``_count``, ``_list``)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..errors import ConfigError
from ..units import each_of
from .messages import check_int, cut, shown

# What each family's transformers model reads and its config class's defaults, generated from
# the transformers release the tests run against by tools/hf_family_keys.py (checked by a test).
KEY_TABLE: Mapping[str, Any] = json.loads(Path(__file__).with_name("hf_keys.json").read_text())


def _defaults(model_type: str) -> dict[str, Any]:
    """The config class's defaults: what a key left out of a config.json becomes (rope_theta:
    the class's default_theta, where it is one number; Gemma3TextConfig's is one per layer type,
    read by ``hf_gemma._gemma3_rope``)."""
    table = KEY_TABLE["families"][model_type]
    theta = table["default_theta"]
    return {**table["defaults"], **({} if isinstance(theta, Mapping) else {"rope_theta": theta})}


def reads(model_type: str) -> frozenset[str]:
    """The config.json keys ``model_type``'s transformers model reads (aliases included)."""
    table = KEY_TABLE["families"][model_type]
    return frozenset(table["read"]) | frozenset(table["aliases"])


def config_class(model_type: str) -> str:
    """The name of ``model_type``'s transformers config class (Gemma3TextConfig for gemma3_text)."""
    return KEY_TABLE["families"][model_type]["config_class"]


def default_rope(model_type: str) -> Mapping[str, Any]:
    """The RoPE a file naming neither rope_parameters nor rope_scaling gets from the config
    class (its ``__post_init__``): {"rope_type": "default", ...} for all but gpt_oss (YaRN)."""
    return KEY_TABLE["families"][model_type].get("default_rope") or {"rope_type": "default"}


@dataclass(frozen=True)
class Family:
    model_type: str
    architecture: str  # transformers' CausalLM class
    defaults: Mapping[str, Any]  # the config class's defaults of the keys read below
    keys: frozenset  # family keys modelled besides COMMON_KEYS
    # keys whose null the config class (transformers 5) takes: it derives the value (head_dim,
    # num_key_value_heads) or it means "none" (sliding_window); null anywhere else is refused
    nullable: frozenset = frozenset()


def _get(data: Mapping[str, Any], family: Family, key: str) -> Any:
    """``key``'s value, or the family's default when it is absent (a null that reaches here
    is one the config class takes: ``hf._refuse_nulls``)."""
    if key in data:
        return data[key]
    aliases = KEY_TABLE["families"][family.model_type]["aliases"]  # the config's attribute_map
    alias = next((name for name, target in aliases.items() if target == key and name in data), None)
    return data[alias] if alias is not None else family.defaults.get(key)


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


LAYER_KINDS = ("sliding_attention", "full_attention")


def _layer_types(data: Mapping[str, Any], family: Family, n_layers: int) -> list[str] | None:
    """``layer_types`` checked (one known kind per layer), None when absent or null."""
    layer_types = _list(data, family, "layer_types", str)
    if layer_types is not None and (set(layer_types) - set(LAYER_KINDS) or len(layer_types) != n_layers):
        raise ConfigError(
            f"layer_types must name 'full_attention' or 'sliding_attention' for {each_of(n_layers, 'layer')}",
            field="layer_types",
        )
    return layer_types


def _windows(window: int | None, local: list[int], n_layers: int) -> tuple[int, str]:
    """(sliding_window, local_layers) of the layers in ``local``; (0, "all") for none."""
    if not local or window is None:
        return 0, "all"
    return window, "all" if len(local) == n_layers else ",".join(map(str, local))


def _number(value: Any) -> float | None:
    """``value`` as a finite float; None for a bool, text, ±inf, NaN or an int beyond a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _json(value: Any) -> str:
    try:
        return cut(json.dumps(value, sort_keys=True), 200)
    except (TypeError, ValueError):
        return shown(value, 200)
