"""A windowed block's attention pattern drawn: which keys each query sees at a small T, coloured
by why (causal, window, global, random), from the one mask (``model.attention.attention_mask``);
and the score FLOPs against T, dense causal attention beside the pattern
(``analysis.score_flops_against_t``, the count ``analyze`` gives)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..config import ModelConfig
from ..config.sparse import SparsePattern
from ..model import attention_mask
from .common import layout_figure, sweep_lengths

PATTERN_T = 64  # the drawn mask's tokens: small enough to see every pair


def score_cost_lengths(cfg: ModelConfig, seq_len: int) -> tuple[int, ...]:
    """The score-cost figure's lengths: 32 from 16 to the model's context (at least 1,024)."""
    return sweep_lengths(max(cfg.max_seq_len, seq_len, 1024), 16, 32)


# Why a query sees a key, in the order a pair is attributed (the first reason that holds)
MASK_REASONS = ("not seen", "causal (no window)", "window", "global token", "random block")
REASON_COLORS = ("#f0f0f0", "#9467bd", "#1f77b4", "#d62728", "#2ca02c")


def mask_reasons(cfg: ModelConfig, T: int = PATTERN_T) -> np.ndarray:
    """(T, T) codes into MASK_REASONS: the pairs a windowed block of ``cfg`` allows over T
    tokens, each by its first reason; a model without a window: the causal triangle."""
    causal = attention_mask(T, T, None, "cpu").numpy()
    W = cfg.sliding_window if any(cfg.local_layer_flags) else 0
    if not W:
        return causal.astype(np.int64)
    if cfg.chunked_attention:  # Llama 4's chunks: the window is the chunk
        return np.where(attention_mask(T, T, W, "cpu", chunk_start=0).numpy(), 2, 0)
    pattern = cfg.sparse_pattern or SparsePattern(W)
    window = attention_mask(T, T, W, "cpu", sparse=SparsePattern(W, pattern.dilation)).numpy()
    with_global = attention_mask(T, T, W, "cpu", sparse=replace(pattern, random_blocks=0)).numpy()
    allowed = attention_mask(T, T, W, "cpu", sparse=pattern).numpy()
    return np.select([window, with_global, allowed], [2, 3, 4], default=0)


def mask_heatmap(codes: np.ndarray, title: str) -> go.Figure:
    """The T×T pairs, query rows down, key columns across, coloured by MASK_REASONS."""
    n = len(MASK_REASONS)
    scale = [[edge, color] for i, color in enumerate(REASON_COLORS) for edge in (i / n, (i + 1) / n)]
    fig = go.Figure(
        go.Heatmap(
            z=codes.tolist(),  # plain lists: the page's JSON keeps the numbers readable
            zmin=-0.5,
            zmax=n - 0.5,
            colorscale=scale,
            customdata=[[MASK_REASONS[code] for code in row] for row in codes.tolist()],
            hovertemplate="query %{y}, key %{x}: %{customdata}<extra></extra>",
            colorbar=dict(tickvals=list(range(n)), ticktext=list(MASK_REASONS), title="why"),
            xgap=1,
            ygap=1,
        )
    )
    fig.update_yaxes(title="query position i", autorange="reversed", scaleanchor="x")
    fig.update_xaxes(title="key position j")
    return layout_figure(fig, title, height=460)


def pattern_title(cfg: ModelConfig, T: int) -> str:
    """The mask figure's title: the pattern's numbers."""
    p = cfg.sparse_pattern
    if not any(cfg.local_layer_flags):
        return f"Which keys each query sees (T={T}): causal, no window"
    if cfg.chunked_attention:
        return f"Which keys each query sees (T={T}): chunks of {cfg.sliding_window}"
    parts = [f"window W={cfg.sliding_window}"]
    if p is not None:
        parts += [f"dilation d={p.dilation}"] * (p.dilation > 1)
        parts += [f"global G={p.global_tokens}"] * (p.global_tokens > 0)
        parts += [f"random r={p.random_blocks} of b={p.block_size}"] * (p.random_blocks > 0)
    return f"Which keys a windowed block's query sees (T={T}): " + ", ".join(parts)


def score_cost_figure(frame: pd.DataFrame) -> go.Figure:
    """Causal score FLOPs of one sequence against T (``analysis.score_flops_against_t``): dense
    causal attention in every block (quadratic) beside the model's pattern (log-log)."""
    fig = go.Figure()
    styles = {"dense causal": dict(color="#9467bd", dash="dash"), "pattern": dict(color="#1f77b4")}
    for name, line in styles.items():
        fig.add_trace(
            go.Scatter(
                x=frame["T"].tolist(),
                y=frame[name].astype(float).tolist(),
                name=name,
                mode="lines",
                line=line,
                hovertemplate=f"{name}: %{{y:.3s}} FLOPs at T=%{{x:,}}<extra></extra>",
            )
        )
    fig.update_xaxes(type="log", title="sequence length T")
    fig.update_yaxes(type="log", title="attention score FLOPs (causal, one sequence)")
    return layout_figure(fig, "Score FLOPs against T: dense causal vs this model's pattern", height=400)
