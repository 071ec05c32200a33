"""LLaVA (``llava``, Liu et al. 2023; LLaVA-1.5: Liu et al. 2024): a vision encoder joined to a
language model — CLIP ViT-L/14 at 336 px, a two-layer GELU MLP projector, and a LLaMA text decoder
(Vicuna) whose sequence takes 576 image tokens per image. transformers' LlavaForConditionalGeneration
builds the text decoder from its text_config's own model_type (AutoConfig: llama here, read by
that family), the tower from vision_config (CLIPVisionModel) and the projector from its own keys
(``hf.vision``). The counts of the tower and projector are ``llama_lab.analysis.vision``'s; the
live model builds the text decoder only."""

from __future__ import annotations

from typing import Any

from ..fields import ModelFields
from ..hf.family import Counts, Family, Note, Rounded, Wrapper
from . import llama

# LlavaConfig's default tower (CLIP ViT-L/14 at 336 px) feeding LLaVA's projector
CLIP_L_336: dict[str, Any] = dict(
    kind="clip",
    hidden_size=1024,
    n_layers=24,
    n_heads=16,
    intermediate_size=4096,
    patch_size=14,
    image_size=336,
    projector="llava",
)

PRESETS: dict[str, dict[str, Any]] = {
    # llava-hf/llava-1.5-7b-hf config.json: Vicuna-7B v1.5 (LLaMA-2-7B fine-tuned; 32,064 tokens)
    # behind CLIP ViT-L/14-336 and the 2-layer MLP projector
    "llava-1.5-7b": dict(
        llama.PRESETS["llama-2-7b"], vocab_size=32064, vision=dict(CLIP_L_336, out_size=4096)
    ),
}

PUBLISHED = {
    # the Hub's safetensors total of LLaVA-1.5-7B checkpoints (same architecture), e.g.
    # huggingface.co/zhiqiulin/llava-v1.5-7b-NaturalBench-train-epoch-2: "Model size 7.06B params"
    "llava-1.5-7b": Rounded(7.06e9, 7.06e9, "Model size 7.06B params (the Hub, a LLaVA-1.5-7B checkpoint)"),
}


def notes(cfg: ModelFields, counts: Counts) -> list[Note]:
    """A multimodal model's vision tower (every wrapper counted whole: LLaVA's and the others')."""
    if cfg.vision is None:
        return []
    t = cfg.vision
    return [
        Note(
            "vision",
            f"**Vision tower**: a {t.kind} encoder ({t.n_layers} blocks of width {t.hidden_size}) and "
            f"the {t.projector} projector, {counts.vision:,} parameters counted beside the text "
            f"decoder; one image adds {counts.image_tokens:,} tokens to the sequence. The live model "
            f"builds the text decoder only.",
        )
    ]


def _nothing(*_: Any) -> Any:
    """LLaVA has no text model type of its own: its text_config's family reads and writes it."""
    return {}


def _lacks_nothing(cfg: ModelFields, model_type: str) -> list[str]:
    return []


FAMILY = Family(
    "LLaVA",
    (),
    read=_nothing,
    write=_nothing,
    lacks=_lacks_nothing,
    notes=notes,
    presets=PRESETS,
    published=PUBLISHED,
    wrappers=(Wrapper("llava", "llama", "LlavaConfig", tie_default=False, fixed=False, vision="clip"),),
)
