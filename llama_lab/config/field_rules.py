"""The rules every ModelConfig's own fields keep, checked as it is made: integer sizes within
their bounds and dividing as attention needs (``check_sizes``), choices, booleans and finite
numbers (``check_choices_and_numbers``, ``check_number``), RoPE's even rotation (``check_rope``),
its scaling (``check_rope_scaling``) and the layer-set strings (``layer_set``); the rules of each
feature's fields are ``feature_rules``'. Each raises ConfigError naming the field, its value and the rule."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from . import messages
from .bounds import CHOICES, LIMITS, MINIMUMS
from .fields import ROPE_SCALING_KEYS, ModelFields, RopeScaling
from .messages import check_int


def layer_set(spec: str, n_layers: int, name: str) -> tuple[bool, ...]:
    """Which of ``n_layers`` blocks a layer-set string selects: "all", "none", "from:K" (K and
    later), "every:N" (blocks N-1, 2N-1, …: every N-th) or a comma list "0,3,5"."""
    if not isinstance(spec, str):
        raise ConfigError(
            f"{name}={spec!r} must be a string such as 'all', 'none', 'from:28', 'every:2' or '0,3,5'",
            field=name,
        )
    text = spec.strip().replace(" ", "")
    if text in ("all", ""):
        return (True,) * n_layers if text == "all" else (False,) * n_layers
    if text == "none":
        return (False,) * n_layers
    kind, _, number = text.partition(":")
    try:
        if kind in ("from", "every") and number:
            k = int(number)
            if k < (0 if kind == "from" else 1):
                raise ValueError
            return tuple((i >= k) if kind == "from" else ((i + 1) % k == 0) for i in range(n_layers))
        chosen = {int(part) for part in text.split(",")}
    except ValueError:
        raise ConfigError(
            f"{name}={spec!r} must be 'all', 'none', 'from:K', 'every:N' (N ≥ 1) "
            f"or a comma list of block indices",
            field=name,
        ) from None
    outside = sorted(i for i in chosen if not 0 <= i < n_layers)
    if outside:
        raise ConfigError(f"{name}={spec!r} names block(s) {outside} outside 0..{n_layers - 1}", field=name)
    return tuple(i in chosen for i in range(n_layers))


# RoPE's base θ sets the frequencies θ^(-2i/d), computed in float32: a base float32 cannot hold
# (1e-300 is 0 there, so θ^(-2i/d) is infinite: the angles, the scores and the loss become NaN
# before any update) is refused. Every published model uses 10,000 or more.
FLOAT32_TINY, FLOAT32_MAX = 1.1754943508222875e-38, 3.4028234663852886e38
ROPE_BASE_RULE = (
    "must lie in float32's range (1.2e-38 to 3.4e38): RoPE's frequencies base^(-2i/d) are computed in "
    "float32, and a base it cannot hold makes them infinite and the loss NaN"
)


def check_sizes(cfg: ModelFields) -> None:
    """Every integer size within its bounds; heads that divide d_model and the KV heads."""
    for name in LIMITS:
        check_int(name, getattr(cfg, name), MINIMUMS.get(name, 1), LIMITS[name])
    if cfg.head_dim is None:  # head_dim = d_model / n_heads needs exact division
        if cfg.n_heads > cfg.d_model:
            raise ConfigError(
                f"n_heads={cfg.n_heads} exceeds d_model={cfg.d_model} "
                f"(each head needs at least one dimension)",
                field="n_heads",
                also=("d_model",),
            )
        if cfg.d_model % cfg.n_heads:
            raise ConfigError(
                f"d_model={cfg.d_model} is not divisible by n_heads={cfg.n_heads}",
                field="d_model",
                also=("n_heads",),
            )
    if cfg.n_heads % cfg.n_kv_heads and not cfg.kv_lora_rank:  # MLA: feature_rules.check_mla's rule
        raise ConfigError(
            f"n_heads={cfg.n_heads} is not divisible by n_kv_heads={cfg.n_kv_heads}",
            field="n_heads",
            also=("n_kv_heads",),
        )


def check_choices_and_numbers(cfg: ModelFields) -> None:
    """Every choice among its options, every switch a bool, every number finite (``check_number``)."""
    for name, allowed in CHOICES.items():
        value = getattr(cfg, name)
        if value not in allowed:
            raise ConfigError(f"{name}={value!r} must be one of {', '.join(map(repr, allowed))}", field=name)
    for name in (
        "bias",
        "final_norm",
        "tie_embeddings",
        "embed_scale",
        "qk_norm",
        "moe_renormalize",
        "rope_interleave",
        "attention_sinks",
        "norm_plus_one",
        "fused_keys",
        "linear_grouped_proj",
        "attn_output_gate",
        "shared_expert_gate",
        "chunked_attention",
        "moe_group_top2",
        "causal",
        "embed_norm",
        "pooler",
        "lm_head",
    ):
        if not isinstance(getattr(cfg, name), bool):
            raise ConfigError(f"{name}={getattr(cfg, name)!r} must be true or false", field=name)
    for name in (
        "rope_theta",
        "norm_eps",
        "routed_scaling",
        "swiglu_limit",
        "swiglu_alpha",
        "embedding_multiplier",
        "residual_multiplier",
        "logits_scaling",
    ):
        check_number(cfg, name)
    for name in ("attn_softcap", "logit_softcap", "attn_temperature_scale"):
        check_number(cfg, name, zero="0 turns it off")
    check_number(cfg, "partial_rotary_factor")
    if cfg.partial_rotary_factor > 1:
        raise ConfigError(
            f"partial_rotary_factor={cfg.partial_rotary_factor} must be at most 1 (a share of "
            f"each head's dimensions)",
            field="partial_rotary_factor",
        )


def check_number(cfg: ModelFields, name: str, zero: str | None = None) -> None:
    """A finite float > 0 (≥ 0 where ``zero`` says what 0 means), stored as a float."""
    value = getattr(cfg, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name}={value!r} must be a number", field=name)
    if isinstance(value, int) and abs(value) > 2**1023:  # beyond every float
        raise ConfigError(
            f"{name}={messages.shown(value)} is beyond the range of a float (±1.8e308)", field=name
        )
    if name in ("rope_theta", "rope_local_theta") and not FLOAT32_TINY <= value <= FLOAT32_MAX:
        raise ConfigError(f"{name}={value} {ROPE_BASE_RULE}", field=name)
    if not math.isfinite(value) or value < 0 or (value == 0 and zero is None):
        rule = f"≥ 0 ({zero})" if zero else "> 0"
        raise ConfigError(f"{name}={value} must be a finite number {rule}", field=name)
    if name == "norm_eps" and value >= 1:
        raise ConfigError(f"norm_eps={value} must be < 1 (it is a small stabiliser)", field="norm_eps")
    object.__setattr__(cfg, name, float(value))


def check_rope(cfg: ModelFields) -> None:
    """RoPE rotates pairs of dimensions: an even head_dim, and an even rotated share ≥ 2."""
    if cfg.pos_encoding == "rope" and not cfg.is_mla and cfg.head_dim % 2:
        implied = " (d_model/n_heads)" if cfg.head_dim == cfg.d_model // cfg.n_heads else ""
        raise ConfigError(
            f"head_dim={cfg.head_dim}{implied} must be even for "
            f"pos_encoding='rope' (RoPE rotates pairs of dimensions)",
            field="head_dim",
            also=(("n_heads", "d_model") if implied else ()) + ("pos_encoding",),
        )
    if cfg.pos_encoding == "rope" and not cfg.is_mla and (cfg.rope_dim % 2 or cfg.rope_dim < 2):
        raise ConfigError(
            f"partial_rotary_factor={cfg.partial_rotary_factor} rotates {cfg.rope_dim} of "
            f"head_dim={cfg.head_dim} dimensions: RoPE needs an even number ≥ 2",
            field="partial_rotary_factor",
            also=("head_dim",),
        )


ROPE_SCALING_RULE = 'a JSON object such as {"rope_type": "linear", "factor": 2.0}, or null for plain RoPE'
_WHOLE = ("original_max_position_embeddings",)
_FACTOR_LISTS = ("short_factor", "long_factor")
# rope_scaling's numbers that must be > 0 (the others, yarn's betas and mscales, ≥ 0)
_POSITIVE = (
    "factor",
    "original_max_position_embeddings",
    "low_freq_factor",
    "high_freq_factor",
    "attention_factor",
)


def json_object(name: str, value: object, rule: str) -> Mapping | None:
    """A field held as a JSON object (rope_scaling, vision): a mapping (our JSON), or that
    mapping as JSON text (``--set``, the URL); None, "" or "none" for none. ConfigError naming
    ``name`` and ``rule`` otherwise."""
    if isinstance(value, str):
        if value.strip().lower() in ("", "none", "null"):
            return None
        try:
            value = json.loads(value)
        except ValueError:
            raise ConfigError(f"{name}={messages.shown(value)} must be {rule}", field=name) from None
    if value is not None and not isinstance(value, Mapping):
        raise ConfigError(f"{name}={messages.shown(value)} must be {rule}", field=name)
    return value


def rope_scaling_of(value: object) -> RopeScaling | None:
    """``rope_scaling`` as a RopeScaling: one already, or its keys as a JSON object
    (``json_object``); None for plain RoPE."""
    if isinstance(value, RopeScaling):
        return value
    value = json_object("rope_scaling", value, ROPE_SCALING_RULE)
    if value is None:
        return None
    kind = value.get("rope_type")
    if kind not in ROPE_SCALING_KEYS:
        raise ConfigError(
            f"rope_scaling rope_type={messages.shown(kind)} must be one of "
            f"{', '.join(map(repr, ROPE_SCALING_KEYS))} (transformers' scaled RoPE types)",
            field="rope_scaling",
        )
    required, optional = ROPE_SCALING_KEYS[kind]
    unknown = [key for key in value if key != "rope_type" and key not in required | optional]
    if unknown:
        raise ConfigError(
            f"rope_scaling key(s) {messages.name_keys(unknown)} are not read by rope_type {kind!r} "
            f"(it takes {', '.join(sorted(required | optional))})",
            field="rope_scaling",
        )
    missing = sorted(key for key in required if value.get(key) is None)
    if missing:
        raise ConfigError(
            f"rope_scaling of rope_type {kind!r} needs {', '.join(missing)} (transformers raises without)",
            field="rope_scaling",
        )
    return RopeScaling(**{k: _rope_value(k, v) for k, v in value.items()})


def _rope_value(key: str, value: Any) -> Any:
    """One rope_scaling value checked: a finite number (> 0 where _POSITIVE, a whole number for
    the original context), a bool for truncate, LongRoPE's lists as tuples of positive numbers."""
    where = f"rope_scaling {key}={messages.shown(value)}"
    if key == "rope_type" or value is None:
        return value
    if key == "truncate":
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false", field="rope_scaling")
        return value
    if key in _FACTOR_LISTS:
        if not isinstance(value, (list, tuple)) or not all(_finite(v) and v > 0 for v in value):
            raise ConfigError(f"{where} must be a list of positive numbers", field="rope_scaling")
        return tuple(float(v) for v in value)
    if not _finite(value) or value < 0 or (value == 0 and key in _POSITIVE):
        rule = "> 0" if key in _POSITIVE else "≥ 0"
        raise ConfigError(f"{where} must be a finite number {rule}", field="rope_scaling")
    if key in _WHOLE:
        if value != int(value) or value > LIMITS["max_seq_len"]:
            raise ConfigError(
                f"{where} must be a whole number of positions up to {LIMITS['max_seq_len']:,}",
                field="rope_scaling",
            )
        return int(value)
    return float(value)


def _finite(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def check_rope_scaling(cfg: ModelFields) -> None:
    """rope_scaling read as a RopeScaling (``rope_scaling_of``) and held to the model: RoPE on,
    LongRoPE's lists one number per rotated pair."""
    scaling = rope_scaling_of(cfg.rope_scaling)
    object.__setattr__(cfg, "rope_scaling", scaling)
    if not isinstance(cfg.rope_scaling_local, bool):
        raise ConfigError(
            f"rope_scaling_local={cfg.rope_scaling_local!r} must be true or false", field="rope_scaling_local"
        )
    if scaling is None:
        return
    if cfg.pos_encoding != "rope":
        raise ConfigError(
            f"rope_scaling needs pos_encoding='rope' (it is {cfg.pos_encoding!r})",
            field="rope_scaling",
            also=("pos_encoding",),
        )
    pairs = cfg.rope_dim // 2
    for key in _FACTOR_LISTS:
        values = getattr(scaling, key)
        if values is not None and len(values) != pairs:
            raise ConfigError(
                f"rope_scaling {key} has {len(values)} numbers; it needs one per rotated pair: "
                f"rope_dim / 2 = {pairs}",
                field="rope_scaling",
            )
