"""BERT's checkpoint keys: a model of BERT's block (``config.hf.select``'s "bert") with its encoder
fields shows transformers' ``BertModel`` state-dict keys and loads them, so
``load_state_dict(BertModel(...).state_dict(), strict=True)`` works and gives BertModel's
last hidden state. The modules keep the lab's names (one set of blocks for every family); a state
dict is renamed on the way out and on the way in (as ``fused.keep_part_keys`` splits q/k/v)."""

from __future__ import annotations

import re

import torch.nn as nn

from ..config import ModelConfig
from ..config.hf.select import block_of

# (the lab's key prefix, BertModel's), "{i}" a block's index. Post-LN: the block's first norm
# follows the attention (BertSelfOutput's LayerNorm), its second the FFN (BertOutput's)
PREFIXES = (
    ("model.embed_tokens.", "embeddings.word_embeddings."),
    ("model.embed_positions.", "embeddings.position_embeddings."),
    ("model.embed_token_types.", "embeddings.token_type_embeddings."),
    ("model.embed_norm.", "embeddings.LayerNorm."),
    ("model.layers.{i}.self_attn.q_proj.", "encoder.layer.{i}.attention.self.query."),
    ("model.layers.{i}.self_attn.k_proj.", "encoder.layer.{i}.attention.self.key."),
    ("model.layers.{i}.self_attn.v_proj.", "encoder.layer.{i}.attention.self.value."),
    ("model.layers.{i}.self_attn.o_proj.", "encoder.layer.{i}.attention.output.dense."),
    ("model.layers.{i}.input_layernorm.", "encoder.layer.{i}.attention.output.LayerNorm."),
    ("model.layers.{i}.mlp.up_proj.", "encoder.layer.{i}.intermediate.dense."),
    ("model.layers.{i}.mlp.down_proj.", "encoder.layer.{i}.output.dense."),
    ("model.layers.{i}.post_attention_layernorm.", "encoder.layer.{i}.output.LayerNorm."),
    ("pooler.", "pooler.dense."),
)


def _pattern(template: str) -> re.Pattern:
    return re.compile("^" + re.escape(template).replace(r"\{i\}", r"(\d+)"))


def _renamer(source: int):
    """A function renaming a key from side ``source`` (0: the lab's, 1: BertModel's) to the other."""
    rules = [(_pattern(pair[source]), pair[1 - source].replace("{i}", r"\1")) for pair in PREFIXES]

    def rename(key: str) -> str:
        for pattern, replacement in rules:
            renamed, hits = pattern.subn(replacement, key)
            if hits:
                return renamed
        return key

    return rename


TO_BERT, FROM_BERT = _renamer(0), _renamer(1)


def has_bert_keys(cfg: ModelConfig) -> bool:
    """Whether ``cfg`` is a BERT encoder (BERT's block with its encoder fields): BertModel's keys."""
    return block_of(cfg) == "bert" and cfg.is_encoder_style


def use_bert_keys(model: nn.Module) -> None:
    """Show ``model``'s state dict with BertModel's keys and load a state dict that has them."""

    def rename_all(state_dict, prefix: str, rename) -> None:
        items = list(state_dict.items())
        state_dict.clear()
        for key, value in items:
            inside = key.startswith(prefix)
            state_dict[prefix + rename(key[len(prefix) :]) if inside else key] = value

    def on_save(module, state_dict, prefix, local_metadata) -> None:
        rename_all(state_dict, prefix, TO_BERT)

    def on_load(module, state_dict, prefix, *args) -> None:
        rename_all(state_dict, prefix, FROM_BERT)

    model.register_state_dict_post_hook(on_save)
    model.register_load_state_dict_pre_hook(on_load)
