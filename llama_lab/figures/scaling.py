"""The Scaling laws page's and the report's tables and figures: IsoFLOP curves of a published fit
with the famous models placed, the placements as a table, and the measured ladder with its fit
beside the published exponents. Every number is ``analysis.scaling``'s or the ladder's."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..analysis.scaling import (
    HOFFMANN_TABLE_2,
    LEFT_OUT,
    MOE_CAVEAT,
    PUBLISHED_FITS,
    ScalingFit,
    isoflop_losses,
    placements,
)
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
    for moe, label, symbol in (
        (False, "trained models (dense)", "star"),
        (True, "MoE (active N)", "diamond"),
    ):
        mine = [r for r in rows if r["moe"] == moe]
        fig.add_scatter(
            x=[r["params"] for r in mine],
            y=[r["loss"] for r in mine],
            mode="markers+text",
            text=[r["name"] for r in mine],
            textposition="top center",
            marker=dict(symbol=symbol, size=11, color="black"),
            name=label,
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
                "parameters N": r["params"],
                "N counted": f"active, of {r['total_params']:.3g} in all" if r["moe"] else "total",
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


def placements_note() -> str:
    """What the placements table cannot show: the MoE caveat and the families left out."""
    left = "; ".join(f"{name}: {why}" for name, why in LEFT_OUT.items())
    return f"{MOE_CAVEAT} Left out — {left}."


def ladder_caveat(result: dict) -> str:
    """What a CPU-sized ladder can and cannot say, with its own sizes, epochs and compute span."""
    rows = result["rows"]
    sizes = [r["params"] for r in rows]
    budgets = [r["budget"] for r in rows if r["budget"] is not None]
    return (
        "What a CPU-sized ladder can say: at a fixed budget the loss has a valley in N, the valley "
        "moves to larger N as the budget grows, and how loosely a few budgets pin the exponent (the "
        "bootstrap intervals). What it cannot: Chinchilla's exponents or tokens per parameter — "
        f"byte-level models of {min(sizes):,} to {max(sizes):,} parameters on 0.4 MB of text (up to "
        f"{max(r['epochs'] for r in rows):.1f} epochs of it), one learning rate untuned per size, a factor "
        f"of {max(budgets) / min(budgets):.0f} in compute where Hoffmann et al.'s IsoFLOP budgets span 500 "
        "(6·10¹⁸ to 3·10²¹ FLOPs)."
        + (
            f" Approach 3's irreducible loss E falls to {result['fit']['E']:.1g}: over so short a range "
            "the fit cannot tell E from the two power laws, which absorb it."
            if result["fit"]["E"] < 0.01
            else ""
        )
    )


def fixed_data_caption(rows: Sequence[dict]) -> str:
    """The fixed-data slice in words: its sizes' losses at one D (``scaling_ladder.fixed_data_rows``)."""
    if not rows:
        return "This ladder has no fixed-data slice."
    losses = ", ".join(f"{r['params']:,} → {r['val_loss']:.3f}" for r in rows)
    falls = all(b["val_loss"] < a["val_loss"] for a, b in zip(rows, rows[1:]))
    return (
        f"At one fixed D = {rows[0]['tokens']:,} tokens (each run decayed to that horizon), N → loss: "
        f"{losses}: "
        + ("the loss falls with size." if falls else "the loss does not fall with size at every step.")
    )


def ladder_isoflop_figure(result: dict) -> go.Figure:
    """The ladder's IsoFLOP curves: validation loss against N at each budget C (the seeds' mean,
    each seed a dot), approach 2's parabola in ln N through them and its minimum N_opt(C)."""
    fig = go.Figure()
    for i, curve in enumerate(result["isoflop"]):
        color = GROUP_PALETTE[i % len(GROUP_PALETTE)]
        rows = sorted(
            (r for r in result["rows"] if r["budget"] == curve["compute"]), key=lambda r: r["params"]
        )
        fig.add_scatter(
            x=[r["params"] for r in rows],
            y=[r["val_loss"] for r in rows],
            mode="markers",
            marker=dict(color=color, size=8),
            name=f"C = {curve['compute']:.2g} FLOPs",
        )
        for r in rows:
            fig.add_scatter(
                x=[r["params"]] * len(r["val_losses"]),
                y=r["val_losses"],
                mode="markers",
                marker=dict(color=color, size=4, opacity=0.5),
                showlegend=False,
            )
        log_n = np.linspace(math.log(rows[0]["params"]), math.log(rows[-1]["params"]), 60)
        fig.add_scatter(
            x=np.exp(log_n),
            y=np.polyval(curve["parabola"], log_n),
            mode="lines",
            line_color=color,
            showlegend=False,
        )
        if curve["n_opt"] is not None:
            fig.add_scatter(
                x=[curve["n_opt"]],
                y=[curve["loss_opt"]],
                mode="markers",
                marker=dict(color=color, size=13, symbol="x"),
                showlegend=False,
            )
    layout_figure(
        fig,
        "The ladder's IsoFLOP curves (approach 2: a parabola in ln N per budget, × its minimum)",
        xaxis_title="parameters N (total)",
        yaxis_title="validation loss (nats per byte)",
    )
    fig.update_xaxes(type="log")
    return fig


def ladder_figure(rows: Sequence[dict], fit: ScalingFit) -> go.Figure:
    """Validation loss against tokens, one line per size (the seeds' mean, each seed a dot), the
    approach-3 fit dashed."""
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
        "The ladder measured here against tokens (dashed: its approach-3 fit)",
        xaxis_title="training tokens D",
        yaxis_title="validation loss (nats per byte)",
    )
    fig.update_xaxes(type="log")
    return fig


def _interval(pair) -> str:
    return "{:.3f} – {:.3f}".format(*pair) if pair else ""


def ladder_rows_frame(result: dict) -> pd.DataFrame:
    """The ladder's rows, the seeds' means: each budget's sizes, then the fixed-data slice."""
    return pd.DataFrame(
        [
            {
                "design": "IsoFLOP budget" if r["budget"] is not None else "fixed D",
                "budget C (FLOPs)": r["budget"],
                "N (parameters)": r["params"],
                "D (tokens)": r["tokens"],
                "validation loss": r["val_loss"],
                "seeds": len(r["val_losses"]),
            }
            for r in result["rows"]
        ]
    )


def exponents_frame(result: dict) -> pd.DataFrame:
    """The ladder's a (N_opt ∝ C^a) and b = 1 − a by approach 2 and approach 3, each with its
    10–90 % bootstrap interval, beside Hoffmann et al.'s Table 2 and the published fits."""
    fit = ScalingFit(**result["fit"])
    boot = result["bootstrap"]
    a2, a2_interval = result["isoflop_a"], result["isoflop_a_interval"]
    rows = [
        {
            "fit": "this lab's ladder, approach 2 (IsoFLOP parabolas)",
            "a": a2,
            "a 10–90 %": _interval(a2_interval),
            "b = 1 − a": None if a2 is None else 1 - a2,
            "b 10–90 %": _interval(a2_interval and [1 - a2_interval[1], 1 - a2_interval[0]]),
        },
        {
            "fit": "this lab's ladder, approach 3 (Huber fit)",
            "a": fit.a,
            "a 10–90 %": _interval(boot["a"]),
            "b = 1 − a": fit.b,
            "b 10–90 %": _interval([1 - boot["a"][1], 1 - boot["a"][0]]),
            "α": fit.alpha,
            "α 10–90 %": _interval(boot["alpha"]),
            "β": fit.beta,
            "β 10–90 %": _interval(boot["beta"]),
            "E": fit.E,
        },
    ]
    for table in HOFFMANN_TABLE_2.values():
        rows.append(
            {
                "fit": table.source,
                "a": table.a,
                "a 10–90 %": _interval(table.a_interval),
                "b = 1 − a": table.b,
                "b 10–90 %": _interval(table.b_interval),
            }
        )
    for published in PUBLISHED_FITS.values():
        rows.append(
            {
                "fit": published.source,
                "a": published.a,
                "b = 1 − a": published.b,
                "α": published.alpha,
                "β": published.beta,
                "E": published.E,
            }
        )
    return pd.DataFrame(rows)  # blank (NaN) where a row has no such number
