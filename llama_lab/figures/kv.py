"""Figures and tables of the KV cache: MHA / GQA / MQA bytes, what fits a GPU, cache against
context, and which query heads read which KV head.
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .. import analysis
from ..analysis.kv import kv_dtype_of
from ..analysis.quant import WeightQuant
from ..config import LIMITS, ModelConfig
from ..runtime.hardware import GPU
from ..units import plural
from .common import ATTENTION_COLORS, GIB, GROUP_PALETTE, display_frame, layout_figure, mark, sweep_lengths

KV_CONTEXT_FLOOR = 32_768  # the cache-vs-context chart reaches at least this context


def kv_fit_frame(
    cfg: ModelConfig,
    gpu: GPU,
    seq_len: int,
    batch: int,
    dtype: WeightQuant | str,
    kv_dtype: str | None = None,
) -> pd.DataFrame:
    """MHA / GQA / MQA of the same model: KV bytes per token, the cache at B×T, weights, and the
    longest context (at batch B) and largest batch (at length T) that fit on ``gpu`` — the
    weights stored at ``dtype``, the cache at ``kv_dtype`` (default: ``dtype``)."""
    kv_dtype = kv_dtype or kv_dtype_of(dtype)
    rows = []
    for kind, variant in analysis.attention_variants(cfg, distinct=True).items():
        report = analysis.kv_cache(variant, seq_len, batch, kv_dtype)
        rows.append(
            {
                "attention": kind.upper(),
                "n_kv_heads": variant.n_kv_heads,
                "kv_bytes_per_token": report.bytes_per_token,
                "kv_cache_bytes": report.bytes,
                "weight_bytes": analysis.weight_bytes(variant, dtype),
                "max_context_at_batch": analysis.max_context_that_fits(variant, gpu, batch, dtype, kv_dtype),
                "max_batch_at_seq_len": analysis.max_batch_that_fits(variant, gpu, seq_len, dtype, kv_dtype),
                "is_current": variant == cfg,
            }
        )
    return pd.DataFrame(rows)


MLA_FORM_LABELS = {
    "absorbed": "absorbed: the latent cached, W_UK into q and W_UV into the output (serving engines)",
    "naive": "naive: every head's up-projected K and V cached (early implementations)",
    "rebuilt": "rebuilt: the latent cached, every head's K and V rebuilt each step (transformers 5)",
}


def mla_forms_frame(
    cfg: ModelConfig,
    gpu: GPU,
    batch: int,
    context_len: int,
    dtype: str,
    weights: WeightQuant | str,
    kv_dtype: str,
) -> pd.DataFrame:
    """An MLA model's three ways to decode one token per sequence at ``context_len`` on ``gpu``
    (``analysis.flops.MLA_FORMS``): the cache each keeps, FLOPs and bytes per step, and the
    roofline bound."""
    rows = []
    for form, label in MLA_FORM_LABELS.items():
        r = analysis.roofline(cfg, gpu, batch, context_len, dtype, "decode", weights, kv_dtype, mla_form=form)
        per_token = (
            analysis.naive_mla_bytes_per_token(cfg, kv_dtype)
            if form == "naive"
            else analysis.kv_cache_bytes_per_token(cfg, kv_dtype)
        )
        rows.append(
            {
                "decode": label,
                "cache_bytes_per_token": per_token,
                "cache_bytes": per_token * batch * context_len,
                "flops_per_step": r.flops,
                "bytes_per_step": r.bytes_moved,
                "arithmetic_intensity": r.arithmetic_intensity,
                "bound": r.bound,
                "time_per_token_ms": r.time_per_token_s * 1e3,
                "fits": analysis.weight_bytes(cfg, weights) + per_token * batch * context_len
                <= gpu.usable_bytes,
            }
        )
    return pd.DataFrame(rows)


def kv_context_lengths(cfg: ModelConfig, fit: pd.DataFrame, seq_len: int) -> tuple[int, ...]:
    """The context lengths of the cache-vs-context chart — the KV page's and the report's: from
    16 to the longest of max_seq_len, the analysed T, twice the longest context that fits the
    GPU at batch B (``fit``: ``kv_fit_frame``) and 32,768, within the allowed lengths."""
    upper = max(cfg.max_seq_len, seq_len, 2 * int(fit.max_context_at_batch.max()), KV_CONTEXT_FLOOR)
    return sweep_lengths(min(upper, LIMITS["max_seq_len"]))


def kv_memory_curve_frame(
    cfg: ModelConfig,
    context_lens: Sequence[int],
    batch: int,
    dtype: WeightQuant | str,
    kv_dtype: str | None = None,
) -> pd.DataFrame:
    """Weights (at ``dtype``) + KV cache (at ``kv_dtype``, default ``dtype``) for each
    attention variant over context length."""
    rows = []
    for kind, variant in analysis.attention_variants(cfg, distinct=True).items():
        weights = analysis.weight_bytes(variant, dtype)
        for context in context_lens:
            cache = analysis.kv_cache(variant, context, batch, kv_dtype or kv_dtype_of(dtype)).bytes
            rows.append(
                {
                    "attention": kind,
                    "n_kv_heads": variant.n_kv_heads,
                    "context_len": context,
                    "kv_cache_bytes": cache,
                    "weight_bytes": weights,
                    "total_bytes": weights + cache,
                }
            )
    return pd.DataFrame(rows)


def kv_memory_vs_context(frame: pd.DataFrame, gpu: GPU | None = None) -> go.Figure:
    frame = display_frame(frame)
    fig = go.Figure()
    for kind, part in frame.groupby("attention", sort=False):
        g = int(part.n_kv_heads.iloc[0])
        fig.add_trace(
            go.Scatter(
                x=part.context_len,
                y=part.total_bytes / GIB,
                mode="lines",
                name=f"{kind.upper()} ({plural(g, 'KV head')})",
                line=dict(color=ATTENTION_COLORS.get(kind)),
                customdata=part.kv_cache_bytes / GIB,
                hovertemplate="T=%{x:,}: %{y:.2f} GiB total, KV %{customdata:.2f} GiB<extra></extra>",
            )
        )
    if gpu is not None:
        mark(
            fig,
            y=gpu.usable_bytes / GIB,
            text=f"{gpu.name}: {gpu.usable_bytes / GIB:.1f} GiB",
            color="#444",
            dash="dash",
        )
    fig.update_xaxes(type="log", title="context length (tokens per sequence)")
    fig.update_yaxes(type="log", title="weights + KV cache (GiB)")
    return layout_figure(fig, "Memory for serving: weights + KV cache", height=420)


def kv_sharing_diagram(n_heads: int, n_kv_heads: int, max_heads: int = 64) -> go.Figure:
    """Query heads (top) and the KV head each one reads (bottom); a colour per group."""
    shown_q = min(n_heads, max_heads)
    n_rep = n_heads // n_kv_heads
    shown_kv = (shown_q - 1) // n_rep + 1
    palette = GROUP_PALETTE
    q_x = list(range(shown_q))
    # each KV head sits under the middle of the query heads it serves
    kv_x = [g * n_rep + (min(n_rep, shown_q - g * n_rep) - 1) / 2 for g in range(shown_kv)]
    line_x, line_y = [], []
    for q in q_x:
        line_x += [q, kv_x[q // n_rep], None]
        line_y += [1, 0, None]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=line_x,
            y=line_y,
            mode="lines",
            line=dict(color="#bbb", width=1),
            hoverinfo="skip",
            showlegend=False,
        )
    )
    fig.add_trace(
        go.Scatter(
            x=q_x,
            y=[1] * shown_q,
            mode="markers",
            name="query heads",
            marker=dict(symbol="square", size=14, color=[palette[(q // n_rep) % len(palette)] for q in q_x]),
            hovertemplate="query head %{x}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=kv_x,
            y=[0] * shown_kv,
            mode="markers+text",
            name="KV heads",
            marker=dict(
                symbol="diamond", size=18, color=[palette[g % len(palette)] for g in range(shown_kv)]
            ),
            text=[f"kv{g}" for g in range(shown_kv)],
            textposition="bottom center",
            customdata=list(range(shown_kv)),
            hovertemplate="KV head %{customdata}<extra></extra>",
        )
    )
    kind = "MHA" if n_kv_heads == n_heads else ("MQA" if n_kv_heads == 1 else "GQA")
    share = "shares" if n_heads == 1 else "share"
    title = (
        f"{kind}: {plural(n_heads, 'query head')} {share} {plural(n_kv_heads, 'KV head')} "
        f"({n_rep} per KV head)"
    )
    if shown_q < n_heads:
        title += f" — first {shown_q} query heads shown"
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False, range=[-0.6, 1.3])
    return layout_figure(fig, title, height=260, showlegend=False)


def kv_dtype_frame(cfg: ModelConfig, gpu: GPU, batch: int, weights: WeightQuant | str) -> pd.DataFrame:
    """The cache's dtype axis next to MHA/GQA/MQA: bytes per token (int8/int4 with their
    per-token scales) and the longest context that fits ``gpu`` at ``batch`` next to the
    weights stored as ``weights``, for every KV dtype and attention kind."""
    variants = analysis.attention_variants(cfg, distinct=True)
    rows = []
    for kv_dtype in analysis.KV_DTYPES:
        row: dict[str, str | int] = {"kv_dtype": kv_dtype}
        for kind, variant in variants.items():
            row[f"{kind}_bytes_per_token"] = analysis.kv_cache_bytes_per_token(variant, kv_dtype)
            row[f"{kind}_longest_context"] = analysis.max_context_that_fits(
                variant, gpu, batch, weights, kv_dtype
            )
        rows.append(row)
    return pd.DataFrame(rows)


def weights_by_format(cfg: ModelConfig) -> pd.DataFrame:
    """The weights' bytes in every format at its defaults: data, scales, what stays in bf16."""
    rows = []
    for name in analysis.WEIGHT_DTYPES:
        stored = analysis.weights_bytes(cfg, name)
        rows.append(
            {
                "weights": name,
                "bytes": stored.total,
                "quantised_data": stored.quantised,
                "scales": stored.scales,
                "kept_in_16_bits": stored.kept,
                "group_size": stored.quant["group_size"] if name in analysis.quant.QUANTISED else None,
            }
        )
    return pd.DataFrame(rows)


SPARSE_COLORS = {"dsa": "#1b9e77", **ATTENTION_COLORS}
SPARSE_NAMES = {"dsa": "DSA (this model)", "mla": "MLA over every key (no indexer)", "gqa": "GQA"}


def decode_cost_figure(frame: pd.DataFrame, index_topk: int) -> go.Figure:
    """``analysis.rooflines.decode_cost_frame`` drawn: a decoded token's score FLOPs and the
    cache bytes it reads against the context, DSA beside MLA and GQA, index_topk marked."""
    frame = display_frame(frame)
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("score FLOPs per token", "cache bytes read per token")
    )
    for kind, part in frame.groupby("attention", sort=False):
        name = SPARSE_NAMES[kind] + (
            "" if kind != "gqa" else f" ({plural(int(part.n_kv_heads.iloc[0]), 'KV head')})"
        )
        for col, column in ((1, "score_flops"), (2, "cache_bytes_read")):
            fig.add_trace(
                go.Scatter(
                    x=part.context_len,
                    y=part[column],
                    mode="lines",
                    name=name,
                    legendgroup=kind,
                    showlegend=col == 1,
                    line=dict(color=SPARSE_COLORS[kind]),
                    hovertemplate="S=%{x:,}: %{y:,.4s}<extra></extra>",
                ),
                row=1,
                col=col,
            )
        dsa = part if kind == "dsa" else None
        if dsa is not None and dsa.indexer_flops.any():
            fig.add_trace(
                go.Scatter(
                    x=dsa.context_len,
                    y=dsa.indexer_flops,
                    mode="lines",
                    name="of which the indexer",
                    line=dict(color=SPARSE_COLORS["dsa"], dash="dot"),
                    hovertemplate="S=%{x:,}: %{y:,.4s}<extra></extra>",
                ),
                row=1,
                col=1,
            )
    for col in (1, 2):
        fig.add_vline(x=index_topk, line=dict(color="#444", dash="dash"), row=1, col=col)
    fig.update_xaxes(type="log", title="context S (keys per sequence)")
    fig.update_yaxes(type="log")
    return layout_figure(fig, f"Decoding one token: DSA attends at most {index_topk:,} keys", height=420)
