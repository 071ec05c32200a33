"""The Scaling laws page's and the report's tables and figures: IsoFLOP curves of a published fit
with the famous models placed, the placements as a table, and the measured ladder with its fit
beside the published exponents. Every number is ``analysis.scaling``'s or the ladder's."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..analysis.scaling import PUBLISHED_FITS, ScalingFit, isoflop_losses, placements
from .common import GROUP_PALETTE, layout_figure

ISOFLOP_BUDGETS = (1e21, 1e22, 1e23, 1e24, 1e25)


def isoflop_figure(fit: ScalingFit, budgets: Sequence[float] = ISOFLOP_BUDGETS) -> go.Figure:
    """Loss against N along 6·N·D = C for each budget, its minimum marked, the models placed."""
    fig = go.Figure()
    sizes = np.logspace(8, 12.5, 120)
    for i, compute in enumerate(budgets):
        color = GROUP_PALETTE[i % len(GROUP_PALETTE)]
        fig.add_scatter(
            x=sizes, y=isoflop_losses(fit, compute, sizes), name=f"C = {compute:.0e}", line_color=color
        )
        n_opt, d_opt = fit.compute_optimal(compute)
        fig.add_scatter(
            x=[n_opt],
            y=[fit.loss(n_opt, d_opt)],
            mode="markers",
            marker=dict(color=color, size=9),
            showlegend=False,
        )
    rows = placements(fit)
    fig.add_scatter(
        x=[r["params"] for r in rows],
        y=[r["loss"] for r in rows],
        mode="markers+text",
        text=[r["name"] for r in rows],
        textposition="top center",
        marker=dict(symbol="star", size=11, color="black"),
        name="trained models",
    )
    layout_figure(
        fig, f"IsoFLOP curves ({fit.source})", xaxis_title="parameters N", yaxis_title="loss L(N, C/6N)"
    )
    fig.update_xaxes(type="log")
    return fig


def placements_frame(fit: ScalingFit) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "model": r["name"],
                "parameters": r["params"],
                "tokens": r["tokens"],
                "tokens per parameter": r["tokens_per_param"],
                "C (FLOPs)": r["compute"],
                "compute-optimal N": r["n_opt"],
                "compute-optimal tokens per parameter": r["tokens_per_param_opt"],
                "N / N_opt": r["size_vs_opt"],
                "loss": r["loss"],
                "compute-optimal loss": r["loss_opt"],
                "decode GFLOPs/token": r["decode_flops"] / 1e9,
                "compute-optimal decode GFLOPs/token": r["decode_flops_opt"] / 1e9,
                "tokens from": r["source"],
            }
            for r in placements(fit)
        ]
    )


def ladder_figure(rows: Sequence[dict], fit: ScalingFit) -> go.Figure:
    """Validation loss against tokens, one line per size (the seeds' mean, each seed a dot), the
    fit dashed."""
    fig = go.Figure()
    for i, n in enumerate(sorted({r["params"] for r in rows})):
        color = GROUP_PALETTE[i % len(GROUP_PALETTE)]
        mine = sorted((r for r in rows if r["params"] == n), key=lambda r: r["tokens"])
        tokens = [r["tokens"] for r in mine]
        fig.add_scatter(
            x=tokens,
            y=[r["val_loss"] for r in mine],
            mode="markers+lines",
            name=f"N = {n:,}",
            line_color=color,
        )
        for r in mine:
            seeds = r.get("val_losses", [])
            fig.add_scatter(
                x=[r["tokens"]] * len(seeds),
                y=seeds,
                mode="markers",
                marker=dict(color=color, size=4, opacity=0.5),
                showlegend=False,
            )
        dense = np.logspace(math.log10(tokens[0]), math.log10(tokens[-1]), 40)
        fig.add_scatter(
            x=dense,
            y=[fit.loss(n, d) for d in dense],
            mode="lines",
            line=dict(color=color, dash="dash"),
            showlegend=False,
        )
    layout_figure(
        fig,
        "The ladder measured here (dashed: its approach-3 fit)",
        xaxis_title="training tokens D",
        yaxis_title="validation loss (nats per byte)",
    )
    fig.update_xaxes(type="log")
    return fig


def exponents_frame(fit: ScalingFit, bootstrap: dict) -> pd.DataFrame:
    """α, β and a = β/(α+β): this ladder's (with its 10–90 % bootstrap interval) beside the
    published fits'."""
    rows = [
        {
            "fit": "this lab's ladder",
            "α": fit.alpha,
            "α 10–90 %": "{:.3f} – {:.3f}".format(*bootstrap["alpha"]),
            "β": fit.beta,
            "β 10–90 %": "{:.3f} – {:.3f}".format(*bootstrap["beta"]),
            "a = β/(α+β)": fit.a,
            "E": fit.E,
        }
    ]
    for published in PUBLISHED_FITS.values():
        rows.append(
            {
                "fit": published.source,
                "α": published.alpha,
                "α 10–90 %": "",
                "β": published.beta,
                "β 10–90 %": "",
                "a = β/(α+β)": published.a,
                "E": published.E,
            }
        )
    return pd.DataFrame(rows)
