"""ModelConfig's ``vision`` field read and checked: a ``VisionTower`` already, a mapping of its
fields (our JSON), or that mapping as JSON text (``--set``, the URL); None for a text-only model.
Every rule broken is one ConfigError naming ``vision`` and the rule."""

from __future__ import annotations

from dataclasses import MISSING, fields

from ..errors import ConfigError
from . import messages
from .field_rules import json_object
from .fields import PROJECTOR_KINDS, VISION_KINDS, ModelFields, VisionTower

VISION_RULE = 'a JSON object of VisionTower fields such as {"kind": "clip", "hidden_size": 1024, …}, or null'
# the whole-number fields and their bounds (beyond any published tower: a typo)
_SIZES = {
    "hidden_size": (1, 65_536),
    "n_layers": (1, 1_024),
    "n_heads": (1, 65_536),
    "intermediate_size": (1, 262_144),
    "patch_size": (1, 1_024),
    "image_size": (1, 65_536),
    "out_size": (1, 131_072),
    "channels": (1, 64),
    "feature_layers": (1, 1_024),
    "tokens_per_image": (0, 1_048_576),
    "temporal_patch_size": (1, 64),
    "merge_size": (1, 64),
    "window_size": (0, 65_536),
    "adapter_in": (0, 262_144),
    "adapter_out": (0, 262_144),
    "vision_output": (0, 262_144),
    "max_tiles": (0, 1_024),
    "position_table": (0, 1_048_576),
}
_FLAGS = ("projector_bias", "keep_class_token", "head")
_NAMES = {f.name for f in fields(VisionTower)}


def _fail(rule: str) -> ConfigError:
    return ConfigError(f"vision: {rule}", field="vision")


def vision_of(value: object) -> VisionTower | None:
    """``vision`` as a VisionTower: one already, or its fields as a JSON object
    (``field_rules.json_object``); None for a text-only model."""
    if isinstance(value, VisionTower):
        return value
    value = json_object("vision", value, VISION_RULE)
    if value is None:
        return None
    unknown = [key for key in value if key not in _NAMES]
    if unknown:
        raise _fail(
            f"unknown key(s) {messages.name_keys(unknown)}; {messages.known_names(unknown[0], _NAMES)}"
        )
    missing = sorted(f.name for f in fields(VisionTower) if f.default is MISSING and f.name not in value)
    if missing:
        raise _fail(f"needs {', '.join(missing)}")
    data = dict(value)
    if "full_attention_layers" in data:
        layers = data["full_attention_layers"]
        if not isinstance(layers, (list, tuple)):
            raise _fail(f"full_attention_layers={messages.shown(layers)} must be a list of block indices")
        data["full_attention_layers"] = tuple(layers)
    return VisionTower(**data)


def check_vision(cfg: ModelFields) -> None:
    """``cfg.vision`` read (``vision_of``) and held to its rules: a known tower and projector,
    sizes in bounds, heads dividing the width, whole patches in the image, the projector ending
    at the text decoder's width, Qwen2.5-VL's full-attention blocks among its blocks."""
    tower = vision_of(cfg.vision)
    object.__setattr__(cfg, "vision", tower)
    if tower is None:
        return
    if tower.kind not in VISION_KINDS:
        raise _fail(f"kind={messages.shown(tower.kind)} must be one of {', '.join(map(repr, VISION_KINDS))}")
    if tower.projector not in PROJECTOR_KINDS:
        kinds = ", ".join(map(repr, PROJECTOR_KINDS))
        raise _fail(f"projector={messages.shown(tower.projector)} must be one of {kinds}")
    for name, (low, high) in _SIZES.items():
        value = getattr(tower, name)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise _fail(f"{name}={messages.shown(value)} must be a whole number in [{low}, {high:,}]")
    for name in _FLAGS:
        if not isinstance(getattr(tower, name), bool):
            raise _fail(f"{name}={messages.shown(getattr(tower, name))} must be true or false")
    if tower.hidden_size % tower.n_heads:
        raise _fail(f"hidden_size={tower.hidden_size} is not divisible by n_heads={tower.n_heads}")
    side = tower.patch_size * tower.merge_size
    if tower.image_size % side:
        raise _fail(f"image_size={tower.image_size} is not a whole number of {side}-pixel patches")
    if tower.out_size != cfg.d_model:
        raise _fail(
            f"out_size={tower.out_size} must equal d_model={cfg.d_model} "
            "(the projector feeds the text decoder)"
        )
    if any(not isinstance(i, int) or not 0 <= i < tower.n_layers for i in tower.full_attention_layers):
        raise _fail(
            f"full_attention_layers={messages.shown(list(tower.full_attention_layers))} must be block "
            f"indices below n_layers={tower.n_layers}"
        )
    if tower.projector == "gemma3" and tower.tokens_per_image < 1:
        raise _fail(f"tokens_per_image={tower.tokens_per_image} must be at least 1 (Gemma 3's pooled tokens)")
