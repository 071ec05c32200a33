"""LLaMA Lab: build, analyse and run LLaMA-style decoders (and the 2017 recipe)."""

from .config import PRESETS, ConfigError, ModelConfig, get_preset

__all__ = ["ConfigError", "ModelConfig", "PRESETS", "get_preset"]
__version__ = "0.1.0"
