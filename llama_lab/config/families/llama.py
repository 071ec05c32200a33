"""LLaMA (``llama``: LLaMA-1/2/3, TinyLlama): the block every other family departs from —
pre-norm RMSNorm, RoPE, SwiGLU, a final norm — with attention_bias on q/k/v/o and mlp_bias on the
FFN (transformers' LlamaConfig). Its note says what a head_dim of its own means, for any family."""

from __future__ import annotations

from typing import Any

from ..fields import ModelFields
from ..hf.family import Counts, Exact, Family, Note, failing
from ..hf.keys import ModelType
from ..hf.reader import Reader

LLAMA = ModelType(
    "llama",
    "LlamaForCausalLM",
    keys=frozenset({"attention_bias", "mlp_bias"}),
    nullable=frozenset({"num_key_value_heads", "head_dim"}),
)


def read(r: Reader) -> dict[str, Any]:
    attention = r.flag("attention_bias")
    return dict(qkv_bias=attention, o_bias=attention, mlp_bias=r.flag("mlp_bias"))


def write(cfg: ModelFields, model_type: str) -> dict[str, Any]:
    return dict(attention_bias=cfg.qkv_bias, mlp_bias=cfg.mlp_bias)


def lacks(cfg: ModelFields, model_type: str) -> list[str]:
    return failing(
        [
            (cfg.qk_norm, "QK-norm"),
            (any(cfg.local_layer_flags), "a sliding window"),
            (cfg.is_moe, "experts"),
            (cfg.qkv_bias != cfg.o_bias, "q/k/v and o biases differ"),
        ]
    )


def notes(cfg: ModelFields, counts: Counts) -> list[Note]:
    """A head_dim of its own (Qwen3, Mistral-Nemo, Gemma), in any family but MLA's."""
    if cfg.is_mla or (cfg.head_dim == cfg.d_model // cfg.n_heads and not cfg.d_model % cfg.n_heads):
        return []
    return [
        Note(
            "attention",
            f"**head_dim {cfg.head_dim}**, not d_model / n_heads = "
            f"{cfg.d_model / cfg.n_heads:g}: q is {cfg.n_heads}×{cfg.head_dim} = "
            f"{cfg.n_heads * cfg.head_dim:,} wide, o_proj maps it back to {cfg.d_model:,}.",
        )
    ]


_LLAMA: dict[str, Any] = dict(vocab_size=32000, norm_eps=1e-5, rope_theta=10000.0)
_LLAMA3: dict[str, Any] = dict(vocab_size=128256, norm_eps=1e-5, rope_theta=500000.0)

# Llama 3.1's RoPE scaling (transformers' rope_type "llama3"): wavelengths past 8,192 positions
# ÷ factor, those under 8,192 / 4 kept, a smooth band between
_LLAMA31_ROPE: dict[str, Any] = dict(
    rope_type="llama3",
    factor=8.0,
    original_max_position_embeddings=8192,
    low_freq_factor=1.0,
    high_freq_factor=4.0,
)
_LLAMA32_ROPE: dict[str, Any] = {**_LLAMA31_ROPE, "factor": 32.0}

PRESETS: dict[str, dict[str, Any]] = {
    # huggyllama/llama-7b config.json (Touvron et al. 2023, Table 2)
    "llama-7b": dict(
        d_model=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=32,
        ffn_hidden=11008,
        max_seq_len=2048,
        **{**_LLAMA, "norm_eps": 1e-6},
    ),
    # meta-llama/Llama-2-7b-hf config.json
    "llama-2-7b": dict(
        d_model=4096, n_layers=32, n_heads=32, n_kv_heads=32, ffn_hidden=11008, max_seq_len=4096, **_LLAMA
    ),
    # meta-llama/Llama-2-13b-hf config.json
    "llama-2-13b": dict(
        d_model=5120, n_layers=40, n_heads=40, n_kv_heads=40, ffn_hidden=13824, max_seq_len=4096, **_LLAMA
    ),
    # meta-llama/Llama-2-70b-hf config.json (GQA, 8 KV heads)
    "llama-2-70b": dict(
        d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8, ffn_hidden=28672, max_seq_len=4096, **_LLAMA
    ),
    # meta-llama/Meta-Llama-3-8B config.json
    "llama-3-8b": dict(
        d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8, ffn_hidden=14336, max_seq_len=8192, **_LLAMA3
    ),
    # meta-llama/Meta-Llama-3-70B config.json
    "llama-3-70b": dict(
        d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8, ffn_hidden=28672, max_seq_len=8192, **_LLAMA3
    ),
    # meta-llama/Llama-3.1-405B config.json: Llama 3.1's RoPE scaling (Meta's llama-models
    # reference apply_scaling: ×8 past the 8,192 pre-training positions, frequency factors 1 and 4)
    "llama-3.1-405b": dict(
        d_model=16384,
        n_layers=126,
        n_heads=128,
        n_kv_heads=8,
        ffn_hidden=53248,
        max_seq_len=131072,
        **_LLAMA3,
        rope_scaling=_LLAMA31_ROPE,
    ),
    # meta-llama/Llama-3.2-1B config.json (tied head; Llama 3.1's RoPE scaling at ×32, as the
    # Hub file's rope_scaling gives it: a copy at kevinstephano/thunder_model_blocks
    # hf_llama/llama_config.py, Hub commit 4e20de3)
    "llama-3.2-1b": dict(
        d_model=2048,
        n_layers=16,
        n_heads=32,
        n_kv_heads=8,
        ffn_hidden=8192,
        max_seq_len=131072,
        tie_embeddings=True,
        **_LLAMA3,
        rope_scaling=_LLAMA32_ROPE,
    ),
    # meta-llama/Llama-3.2-3B config.json (head_dim 128 = 3072/24; RoPE scaled as the 1B's)
    "llama-3.2-3b": dict(
        d_model=3072,
        n_layers=28,
        n_heads=24,
        n_kv_heads=8,
        ffn_hidden=8192,
        max_seq_len=131072,
        tie_embeddings=True,
        **_LLAMA3,
        rope_scaling=_LLAMA32_ROPE,
    ),
    # TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T config.json
    "tinyllama-1.1b": dict(
        d_model=2048, n_layers=22, n_heads=32, n_kv_heads=4, ffn_hidden=5632, max_seq_len=2048, **_LLAMA
    ),
}

# Parameter counts published for the released checkpoints (model cards / safetensors metadata)
PUBLISHED = {
    "llama-7b": Exact(6_738_415_616),
    "llama-2-7b": Exact(6_738_415_616),
    "llama-2-13b": Exact(13_015_864_320),
    "llama-2-70b": Exact(68_976_648_192),
    "llama-3-8b": Exact(8_030_261_248),
    "llama-3-70b": Exact(70_553_706_496),
    "llama-3.1-405b": Exact(405_853_388_800),
    "tinyllama-1.1b": Exact(1_100_048_384),
    "llama-3.2-1b": Exact(1_235_814_400),
    "llama-3.2-3b": Exact(3_212_749_824),
}

FAMILY = Family(
    "LLaMA",
    (LLAMA,),
    read=read,
    write=write,
    lacks=lacks,
    notes=notes,
    presets=PRESETS,
    published=PUBLISHED,
)
