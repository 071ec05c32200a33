"""vLLM's profiling peak (``validation.engine.profile_activation_bytes``), each stage by hand
from vLLM's model code: the layer loop's input and the residual (2·C) at every stage, then the
attention's projections at o_proj, the dense FFN at SiluAndMul, or the fused MoE's caches."""

from __future__ import annotations

from llama_lab.config import PRESETS, ModelConfig
from llama_lab.validation.engine import (
    FUSED_MOE_CHUNK_TOKENS,
    forward_stage_elements,
    moe_cache_elements,
    profile_activation_bytes,
    sampler_logits_bytes,
)
from llama_lab.validation.rows import load_rows

C, F, Q, KV = 4096, 14336, 32 * 128, 8 * 128  # Llama 3 8B


def test_llama_3_8b_peaks_at_the_mlp_and_its_tensor_parallel_share():
    cfg = PRESETS["llama-3-8b"]
    # o_proj: q, k, v (Q + 2·KV), the attention's output (Q), o_proj's output (C)
    assert forward_stage_elements(cfg, 1)[:2] == (2 * C + Q + 2 * KV + Q + C, 2 * C + C + 3 * F)
    # two GPUs: the heads and the FFN's width halve, the hidden states (and o_proj's output,
    # before its all-reduce) do not
    assert forward_stage_elements(cfg, 2)[:2] == (2 * C + (Q + 2 * KV + Q) / 2 + C, 3 * C + 3 * F / 2)
    assert profile_activation_bytes(cfg, 29000, 256, 1) == 2 * 29000 * (3 * C + 3 * F)
    # one token per sequence: the sampling, not the forward, is the peak
    assert profile_activation_bytes(cfg, 256, 256, 1) == 2 * 256 * C + 6 * 256 * 128256
    assert sampler_logits_bytes(cfg, 256, 100) == 6 * 100 * 128256  # at most one per token


def test_qwen3_norms_copy_q_and_k_and_its_small_model_peaks_when_sampling():
    row = next(r for r in load_rows() if r.id == "vllm-kv-qwen3-0.6b-a100-bf16")
    cfg = row.config
    c, q, kv, f, v = 1024, 16 * 128, 8 * 128, 3072, 151936
    assert forward_stage_elements(cfg, 1)[:2] == (2 * c + q + 2 * kv + q + c + q + kv, 3 * c + 3 * f)
    # 8,192 tokens over 256 sequences: 201 MB through the blocks, 250 MB at the sampler
    forward = 2 * 8192 * max(2 * c + q + 2 * kv + q + c + q + kv, 3 * c + 3 * f)
    sampling = 2 * 8192 * c + (2 + 4) * 256 * v
    assert sampling > forward
    assert profile_activation_bytes(cfg, 8192, 256, 1) == sampling


def test_a_mixtures_fused_moe_caches_and_shared_experts():
    cfg = ModelConfig(
        vocab_size=64,
        d_model=32,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        ffn_hidden=48,
        max_seq_len=64,
        n_experts=8,
        experts_per_token=2,
        expert_ffn_hidden=16,
        n_shared_experts=1,
    )
    c, k, fe, e = 32, 2, 16, 8
    # cache1 (M, k, 2·Fe/tp), cache2 (M·k, Fe/tp), cache3 (M, k, C)
    assert moe_cache_elements(cfg, 1) == k * (3 * fe + c)
    assert moe_cache_elements(cfg, 2) == k * (3 * fe / 2 + c)
    _, ffn, routed = forward_stage_elements(cfg, 1)
    assert ffn == 2 * c + c + 3 * fe  # the shared expert (every block is sparse: no dense FFN)
    assert routed == 2 * c + 2 * c + c + e  # input, output, the shared expert's output, the router
    tokens = FUSED_MOE_CHUNK_TOKENS + 1000  # the caches stop at a chunk
    expected = 2 * (tokens * routed + FUSED_MOE_CHUNK_TOKENS * k * (3 * fe + c))
    assert profile_activation_bytes(cfg, tokens, 1, 1) == expected
