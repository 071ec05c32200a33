"""A multimodal wrapper's ``vision_config`` (and its own projector keys) read as ModelConfig's
``vision`` (a VisionTower's fields), each tower kind with its config class's defaults for keys
left out (transformers 5): LLaVA's CLIPVisionConfig (LlavaConfig's own defaults: ViT-L/14 at
336 px), Gemma 3's SiglipVisionConfig, Qwen2.5-VL's Qwen2_5_VLVisionConfig, Mistral 3's
PixtralVisionConfig, Llama 4's Llama4VisionConfig, Qwen3.5's Qwen3_5VisionConfig. What the lab
does not model is refused by name: a LLaVA tower other than CLIP (likewise Mistral 3's Pixtral,
Llama 4's own), a projector activation other than GELU, a pixel shuffle other than 1 / a whole
number. The counts are ``llama_lab.analysis.vision``'s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import ConfigError
from ..fields import VisionTower
from ..messages import shown

# each kind's vision_config model_type and its config class's defaults (transformers 5)
CLIP_LLAVA = dict(  # LlavaConfig's SubConfigSpec for clip_vision_model
    hidden_size=1024,
    intermediate_size=4096,
    num_hidden_layers=24,
    num_attention_heads=16,
    patch_size=14,
    image_size=336,
    num_channels=3,
)
SIGLIP = dict(  # SiglipVisionConfig
    hidden_size=768,
    intermediate_size=3072,
    num_hidden_layers=12,
    num_attention_heads=12,
    patch_size=16,
    image_size=224,
    num_channels=3,
    vision_use_head=True,
)
QWEN2_5_VL = dict(  # Qwen2_5_VLVisionConfig
    hidden_size=3584,
    intermediate_size=3420,
    depth=32,
    num_heads=16,
    patch_size=14,
    in_channels=3,
    spatial_merge_size=2,
    temporal_patch_size=2,
    window_size=112,
    out_hidden_size=3584,
    fullatt_block_indexes=[7, 15, 23, 31],
)
PIXTRAL = dict(  # PixtralVisionConfig
    hidden_size=1024,
    intermediate_size=4096,
    num_hidden_layers=24,
    num_attention_heads=16,
    patch_size=16,
    image_size=1024,
    num_channels=3,
)
LLAMA4 = dict(  # Llama4VisionConfig
    hidden_size=768,
    intermediate_size=5632,
    num_hidden_layers=34,
    num_attention_heads=16,
    patch_size=14,
    image_size=448,
    num_channels=3,
    pixel_shuffle_ratio=0.5,
    projector_input_dim=4096,
    projector_output_dim=4096,
    vision_output_dim=7680,
)
LLAMA4_MAX_TILES = 16  # Llama4ImageProcessor's max_patches
QWEN3_5 = dict(  # Qwen3_5VisionConfig (Qwen3_5MoeVisionConfig's are the same)
    hidden_size=1152,
    intermediate_size=4304,
    depth=27,
    num_heads=16,
    patch_size=16,
    in_channels=3,
    spatial_merge_size=2,
    temporal_patch_size=2,
    out_hidden_size=3584,
    num_position_embeddings=2304,
)
# Qwen3.5's default image side: 512 × 512 = 1,024 patches of 16, 256 tokens (as Qwen2.5-VL's 448)
QWEN3_5_DEFAULT_IMAGE = 512
# Qwen2.5-VL's resolution is dynamic: the side (pixels) analyze assumes unless told (--image-size),
# 448 × 448 = 1,024 patches, 256 tokens
QWEN_DEFAULT_IMAGE = 448


def _value(config: Mapping[str, Any], defaults: Mapping[str, Any], key: str) -> Any:
    value = config.get(key)
    return defaults[key] if value is None else value


def _square(name: str, value: Any) -> int:
    """A size transformers takes as an int or a [h, w] pair: the lab's towers are square."""
    if isinstance(value, (list, tuple)):
        if len(value) != 2 or value[0] != value[1]:
            raise ConfigError(
                f"vision_config {name}={shown(value)}: only square sizes are modelled", field="vision"
            )
        value = value[0]
    return value


def read_vision(data: Mapping[str, Any], kind: str, d_model: int) -> dict[str, Any]:
    """The VisionTower fields of wrapper ``data`` whose tower is ``kind``; ``d_model`` is the text
    decoder's width, where every projector ends."""
    config = data.get("vision_config")
    config = {} if config is None else config
    if not isinstance(config, Mapping):
        raise ConfigError(f"vision_config={shown(config)} must be a JSON object", field="vision")
    named = config.get("model_type")
    expected = {"clip": "clip_vision_model", "pixtral": "pixtral", "llama4": "llama4_vision_model"}.get(kind)
    if expected is not None and named not in (None, expected):
        wrapper = {"clip": "LLaVA", "pixtral": "Mistral 3", "llama4": "Llama 4"}[kind]
        raise ConfigError(
            f"vision_config model_type={shown(named)}: LLaMA Lab models {wrapper} with its "
            f"{expected} tower only",
            field="vision",
        )
    if kind == "clip":
        return _llava(data, config, d_model)
    if kind == "siglip":
        return _gemma3(data, config, d_model)
    if kind == "pixtral":
        return _mistral3(data, config, d_model)
    if kind == "llama4":
        return _llama4(config, d_model)
    if kind == "qwen3_5":
        return _qwen3_5(config, d_model)
    return _qwen2_5_vl(config, d_model)


def _tower(config: Mapping[str, Any], defaults: Mapping[str, Any], kind: str, **names: str) -> dict[str, Any]:
    """The fields every tower has, read under the config class's key names (``names``)."""
    keys = {
        "hidden_size": "hidden_size",
        "n_layers": "num_hidden_layers",
        "n_heads": "num_attention_heads",
        "intermediate_size": "intermediate_size",
        "patch_size": "patch_size",
        "channels": "num_channels",
        **names,
    }
    out: dict[str, Any] = {"kind": kind}
    for field, key in keys.items():
        out[field] = _square(key, _value(config, defaults, key))
    return out


def _gelu_projector(data: Mapping[str, Any], wrapper: str) -> None:
    act = data.get("projector_hidden_act", "gelu")
    if act != "gelu":
        raise ConfigError(
            f"projector_hidden_act={shown(act)} is not modelled ({wrapper}'s projector is a GELU MLP)",
            field="vision",
        )


def _feature_layers(data: Mapping[str, Any], default: int) -> int:
    """How many layers' states the projector takes, concatenated (vision_feature_layer a list)."""
    layers = data.get("vision_feature_layer", default)
    return len(layers) if isinstance(layers, (list, tuple)) else 1


def _llava(data: Mapping[str, Any], config: Mapping[str, Any], d_model: int) -> dict[str, Any]:
    """LLaVA: CLIP, and LlavaMultiModalProjector (linear_1 over the selected layers' states
    concatenated, GELU, linear_2)."""
    _gelu_projector(data, "LLaVA")
    strategy = data.get("vision_feature_select_strategy", "default")
    if strategy not in ("default", "full"):
        raise ConfigError(
            f"vision_feature_select_strategy={shown(strategy)} must be 'default' or 'full'", field="vision"
        )
    return dict(
        **_tower(config, CLIP_LLAVA, "clip"),
        image_size=_square("image_size", _value(config, CLIP_LLAVA, "image_size")),
        projector="llava",
        out_size=d_model,
        projector_bias=data.get("multimodal_projector_bias", True),
        feature_layers=_feature_layers(data, -2),
        keep_class_token=strategy == "full",
    )


def _mistral3(data: Mapping[str, Any], config: Mapping[str, Any], d_model: int) -> dict[str, Any]:
    """Mistral 3: Pixtral, and Mistral3MultiModalProjector (RMSNorm, the patch merger over
    spatial_merge_size² patches, linear_1, GELU, linear_2; no biases by default)."""
    _gelu_projector(data, "Mistral 3")
    return dict(
        **_tower(config, PIXTRAL, "pixtral"),
        image_size=_square("image_size", _value(config, PIXTRAL, "image_size")),
        projector="mistral3",
        out_size=d_model,
        projector_bias=data.get("multimodal_projector_bias", False),
        feature_layers=_feature_layers(data, -1),
        merge_size=data.get("spatial_merge_size", 2),
    )


def _gemma3(data: Mapping[str, Any], config: Mapping[str, Any], d_model: int) -> dict[str, Any]:
    """Gemma 3: SigLIP, and Gemma3MultiModalProjector (pool to mm_tokens_per_image, RMSNorm, one
    matrix)."""
    tokens = data.get("mm_tokens_per_image")
    return dict(
        **_tower(config, SIGLIP, "siglip"),
        image_size=_square("image_size", _value(config, SIGLIP, "image_size")),
        projector="gemma3",
        out_size=d_model,
        head=_value(config, SIGLIP, "vision_use_head"),
        tokens_per_image=256 if tokens is None else tokens,
    )


def _llama4(config: Mapping[str, Any], d_model: int) -> dict[str, Any]:
    """Llama 4: Llama4VisionModel (its pixel-shuffle adapter) and Llama4MultiModalProjector's
    linear_1 into the text decoder; a pixel_shuffle_ratio other than 1 / a whole number refused."""
    ratio = _value(config, LLAMA4, "pixel_shuffle_ratio")
    merge = round(1 / ratio) if isinstance(ratio, (int, float)) and ratio > 0 else 0
    if merge < 1 or abs(merge * ratio - 1) > 1e-9:
        raise ConfigError(
            f"vision_config pixel_shuffle_ratio={shown(ratio)} is not modelled (1 / a whole number: 0.5)",
            field="vision",
        )
    return dict(
        **_tower(config, LLAMA4, "llama4"),
        image_size=_square("image_size", _value(config, LLAMA4, "image_size")),
        projector="llama4",
        out_size=d_model,
        projector_bias=False,
        merge_size=merge,
        adapter_in=_value(config, LLAMA4, "projector_input_dim"),
        adapter_out=_value(config, LLAMA4, "projector_output_dim"),
        vision_output=_value(config, LLAMA4, "vision_output_dim"),
        max_tiles=LLAMA4_MAX_TILES,
    )


def _qwen3_5(config: Mapping[str, Any], d_model: int) -> dict[str, Any]:
    """Qwen3.5: Qwen3_5VisionModel (a learned position grid, LayerNorm blocks attending fully)
    whose merger is the projector; out_hidden_size must be the text decoder's width."""
    _out_is_text(config, QWEN3_5, d_model)
    return dict(
        **_tower(config, QWEN3_5, "qwen3_5", n_layers="depth", n_heads="num_heads", channels="in_channels"),
        image_size=QWEN3_5_DEFAULT_IMAGE,
        projector="qwen3_5",
        out_size=d_model,
        temporal_patch_size=_square("temporal_patch_size", _value(config, QWEN3_5, "temporal_patch_size")),
        merge_size=_value(config, QWEN3_5, "spatial_merge_size"),
        position_table=_value(config, QWEN3_5, "num_position_embeddings"),
    )


def _out_is_text(config: Mapping[str, Any], defaults: Mapping[str, Any], d_model: int) -> None:
    out = _value(config, defaults, "out_hidden_size")
    if out != d_model:
        raise ConfigError(
            f"vision_config out_hidden_size={shown(out)} must equal the text decoder's hidden_size={d_model}",
            field="vision",
        )


def _qwen2_5_vl(config: Mapping[str, Any], d_model: int) -> dict[str, Any]:
    """Qwen2.5-VL: its ViT (window attention, fullatt_block_indexes attending fully) whose patch
    merger is the projector; out_hidden_size must be the text decoder's width."""
    _out_is_text(config, QWEN2_5_VL, d_model)
    return dict(
        **_tower(
            config,
            QWEN2_5_VL,
            "qwen2_5_vl",
            n_layers="depth",
            n_heads="num_heads",
            channels="in_channels",
        ),
        image_size=QWEN_DEFAULT_IMAGE,
        projector="qwen2_5_vl",
        out_size=d_model,
        temporal_patch_size=_square("temporal_patch_size", _value(config, QWEN2_5_VL, "temporal_patch_size")),
        merge_size=_value(config, QWEN2_5_VL, "spatial_merge_size"),
        window_size=_value(config, QWEN2_5_VL, "window_size"),
        full_attention_layers=tuple(_value(config, QWEN2_5_VL, "fullatt_block_indexes")),
    )


def write_vision(tower: VisionTower, text: dict[str, Any]) -> dict[str, Any]:
    """The wrapper config.json around ``text`` (the text decoder's) for ``tower``: LLaVA's only
    (writing Gemma 3's or Qwen2.5-VL's wrapper is refused by name)."""
    if tower.projector != "llava":
        raise ConfigError(
            f"to_hf_config writes a LLaVA wrapper only; a {tower.kind} tower with the "
            f"{tower.projector} projector is read, not written (set vision=null for its text decoder)",
            field="vision",
        )
    k = tower.feature_layers
    return {
        "architectures": ["LlavaForConditionalGeneration"],
        "model_type": "llava",
        "text_config": {key: value for key, value in text.items() if key != "architectures"},
        "vision_config": {
            "model_type": "clip_vision_model",
            "hidden_size": tower.hidden_size,
            "intermediate_size": tower.intermediate_size,
            "num_hidden_layers": tower.n_layers,
            "num_attention_heads": tower.n_heads,
            "patch_size": tower.patch_size,
            "image_size": tower.image_size,
            "num_channels": tower.channels,
        },
        "projector_hidden_act": "gelu",
        "multimodal_projector_bias": tower.projector_bias,
        "vision_feature_layer": -2 if k == 1 else list(range(-k - 1, -1)),
        "vision_feature_select_strategy": "full" if tower.keep_class_token else "default",
        "tie_word_embeddings": text["tie_word_embeddings"],
    }
