"""OLMo 2 (``olmo2``): a LLaMA whose blocks have no input norms — x + post_attention_layernorm(
attn(x)), then x + post_feedforward_layernorm(mlp(x)) — and whose QK-norm normalises all of q
(q_norm over H·head_dim) and of k (k_norm over G·head_dim) before RoPE; attention_bias on
q/k/v/o, an MLP without biases; head_dim only if given. The sidebar's group for the QK-norm
scope, NoPE blocks, partial RoPE and fused keys (OLMo 2, SmolLM3, Phi-3, GLM) is declared here."""

from __future__ import annotations

from typing import Any

from ..fields import ModelFields
from ..hf.family import (
    LAYER_SET_HELP,
    Counts,
    Exact,
    Family,
    Feature,
    FieldGroup,
    FieldSpec,
    Note,
    failing,
    head_dim_always_read,
)
from ..hf.keys import ModelType
from ..hf.reader import Reader

OLMO2 = ModelType(
    "olmo2",
    "Olmo2ForCausalLM",
    keys=frozenset({"attention_bias"}),
    nullable=frozenset({"num_key_value_heads"}),
    null_why=head_dim_always_read("olmo2"),
    block="olmo2",
    holds=frozenset({"qk_norm_projection"}),
)


def read(r: Reader) -> dict[str, Any]:
    attention = r.flag("attention_bias")
    return dict(
        norm_position="output",
        qk_norm=True,
        qk_norm_scope="projection",
        qkv_bias=attention,
        o_bias=attention,
        mlp_bias=False,
        **r.floor_head_dim(),
    )


def write(cfg: ModelFields, model_type: str) -> dict[str, Any]:
    return dict(attention_bias=cfg.qkv_bias)


def lacks(cfg: ModelFields, model_type: str) -> list[str]:
    """Olmo2Config: QK-norm over the projections always, attention_bias for q/k/v/o, no MLP
    biases, no window, no experts."""
    return failing(
        [
            (not (cfg.qk_norm and cfg.qk_norm_scope == "projection"), "no QK-norm over the projections"),
            (any(cfg.local_layer_flags), "a sliding window"),
            (cfg.is_moe, "experts"),
            (cfg.qkv_bias != cfg.o_bias, "q/k/v and o biases differ"),
            (cfg.mlp_bias, "MLP biases"),
        ]
    )


FEATURES = (
    Feature(
        "qk_norm_projection",
        "QK-norm over the whole projection",
        lambda cfg: cfg.qk_norm and cfg.qk_norm_scope == "projection",
    ),
)


def notes(cfg: ModelFields, counts: Counts) -> list[Note]:
    if cfg.norm_position != "output":
        return []
    return [
        Note(
            "positions",
            "**Output norms** (OLMo 2): each sublayer reads the residual stream itself and its "
            "output is normalised before the add, x + norm(f(x)); no norm before attention or FFN.",
        )
    ]


PRESETS: dict[str, dict[str, Any]] = {
    # allenai/OLMo-2-1124-7B config.json (tests/published_configs/olmo-2-1124-7b.json): norms on
    # the sublayers' outputs only (x + norm(f(x))), QK-norm over all of q and k, 32 heads of 128
    # (MHA), vocab 100352, RoPE θ 5e5. Olmo2ForCausalLM on the meta device: 7,298,617,344, the
    # Hub's safetensors total
    "olmo-2-7b": dict(
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
}

# the Hub's safetensors total (its API's safetensors.total; tests/published_configs/SOURCES.md)
PUBLISHED = {"olmo-2-7b": Exact(7_298_617_344)}

# OLMo 2's projection-wide QK-norm, SmolLM3's NoPE blocks, Phi-3's and GLM's partial rotary,
# Phi-3's fused checkpoint keys (OLMo 2's output norms are a choice of the recipe)
FIELDS = FieldGroup(
    "OLMo 2, SmolLM3, Phi-3, GLM (QK-norm scope, NoPE, partial RoPE)",
    (
        FieldSpec(
            "qk_norm_scope",
            "QK-norm over",
            "choice",
            help="head: one norm of head_dim per q and k head (Qwen3, Gemma 3, GLM); projection: one "
            "norm over all of q (H·D) and of k (G·D) (OLMo 2); rope_l2: per head after RoPE, no γ, "
            "on the rotated blocks only (Llama 4).",
        ),
        FieldSpec(
            "nope_layers",
            "blocks without RoPE (NoPE)",
            "text",
            help="SmolLM3 leaves every fourth block unrotated ('every:4'). " + LAYER_SET_HELP,
        ),
        FieldSpec(
            "partial_rotary_factor",
            "share of each head RoPE rotates",
            "float",
            help="partial_rotary_factor: Phi-4-mini 0.75, GLM-4.5 0.5 (the first dimensions of each head).",
            minimum=0.0,
            maximum=1.0,
            step=0.05,
        ),
        FieldSpec(
            "fused_keys",
            "fused checkpoint keys (qkv_proj, gate_up_proj)",
            "toggle",
            help="Phi-3 stores q/k/v and gate/up as one matrix each; the maths is the same.",
        ),
    ),
)

FAMILY = Family(
    "OLMo",
    (OLMO2,),
    read=read,
    write=write,
    lacks=lacks,
    notes=notes,
    features=FEATURES,
    presets=PRESETS,
    published=PUBLISHED,
    field_groups=(FIELDS,),
)
