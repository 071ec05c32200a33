"""Granite 3.x (``granite``): a LLaMA block whose training used µP (maximal update
parametrisation), which leaves four multipliers in the model (GraniteConfig, GraniteForCausalLM
in transformers 5): the embeddings × embedding_multiplier, each sublayer's output ×
residual_multiplier before the residual add, the attention scores × attention_multiplier in place
of 1/√head_dim (a file without it scales them by 1), and the logits ÷ logits_scaling;
attention_bias on q/k/v/o, mlp_bias on the MLP. None changes a parameter or a FLOP counted (each
is one element-wise multiply), but every one changes the logits."""

from __future__ import annotations

from typing import Any

from ..fields import ModelFields
from ..hf.family import (
    Counts,
    Family,
    Feature,
    FieldGroup,
    FieldSpec,
    Note,
    Rounded,
    failing,
    head_dim_always_read,
)
from ..hf.keys import ModelType
from ..hf.reader import Reader

# GraniteConfig's keys, named as ModelConfig's fields
MULTIPLIERS = ("embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling")
GRANITE = ModelType(
    "granite",
    "GraniteForCausalLM",
    keys=frozenset({"attention_bias", "mlp_bias", *MULTIPLIERS}),
    nullable=frozenset({"num_key_value_heads"}),
    null_why=head_dim_always_read("granite"),
    holds=frozenset({"granite_multipliers"}),
)


def read(r: Reader) -> dict[str, Any]:
    attention = r.flag("attention_bias")
    return dict(
        qkv_bias=attention,
        o_bias=attention,
        mlp_bias=r.flag("mlp_bias"),
        **{name: r.get(name) for name in MULTIPLIERS},
        **r.floor_head_dim(),
    )


def write(cfg: ModelFields, model_type: str) -> dict[str, Any]:
    return dict(
        attention_bias=cfg.qkv_bias,
        mlp_bias=cfg.mlp_bias,
        **{name: getattr(cfg, name) for name in MULTIPLIERS},
    )


def lacks(cfg: ModelFields, model_type: str) -> list[str]:
    """GraniteConfig: LlamaConfig's block and biases, and its multipliers."""
    return failing(
        [
            (cfg.qk_norm, "QK-norm"),
            (any(cfg.local_layer_flags), "a sliding window"),
            (cfg.is_moe, "experts"),
            (cfg.qkv_bias != cfg.o_bias, "q/k/v and o biases differ"),
        ]
    )


FEATURES = (
    Feature("granite_multipliers", "Granite's µP multipliers", lambda cfg: cfg.has_granite_multipliers),
)


def notes(cfg: ModelFields, counts: Counts) -> list[Note]:
    if not cfg.has_granite_multipliers:
        return []
    plain = cfg.query_pre_attn_scalar**-0.5
    return [
        Note(
            "block",
            f"**µP multipliers** (Granite): the embeddings × {cfg.embedding_multiplier:g}, each "
            f"sublayer's output × {cfg.residual_multiplier:g} before the residual add, the attention "
            f"scores × {cfg.attention_multiplier:g} (not 1/√{cfg.query_pre_attn_scalar} = {plain:.4g}), "
            f"the logits ÷ {cfg.logits_scaling:g}: each an element-wise multiply, no parameters, no "
            f"FLOPs counted.",
        )
    ]


_GRANITE: dict[str, Any] = dict(
    vocab_size=49155,
    n_layers=40,
    n_heads=32,
    n_kv_heads=8,
    tie_embeddings=True,
    norm_eps=1e-5,
    embedding_multiplier=12.0,
    residual_multiplier=0.22,
)

PRESETS: dict[str, dict[str, Any]] = {
    # ibm-granite/granite-3.1-8b-instruct config.json @96fedcd (tests/families/published_configs/
    # granite-3.1-8b-instruct.json): 32 heads of 128 on 8 KV heads, SwiGLU 12,800, a tied head,
    # scores × 1/128, logits ÷ 16, RoPE θ 1e7, 128k positions. GraniteForCausalLM on the meta
    # device: 8,170,848,256
    "granite-3.1-8b": dict(
        **_GRANITE,
        d_model=4096,
        ffn_hidden=12800,
        max_seq_len=131072,
        rope_theta=1e7,
        attention_multiplier=0.0078125,
        logits_scaling=16.0,
    ),
    # ibm-granite/granite-3.0-2b-instruct config.json @342f92f (tests/families/published_configs/
    # granite-3.0-2b-instruct.json): 32 heads of 64 on 8 KV heads, SwiGLU 8,192, scores × 1/64,
    # logits ÷ 8, RoPE θ 1e4, 4,096 positions. GraniteForCausalLM on the meta device: 2,533,531,648
    "granite-3.0-2b": dict(
        **_GRANITE,
        d_model=2048,
        ffn_hidden=8192,
        max_seq_len=4096,
        attention_multiplier=0.015625,
        logits_scaling=8.0,
    ),
}

# The Granite 3.0 model cards' architecture table (ibm-granite/granite-3.0-8b-base @23357b6):
# "# Parameters | 2.5B | 8.1B | 1.3B | 3.3B" for the 2B, 8B and the two MoE models; Granite 3.1
# extends 3.0's context only (RoPE θ and positions), its shapes are 3.0's
PUBLISHED = {
    "granite-3.1-8b": Rounded(8.1e9, 8.1e9, "| # Parameters | 2.5B | **8.1B** | 1.3B | 3.3B |"),
    "granite-3.0-2b": Rounded(2.5e9, 2.5e9, "| # Parameters | **2.5B** | 8.1B | 1.3B | 3.3B |"),
}

FIELDS = FieldGroup(
    "Granite (µP multipliers)",
    (
        FieldSpec(
            "embedding_multiplier",
            "embeddings × (embedding_multiplier)",
            "float",
            help="Granite 3: 12. The token embeddings are multiplied by it.",
            minimum=0.0,
            step=0.5,
        ),
        FieldSpec(
            "residual_multiplier",
            "sublayer outputs × (residual_multiplier)",
            "float",
            help="Granite 3: 0.22. Each attention and FFN output is scaled before the residual add.",
            minimum=0.0,
            step=0.01,
        ),
        FieldSpec(
            "attention_multiplier",
            "score scale (attention_multiplier; 0 = 1/√s)",
            "float",
            help="Granite 3: 1/head_dim, in place of 1/√head_dim.",
            minimum=0.0,
            step=0.001,
        ),
        FieldSpec(
            "logits_scaling",
            "logits ÷ (logits_scaling)",
            "float",
            help="Granite 3: 8 (2B) or 16 (8B).",
            minimum=0.0,
            step=1.0,
        ),
    ),
)

FAMILY = Family(
    "Granite",
    (GRANITE,),
    read=read,
    write=write,
    lacks=lacks,
    notes=notes,
    features=FEATURES,
    presets=PRESETS,
    published=PUBLISHED,
    field_groups=(FIELDS,),
)
