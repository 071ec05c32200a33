"""Config files: our ModelConfig JSON or a HF config.json, read with a size bound, parsed as data
only (json.loads: nothing is executed).
"""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import ConfigError
from .hf import read_hf_dict
from .model_config import ModelConfig


MAX_CONFIG_BYTES = 1_000_000     # a real config.json is about 1 KB


def read_hf_config(data) -> tuple[ModelConfig, list[str]]:
    """A HF config.json dict as a ModelConfig, plus one note per key that was not modelled."""
    return read_hf_dict(data, ModelConfig)


def read_bounded(path: str | Path, max_bytes: int, what: str) -> bytes:
    """Read at most ``max_bytes`` of a file (regular, or a pipe such as ``<(...)``), one byte
    more to tell an oversized one apart, so /dev/zero or a huge file cannot fill memory."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{what} {str(path)!r} does not exist")
    if path.is_dir():
        raise ConfigError(f"{what} {str(path)!r} is a folder, not a file")
    try:
        with path.open("rb") as handle:
            raw = handle.read(max_bytes + 1)
    except OSError as exc:
        raise ConfigError(f"{what} {str(path)!r} cannot be read: {exc.strerror or exc}") from None
    if len(raw) > max_bytes:
        raise ConfigError(f"{what} {str(path)!r} is larger than the limit of {max_bytes:,} bytes")
    return raw


def load_config_file(path: str | Path) -> tuple[ModelConfig, list[str]]:
    """Load our ModelConfig JSON or a HF config.json (told apart by 'hidden_size')."""
    raw = read_bounded(path, MAX_CONFIG_BYTES, "config file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"config file {str(path)!r} is not UTF-8 text") from None
    return parse_config_json(text, source=str(path))


def parse_config_json(text: str, source: str = "config") -> tuple[ModelConfig, list[str]]:
    """Parse our JSON or a HF config.json, as data only (json.loads: nothing is executed)."""
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{source} is {len(text):,} characters; a config file may hold at most "
                          f"{MAX_CONFIG_BYTES:,}")
    if not text.strip():
        raise ConfigError(f"{source} is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source} is not valid JSON: {exc.msg} at line {exc.lineno} "
                          f"column {exc.colno}") from None
    except RecursionError:
        raise ConfigError(f"{source} is nested too deeply to be a config") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source} must hold a JSON object, got {type(data).__name__}")
    if "hidden_size" in data:
        return read_hf_config(data)
    return ModelConfig.from_dict(data), []
