"""Roofline figures: decode steps on a GPU's roof, and the throughput bound over batch. The one
number drawn here that is not a count is the roof itself, min(peak, intensity × bandwidth):
the chart's definition.
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd
import plotly.graph_objects as go

from .. import analysis
from ..analysis.quant import WeightQuant
from ..config import ModelConfig
from ..runtime.hardware import GPU
from ..units import plural
from ..validation.efficiency import Efficiency, decode_step
from ..validation.predict import interval
from .common import ATTENTION_COLORS, layout_figure

ROOFLINE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # batches the decode roofline is drawn at


def roofline_points(
    cfg: ModelConfig,
    gpu: GPU,
    batches: Sequence[int],
    context_len: int,
    dtype: str,
    weights: WeightQuant | str | None = None,
    kv_dtype: str | None = None,
) -> pd.DataFrame:
    """Decode steps of MHA / GQA / MQA over batch at one context length (computing at
    ``dtype``; weights and cache stored at ``weights`` / ``kv_dtype``, default ``dtype``): the
    roofline bound, and the calibrated estimate with its interval (``validation``)."""
    rows = []
    eff = Efficiency.load()
    for kind, variant in analysis.attention_variants(cfg, distinct=True).items():
        for batch in batches:
            r = analysis.roofline(
                variant, gpu, batch, context_len, dtype, phase="decode", weights=weights, kv_dtype=kv_dtype
            )
            step = decode_step(variant, gpu, batch, context_len, weights or dtype, kv_dtype or dtype, 1, eff)
            estimate = batch / step.estimate
            low, high = interval(estimate, "decode_bs1" if batch == 1 else "decode_batched", r.tokens_per_s)
            rows.append(
                {
                    "attention": kind,
                    "n_kv_heads": variant.n_kv_heads,
                    "batch": batch,
                    "context_len": context_len,
                    "arithmetic_intensity": r.arithmetic_intensity,
                    "achieved_flops_per_s": r.flops / r.time_per_step_s,
                    "tokens_per_s": r.tokens_per_s,
                    "tokens_per_s_estimate": estimate,
                    "tokens_per_s_low": low,
                    "tokens_per_s_high": high,
                    "time_per_token_ms": r.time_per_token_s * 1e3,
                    "bound": r.bound,
                    "peak_flops": r.peak_flops,
                    "hbm_bytes_per_s": r.hbm_bytes_per_s,
                    "ridge_point": r.ridge_point,
                }
            )
    return pd.DataFrame(rows)


def roofline_figure(points: pd.DataFrame, gpu: GPU) -> go.Figure:
    """The GPU's roof (bandwidth slope, then the compute peak) with decode steps on it."""
    peak, bandwidth = float(points.peak_flops.iloc[0]), float(points.hbm_bytes_per_s.iloc[0])
    ridge = float(points.ridge_point.iloc[0])
    low = min(points.arithmetic_intensity.min(), ridge) / 4
    high = max(points.arithmetic_intensity.max(), ridge) * 4
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[low, ridge, high],
            y=[low * bandwidth, peak, peak],
            mode="lines",
            name=f"{gpu.name} roof",
            line=dict(color="#444", width=2),
            hoverinfo="skip",
        )
    )
    for kind, part in points.groupby("attention", sort=False):
        g = int(part.n_kv_heads.iloc[0])
        fig.add_trace(
            go.Scatter(
                x=part.arithmetic_intensity,
                y=part.achieved_flops_per_s,
                mode="markers+lines",
                name=f"{kind.upper()} ({plural(g, 'KV head')})",
                marker=dict(size=9),
                line=dict(color=ATTENTION_COLORS.get(kind), dash="dot"),
                customdata=part[["batch", "tokens_per_s", "bound"]].values,
                hovertemplate=(
                    "B=%{customdata[0]}: %{x:.1f} FLOP/byte, %{y:.3s}FLOP/s, "
                    "%{customdata[1]:,.0f} tok/s (%{customdata[2]}-bound)<extra></extra>"
                ),
            )
        )
    fig.update_xaxes(type="log", title="arithmetic intensity (FLOPs per byte moved)")
    fig.update_yaxes(type="log", title="attainable FLOP/s")
    context = int(points.context_len.iloc[0])
    return layout_figure(fig, f"Decode roofline at context {context:,} (points: batch sizes)", height=440)


def decode_throughput(points: pd.DataFrame) -> go.Figure:
    """Tokens/s over batch: the roofline bound (solid) and the calibrated estimate (dashed),
    whose bars span its kind's interval (``validation.predict.interval``)."""
    fig = go.Figure()
    for kind, part in points.groupby("attention", sort=False):
        color = ATTENTION_COLORS.get(kind)
        fig.add_trace(
            go.Scatter(
                x=part.batch,
                y=part.tokens_per_s,
                mode="lines+markers",
                name=f"{kind.upper()} bound",
                line=dict(color=color),
            )
        )
        fig.add_trace(
            go.Scatter(
                x=part.batch,
                y=part.tokens_per_s_estimate,
                mode="lines+markers",
                name=f"{kind.upper()} estimate",
                line=dict(color=color, dash="dash"),
                error_y=dict(
                    type="data",
                    symmetric=False,
                    array=part.tokens_per_s_high - part.tokens_per_s_estimate,
                    arrayminus=part.tokens_per_s_estimate - part.tokens_per_s_low,
                    color=color,
                    thickness=1,
                ),
            )
        )
    fig.update_xaxes(type="log", title="batch (sequences decoded together)")
    fig.update_yaxes(type="log", title="tokens/s")
    return layout_figure(
        fig, "Decode throughput: roofline bound (solid), calibrated estimate (dashed)", height=360
    )
