"""gpt-oss (``gpt_oss``): every layer's attention has q/k/v/o biases (attention_bias) and one sink
logit per query head, which joins the softmax and is dropped after it; layer_types (sliding on
even layers unless given) picks the layers that attend through sliding_window; every layer's MLP
is gpt-oss's expert block: a router with a bias (softmax over the top-k logits), experts of
intermediate_size with biases and the clamped SwiGLU (swiglu_limit, swiglu_alpha). Its model
never reads hidden_act; its config class's default RoPE is YaRN, so a written config says plain
RoPE explicitly."""

from __future__ import annotations

from typing import Any

from ...units import plural
from ..bounds import FAMILY_LIMITS
from ..fields import ModelFields
from ..hf.family import Counts, Family, Feature, FieldGroup, FieldSpec, Note, Rounded, failing
from ..hf.keys import ModelType
from ..hf.reader import LAYER_KINDS, Reader, windows
from ..hf.write import rope_parameters

GPT_OSS = ModelType(
    "gpt_oss",
    "GptOssForCausalLM",
    keys=frozenset(
        {
            "attention_bias",
            "sliding_window",
            "layer_types",
            "num_local_experts",
            "num_experts",
            "num_experts_per_tok",
            "swiglu_limit",
            "swiglu_alpha",
        }
    ),
    # GptOssConfig takes a null sliding_window too, but its model cannot run with one
    # (null_why); a null num_key_value_heads or head_dim it refuses (strict int)
    nullable=frozenset({"layer_types"}),
    null_why={
        "sliding_window": "GptOssModel builds its sliding-window mask on every forward and raises "
        "without a window"
    },
    holds=frozenset({"sinks", "gpt_oss_experts"}),
)


def read(r: Reader) -> dict[str, Any]:
    attention = r.flag("attention_bias")
    layer_types = r.layer_types()
    if layer_types is None:  # GptOssConfig.__post_init__
        layer_types = [LAYER_KINDS[0] if (i + 1) % 2 else LAYER_KINDS[1] for i in range(r.n_layers)]
    local = [i for i, kind in enumerate(layer_types) if kind == "sliding_attention"]
    # a window of 0 would mask every key of a sliding layer (transformers keeps k > q - W)
    window = r.count("sliding_window", 1, FAMILY_LIMITS["sliding_window"]) if local else None
    sliding_window, local_layers = windows(window, local, r.n_layers)
    return dict(
        qkv_bias=attention,
        o_bias=attention,
        mlp_bias=True,  # the experts' biases (every layer is sparse: no dense FFN to carry one)
        attention_sinks=True,
        sliding_window=sliding_window,
        local_layers=local_layers,
        n_experts=r.get("num_local_experts"),
        experts_per_token=r.get("num_experts_per_tok"),
        expert_ffn_hidden=r.get("intermediate_size"),
        moe_layers="all",
        moe_style="gpt_oss",
        moe_renormalize=True,
        moe_scoring="softmax",
        swiglu_limit=r.get("swiglu_limit"),
        swiglu_alpha=r.get("swiglu_alpha"),
    )


def write(cfg: ModelFields, model_type: str) -> dict[str, Any]:
    out = dict(
        attention_bias=cfg.qkv_bias,
        # a window the model can build its sliding mask with, even with no sliding layer
        sliding_window=cfg.sliding_window or GPT_OSS.defaults["sliding_window"],
        layer_types=["sliding_attention" if flag else "full_attention" for flag in cfg.local_layer_flags],
        num_local_experts=cfg.n_experts,
        num_experts_per_tok=cfg.experts_per_token,
        swiglu_limit=cfg.swiglu_limit,
        # always written: GptOssConfig's default (rope_parameters null) is YaRN
        rope_parameters=rope_parameters(cfg.rope_theta, cfg.rope_scaling),
    )
    if "swiglu_alpha" in GPT_OSS.defaults:  # GptOssConfig holds it (transformers 5)
        out["swiglu_alpha"] = cfg.swiglu_alpha
    return out


def lacks(cfg: ModelFields, model_type: str) -> list[str]:
    """GptOssConfig: sinks on every layer, gpt-oss experts on every layer (their biases:
    mlp_bias), one attention_bias for q/k/v/o, one width for intermediate_size."""
    return failing(
        [
            (not cfg.attention_sinks, "no attention sinks"),
            (cfg.moe_style != "gpt_oss", "no gpt-oss experts (moe_style='gpt_oss')"),
            (cfg.is_moe and not all(cfg.moe_layer_flags), "dense layers (gpt-oss's are all sparse)"),
            (cfg.expert_ffn_hidden != cfg.ffn_hidden, "an expert width apart from ffn_hidden"),
            (cfg.qkv_bias != cfg.o_bias, "q/k/v and o biases differ"),
            (not cfg.mlp_bias, "no MLP biases (gpt-oss's experts have them)"),
            (cfg.qk_norm, "QK-norm"),
            (
                cfg.swiglu_alpha != 1.702 and "swiglu_alpha" not in GPT_OSS.defaults,
                "a swiglu_alpha this transformers' GptOssConfig cannot hold",
            ),
        ]
    )


FEATURES = (
    Feature("sinks", "attention sinks", lambda cfg: cfg.attention_sinks),
    Feature("gpt_oss_experts", "gpt-oss experts", lambda cfg: cfg.moe_style == "gpt_oss"),
)


def notes(cfg: ModelFields, counts: Counts) -> list[Note]:
    out = []
    if cfg.attention_sinks:
        out.append(
            Note(
                "sinks",
                f"**Attention sinks** (gpt-oss): each of the {cfg.n_heads} heads of every block has a "
                f"learned logit that joins its softmax and is dropped after it, so a head's weights "
                f"may sum to less than 1 (it can attend to nothing); {cfg.n_heads * cfg.n_layers:,} "
                f"parameters in all, no KV cache.",
            )
        )
    if cfg.is_moe and cfg.moe_style == "gpt_oss":
        out.append(
            Note(
                "experts",
                f"**gpt-oss experts**: {plural(sum(cfg.moe_layer_flags), 'sparse block')} of "
                f"{cfg.n_experts} experts; a router with a bias picks {cfg.experts_per_token} per token "
                f"and weights them by the softmax of their {cfg.experts_per_token} logits. Each expert "
                f"is a SwiGLU with biases, clamped at ±{cfg.swiglu_limit:g}: (up + 1) · "
                f"g·σ({cfg.swiglu_alpha:g}·g). Experts are {counts.experts / counts.total:.0%} of the "
                f"{counts.total:,} parameters; a token uses {counts.active:,}, or "
                f"{counts.active - counts.embedding:,} without the embedding table (the model card's "
                f"convention: the unembedding counts, the embedding does not).",
            )
        )
    return out


def _even_layers(n_layers: int) -> str:
    return ",".join(map(str, range(0, n_layers, 2)))


# gpt-oss: 64 query heads of 64 (8 KV heads) with q/k/v/o biases and a sink each, a window of
# 128 on the even layers (layer_types), every layer 4 of its experts (width 2880, biases, the
# clamped SwiGLU: limit 7, alpha 1.702), vocab 201088, RoPE θ 150000 with YaRN ×32
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
    # YaRN ×32 over 4,096 positions, its ramp's ends not rounded (both files)
    rope_scaling=dict(
        rope_type="yarn",
        factor=32.0,
        original_max_position_embeddings=4096,
        beta_fast=32.0,
        beta_slow=1.0,
        truncate=False,
    ),
    norm_eps=1e-5,
)

PRESETS: dict[str, dict[str, Any]] = {
    # openai/gpt-oss-20b config.json (tests/families/published_configs/gpt-oss-20b.json): 24 layers, 32
    # experts. GptOssForCausalLM on the meta device (transformers 5.24, AutoConfig.for_model of
    # that file without its quantization_config): 20,914,757,184 parameters
    "gpt-oss-20b": dict(**_GPT_OSS, n_layers=24, local_layers=_even_layers(24), n_experts=32),
    # openai/gpt-oss-120b config.json (tests/families/published_configs/gpt-oss-120b.json): 36 layers, 128
    # experts. GptOssForCausalLM on the meta device (as above): 116,829,156,672 parameters
    "gpt-oss-120b": dict(**_GPT_OSS, n_layers=36, local_layers=_even_layers(36), n_experts=128),
}

# The model card (arXiv 2508.10925) Table 1, whose active count takes the unembedding and not
# the embedding, and openai/gpt-oss README.md @0492bd3
PUBLISHED = {
    "gpt-oss-20b": Rounded(
        20.91e9,
        3.61e9,
        "Total Parameters 20.91B, Active Parameters 3.61B (Unembedding parameters are counted "
        "towards active, but not embeddings); 21B parameters with 3.6B active parameters",
    ),
    "gpt-oss-120b": Rounded(
        116.83e9,
        5.13e9,
        "Total Parameters 116.83B, Active Parameters 5.13B (Unembedding parameters are counted "
        "towards active, but not embeddings); 117B parameters with 5.1B active parameters",
    ),
}

FIELDS = FieldGroup(
    "Sinks and gpt-oss experts",
    (
        FieldSpec(
            "attention_sinks",
            "attention sinks (a learned logit per head)",
            "toggle",
            help="gpt-oss: each head's sink joins its softmax and is dropped after it.",
        ),
        FieldSpec(
            "moe_style",
            "expert block",
            "choice",
            help="standard (Mixtral, Qwen, DeepSeek); gpt_oss: a router with a bias, the softmax "
            "of the top-k logits, experts with biases and a clamped SwiGLU; llama4: σ of the top-k "
            "logits scales each expert's input, one shared expert beside them.",
        ),
        FieldSpec("swiglu_limit", "clamp (swiglu_limit)", "float", minimum=0.0, step=0.1),
        FieldSpec("swiglu_alpha", "gate slope α", "float", minimum=0.0, step=0.1),
    ),
)

FAMILY = Family(
    "gpt-oss",
    (GPT_OSS,),
    read=read,
    write=write,
    lacks=lacks,
    notes=notes,
    features=FEATURES,
    presets=PRESETS,
    published=PUBLISHED,
    field_groups=(FIELDS,),
)
