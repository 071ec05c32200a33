"""What the config tests of the 2025–26 families share: the published config.json files checked
in under tests/families/published_configs, transformers' own reading of a dict, and its model's parameter
count on the meta device."""

import copy
import json
from pathlib import Path

import torch
import transformers

PUBLISHED = Path(__file__).resolve().parents[1] / "families" / "published_configs"


def published(file: str) -> dict:
    """tests/families/published_configs/<file>.json."""
    return json.loads((PUBLISHED / f"{file}.json").read_text())


def theirs(data: dict):
    """AutoConfig.for_model of ``data`` (a copy: transformers edits nested dicts in place),
    quantization_config left out (the loader's, not the config's); of a multimodal wrapper its
    text_config."""
    data = {k: v for k, v in copy.deepcopy(data).items() if k != "quantization_config"}
    config = transformers.AutoConfig.for_model(**data)
    return getattr(config, "text_config", None) or config


def causal_lm(config):
    """transformers' causal-LM class of ``config``'s family (AutoModelForCausalLM does not map
    Mistral4Config in transformers 5.24; the family's own class always builds it)."""
    from llama_lab.config.families import MODEL_TYPES as FAMILIES

    return getattr(transformers, FAMILIES[config.model_type].architecture)


def meta_model(config):
    """transformers' causal LM of ``config`` on the meta device (no weights)."""
    with torch.device("meta"):
        return causal_lm(config)._from_config(config)


def meta_count(config) -> int:
    return sum(p.numel() for p in meta_model(config).parameters())


# A 2-layer Qwen2 (its q, k, v carry biases), every width a multiple of 32 as GPTQ packs it, and
# a GPTQ int4 quantization_config: the stored-format tests' small checkpoint.
QWEN2_SMALL = {
    "model_type": "qwen2",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
}
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}


def scaling_of(rope_parameters: dict) -> dict | None:
    """The scaling in transformers' ``rope_parameters`` (one layer type's, or the whole), as
    RopeScaling.as_dict() spells it: rope_theta and partial_rotary_factor left out (fields of
    their own), and the legacy ``type`` (the class copies it to rope_type); None for plain RoPE."""
    own_fields = ("rope_theta", "partial_rotary_factor", "type")
    rope = {k: v for k, v in rope_parameters.items() if k not in own_fields}
    return None if rope.get("rope_type", "default") == "default" else rope


def same_scaling(cfg, rope_parameters: dict) -> None:
    """The RoPE scaling LLaMA Lab read is the one transformers' config class built."""
    ours = cfg.rope_scaling.as_dict() if cfg.rope_scaling is not None else None
    assert ours == scaling_of(rope_parameters), (ours, rope_parameters)
