"""The seed's section-七 table (2017 Transformer vs LLaMA), evaluated on any config: each row's
option switched alone on the config, everything else equal, with what it does to the
parameters, the forward FLOPs and the KV cache.
"""

from __future__ import annotations

from dataclasses import asdict, astuple, dataclass

import pandas as pd

from .. import analysis
from ..config import ConfigError, ModelConfig, seed_ffn_hidden
from ..model import INIT_STD
from .claims import xavier_uniform_std

# The seed table's Chinese cells in English (the originals are kept in RowText and shown apart)
ENGLISH = {
    "统一任务，训练并行": "one task format, parallel training",
    "梯度稳定": "stable gradients",
    "可融合，更快": "fusable, faster",
    "相对位置，外推好": "relative positions, extrapolates well",
    "门控表达力强": "gating is more expressive",
    "补偿 SwiGLU 的额外矩阵": "makes up for SwiGLU's extra matrix",
    "平滑": "smooth",
    "省 KV cache": "saves KV cache",
    "RMSNorm 已处理尺度": "RMSNorm already takes care of the scale",
    "更简洁": "simpler",
    "标准配置": "the standard setup",
    "效率": "efficiency",
    "正弦绝对位置 (sinusoidal)": "sinusoidal absolute positions",
    "GQA（推理友好）": "GQA (inference-friendly)",
    "无 bias (seed; in fact biases)": "no bias (seed; in fact biases)",
    "无 bias": "no bias",
}


def in_english(text: str) -> str:
    """A cell of the seed's table in English (as it is when it has no Chinese)."""
    return ENGLISH.get(text, text)


@dataclass(frozen=True)
class RowText:
    """What the seed's table says in one row, and what the config uses."""

    aspect: str  # English name of the row
    aspect_zh: str  # the seed's row name
    transformer_2017: str  # the seed's left column
    llama: str  # the seed's right column
    seed_reason: str  # the seed's 原因 column
    current: str  # what the current config uses


@dataclass(frozen=True)
class Workload:
    seq_len: int
    batch: int
    dtype: str  # of the KV cache bytes


@dataclass(frozen=True)
class ComparisonRow(RowText):
    """A row of the table: the seed's words, then what the lab computes on the config."""

    lab: str  # what switching this one option changes, computed
    params_2017: int | None  # total parameters with the 2017 option, all else as the config
    params_llama: int | None
    flops_2017: int | None  # forward matmul FLOPs at (batch, seq_len)
    flops_llama: int | None
    kv_bytes_per_token_2017: int | None
    kv_bytes_per_token_llama: int | None
    ablation: str | None  # experiments.ablation_specs kind that trains this contrast

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ArchitectureComparison:
    config: dict
    seq_len: int
    batch: int
    dtype: str
    rows: list

    def to_dict(self) -> dict:
        return {
            "config": self.config,
            "seq_len": self.seq_len,
            "batch": self.batch,
            "dtype": self.dtype,
            "rows": [row.to_dict() for row in self.rows],
        }

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([row.to_dict() for row in self.rows])


def _variant(cfg: ModelConfig, **changes) -> tuple[ModelConfig | None, str | None]:
    try:
        return cfg.replace(**changes), None
    except ConfigError as exc:
        return None, str(exc)


def _delta_text(before: int, after: int, unit: str) -> str:
    if before == after:
        return f"{unit} unchanged ({before:,})"
    change = f"{after - before:+,}"
    change_ratio = (after - before) / before if before else 0.0
    share = f" ({change_ratio:+.2%})" if abs(change_ratio) >= 1e-3 else f" ({change_ratio:+.4%})"
    share = share if before else ""
    return f"{unit} {before:,} → {after:,}: {change}{share}"


def _elementwise(cfg: ModelConfig, work: Workload, term: str, **changes) -> str:
    """An element-wise FLOP term of ``cfg`` with ``changes``, or "—" when they make an
    impossible config (a ReLU FFN for a mixture of experts, say)."""
    variant, _ = _variant(cfg, **changes)
    if variant is None:
        return "—"
    return f"{analysis.count_flops(variant, work.seq_len, work.batch).elementwise[term]:,}"


def _row(
    text: RowText, lab: str, counts: tuple[int | None, ...] = (None,) * 6, ablation: str | None = None
) -> ComparisonRow:
    fields = (*astuple(text), lab, *counts, ablation)  # RowText's, then ComparisonRow's own
    return ComparisonRow(*fields)


def _measured_row(
    cfg: ModelConfig,
    work: Workload,
    text: RowText,
    old: dict,
    new: dict,
    extra: str = "",
    ablation: str | None = None,
) -> ComparisonRow:
    """A row whose two options are config changes: count both on top of ``cfg``."""
    old_cfg, old_error = _variant(cfg, **old)
    new_cfg, new_error = _variant(cfg, **new)
    if old_cfg is None or new_cfg is None:
        return _row(text, f"not comparable on this config: {old_error or new_error}", ablation=ablation)
    params = (analysis.count_params(old_cfg).total, analysis.count_params(new_cfg).total)
    flops = (
        analysis.count_flops(old_cfg, work.seq_len, work.batch).forward,
        analysis.count_flops(new_cfg, work.seq_len, work.batch).forward,
    )
    kv = (
        analysis.kv_cache_bytes_per_token(old_cfg, work.dtype),
        analysis.kv_cache_bytes_per_token(new_cfg, work.dtype),
    )
    parts = [_delta_text(*params, "params"), _delta_text(*flops, "forward FLOPs")]
    if kv[0] != kv[1]:
        parts.append(_delta_text(*kv, f"KV bytes/token ({work.dtype})"))
    lab = "; ".join(parts) + (f". {extra}" if extra else "")
    return _row(text, lab, (*params, *flops, *kv), ablation)


def _recipe_rows(cfg: ModelConfig, work: Workload) -> list[ComparisonRow]:
    """Rows whose options are switches of the config: norms, positions, FFN."""
    d = cfg.d_model
    norm_elementwise = {
        norm: _elementwise(cfg, work, "norms", norm_type=norm) for norm in ("layernorm", "rmsnorm")
    }
    return [
        _text_row(
            RowText(
                "structure", "结构", "Encoder-Decoder", "Decoder-only", "统一任务，训练并行", "decoder-only"
            ),
            "Both recipes are built decoder-only here (no encoder, no cross-attention); "
            "the 2017 column is the original decoder block.",
        ),
        _measured_row(
            cfg,
            work,
            RowText(
                "norm position", "归一化位置", "Post-LN", "Pre-LN", "梯度稳定", cfg.norm_position + "-LN"
            ),
            old=dict(norm_position="post", final_norm=False),
            new=dict(norm_position="pre", final_norm=True),
            extra="Pre-LN adds only the final norm; its benefit is in the gradients "
            "(see the Gradient norms page)",
            ablation="norm_position",
        ),
        _measured_row(
            cfg,
            work,
            RowText("norm type", "归一化类型", "LayerNorm", "RMSNorm", "可融合，更快", cfg.norm_type),
            old=dict(norm_type="layernorm"),
            new=dict(norm_type="rmsnorm"),
            extra=f"element-wise norm FLOPs {norm_elementwise['layernorm']} → "
            f"{norm_elementwise['rmsnorm']} (not in forward)",
            ablation="norm_type",
        ),
        _measured_row(
            cfg,
            work,
            RowText(
                "positions",
                "位置编码",
                "正弦绝对位置 (sinusoidal)",
                "RoPE",
                "相对位置，外推好",
                cfg.pos_encoding,
            ),
            old=dict(pos_encoding="sinusoidal"),
            new=dict(pos_encoding="rope"),
            extra="neither has parameters; RoPE rotates q and k in every layer, the sinusoid is added once",
        ),
        _measured_row(
            cfg,
            work,
            RowText(
                "FFN", "FFN", "ReLU", "SwiGLU", "门控表达力强", f"{cfg.ffn_type} (width {cfg.ffn_hidden:,})"
            ),
            old=dict(ffn_type="relu"),
            new=dict(ffn_type="swiglu"),
            extra="at the same width SwiGLU adds a third d×F matrix (gate_proj)",
            ablation="ffn",
        ),
        _measured_row(
            cfg,
            work,
            RowText(
                "FFN width",
                "FFN 中间维度",
                "4d",
                "~2.67d",
                "补偿 SwiGLU 的额外矩阵",
                f"{cfg.ffn_hidden / d:.3g}d",
            ),
            old=dict(ffn_type="relu", ffn_hidden=4 * d),
            new=dict(ffn_type="swiglu", ffn_hidden=seed_ffn_hidden(d)),
            extra=f"ReLU at 4d = {4 * d:,} vs SwiGLU at ⌊8/3·d⌋ = "
            f"{seed_ffn_hidden(d):,}: about equal by design",
            ablation="ffn",
        ),
    ]


def _other_rows(cfg: ModelConfig, work: Workload) -> list[ComparisonRow]:
    """Activation, attention, init, bias, schedule, precision."""
    d = cfg.d_model
    elementwise = {
        ffn: _elementwise(cfg, work, "activation", ffn_type=ffn) for ffn in ("relu", "gelu", "swiglu")
    }
    variants = analysis.attention_variants(cfg)
    xavier = (xavier_uniform_std(d, d), xavier_uniform_std(d, cfg.ffn_hidden))
    weights = {name: analysis.weight_bytes(cfg, name) for name in ("fp32", "bf16")}
    kv_by_dtype = {name: analysis.kv_cache_bytes_per_token(cfg, name) for name in ("fp32", "bf16")}
    forward = analysis.count_flops(cfg, work.seq_len, work.batch).forward
    return [
        _text_row(
            RowText("activation", "激活", "ReLU", "GELU / SiLU", "平滑", cfg.ffn_type),
            f"no parameters; element-wise activation FLOPs at the current width: ReLU "
            f"{elementwise['relu']}, GELU {elementwise['gelu']}, SwiGLU (SiLU·up) "
            f"{elementwise['swiglu']} (not in forward)",
        ),
        _measured_row(
            cfg,
            work,
            RowText("attention", "Attention", "MHA", "GQA（推理友好）", "省 KV cache", cfg.attention_kind),
            old=dict(n_kv_heads=variants["mha"].n_kv_heads),
            new=dict(n_kv_heads=variants["gqa"].n_kv_heads),
            extra=f"GQA column: {variants['gqa'].n_kv_heads} KV heads for {cfg.n_heads} query heads",
        ),
        _text_row(
            RowText("init", "初始化", "Xavier", "N(0, 0.02)", "RMSNorm 已处理尺度", cfg.init),
            f"Xavier-uniform std: {xavier[0]:.4f} for a d×d projection, {xavier[1]:.4f} "
            f"for up_proj (d×{cfg.ffn_hidden:,}); N(0, 0.02) uses {INIT_STD} everywhere",
        ),
        _measured_row(
            cfg,
            work,
            RowText(
                "bias",
                "归一化 (bias)",
                "无 bias (seed; in fact biases)",
                "无 bias",
                "更简洁",
                str(cfg.bias).lower(),
            ),
            old=dict(bias=True),
            new=dict(bias=False),
            extra="the seed says the 2017 model had no bias, but its FFN is "
            "ReLU(xW₁ + b₁)W₂ + b₂ and its LayerNorm has β",
        ),
        _text_row(
            RowText("LR schedule", "学习率调度", "warmup+decay", "warmup + cosine", "标准配置", "—"),
            "no parameter or FLOP effect; train both recipes below to compare",
            ablation="recipe",
        ),
        _text_row(
            RowText("precision", "精度", "fp32", "bf16/fp16", "效率", work.dtype),
            f"weights {weights['fp32']:,} → {weights['bf16']:,} bytes; KV cache "
            f"{kv_by_dtype['fp32']:,} → {kv_by_dtype['bf16']:,} bytes/token; the matmul "
            f"FLOPs ({forward:,}) are the same, run at the bf16 tensor-core peak",
        ),
    ]


def _text_row(text: RowText, lab: str, ablation: str | None = None) -> ComparisonRow:
    return _row(text, lab, ablation=ablation)


def architecture_comparison(
    cfg: ModelConfig, seq_len: int, batch: int = 1, dtype: str = "bf16"
) -> ArchitectureComparison:
    """The seed's 2017-vs-LLaMA table, row by row, each switched alone on ``cfg``."""
    work = Workload(seq_len, batch, dtype)
    rows = _recipe_rows(cfg, work) + _other_rows(cfg, work)
    return ArchitectureComparison(cfg.to_dict(), seq_len, batch, dtype, rows)
