"""One config.json as a family's reader sees it (``Reader``): its values by key, a key left out
taking the config class's default (as ``AutoConfig.for_model`` does) or an alias's value, read
as the type the family's model needs (``flag``, ``count``, ``int_list``, ``layer_types``), with
the notes the reading makes; and the small helpers every family's reader shares (``windows``,
``layer_list``, ``number``, ``as_json``)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...errors import ConfigError
from ...units import each_of
from ..messages import check_int, cut, shown
from .keys import ModelType, aliases

LAYER_KINDS = ("sliding_attention", "full_attention")


@dataclass
class Reader:
    """``data`` (a config.json's object) read as ``model_type``'s config class reads it."""

    data: Mapping[str, Any]
    model_type: ModelType
    n_layers: int = 0  # num_hidden_layers, once read
    notes: list[str] = field(default_factory=list)  # keys read and ignored, said once each

    @property
    def name(self) -> str:
        return self.model_type.name

    @property
    def architecture(self) -> str:
        return self.model_type.architecture

    def note(self, text: str) -> None:
        if text not in self.notes:  # (a key read twice, as Phi-3's RoPE, is said once)
            self.notes.append(text)

    def given(self, key: str) -> bool:
        return key in self.data

    def get(self, key: str) -> Any:
        """``key``'s value, or the config class's default when it is absent (a null that
        reaches here is one the config class takes: ``read.refuse_nulls``)."""
        if key in self.data:
            return self.data[key]
        alias = next(
            (k for k, target in aliases(self.name).items() if target == key and k in self.data), None
        )
        return self.data[alias] if alias is not None else self.model_type.defaults.get(key)

    def flag(self, key: str, default: bool = False) -> bool:
        value = self.get(key)
        value = default if value is None else value
        if not isinstance(value, bool):
            raise ConfigError(f"{key}={shown(value)} must be true or false", field=key)
        return value

    def count(self, key: str, low: int, high: int) -> int:
        """An integer the reader itself computes with (layer counts, steps), checked before use."""
        value = self.get(key)
        check_int(key, value, low, high)
        return int(value)

    def str_list(self, key: str) -> list[str] | None:
        """A list of strings (layer kinds); None when null."""
        return self._list(key, str)

    def int_list(self, key: str) -> list[int] | None:
        """A list of block indices; None when null."""
        return self._list(key, int)

    def _list(self, key: str, item: type) -> list | None:
        value = self.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(
            isinstance(v, item) and not isinstance(v, bool) for v in value
        ):
            kind = "strings" if item is str else "block indices (integers)"
            raise ConfigError(f"{key}={shown(value)} must be a list of {kind}", field=key)
        return value

    def layer_types(self) -> list[str] | None:
        """``layer_types`` checked (one known kind per layer), None when absent or null."""
        layer_types = self.str_list("layer_types")
        if layer_types is not None and (
            set(layer_types) - set(LAYER_KINDS) or len(layer_types) != self.n_layers
        ):
            raise ConfigError(
                f"layer_types must name 'full_attention' or 'sliding_attention' for "
                f"{each_of(self.n_layers, 'layer')}",
                field="layer_types",
            )
        return layer_types

    def floor_head_dim(self) -> dict[str, int]:
        """For an attention that takes ``getattr(config, "head_dim", hidden_size //
        num_attention_heads)`` (a config class with no head_dim field: OLMo 2, SmolLM3, Phi-3,
        GLM-4.5): a file without one gets the floor, which ModelConfig's own rule (d_model /
        n_heads, exact) derives only where it divides."""
        if "head_dim" in self.data:
            return {}
        hidden, heads = self.get("hidden_size"), self.get("num_attention_heads")
        numbers = all(isinstance(v, int) and not isinstance(v, bool) for v in (hidden, heads))
        if not numbers or heads < 1 or hidden < heads or hidden % heads == 0:
            return {}  # ModelConfig names what is wrong, or derives the same width
        return dict(head_dim=hidden // heads)

    def partial_rotary(self, setdefault: float | None = None) -> float:
        """The share of each head RoPE rotates, as the rotary embedding reads it:
        ``rope_parameters.get("partial_rotary_factor", 1.0)`` after the config class built
        rope_parameters (``rope_scaling or rope_parameters``, then the top-level key folded in:
        Phi3Config's ``kwargs.get(..., 1.0)``, or the class's ``kwargs.setdefault(...,
        setdefault)`` (GLM-4.5's 0.5, Qwen3-Next's and Qwen3.5's 0.25), which PreTrainedConfig
        folds in only when it is not null)."""
        scaling, params = self.data.get("rope_scaling"), self.data.get("rope_parameters")
        source = scaling if scaling else params
        if isinstance(source, Mapping) and "partial_rotary_factor" in source:
            where = "rope_scaling" if source is scaling else "rope_parameters"
            key, value = f"{where}['partial_rotary_factor']", source["partial_rotary_factor"]
        else:
            key = "partial_rotary_factor"
            value = self.data.get(key, 1.0 if setdefault is None else setdefault)
            if value is None and setdefault is not None:
                return 1.0  # not folded in: the rotary embedding's .get(..., 1.0)
        share = number(value)
        if share is None or not 0 < share <= 1:
            raise ConfigError(
                f"{key}={shown(value)} must be a number in (0, 1]: {self.architecture}'s RoPE rotates "
                f"int(head_dim × it) dimensions of each head",
                field="partial_rotary_factor",
            )
        return share


def windows(window: int | None, local: list[int], n_layers: int) -> tuple[int, str]:
    """(sliding_window, local_layers) of the layers in ``local``; (0, "all") for none."""
    if not local or window is None:
        return 0, "all"
    return window, "all" if len(local) == n_layers else ",".join(map(str, local))


def layer_list(indices: list[int], n_layers: int) -> str:
    """A layer-set string of ``indices``: "none", "all" or the comma list."""
    if not indices:
        return "none"
    return "all" if len(indices) == n_layers else ",".join(map(str, indices))


def all_but_every(n_layers: int, interval: int = 4) -> str:
    """Every block but each interval-th, as a layer set (Qwen3-Next's and Qwen3.5's Gated
    DeltaNet blocks by default: 3 of them, then one gated attention block; Llama 4's rotated
    blocks: 3, then one NoPE)."""
    return ",".join(str(i) for i in range(n_layers) if (i + 1) % interval)


def number(value: Any) -> float | None:
    """``value`` as a finite float; None for a bool, text, ±inf, NaN or an int beyond a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        as_float = float(value)
    except OverflowError:
        return None
    return as_float if math.isfinite(as_float) else None


def as_json(value: Any) -> str:
    """``value`` as a note shows it: sorted JSON cut to 200 characters (its repr if not JSON)."""
    try:
        return cut(json.dumps(value, sort_keys=True), 200)
    except (TypeError, ValueError):
        return shown(value, 200)
