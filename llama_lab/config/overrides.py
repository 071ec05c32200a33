"""``field=value`` overrides (CLI ``--set``, URL query) parsed into typed values.
"""
from __future__ import annotations

from dataclasses import fields
from typing import Any

from ..errors import ConfigError
from .model_config import ModelConfig


_FIELD_TYPES = {f.name: f.type for f in fields(ModelConfig)}


def parse_override(text: str) -> tuple[str, Any]:
    """Parse a ``field=value`` override (CLI ``--set``, URL query) into a typed pair."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like field=value")
    name, raw = (part.strip() for part in text.split("=", 1))
    if name not in _FIELD_TYPES:
        raise ConfigError(f"unknown config field {name!r}; known fields: "
                          f"{', '.join(sorted(_FIELD_TYPES))}")
    return name, coerce_field(name, raw)


def coerce_field(name: str, raw: str) -> Any:
    """``raw`` as field ``name``'s type; a derived field (``head_dim``, the bias switches) also
    takes "auto" (or "none"): follow its rule."""
    kind = str(_FIELD_TYPES[name])
    if kind.endswith(" | None"):
        if raw.strip().lower() in ("auto", "none", "null", ""):
            return None
        kind = kind[: -len(" | None")]
    if kind == "int":
        try:
            return int(raw.replace("_", ""))
        except ValueError:
            raise ConfigError(f"{name}={raw!r} must be an integer") from None
    if kind == "float":
        try:
            return float(raw)
        except ValueError:
            raise ConfigError(f"{name}={raw!r} must be a number") from None
    if kind == "bool":
        lowered = raw.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{name}={raw!r} must be true or false")
    return raw


def apply_overrides(cfg: ModelConfig, overrides: list[str] | tuple[str, ...]) -> ModelConfig:
    changes = dict(parse_override(text) for text in overrides)
    return cfg.replace(**changes) if changes else cfg
