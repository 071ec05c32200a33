"""Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models":
the activation bytes one GPT layer keeps for backward (16-bit activations, 1-byte dropout
masks; s sequence, b micro-batch, h hidden, a heads, t tensor-parallel ranks), term by term as
their §4.1 derives it, their Table 2 variants, and ours for the same shapes beside them: our
implementation of their GPT recipe (Pre-LN, LayerNorm, GELU 4h, biases) and of the model's own
recipe (a LLaMA block: RMSNorm, SwiGLU, RoPE, GQA), both with fused attention and no dropout.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TypedDict

from ..config import ModelConfig
from .activations import block_saved
from .common import STATS_BYTES
from .shapes import Shapes

B16 = 2  # their activations are 16-bit

# Their per-layer terms in units of s·b·h bytes (``sbh``) and a·s²·b bytes (``as2b``):
# (term, sbh factor, as²b factor, replicated under tensor parallelism without SP)
TERMS = (
    ("layer norms' inputs (2)", 4, 0, True),
    ("QKV input", 2, 0, True),
    ("Q and K", 4, 0, False),
    ("V", 2, 0, False),
    ("QKᵀ → softmax output", 0, 2, False),
    ("softmax dropout mask", 0, 1, False),
    ("softmax dropout output", 0, 2, False),
    ("attention output (projection input)", 2, 0, False),
    ("attention dropout mask", 1, 0, True),
    ("MLP input", 2, 0, True),
    ("GeLU input (4h)", 8, 0, False),
    ("GeLU output (second linear's input)", 8, 0, False),
    ("MLP dropout mask", 1, 0, True),
)
VARIANTS = ("none", "tp", "tp+sp", "tp+selective", "tp+sp+selective", "full")


def korthikanti_layer_bytes(s: int, b: int, h: int, a: int, t: int = 1, variant: str = "tp") -> float:
    """Table 2: bytes per layer. none: sbh(34 + 5as/h); tp: sbh(10 + 24/t + 5as/(ht));
    tp+sp: sbh/t·(34 + 5as/h); tp+selective: sbh(10 + 24/t); tp+sp+selective: 34·sbh/t;
    full: 2sbh (the layer's input only)."""
    sbh, attn = s * b * h, 5 * a * s / h
    return {
        "none": sbh * (34 + attn),
        "tp": sbh * (10 + 24 / t + attn / t),
        "tp+sp": sbh / t * (34 + attn),
        "tp+selective": sbh * (10 + 24 / t),
        "tp+sp+selective": sbh * 34 / t,
        "full": 2 * sbh,
    }[variant]


def gpt_recipe(cfg: ModelConfig) -> ModelConfig:
    """Their GPT block at ``cfg``'s size: Pre-LN, LayerNorm, learned positions, GELU 4h,
    biases, multi-head attention — built afresh from the sizes, so no family field of ``cfg``
    (experts, MLA, windows, Gemma's or OLMo's norms …) carries over. Heads keep ``cfg``'s
    width where d_model / n_heads does not divide (GLM-4.5-Air: 96 heads of 128 on 4096)."""
    # head_dim None: d_model / n_heads (ModelConfig resolves it)
    head_dim = cfg.head_dim if cfg.d_model % cfg.n_heads else None
    return ModelConfig(
        vocab_size=cfg.vocab_size,
        d_model=cfg.d_model,
        n_layers=cfg.n_layers,
        n_heads=cfg.n_heads,
        n_kv_heads=cfg.n_heads,
        ffn_hidden=4 * cfg.d_model,
        max_seq_len=cfg.max_seq_len,
        norm_position="pre",
        norm_type="layernorm",
        pos_encoding="learned",
        ffn_type="gelu",
        bias=True,
        final_norm=True,
        tie_embeddings=cfg.tie_embeddings,
        head_dim=head_dim,  # type: ignore[arg-type]
    )


# Our block_saved parts, in the order of their terms above
OUR_ROWS = (
    ("layer norms' inputs (2; a sandwich block's 4)", ("norms",)),
    ("QKV input", ("attention_input",)),
    ("Q, K and V (MLA: and its latent)", ("qkv", "latent")),
    ("attention output (projection input)", ("attention_output",)),
    ("MLP input", ("ffn_input",)),
    ("MLP hidden", ("ffn_hidden",)),
    ("QK-norm, RoPE casts, window mask", ("qk_norm", "rope_casts", "window_mask")),
)


class TheirTerm(TypedDict):
    """One of their §4.1 terms at s=seq_len, b=batch, t=1."""

    term: str
    bytes: int
    sbh: int  # its factor of s·b·h bytes
    as2b: int  # and of a·s²·b bytes
    replicated_under_tp: bool


class OurRow(TypedDict):
    row: str
    gpt_recipe_bytes: int
    this_config_bytes: int


class VariantRow(TypedDict):
    """One of their Table 2 variants."""

    variant: str
    korthikanti_bytes: int
    ours_bytes: int


class Difference(TypedDict):
    reason: str
    bytes: int


@dataclass(frozen=True)
class KorthikantiComparison:
    seq_len: int
    batch: int
    tp: int
    terms: list[TheirTerm]  # their terms: name, bytes (s=seq_len, b=batch, t=1)
    ours: list[OurRow]  # our rows: name, GPT recipe bytes, this config's bytes
    korthikanti_total: int  # 34sbh + 5as²b
    ours_gpt_total: int
    ours_total: int
    variants: list[VariantRow]  # Table 2: variant, theirs, ours (this config)
    differences: list[Difference]  # the reasons, with their bytes

    def to_dict(self) -> dict:
        return asdict(self)


def _ours(cfg: ModelConfig, s: int, b: int, t: int, sp: bool) -> dict:
    """The first attention block's saved tensors (a hybrid's Gated DeltaNet blocks aside)."""
    first = next((i for i, linear in enumerate(cfg.linear_layer_flags) if not linear), 0)
    return block_saved(cfg, first, b, s, B16, "bf16", t, sp)


def _our_variant(cfg: ModelConfig, s: int, b: int, t: int, variant: str) -> int:
    if variant == "full":
        return B16 * s * b * cfg.d_model  # the block input, kept in bf16
    sp = "sp" in variant
    parts = _ours(cfg, s, b, 1 if variant == "none" else t, sp)
    if "selective" in variant:  # the attention core recomputed: its logsumexp (or, with
        # sinks, its softmax over T + 1) and the mask are not kept
        heads = cfg.n_heads // t
        parts["attention_output"] -= (
            B16 * b * heads * s * (s + 1) if cfg.attention_sinks else STATS_BYTES * b * heads * s
        )
        parts["window_mask"] = 0
    return sum(parts.values())


def compare(cfg: ModelConfig, seq_len: int, batch: int = 1, tp: int = 8) -> KorthikantiComparison:
    """Their layer beside ours at ``cfg``'s h and a (the LLaMA block's own heads and widths)."""
    s, b = seq_len, batch
    h, a = Shapes.of(cfg).C, cfg.n_heads
    sbh, as2b = s * b * h, a * s * s * b
    terms: list[TheirTerm] = [
        {"term": name, "bytes": f * sbh + g * as2b, "sbh": f, "as2b": g, "replicated_under_tp": rep}
        for name, f, g, rep in TERMS
    ]
    gpt, own = _ours(gpt_recipe(cfg), s, b, 1, False), _ours(cfg, s, b, 1, False)
    ours: list[OurRow] = [
        {
            "row": name,
            "gpt_recipe_bytes": sum(gpt.get(k, 0) for k in keys),
            "this_config_bytes": sum(own.get(k, 0) for k in keys),
        }
        for name, keys in OUR_ROWS
    ]
    theirs = 34 * sbh + 5 * as2b
    gpt_total = sum(gpt.values())
    variants: list[VariantRow] = [
        {
            "variant": v,
            "korthikanti_bytes": round(korthikanti_layer_bytes(s, b, h, a, tp, v)),
            "ours_bytes": _our_variant(cfg, s, b, tp, v),
        }
        for v in VARIANTS
    ]
    differences: list[Difference] = [
        {"reason": "no dropout: three masks (2sbh + as²b) are not kept", "bytes": -(2 * sbh + as2b)},
        {
            "reason": "fused attention (SDPA / FlashAttention): no softmax output nor its dropout "
            "(4as²b); a float32 logsumexp per head and position instead",
            "bytes": -4 * as2b + STATS_BYTES * a * s * b,
        },
        {
            "reason": "LayerNorm's float32 mean and rstd per position, two norms",
            "bytes": 2 * 2 * STATS_BYTES * s * b,
        },
    ]
    return KorthikantiComparison(
        s, b, tp, terms, ours, theirs, gpt_total, sum(own.values()), variants, differences
    )
