"""Presets of Llama 4 (Scout, Maverick: the text decoders of their published config.json files,
tests/published_configs, SOURCES.md says which copy each is) and Mistral 4 (Mistral Small 4:
transformers' Mistral4Config defaults, its documented checkpoint). Merged into
``presets.PRESETS``."""

from __future__ import annotations

from typing import Any

from .model_config import ModelConfig
from .presets_hybrid import all_but_every

# What Scout and Maverick share: 48 blocks of 40 heads (128 wide) on 8 KV heads, every 4th block
# NoPE (with the attention temperature), the others rotated (base 500,000, adjacent pairs) and
# chunked (8,192), experts of 8,192 with one shared expert as wide, top-1, dense blocks of
# 16,384, a 202,048-token vocabulary
_LLAMA4: dict[str, Any] = dict(
    vocab_size=202048,
    d_model=5120,
    n_layers=48,
    n_heads=40,
    n_kv_heads=8,
    ffn_hidden=16384,
    rope_theta=500000.0,
    norm_eps=1e-5,
    rope_interleave=True,
    nope_layers=",".join(str(i) for i in range(3, 48, 4)),  # as the reader writes it
    sliding_window=8192,
    local_layers=all_but_every(48),
    chunked_attention=True,
    attn_temperature_layers=",".join(str(i) for i in range(3, 48, 4)),  # the NoPE blocks
    n_experts=16,
    experts_per_token=1,
    expert_ffn_hidden=8192,
    n_shared_experts=1,
    moe_style="llama4",
    moe_scoring="sigmoid",
    moe_renormalize=False,
)

RECENT_PRESETS = {
    # meta-llama/Llama-4-Scout-17B-16E text_config (the base model's 262,144-token context):
    # 16 experts on every block, QK-norm after RoPE. 107,769,861,120 on the meta device, 17.17B
    # active (the card: 17B activated, 109B total with the vision tower)
    "llama-4-scout": ModelConfig(**_LLAMA4, max_seq_len=262144, qk_norm=True, qk_norm_scope="rope_l2"),
    # meta-llama/Llama-4-Maverick-17B-128E-Instruct text_config: 128 experts on every 2nd block
    # (dense blocks between), no QK-norm, a 1,048,576-token context. 400,711,848,960 on the meta
    # device, 17.18B active (the card: 17B activated, 400B total)
    "llama-4-maverick": ModelConfig(
        **{**_LLAMA4, "n_experts": 128}, max_seq_len=1048576, moe_layers="every:2"
    ),
    # mistralai/Mistral-Small-4-119B-2603's text decoder as transformers' Mistral4Config defaults
    # it (the class's documented checkpoint; no published config.json was found, SOURCES.md):
    # MLA (q LoRA 1,024, latent 256 + a RoPE key of 64), 128 experts of 2,048 (top-4) with one
    # shared expert on all 36 blocks, softmax routing, every query × 1 + 0.1 · ln(1 + ⌊p / 8,192⌋).
    # 118,972,826,624 on the meta device (the docs: "119B with 6.5B activated parameters per
    # token"; here 6.63B with the embedding and head, 6.10B without the embedding)
    "mistral-small-4": ModelConfig(
        vocab_size=131072,
        d_model=4096,
        n_layers=36,
        n_heads=32,
        n_kv_heads=32,
        ffn_hidden=12288,
        max_seq_len=1048576,
        kv_lora_rank=256,
        q_lora_rank=1024,
        qk_rope_head_dim=64,
        rope_interleave=True,
        n_experts=128,
        experts_per_token=4,
        expert_ffn_hidden=2048,
        n_shared_experts=1,
        moe_layers="from:0",
        attn_temperature_layers="all",
        attn_temperature_offset=0,
    ),
}
