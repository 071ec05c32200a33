"""A multimodal model's image encoder and projector (``ModelConfig.vision``, a VisionTower): its
parameters as transformers' module holds them, the tokens one image adds to the text decoder's
sequence, and the encoder's FLOPs per image (2 per multiply-add, matmuls and the patch
convolution: what ``torch.utils.flop_counter.FlopCounterMode`` counts). Every per-kind rule is
here, one function each:

- ``clip`` (LLaVA-1.5, ``CLIPVisionModel``): a class token, learned positions for the patches and
  it, LayerNorm before the blocks (``pre_layrnorm``) and after them, biased q/k/v/out and a
  two-matrix GELU MLP; LLaVA's projector ``linear_1 → GELU → linear_2``, fed the patches of the
  second-to-last layer (the class token dropped: ``vision_feature_select_strategy`` "default").
- ``siglip`` (Gemma 3, ``SiglipVisionModel``): no class token, a biased patch convolution, the
  same blocks, a final LayerNorm, an attention-pooling head when ``head``; Gemma 3's projector
  average-pools the patch grid to ``tokens_per_image``, RMS-normalises (γ) and multiplies by one
  matrix (``mm_input_projection_weight``, no bias).
- ``qwen2_5_vl`` (``Qwen2_5_VisionTransformerPretrainedModel``): a 3-D patch convolution (two
  frames; an image is repeated), RMSNorm blocks with a fused biased qkv, a biased SwiGLU MLP,
  window attention except in ``full_attention_layers``, and the patch merger (RMSNorm, then an
  MLP over 2×2 merged patches) as its projector. Its resolution is dynamic: the tokens follow
  the image's size (``image_size`` × ``image_size`` unless told).
- ``pixtral`` (Mistral 3, ``PixtralVisionModel``): a patch convolution without bias, RMSNorm
  before the blocks and in them, unbiased q/k/v/o and SwiGLU MLP, 2-D RoPE (no parameters);
  Mistral 3's projector: RMSNorm, the patch merger (merge² patches → one, one matrix) and a
  two-layer GELU MLP. Dynamic resolution up to ``image_size`` a side; each row of merged patches
  ends in an [IMG_BREAK] (the last in [IMG_END]) token.
- ``llama4`` (Llama 4, ``Llama4VisionModel``): CLIP's blocks (a class token, appended last and
  dropped after the blocks, learned positions, LayerNorm before and after), an unbiased linear
  patch embedding; its adapter (a pixel shuffle of ratio 1 / ``merge_size``, then two unbiased
  GELU matrices) and the unbiased ``linear_1`` are the projector. An image is split into tiles of
  ``image_size`` (at most ``max_tiles``), plus a global tile when there are several; each tile
  runs the encoder.
- ``qwen3_5`` (Qwen3.5, ``Qwen3_5VisionModel``): a biased Conv3d over two frames, a learned
  position grid of ``position_table`` entries (interpolated: no matmul), CLIP's biased blocks
  (fused qkv, LayerNorm, a two-matrix GELU MLP) attending fully, and its merger (LayerNorm, then
  an MLP over 2×2 merged patches) as the projector. Dynamic resolution as Qwen2.5-VL's.

The live model builds the text decoder only; these counts are the tower's."""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..config import ModelConfig
from ..config.fields import VisionTower
from ..errors import AnalysisError


def _block_params(t: VisionTower) -> int:
    """One encoder block: q, k, v and the output projection with biases, the MLP (two biased
    matrices, three for Qwen2.5-VL's SwiGLU) and two norms (LayerNorm γ and β; RMSNorm γ)."""
    H, F = t.hidden_size, t.intermediate_size
    if t.kind == "pixtral":  # no biases; two RMSNorm γ
        return 4 * H * H + 3 * H * F + 2 * H
    attention = 4 * (H * H + H)
    if t.kind == "qwen2_5_vl":
        return attention + 3 * H * F + 2 * F + H + 2 * H
    return attention + 2 * H * F + F + H + 2 * 2 * H


def patches(t: VisionTower) -> int:
    """Patches of an image at the tower's own size: (image_size / patch_size)²."""
    return (t.image_size // t.patch_size) ** 2


def vision_params(t: VisionTower) -> int:
    """The image encoder's parameters (Qwen2.5-VL's merger excluded: ``projector_params``)."""
    H, channels, p = t.hidden_size, t.channels, t.patch_size
    blocks = t.n_layers * _block_params(t)
    if t.kind == "clip":  # class embedding, patch conv (no bias), positions (+1), pre and post LayerNorm
        return H + channels * p * p * H + (patches(t) + 1) * H + 2 * H + blocks + 2 * H
    if t.kind == "siglip":  # patch conv with bias, positions, post LayerNorm, optional pooling head
        F = t.intermediate_size
        head = H + (3 * H * H + 3 * H) + (H * H + H) + 2 * H + (2 * H * F + F + H) if t.head else 0
        return channels * p * p * H + H + patches(t) * H + blocks + 2 * H + head
    if t.kind == "pixtral":  # patch conv without bias, ln_pre γ; 2-D RoPE has no parameters
        return channels * p * p * H + H + blocks
    if t.kind == "qwen3_5":  # a biased Conv3d, the position grid; RoPE has no parameters
        return channels * t.temporal_patch_size * p * p * H + H + t.position_table * H + blocks
    if t.kind == "llama4":  # class embedding, positions (+1), linear patch embedding, two LayerNorms
        return H + (patches(t) + 1) * H + channels * p * p * H + 2 * 2 * H + blocks
    # qwen2_5_vl: a Conv3d over temporal_patch_size frames, no bias; RoPE has no parameters
    return channels * t.temporal_patch_size * p * p * H + blocks


def projector_params(t: VisionTower) -> int:
    """The projector from the tower's width into the text decoder's (``out_size``)."""
    H, C = t.hidden_size, t.out_size
    if t.projector == "llava":  # linear_1 (H · feature_layers → C), GELU, linear_2 (C → C)
        bias = 2 * C if t.projector_bias else 0
        return H * t.feature_layers * C + C * C + bias
    if t.projector == "gemma3":  # mm_soft_emb_norm γ (H), mm_input_projection_weight (H × C)
        return H + H * C
    if t.projector == "llama4":  # the adapter's fc1 and fc2, then linear_1; no biases
        return t.intermediate_size * t.adapter_in + t.adapter_out * t.adapter_out + t.vision_output * C
    if t.projector == "mistral3":  # norm γ, merging_layer (m²H → H), linear_1 (H·k → C), linear_2
        bias = 2 * C if t.projector_bias else 0
        return H + t.merge_size**2 * H * H + H * t.feature_layers * C + C * C + bias
    merged = t.merge_size**2 * H  # the merger: its norm (ln_q γ; Qwen3.5 LayerNorm γ, β), then
    norm = 2 * H if t.projector == "qwen3_5" else H  # m²H → m²H → C, with biases
    return norm + merged * merged + merged + merged * C + C


# the towers whose processors keep an image's size (dynamic resolution), by name
DYNAMIC = {"qwen2_5_vl": "Qwen2.5-VL", "qwen3_5": "Qwen3.5", "pixtral": "Pixtral", "llama4": "Llama 4"}


def _image_shape(t: VisionTower, size: tuple[int, int] | None) -> tuple[int, int]:
    """The image's (height, width) in pixels: ``size``, which only Qwen2.5-VL's dynamic
    resolution takes (LLaVA and Gemma 3 resize every image to their own square), else the
    tower's square."""
    if size is None:
        return t.image_size, t.image_size
    if t.kind not in DYNAMIC:
        raise AnalysisError(
            f"image size {size[0]}x{size[1]}: a {t.kind} tower's processor resizes every image to "
            f"{t.image_size}x{t.image_size}; only Qwen2.5-VL's and Pixtral's dynamic resolution "
            f"takes an image size"
        )
    side = t.image_size if t.kind == "llama4" else t.patch_size * t.merge_size  # Llama 4: whole tiles
    height, width = size
    if height < side or width < side or height % side or width % side:
        raise AnalysisError(
            f"image size {height}x{width} must be whole multiples of {side} pixels ({DYNAMIC[t.kind]}'s "
            f"processor resizes to them: patch {t.patch_size} × merge {t.merge_size})"
        )
    if t.kind == "llama4" and (height // side) * (width // side) > t.max_tiles:
        raise AnalysisError(
            f"image size {height}x{width}: {(height // side) * (width // side)} tiles of {side} "
            f"pixels; Llama 4's processor splits an image into at most {t.max_tiles}"
        )
    if t.kind == "pixtral" and max(height, width) > t.image_size:
        raise AnalysisError(
            f"image size {height}x{width}: Pixtral's processor resizes an image to at most "
            f"{t.image_size} pixels a side"
        )
    return height, width


def _grid(t: VisionTower, size: tuple[int, int] | None) -> tuple[int, int]:
    """Patches along the height and the width."""
    height, width = _image_shape(t, size)
    return height // t.patch_size, width // t.patch_size


def tiles(t: VisionTower, size: tuple[int, int] | None = None) -> tuple[int, int]:
    """Llama 4: the grid of image_size tiles an image is split into (rows, columns)."""
    height, width = _image_shape(t, size)
    return height // t.image_size, width // t.image_size


def image_tokens(t: VisionTower, size: tuple[int, int] | None = None) -> int:
    """Tokens one image adds to the text decoder's sequence: LLaVA (S/p)² (+1 with the class
    token kept), 576 for CLIP ViT-L/14 at 336 px; Gemma 3 its pooled grid, mm_tokens_per_image
    (256); Qwen2.5-VL (H/p)·(W/p)/merge² (Qwen2VLImageProcessor: one token per 2×2 patches);
    Pixtral r·(c + 1) for r × c merged patches (transformers' pixtral/processing_pixtral.py:
    a break token after each row); Llama 4 per tile (S/p)²/merge² (144), for each tile of the
    grid and the global one, with its separators and markers (llama4/processing_llama4.py)."""
    if t.projector == "gemma3":
        _image_shape(t, size)
        return t.tokens_per_image
    if t.kind == "llama4":  # Llama4Processor._prompt_split_image
        per_tile = patches(t) // t.merge_size**2
        across, down = tiles(t, size)[::-1]
        grid = down * across * per_tile + down * (across - 1) + down if down * across > 1 else 0
        return 1 + grid + 1 + per_tile + 1  # <|image_start|>, the tiles, <|image|>, global, <|image_end|>
    rows, cols = _grid(t, size)
    if t.kind == "clip":
        return rows * cols + (1 if t.keep_class_token else 0)
    if t.kind == "pixtral":  # PixtralProcessor: each merged row, then [IMG_BREAK] ([IMG_END] last)
        merged_rows, merged_cols = rows // t.merge_size, cols // t.merge_size
        return merged_rows * (merged_cols + 1)
    return rows * cols // t.merge_size**2


def _attention_flops(tokens: int, width: int) -> int:
    """Scores and the weighted sum of ``tokens`` queries over as many keys: 2 · 2·n²·H."""
    return 2 * 2 * tokens * tokens * width


def _qwen_windows(t: VisionTower, rows: int, cols: int) -> list[int]:
    """Patches in each attention window of Qwen2.5-VL (``get_window_index``): windows of
    window_size / merge / patch merged tokens a side, the last ones along each axis cut short."""
    side = t.window_size // t.merge_size // t.patch_size
    merged_rows, merged_cols = rows // t.merge_size, cols // t.merge_size

    def spans(n: int) -> list[int]:
        return [side] * (n // side) + ([n % side] if n % side else [])

    m2 = t.merge_size**2
    return [a * b * m2 for a in spans(merged_rows) for b in spans(merged_cols)]


@dataclass(frozen=True)
class VisionFlops:
    """One image through the encoder and the projector (2 FLOPs per multiply-add)."""

    patch_embedding: int
    projections: int  # q, k, v, out of every block
    attention_scores: int  # QKᵀ and the weighted sum (windows where Qwen2.5-VL has them)
    mlp: int
    projector: int

    @property
    def total(self) -> int:
        return self.patch_embedding + self.projections + self.attention_scores + self.mlp + self.projector


def vision_flops(t: VisionTower, size: tuple[int, int] | None = None) -> VisionFlops:
    """The encoder's FLOPs for one image (every block runs: LLaVA reads the second-to-last
    layer's states, but transformers' tower runs the last one too)."""
    if t.head:
        raise AnalysisError(
            "vision.head: the SigLIP attention-pooling head's FLOPs are not modelled (no wrapper "
            "LLaMA Lab reads uses it; Gemma 3 sets vision_use_head false)"
        )
    if t.kind == "llama4" and tiles(t, size) != (1, 1):  # every tile and the global one
        down, across = tiles(t, size)
        one = vision_flops(t)  # a tile: the tower at its own size
        return VisionFlops(*((down * across + 1) * getattr(one, f.name) for f in fields(VisionFlops)))
    H, F, L = t.hidden_size, t.intermediate_size, t.n_layers
    rows, cols = _grid(t, size)
    n = rows * cols  # patches
    tokens = n + 1 if t.kind in ("clip", "llama4") else n  # the class token rides along
    patch = 2 * n * t.channels * t.temporal_patch_size * t.patch_size**2 * H
    projections = L * 2 * tokens * 4 * H * H
    mlp = L * 2 * tokens * (3 if t.kind in ("qwen2_5_vl", "pixtral") else 2) * H * F
    if t.kind == "qwen2_5_vl" and t.window_size:
        full = len(t.full_attention_layers)
        windowed = sum(_attention_flops(w, H) for w in _qwen_windows(t, rows, cols))
        scores = full * _attention_flops(n, H) + (L - full) * windowed
    else:
        scores = L * _attention_flops(tokens, H)
    C = t.out_size
    if t.projector == "llava":
        fed = n + (1 if t.keep_class_token else 0)
        projector = 2 * fed * (H * t.feature_layers * C + C * C)
    elif t.projector == "gemma3":
        projector = 2 * t.tokens_per_image * H * C
    elif t.projector == "llama4":  # the shuffled patches (class token dropped): fc1, fc2, linear_1
        shuffled = n // t.merge_size**2
        projector = 2 * shuffled * (F * t.adapter_in + t.adapter_out**2 + t.vision_output * C)
    elif t.projector == "mistral3":  # over the merged tokens: merging_layer, linear_1, linear_2
        merged_tokens = n // t.merge_size**2
        projector = 2 * merged_tokens * (t.merge_size**2 * H * H + H * t.feature_layers * C + C * C)
    else:
        merged = t.merge_size**2 * H
        projector = 2 * (n // t.merge_size**2) * (merged * merged + merged * C)
    return VisionFlops(patch, projections, scores, mlp, projector)


def parse_image_size(text: str) -> tuple[int, int]:
    """``HxW`` (pixels) as (height, width); one number is a square."""
    parts = text.lower().replace("×", "x").split("x")
    try:
        values = [int(part) for part in parts]
    except ValueError:
        values = []
    if len(values) not in (1, 2) or min(values, default=0) < 1 or max(values) > 65_536:
        raise AnalysisError(f"image size {text!r} must be HxW in pixels (e.g. 448x448), each 1 to 65,536")
    return (values[0], values[-1])


def image_summary(
    cfg: ModelConfig, images: int, kv_bytes_per_token: int, size: tuple[int, int] | None = None
) -> dict:
    """What images cost a multimodal config: ``image_tokens``, the tower's and the projector's
    parameters, the encoder's FLOPs per image, an image's KV cache, and the ``images`` asked for."""
    t = cfg.vision
    if t is None:
        raise AnalysisError("images: this config has no vision tower (a text-only model takes no images)")
    tokens = image_tokens(t, size)
    flops = vision_flops(t, size)
    height, width = _image_shape(t, size)
    return {
        "kind": t.kind,
        "projector": t.projector,
        "image_size": [height, width],
        "image_tokens": tokens,
        "vision_params": vision_params(t),
        "projector_params": projector_params(t),
        "flops_per_image": flops.total,
        "flops_per_image_by_part": {
            "patch_embedding": flops.patch_embedding,
            "projections": flops.projections,
            "attention_scores": flops.attention_scores,
            "mlp": flops.mlp,
            "projector": flops.projector,
        },
        "kv_cache_bytes_per_image": tokens * kv_bytes_per_token,
        "images": images,
        "tokens_added": images * tokens,
    }


def check_images(images: int) -> int:
    if isinstance(images, bool) or not isinstance(images, int) or not 0 <= images <= 4096:
        raise AnalysisError(f"images={images!r} must be a whole number from 0 to 4,096")
    return images


def tokens_with_images(cfg: ModelConfig, seq_len: int, images: int, size: tuple[int, int] | None) -> int:
    """The text decoder's sequence: the prompt's ``seq_len`` text tokens and every image's."""
    if cfg.vision is None and (images or size is not None):
        raise AnalysisError("images: this config has no vision tower (a text-only model takes no images)")
    return seq_len + images * image_tokens(cfg.vision, size) if cfg.vision is not None else seq_len


def text_decoder_only(cfg: ModelConfig, surface: str) -> None:
    """The one refusal of every surface that models the text decoder alone (parallel layouts,
    predict train / decode, fine-tuning, sharding, live quantisation): a multimodal config
    would be answered short of its tower, so it is refused by name in one line."""
    if cfg.vision is not None:
        t = cfg.vision
        raise AnalysisError(
            f"{surface} models the text decoder only: this config's {t.kind} vision tower and "
            f"{t.projector} projector ({vision_params(t) + projector_params(t):,} parameters) are not "
            f"modelled there; analyze counts them (set vision=null for the text decoder alone)",
            field="vision",
        )


__all__ = [
    "VisionFlops",
    "check_images",
    "image_summary",
    "image_tokens",
    "parse_image_size",
    "patches",
    "projector_params",
    "text_decoder_only",
    "tokens_with_images",
    "vision_flops",
    "vision_params",
]
