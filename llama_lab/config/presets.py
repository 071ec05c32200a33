"""Presets: the seed's demo model, the 2017 recipe and the published configs (LLaMA, Mistral,
Qwen, DeepSeek, gpt-oss, Gemma 2/3, OLMo 2, SmolLM3, Phi-3 / Phi-4-mini, GLM-4.5-Air), a source
comment each; the parameter counts published for them are ``published``'s.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .model_config import ModelConfig
from .presets_hybrid import HYBRID_PRESETS
from .presets_recent import RECENT_PRESETS

_LLAMA: dict[str, Any] = dict(vocab_size=32000, norm_eps=1e-5, rope_theta=10000.0)


_LLAMA3: dict[str, Any] = dict(vocab_size=128256, norm_eps=1e-5, rope_theta=500000.0)


# DeepSeek-V2/V3's MLA: q LoRA 1536, latent 512, q/k heads of 128 + 64 rotated (interleaved
# pairs), value heads of 128
_MLA: dict[str, Any] = dict(
    head_dim=192,
    q_lora_rank=1536,
    kv_lora_rank=512,
    qk_rope_head_dim=64,
    v_head_dim=128,
    rope_interleave=True,
)
_DEEPSEEK_V3: dict[str, Any] = dict(
    vocab_size=129280,
    d_model=7168,
    n_layers=61,
    n_heads=128,
    n_kv_heads=128,
    ffn_hidden=18432,
    max_seq_len=163840,
    norm_eps=1e-6,
    **_MLA,
    n_experts=256,
    experts_per_token=8,
    expert_ffn_hidden=2048,
    n_shared_experts=1,
    moe_layers="from:3",
    moe_scoring="sigmoid",
    moe_groups=8,
    moe_topk_groups=4,
    routed_scaling=2.5,
)

# gpt-oss: 64 query heads of 64 (8 KV heads) with q/k/v/o biases and a sink each, a window of
# 128 on the even layers (layer_types), every layer 4 of its experts (width 2880, biases, the
# clamped SwiGLU: limit 7, alpha 1.702), vocab 201088, RoPE θ 150000 (its YaRN ×32 scaling
# not modelled)
_GPT_OSS: dict[str, Any] = dict(
    vocab_size=201088,
    d_model=2880,
    n_heads=64,
    n_kv_heads=8,
    head_dim=64,
    ffn_hidden=2880,
    max_seq_len=131072,
    qkv_bias=True,
    o_bias=True,
    mlp_bias=True,
    attention_sinks=True,
    sliding_window=128,
    experts_per_token=4,
    moe_style="gpt_oss",
    rope_theta=150000.0,
    norm_eps=1e-5,
)


def _even_layers(n_layers: int) -> str:
    return ",".join(map(str, range(0, n_layers, 2)))


# Gemma 2/3: sandwich norms with RMSNorm × (1 + γ), GeGLU (tanh GELU), embeddings × √d, a tied
# head, a window on the local layers, RMSNorm eps 1e-6
_GEMMA: dict[str, Any] = dict(
    norm_position="sandwich",
    norm_plus_one=True,
    ffn_type="geglu",
    embed_scale=True,
    tie_embeddings=True,
    norm_eps=1e-6,
)
# Gemma 3: QK-norm, five local layers to one global (sliding_window_pattern 6), RoPE θ 1e6 on the
# global layers and 1e4 on the local ones
_GEMMA3: dict[str, Any] = dict(**_GEMMA, qk_norm=True, rope_theta=1e6, rope_local_theta=1e4)


def _gemma3_local(n_layers: int, pattern: int = 6) -> str:
    """Gemma3TextConfig's sliding layers: every layer but each ``pattern``-th."""
    return ",".join(str(i) for i in range(n_layers) if (i + 1) % pattern)


PRESETS: dict[str, ModelConfig] = {
    # Tiny model for tests and quick demos.
    "debug": ModelConfig(
        vocab_size=256, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_hidden=172, max_seq_len=64
    ),
    # Seed tutorial 000, section 八: LlamaModel(vocab=32000, d=512, n_layers=4, n_heads=8,
    # n_kv_heads=2, max_seq=128, ffn_hidden=1365).
    "seed-demo": ModelConfig(),
    "seed-demo-mha": ModelConfig(n_kv_heads=8),
    # Vaswani et al. 2017 recipe as a decoder-only model at the seed's size: Post-LN, LayerNorm,
    # sinusoidal positions, ReLU FFN of 4d, biases, Xavier init, no final norm, embeddings
    # multiplied by √d (§3.4; the paper also ties them to the output layer: tie_embeddings).
    "transformer-2017": ModelConfig(
        n_kv_heads=8,
        ffn_hidden=2048,
        norm_position="post",
        norm_type="layernorm",
        pos_encoding="sinusoidal",
        ffn_type="relu",
        bias=True,
        final_norm=False,
        init="xavier",
        embed_scale=True,
        norm_eps=1e-5,
    ),
    # huggyllama/llama-7b config.json (Touvron et al. 2023, Table 2)
    "llama-7b": ModelConfig(
        d_model=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=32,
        ffn_hidden=11008,
        max_seq_len=2048,
        **{**_LLAMA, "norm_eps": 1e-6},
    ),
    # meta-llama/Llama-2-7b-hf config.json
    "llama-2-7b": ModelConfig(
        d_model=4096, n_layers=32, n_heads=32, n_kv_heads=32, ffn_hidden=11008, max_seq_len=4096, **_LLAMA
    ),
    # meta-llama/Llama-2-13b-hf config.json
    "llama-2-13b": ModelConfig(
        d_model=5120, n_layers=40, n_heads=40, n_kv_heads=40, ffn_hidden=13824, max_seq_len=4096, **_LLAMA
    ),
    # meta-llama/Llama-2-70b-hf config.json (GQA, 8 KV heads)
    "llama-2-70b": ModelConfig(
        d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8, ffn_hidden=28672, max_seq_len=4096, **_LLAMA
    ),
    # meta-llama/Meta-Llama-3-8B config.json
    "llama-3-8b": ModelConfig(
        d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8, ffn_hidden=14336, max_seq_len=8192, **_LLAMA3
    ),
    # meta-llama/Meta-Llama-3-70B config.json
    "llama-3-70b": ModelConfig(
        d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8, ffn_hidden=28672, max_seq_len=8192, **_LLAMA3
    ),
    # meta-llama/Llama-3.1-405B config.json (rope_scaling "llama3" not modelled)
    "llama-3.1-405b": ModelConfig(
        d_model=16384,
        n_layers=126,
        n_heads=128,
        n_kv_heads=8,
        ffn_hidden=53248,
        max_seq_len=131072,
        **_LLAMA3,
    ),
    # meta-llama/Llama-3.2-1B config.json (tied head, rope_scaling "llama3" not modelled)
    "llama-3.2-1b": ModelConfig(
        d_model=2048,
        n_layers=16,
        n_heads=32,
        n_kv_heads=8,
        ffn_hidden=8192,
        max_seq_len=131072,
        tie_embeddings=True,
        **_LLAMA3,
    ),
    # meta-llama/Llama-3.2-3B config.json (head_dim 128 = 3072/24)
    "llama-3.2-3b": ModelConfig(
        d_model=3072,
        n_layers=28,
        n_heads=24,
        n_kv_heads=8,
        ffn_hidden=8192,
        max_seq_len=131072,
        tie_embeddings=True,
        **_LLAMA3,
    ),
    # mistralai/Mistral-7B-v0.1 config.json: sliding_window 4096 on every layer
    "mistral-7b": ModelConfig(
        d_model=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=8,
        ffn_hidden=14336,
        max_seq_len=32768,
        sliding_window=4096,
        **_LLAMA,
    ),
    # mistralai/Mistral-Nemo-Base-2407 config.json: head_dim 128 ≠ 5120/32, vocab 131072
    "mistral-nemo-12b": ModelConfig(
        vocab_size=131072,
        d_model=5120,
        n_layers=40,
        n_heads=32,
        n_kv_heads=8,
        head_dim=128,
        ffn_hidden=14336,
        max_seq_len=1024000,
        rope_theta=1e6,
        norm_eps=1e-5,
    ),
    # mistralai/Mixtral-8x7B-v0.1 config.json: 8 experts, top-2, renormalised
    "mixtral-8x7b": ModelConfig(
        d_model=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=8,
        ffn_hidden=14336,
        max_seq_len=32768,
        n_experts=8,
        experts_per_token=2,
        **{**_LLAMA, "rope_theta": 1e6},
    ),
    # Qwen/Qwen2.5-7B config.json: q/k/v biases, o_proj none (use_sliding_window false)
    "qwen2.5-7b": ModelConfig(
        vocab_size=152064,
        d_model=3584,
        n_layers=28,
        n_heads=28,
        n_kv_heads=4,
        ffn_hidden=18944,
        max_seq_len=131072,
        qkv_bias=True,
        rope_theta=1e6,
        norm_eps=1e-6,
    ),
    # Qwen/Qwen3-8B config.json: head_dim 128, QK-norm
    "qwen3-8b": ModelConfig(
        vocab_size=151936,
        d_model=4096,
        n_layers=36,
        n_heads=32,
        n_kv_heads=8,
        head_dim=128,
        ffn_hidden=12288,
        max_seq_len=40960,
        qk_norm=True,
        rope_theta=1e6,
        norm_eps=1e-6,
    ),
    # Qwen/Qwen3-30B-A3B config.json: 128 experts of width 768, top-8, norm_topk_prob true
    "qwen3-30b-a3b": ModelConfig(
        vocab_size=151936,
        d_model=2048,
        n_layers=48,
        n_heads=32,
        n_kv_heads=4,
        head_dim=128,
        ffn_hidden=6144,
        max_seq_len=40960,
        qk_norm=True,
        n_experts=128,
        experts_per_token=8,
        expert_ffn_hidden=768,
        rope_theta=1e6,
        norm_eps=1e-6,
    ),
    # deepseek-ai/DeepSeek-V3 config.json (DeepSeek-R1 and V3-0324 share it): MLA (q LoRA 1536,
    # latent 512, RoPE key 64, heads 128 + 64 wide, values 128), 3 dense blocks then DeepSeekMoE
    # (256 routed experts of 2048 in 8 groups, top-4 groups, top-8 experts, sigmoid scores with
    # the correction bias, renormalised, × 2.5, one shared expert). Its MTP module is not part
    # of DeepseekV3ForCausalLM: the 671B of the main model, not the 685B on the Hub.
    "deepseek-v3": ModelConfig(**_DEEPSEEK_V3),
    # moonshotai/Kimi-K2-Instruct config.json (model_type kimi_k2: DeepseekV3ForCausalLM): 384
    # experts in one group, 64 heads, one dense block, × 2.827, vocab 163840, no MTP module
    "kimi-k2": ModelConfig(
        **{
            **_DEEPSEEK_V3,
            "vocab_size": 163840,
            "n_heads": 64,
            "n_kv_heads": 64,
            "n_experts": 384,
            "moe_groups": 1,
            "moe_topk_groups": 1,
            "moe_layers": "from:1",
            "routed_scaling": 2.827,
            "max_seq_len": 131072,
            "rope_theta": 50000.0,
        }
    ),
    # deepseek-ai/DeepSeek-V2-Lite config.json: q from one q_proj, 64 experts of 1408, top-6
    # greedy, 2 shared, one dense block
    "deepseek-v2-lite": ModelConfig(
        vocab_size=102400,
        d_model=2048,
        n_layers=27,
        n_heads=16,
        n_kv_heads=16,
        ffn_hidden=10944,
        max_seq_len=163840,
        norm_eps=1e-6,
        **{**_MLA, "q_lora_rank": 0},
        n_experts=64,
        experts_per_token=6,
        expert_ffn_hidden=1408,
        n_shared_experts=2,
        moe_layers="from:1",
        moe_renormalize=False,
    ),
    # deepseek-ai/DeepSeek-V2 config.json: MLA as V3's, 160 experts of 1536 in 8 groups (top-3
    # groups by their best expert, then top-6, softmax, not renormalised, × 16), 2 shared
    "deepseek-v2": ModelConfig(
        vocab_size=102400,
        d_model=5120,
        n_layers=60,
        n_heads=128,
        n_kv_heads=128,
        ffn_hidden=12288,
        max_seq_len=163840,
        norm_eps=1e-6,
        **_MLA,
        n_experts=160,
        experts_per_token=6,
        expert_ffn_hidden=1536,
        n_shared_experts=2,
        moe_layers="from:1",
        moe_renormalize=False,
        moe_groups=8,
        moe_topk_groups=3,
        routed_scaling=16.0,
    ),
    # openai/gpt-oss-20b config.json (tests/published_configs/gpt-oss-20b.json): 24 layers, 32
    # experts. GptOssForCausalLM on the meta device (transformers 5.24, AutoConfig.for_model of
    # that file without its quantization_config): 20,914,757,184 parameters
    "gpt-oss-20b": ModelConfig(**_GPT_OSS, n_layers=24, local_layers=_even_layers(24), n_experts=32),
    # openai/gpt-oss-120b config.json (tests/published_configs/gpt-oss-120b.json): 36 layers, 128
    # experts. GptOssForCausalLM on the meta device (as above): 116,829,156,672 parameters
    "gpt-oss-120b": ModelConfig(**_GPT_OSS, n_layers=36, local_layers=_even_layers(36), n_experts=128),
    # google/gemma-3-1b-it config.json (tests/published_configs/gemma-3-1b-it.json, gemma3_text):
    # 4 heads of 256 (one KV head) on d 1152, window 512. Gemma3ForCausalLM on the meta device
    # (transformers 5.24): 999,885,952 = 301,989,888 embedding + 697,896,064 non-embedding; the
    # Gemma 3 report's Table 1: 302M + 698M
    "gemma-3-1b": ModelConfig(
        **_GEMMA3,
        vocab_size=262144,
        d_model=1152,
        n_layers=26,
        n_heads=4,
        n_kv_heads=1,
        head_dim=256,
        ffn_hidden=6912,
        max_seq_len=32768,
        sliding_window=512,
        local_layers=_gemma3_local(26),
        query_pre_attn_scalar=256,
    ),
    # google/gemma-3-27b-it config.json (tests/published_configs/gemma-3-27b-it.json): the text
    # decoder of the gemma3 wrapper (Gemma3TextConfig's defaults for the keys its text_config
    # leaves out: vocab 262208, 128k positions), scores × 168^-½, window 1024; its linear ×8 RoPE
    # scaling on the global layers not modelled. Gemma3ForCausalLM on the meta device: 27,009,346,304
    # = 1,409,630,208 embedding + 25,599,716,096 non-embedding (the report: 1,416M + 25,600M; its
    # vision tower of 417M not counted)
    "gemma-3-27b": ModelConfig(
        **_GEMMA3,
        vocab_size=262208,
        d_model=5376,
        n_layers=62,
        n_heads=32,
        n_kv_heads=16,
        head_dim=128,
        ffn_hidden=21504,
        max_seq_len=131072,
        sliding_window=1024,
        local_layers=_gemma3_local(62),
        query_pre_attn_scalar=168,
    ),
    # google/gemma-2-9b config.json (tests/published_configs/gemma-2-9b.json): window 4096 on the
    # even layers, scores soft-capped at 50 and logits at 30, RoPE θ 1e4. Gemma2ForCausalLM on the
    # meta device: 9,241,705,984 = 917,504,000 embedding + 8,324,201,984 non-embedding (the Gemma 2
    # report: 917,962,752 + 8,324,201,984; its embedding counts 256,128 rows, the file 256,000)
    "gemma-2-9b": ModelConfig(
        **_GEMMA,
        vocab_size=256000,
        d_model=3584,
        n_layers=42,
        n_heads=16,
        n_kv_heads=8,
        head_dim=256,
        ffn_hidden=14336,
        max_seq_len=8192,
        sliding_window=4096,
        local_layers=_even_layers(42),
        query_pre_attn_scalar=256,
        attn_softcap=50.0,
        logit_softcap=30.0,
    ),
    # allenai/OLMo-2-1124-7B config.json (tests/published_configs/olmo-2-1124-7b.json): norms on
    # the sublayers' outputs only (x + norm(f(x))), QK-norm over all of q and k, 32 heads of 128
    # (MHA), vocab 100352, RoPE θ 5e5. Olmo2ForCausalLM on the meta device: 7,298,617,344, the
    # Hub's safetensors total
    "olmo-2-7b": ModelConfig(
        vocab_size=100352,
        d_model=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=32,
        ffn_hidden=11008,
        max_seq_len=4096,
        norm_position="output",
        qk_norm=True,
        qk_norm_scope="projection",
        rope_theta=500000.0,
        norm_eps=1e-6,
    ),
    # HuggingFaceTB/SmolLM3-3B config.json (tests/published_configs/smollm3-3b.json): every fourth
    # block without RoPE (no_rope_layers), 16 heads of 128 on 4 KV heads, a tied head, RoPE θ 5e6.
    # SmolLM3ForCausalLM on the meta device: 3,075,098,624, the Hub's safetensors total
    "smollm3-3b": ModelConfig(
        vocab_size=128256,
        d_model=2048,
        n_layers=36,
        n_heads=16,
        n_kv_heads=4,
        ffn_hidden=11008,
        max_seq_len=65536,
        tie_embeddings=True,
        nope_layers=",".join(str(i) for i in range(3, 36, 4)),
        rope_theta=5e6,
        norm_eps=1e-6,
    ),
    # microsoft/Phi-4-mini-instruct config.json (tests/published_configs/phi-4-mini-instruct.json):
    # qkv_proj and gate_up_proj fused, RoPE on the first 96 of each head's 128 dimensions, 24 heads
    # on 8 KV heads, a tied head of vocab 200064, a window of 262144 on every layer (longer than
    # its 131072 positions); its LongRoPE scaling not modelled. Phi3ForCausalLM on the meta device:
    # 3,836,021,760, the Hub's safetensors total
    "phi-4-mini": ModelConfig(
        vocab_size=200064,
        d_model=3072,
        n_layers=32,
        n_heads=24,
        n_kv_heads=8,
        ffn_hidden=8192,
        max_seq_len=131072,
        tie_embeddings=True,
        sliding_window=262144,
        partial_rotary_factor=0.75,
        fused_keys=True,
        norm_eps=1e-5,
    ),
    # microsoft/Phi-3-mini-4k-instruct config.json (tests/published_configs/phi-3-mini-4k-instruct.json):
    # fused projections, 32 heads of 96 (MHA), a window of 2047 on every layer, vocab 32064.
    # Phi3ForCausalLM on the meta device: 3,821,079,552, the Hub's safetensors total
    "phi-3-mini-4k": ModelConfig(
        vocab_size=32064,
        d_model=3072,
        n_layers=32,
        n_heads=32,
        n_kv_heads=32,
        ffn_hidden=8192,
        max_seq_len=4096,
        sliding_window=2047,
        fused_keys=True,
        norm_eps=1e-5,
    ),
    # zai-org/GLM-4.5-Air config.json (tests/published_configs/glm-4.5-air.json): 96 heads of 128
    # on 8 KV heads with q/k/v biases (none on o_proj), half of each head rotated, one dense block
    # then 128 experts of 1408 (top-8, sigmoid scores with the correction bias, renormalised) and a
    # shared one; its MTP layer is not part of Glm4MoeForCausalLM. On the meta device:
    # 106,852,245,504 (the card: 106B total, 12B active)
    "glm-4.5-air": ModelConfig(
        vocab_size=151552,
        d_model=4096,
        n_layers=46,
        n_heads=96,
        n_kv_heads=8,
        head_dim=128,
        ffn_hidden=10944,
        max_seq_len=131072,
        qkv_bias=True,
        o_bias=False,
        partial_rotary_factor=0.5,
        n_experts=128,
        experts_per_token=8,
        expert_ffn_hidden=1408,
        n_shared_experts=1,
        moe_layers="from:1",
        moe_scoring="sigmoid",
        rope_theta=1e6,
        norm_eps=1e-5,
    ),
    **HYBRID_PRESETS,  # Qwen3-Next, Qwen3.5
    **RECENT_PRESETS,  # Llama 4 Scout, Maverick; Mistral Small 4
    # TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T config.json
    "tinyllama-1.1b": ModelConfig(
        d_model=2048, n_layers=22, n_heads=32, n_kv_heads=4, ffn_hidden=5632, max_seq_len=2048, **_LLAMA
    ),
}


def get_preset(name: str) -> ModelConfig:
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; known presets: {', '.join(PRESETS)}") from None
