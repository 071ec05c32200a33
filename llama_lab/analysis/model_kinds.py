"""The three kinds of Transformer the tutorial tells (003 §2.1, 000 §1): the causal decoder (GPT,
LLaMA: each token sees the earlier ones, and the model generates), the bidirectional encoder
(BERT: every token sees every other, and the model fills in and classifies) and the
encoder-decoder (the 2017 Transformer: an encoder reads the source, a causal decoder writes the
target through cross-attention, and the model translates). ``kinds_table`` sets models of each
side by side, every number from the lab's counts (parameters, forward FLOPs at T, the KV cache
per token): a column per preset of ``KIND_PRESETS``."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..config import ModelConfig, get_preset
from .flops import count_flops
from .kv import kv_cache_bytes_per_token
from .params import count_params

# One model of each kind, by preset name (the page's columns, in order). The encoder-decoder's
# preset (the marian family's "transformer-2017-base", whose config has encoder_layers) joins this
# list where it exists; ``kind_of`` already names its kind.
KIND_PRESETS: tuple[str, ...] = ("seed-demo", "bert-base-uncased", "transformer-2017-base")

# What each kind can do, and why (the mask decides it)
CAN = {
    "causal decoder": {
        "attention": "causal: token i sees tokens 0 … i",
        "generate": "yes: the next token from the ones before, one at a time",
        "fill in": "no: a token never sees the ones after it",
        "translate": "only as a continuation of a prompt (the source is part of the prefix)",
    },
    "bidirectional encoder": {
        "attention": "bidirectional: every token sees every token",
        "generate": "no: every position sees the whole input, so there is no next token to predict",
        "fill in": "yes: a masked token from both sides (BERT's masked-LM)",
        "translate": "no: it has no decoder to write a target",
    },
    "encoder-decoder": {
        "attention": "encoder bidirectional; decoder causal, plus cross-attention to the encoder",
        "generate": "yes: the decoder writes the target a token at a time",
        "fill in": "the encoder reads the source both ways; the target is written left to right",
        "translate": "yes: source in, target out (Vaswani et al. 2017)",
    },
}


def kind_of(cfg: ModelConfig) -> str:
    """``cfg``'s kind: an encoder-decoder (it has encoder layers), a bidirectional encoder
    (``causal=False``) or a causal decoder."""
    if getattr(cfg, "encoder_layers", 0):
        return "encoder-decoder"
    return "causal decoder" if cfg.causal else "bidirectional encoder"


def kind_counts(cfg: ModelConfig, seq_len: int, dtype: str = "bf16") -> dict[str, int]:
    """The numbers behind a column of ``kinds_table``: parameters, forward FLOPs over the pairs
    the mask allows at ``seq_len`` tokens (at most the model's max_seq_len) and KV bytes per token."""
    return {
        "parameters": count_params(cfg).total,
        "seq_len": min(seq_len, cfg.max_seq_len),
        "forward_flops": count_flops(cfg, min(seq_len, cfg.max_seq_len)).forward_causal,
        "kv_bytes_per_token": kv_cache_bytes_per_token(cfg, dtype),
    }


def cached_per_token(kind: str, per_token: int, dtype: str) -> str:
    """What a model of ``kind`` keeps per token when it runs, in words, with its byte count."""
    if kind == "bidirectional encoder":
        return "nothing: it reads the whole input in one pass and generates nothing (0 bytes)"
    if kind == "encoder-decoder":
        return (
            f"{per_token:,} bytes ({dtype}) per generated token of decoder self-attention K and V, plus "
            f"the cross-attention K and V, fixed by the source length"
        )
    return f"{per_token:,} bytes ({dtype}): K and V of every layer, growing with each token generated"


def kinds_table(names: Sequence[str] = KIND_PRESETS, seq_len: int = 128, dtype: str = "bf16") -> pd.DataFrame:
    """One column per preset of ``names`` (its kind in the header), one row per aspect: what
    its attention sees, its parameters, its forward FLOPs (``kind_counts``), what it caches per
    token, and whether it generates, fills in and translates."""
    columns = {}
    for name in names:
        cfg = get_preset(name)
        kind, counts = kind_of(cfg), kind_counts(cfg, seq_len, dtype)
        columns[f"{name} ({kind})"] = {
            "attention": CAN[kind]["attention"],
            "parameters": f"{counts['parameters']:,}",
            "forward FLOPs": f"{counts['forward_flops']:,} at T={counts['seq_len']:,}",
            "cached per token": cached_per_token(kind, counts["kv_bytes_per_token"], dtype),
            **{can: CAN[kind][can] for can in ("generate", "fill in", "translate")},
        }
    return pd.DataFrame(columns).rename_axis("aspect").reset_index()
