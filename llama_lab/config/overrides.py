"""``field=value`` overrides (CLI ``--set``, URL query) parsed into typed values. The text is
checked as a config file's values are: control characters, absurd lengths and digit counts,
NaN and infinity, and empty or null text for a field that needs a value are refused with a
message naming the field and the rule.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..errors import ConfigError
from .files import MAX_INT_DIGITS, MAX_NUMBER_CHARS, UNPRINTABLE
from .messages import known_names, shown
from .model_config import DERIVED, FIELD_KINDS, ModelConfig, kind_words

# The fields a rule derives when they are None (model_config.DERIVED) also take "auto".
_DERIVED_FIELDS = ", ".join(DERIVED)
MAX_VALUE_CHARS = 200  # the longest value: a layer list such as "0,3,5,…"
_INT = re.compile(r"[+-]?[0-9][0-9_]*", re.ASCII)
_FLOAT = re.compile(r"[+-]?([0-9][0-9_]*\.?[0-9_]*|\.[0-9][0-9_]*)([eE][+-]?[0-9]+)?", re.ASCII)
_NAN_INF = re.compile(r"[+-]?(nan|inf|infinity)", re.ASCII | re.IGNORECASE)


def parse_override(text: str) -> tuple[str, Any]:
    """Parse a ``field=value`` override (CLI ``--set``, URL query) into a typed pair."""
    if "=" not in text:
        raise ConfigError(f"override {shown(text)} must look like field=value")
    name, raw = (part.strip() for part in text.split("=", 1))
    if name not in FIELD_KINDS:
        raise ConfigError(
            f"unknown config field {shown(name)}; {known_names(name, FIELD_KINDS)}",
            field=name,
        )
    return name, coerce_field(name, raw)


def _check_text(name: str, raw: str) -> None:
    if not isinstance(raw, str):
        raise ConfigError(f"{name}={shown(raw)} must be given as text", field=name)
    bad = UNPRINTABLE.search(raw)
    if bad:
        raise ConfigError(
            f"{name}={shown(raw)} holds the control character or lone surrogate "
            f"{bad.group()!r}; a value must be printable text",
            field=name,
        )
    if len(raw) > MAX_VALUE_CHARS:
        raise ConfigError(
            f"{name}={shown(raw)} is {len(raw):,} characters long; a value has at most {MAX_VALUE_CHARS}",
            field=name,
        )


def _number(name: str, raw: str, kind: type) -> int | float:
    text = raw.strip()
    if kind is int:
        if not _INT.fullmatch(text):
            raise ConfigError(f"{name}={raw!r} must be an integer", field=name)
        digits = sum(ch.isdigit() for ch in text)
        if digits > MAX_INT_DIGITS:
            raise ConfigError(
                f"{name}={shown(raw, 24)} has {digits} digits; an integer field "
                f"takes at most {MAX_INT_DIGITS}",
                field=name,
            )
        return int(text.replace("_", ""))
    if _NAN_INF.fullmatch(text):
        raise ConfigError(f"{name}={text} must be a finite number (NaN and infinity are refused)", field=name)
    if not _FLOAT.fullmatch(text) or len(text) > MAX_NUMBER_CHARS:
        raise ConfigError(
            f"{name}={raw!r} must be a number (at most {MAX_NUMBER_CHARS} characters, "
            "such as 1e-5 or 500000)",
            field=name,
        )
    value = float(text.replace("_", ""))
    if not math.isfinite(value):
        raise ConfigError(f"{name}={text} must be a finite number (it is beyond ±1.8e308)", field=name)
    return value


def coerce_field(name: str, raw: str) -> Any:
    """``raw`` as field ``name``'s type; a derived field (``head_dim``, the bias switches) also
    takes "auto" (or "none"): follow its rule."""
    _check_text(name, raw)
    kind = FIELD_KINDS[name]
    lowered = raw.strip().lower()
    if name in DERIVED and lowered in ("auto", "none", "null", ""):
        return None
    if name in ("rope_scaling", "vision") and lowered in ("none", "null", ""):
        return None  # plain RoPE, a text-only model; any other text is a JSON object ModelConfig reads
    if not lowered:
        what = kind_words(name)
        raise ConfigError(
            f"{name}= is empty; {what} is required (only {_DERIVED_FIELDS} take 'auto')", field=name
        )
    # "none" is a value of some choices (pos_encoding); elsewhere it reads as a null
    if lowered in ("null", "nil") or (lowered == "none" and kind is not str):
        what = kind_words(name)
        raise ConfigError(
            f"{name}={raw.strip()!r} is null; {what} is required (only {_DERIVED_FIELDS} take 'auto')",
            field=name,
        )
    if kind in (int, float):
        return _number(name, raw, kind)
    if kind is bool:
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{name}={raw!r} must be true or false", field=name)
    return raw


def apply_overrides(cfg: ModelConfig, overrides: list[str] | tuple[str, ...]) -> ModelConfig:
    changes = dict(parse_override(text) for text in overrides)
    return cfg.replace(**changes) if changes else cfg
