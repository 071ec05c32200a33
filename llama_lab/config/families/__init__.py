"""The families LLaMA Lab reads, one module each: what the lab knows of a family — the model
types it reads, how its config.json is read and written, what it cannot express, the features
only it holds, its notes, its presets and their published counts, its sidebar fields — is its
module's ``FAMILY`` (a ``hf.family.Family``). ``FAMILIES`` maps every model_type a family
reads (its wrappers' and aliases' too) to it; ``FAMILY_LIST`` holds them in the order a config
is matched to a family when one is written (``family_of``). Adding a family: docs/families.md."""

from __future__ import annotations

from ..fields import ModelFields
from ..hf import select
from ..hf.family import TOPICS, Counts, Family
from ..hf.keys import ModelType
from . import (
    bert,
    deepseek,
    deepseek_v32,
    gemma,
    glm,
    gpt_oss,
    granite,
    llama,
    llama4,
    llava,
    marian,
    mistral,
    olmo,
    phi3,
    qwen,
    qwen_next,
    smollm3,
)

# the order a config is matched to a family when it is written: the families added last come last
FAMILY_LIST: tuple[Family, ...] = tuple(
    module.FAMILY
    for module in (
        llama,
        mistral,
        qwen,
        deepseek,
        gpt_oss,
        gemma,
        olmo,
        smollm3,
        phi3,
        glm,
        qwen_next,
        llama4,
    )
    + (granite, deepseek_v32, bert, marian, llava)
)
# every model type, in the registry's order (the order family_of tries them)
MODEL_TYPES: dict[str, ModelType] = {mt.name: mt for family in FAMILY_LIST for mt in family.model_types}
FAMILIES: dict[str, Family] = {
    name: family
    for family in FAMILY_LIST
    for name in (
        *(mt.name for mt in family.model_types),
        *(wrapper.model_type for wrapper in family.wrappers),
        *family.aliases,
    )
}


def family_of(cfg: ModelFields) -> select.Expressed:
    """The family and model type that express ``cfg`` exactly (ConfigError: none does)."""
    return select.family_of(cfg, FAMILY_LIST)


def family_notes(cfg: ModelFields, counts: Counts) -> list[str]:
    """What sets ``cfg`` apart from a plain LLaMA, one line each, by topic (``TOPICS``), every
    figure from the config and ``counts``."""
    notes = [note for family in FAMILY_LIST for note in family.notes(cfg, counts)]
    return [note.text for topic in TOPICS for note in notes if note.topic == topic]


__all__ = ["FAMILIES", "FAMILY_LIST", "MODEL_TYPES", "Family", "ModelType", "family_notes", "family_of"]
