"""Configuration: ``ModelConfig`` (frozen, validated), the presets, FFN width rules, recipes,
Hugging Face ``config.json`` interop, config files and ``field=value`` overrides."""

from ..errors import ConfigError
from .bounds import CHOICES, INIT_STD, LIMITS, MAX_BATCH, MINIMUMS
from .feature_rules import require_decoder_only
from .ffn import FFN_RULES, detect_ffn_rule, ffn_from_rule, llama_ffn_hidden, seed_ffn_hidden
from .files import MAX_CONFIG_BYTES, load_config_file, parse_config_json, read_bounded, read_hf_config
from .hf.read import HFConfigWarning
from .model_config import ModelConfig
from .overrides import apply_overrides, coerce_field, parse_override
from .presets import PRESETS, PUBLISHED_PARAMS, PUBLISHED_ROUNDED, PUBLISHED_SPLIT, get_preset
from .recipes import (
    REGIMES,
    TRAINING_SHAPE,
    arrangement,
    decoder_stack,
    encoder_stack,
    live_config,
    recipe_2017,
    recipe_llama,
    regime_recipe,
    small_training_config,
)

__all__ = [
    "CHOICES",
    "REGIMES",
    "regime_recipe",
    "ConfigError",
    "FFN_RULES",
    "HFConfigWarning",
    "INIT_STD",
    "LIMITS",
    "MAX_BATCH",
    "MAX_CONFIG_BYTES",
    "MINIMUMS",
    "ModelConfig",
    "PRESETS",
    "PUBLISHED_PARAMS",
    "PUBLISHED_ROUNDED",
    "PUBLISHED_SPLIT",
    "TRAINING_SHAPE",
    "apply_overrides",
    "coerce_field",
    "detect_ffn_rule",
    "ffn_from_rule",
    "arrangement",
    "decoder_stack",
    "encoder_stack",
    "get_preset",
    "live_config",
    "llama_ffn_hidden",
    "load_config_file",
    "parse_config_json",
    "parse_override",
    "read_bounded",
    "read_hf_config",
    "recipe_2017",
    "recipe_llama",
    "require_decoder_only",
    "seed_ffn_hidden",
    "small_training_config",
]
