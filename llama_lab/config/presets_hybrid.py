"""Presets of the hybrid families: Gated DeltaNet blocks beside gated attention (Qwen3-Next,
Qwen3.5), from their published config.json files (tests/published_configs, SOURCES.md says
which copy each is). Merged into ``presets.PRESETS``."""

from __future__ import annotations

from typing import Any

from .model_config import ModelConfig


def all_but_every(n_layers: int, interval: int = 4) -> str:
    """Every block but each interval-th, as a layer set (Qwen3-Next's and Qwen3.5's layer_types
    by default: 3 Gated DeltaNet blocks, then one gated attention block; Llama 4's chunked
    blocks: 3 rotated, then one NoPE)."""
    return ",".join(str(i) for i in range(n_layers) if (i + 1) % interval)


# What Qwen3-Next and Qwen3.5 share: head_dim 256 with a quarter rotated, (1 + γ) norms, per-head
# QK-norm, gated attention, 16 q/k heads of 128 and value heads of 128 in the linear blocks,
# a 4-tap convolution, RoPE base 10⁷, eps 1e-6, a 262,144-token context
_QWEN_HYBRID: dict[str, Any] = dict(
    head_dim=256,
    max_seq_len=262144,
    rope_theta=1e7,
    norm_eps=1e-6,
    partial_rotary_factor=0.25,
    qk_norm=True,
    norm_plus_one=True,
    attn_output_gate=True,
    linear_k_heads=16,
    linear_k_head_dim=128,
    linear_v_head_dim=128,
    linear_conv_kernel=4,
)
# The experts of Qwen3-Next and Qwen3.5-MoE: on every block, 512-wide, renormalised top-k, and
# one gated shared expert as wide
_QWEN_EXPERTS: dict[str, Any] = dict(
    expert_ffn_hidden=512, n_shared_experts=1, shared_expert_gate=True, moe_renormalize=True
)

HYBRID_PRESETS = {
    # Qwen/Qwen3-Next-80B-A3B-Instruct config.json: 12 × (3 Gated DeltaNet blocks (32 value heads)
    # then one gated attention block (16 heads on 2 KV heads)), every block 512 experts (top-10)
    # with a shared one; in_proj_qkvz / in_proj_ba grouped per key head. On the meta device
    # 79,674,391,296 (the card: 80B in total, 3B activated; 79B non-embedding); its MTP layer
    # (mtp.*, which Qwen3NextForCausalLM skips when loading) is not counted.
    "qwen3-next-80b-a3b": ModelConfig(
        **_QWEN_HYBRID,
        **_QWEN_EXPERTS,
        vocab_size=151936,
        d_model=2048,
        n_layers=48,
        n_heads=16,
        n_kv_heads=2,
        ffn_hidden=5120,
        linear_layers=all_but_every(48),
        linear_v_heads=32,
        linear_grouped_proj=True,
        n_experts=512,
        experts_per_token=10,
    ),
    # Qwen/Qwen3.5-35B-A3B text_config (the text decoder; the vision tower and the MTP layer not
    # counted): 10 × (3 Gated DeltaNet + 1 gated attention), 256 experts (top-8) with a shared
    # one on every block, Qwen3.5's separate in_proj_qkv / z / b / a. 34,660,610,688 on the meta
    # device (the card: 35B total / 3B active, with the vision tower)
    "qwen3.5-35b-a3b": ModelConfig(
        **_QWEN_HYBRID,
        **_QWEN_EXPERTS,
        vocab_size=248320,
        d_model=2048,
        n_layers=40,
        n_heads=16,
        n_kv_heads=2,
        ffn_hidden=512,
        linear_layers=all_but_every(40),
        linear_v_heads=32,
        n_experts=256,
        experts_per_token=8,
    ),
    # Qwen/Qwen3.5-27B text_config (composite, SOURCES.md): a dense 27B, 16 × (3 Gated DeltaNet
    # (48 value heads) + 1 gated attention (24 heads on 4 KV heads)), SwiGLU 17,408 wide.
    # 26,895,998,464 on the meta device (the Hub: 27.78B with the vision tower and MTP)
    "qwen3.5-27b": ModelConfig(
        **_QWEN_HYBRID,
        vocab_size=248320,
        d_model=5120,
        n_layers=64,
        n_heads=24,
        n_kv_heads=4,
        ffn_hidden=17408,
        linear_layers=all_but_every(64),
        linear_v_heads=48,
    ),
}
