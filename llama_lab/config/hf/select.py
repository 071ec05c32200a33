"""Which family expresses a config (``family_of``), for writing its config.json: the first model
type of the registry, in order, whose block the config builds (``BLOCKS``), that holds every
feature the config uses (``ModelType.holds`` of the families' ``Feature``s) and that lacks
nothing else (``Family.lacks``). Otherwise a ConfigError lists what each model type lacks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ...errors import ConfigError
from ..fields import ModelFields
from .family import Family
from .keys import ModelType

# What every block of a supported family has
SHARED_BLOCK: Mapping[str, Any] = dict(norm_type="rmsnorm", pos_encoding="rope", final_norm=True)


@dataclass(frozen=True)
class Block:
    """The block a model type's layers build: the fields that make it (beside ``SHARED_BLOCK``)."""

    name: str
    fields: Mapping[str, Any]
    words: str
    plain: bool = True  # Gemma's own fields (``gemma_fields_at_plain``) left plain
    encoder: bool = False  # the block of an encoder-decoder (encoder_layers > 0: the 2017 one)


LLAMA = dict(norm_position="pre", ffn_type="swiglu", embed_scale=False, norm_plus_one=False)
BLOCKS = {
    block.name: block
    for block in (
        Block("llama", LLAMA, "a LLaMA block (pre-norm RMSNorm, SwiGLU, unscaled embeddings)"),
        Block(
            "olmo2",  # x + norm(f(x)), no input norms
            {**LLAMA, "norm_position": "output"},
            "OLMo 2's block (norms on the sublayers' outputs only, x + norm(f(x)))",
        ),
        Block(
            "qwen_hybrid",  # Qwen3-Next's and Qwen3.5's: (1 + γ) norms
            {**LLAMA, "norm_plus_one": True},
            "Qwen3-Next's block (pre-norm RMSNorm × (1 + γ), SwiGLU)",
        ),
        Block(
            "bert",
            dict(
                norm_position="post",
                norm_type="layernorm",
                pos_encoding="learned",
                ffn_type="gelu",
                final_norm=False,
                embed_scale=False,
                norm_plus_one=False,
            ),
            "BERT's block (Post-LN LayerNorm, learned positions, GELU, no final norm)",
        ),
        Block(
            "marian",  # the 2017 recipe: Post-LN LayerNorm, static sinusoidal positions, no final norm
            dict(
                norm_position="post",
                norm_type="layernorm",
                pos_encoding="sinusoidal",
                final_norm=False,
                norm_plus_one=False,
            ),
            "the 2017 encoder-decoder's block (Post-LN LayerNorm, sinusoidal positions, no final norm)",
            encoder=True,
        ),
        Block(
            "gemma",
            dict(norm_position="sandwich", ffn_type="geglu", embed_scale=True, norm_plus_one=True),
            "Gemma's block (sandwich norms, RMSNorm × (1 + γ), GeGLU, √d embeddings)",
            plain=False,
        ),
    )
}


def gemma_plain(cfg: ModelFields) -> dict[str, Any]:
    """Gemma's fields that any other block must leave at their plain values (a RoPE base of the
    sliding layers' own is a feature: Gemma 3's and Olmo 3's)."""
    return dict(
        query_pre_attn_scalar=cfg.head_dim,
        attn_softcap=0.0,
        logit_softcap=0.0,
    )


def _has(cfg: ModelFields, block: Block) -> bool:
    wanted = {**SHARED_BLOCK, **block.fields}  # (a block may depart from the shared one: BERT, 2017)
    plain = gemma_plain(cfg) if block.plain else {}
    if cfg.is_encoder_decoder != block.encoder:
        return False
    return all(getattr(cfg, name) == value for name, value in {**wanted, **plain}.items())


def block_of(cfg: ModelFields) -> str | None:
    """The block a config's fields build (None: no family's). Gemma's first: its fields are
    the others' plain values' exceptions."""
    for name in ("bert", "gemma", "olmo2", "qwen_hybrid", "llama", "marian"):
        if _has(cfg, BLOCKS[name]):
            return name
    return None


def reasons(cfg: ModelFields, family: Family, model_type: ModelType, families: Sequence[Family]) -> list[str]:
    """Why ``model_type`` (of ``family``) cannot express ``cfg`` (empty: it can): another block,
    what the family itself lacks, then every feature in use that it does not hold."""
    if block_of(cfg) != model_type.block:
        return [f"not {BLOCKS[model_type.block].words}"]
    missing = [
        feature.words
        for other in families
        for feature in other.features
        if feature.key not in model_type.holds and feature.present(cfg)
    ]
    return family.lacks(cfg, model_type.name) + missing


class Expressed(NamedTuple):
    """The family, and its model type, that write a config's config.json."""

    family: Family
    model_type: ModelType


def family_of(cfg: ModelFields, families: Sequence[Family]) -> Expressed:
    """The first model type of ``families`` that expresses ``cfg`` exactly (ConfigError: none)."""
    if block_of(cfg) is None:
        shown = [f"{name}={getattr(cfg, name)!r}" for name in {**SHARED_BLOCK, **LLAMA}]
        shown += [
            f"{name}={getattr(cfg, name)!r}"
            for name, plain in gemma_plain(cfg).items()
            if getattr(cfg, name) != plain
        ]
        raise ConfigError(
            "to_hf_config needs a LLaMA-style config (pre-norm, rmsnorm, rope, swiglu, final norm, "
            "unscaled embeddings, none of Gemma's fields), OLMo 2's (the same with norm_position "
            "'output') or a Gemma-style one (sandwich norms, rmsnorm × (1 + γ), rope, geglu, final "
            "norm, √d-scaled embeddings) or BERT's (post-norm layernorm, learned positions, gelu, no "
            "final norm); this one has " + ", ".join(shown)
        )
    why = {}
    for family in families:
        for model_type in family.model_types:
            why[model_type.name] = reasons(cfg, family, model_type, families)
            if not why[model_type.name]:
                return Expressed(family, model_type)
    raise ConfigError(
        "no supported family expresses this config: "
        + "; ".join(f"{name} ({', '.join(because)})" for name, because in why.items())
    )
