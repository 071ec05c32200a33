"""The depth sweep: the last block's FFN output-projection gradient norm at initialisation
against depth L, Post-LN and Pre-LN, with the fitted log-log slopes (Xiong et al. 2020,
Theorem 1: flat under Post-LN, ∝ 1/√L under Pre-LN).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

import pandas as pd
import plotly.graph_objects as go

from ..config import ModelConfig
from ..errors import ExperimentError
from ..figures.common import (ARRANGEMENT_COLORS, ARRANGEMENT_LABELS, Figure, Table,
                              layout_figure)
from ..train.budgets import guard
from ..train.data import TokenData
from ..units import Progress, plain_fields, sub_progress
from .gradient_norms import gradnorms
from .registry import ExperimentKind, register


# The depths a page offers, and the widths of the small live models the sweep builds.
DEPTH_CHOICES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
WIDTH_CHOICES = (32, 64, 128, 256)


def loglog_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares (slope, intercept) of log y = intercept + slope·log x (y ∝ x^slope)."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    slope = sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)
    return slope, my - slope * mx


def loglog_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    return loglog_fit(xs, ys)[0]


@dataclass(frozen=True)
class DepthSweep:
    depths: list
    post: list                # ‖∇W_down‖ of the last block, Post-LN, per depth
    pre: list
    post_slope: float         # log-log slope; Xiong et al. Thm 1: ≈ 0
    pre_slope: float          # ≈ -0.5 (1/√L)

    def to_dict(self) -> dict:
        return plain_fields(self)

    def to_frame(self):
        import pandas as pd
        return pd.DataFrame({"n_layers": self.depths, "post_last_ffn_grad_norm": self.post,
                             "pre_last_ffn_grad_norm": self.pre})


def depth_sweep(cfg: ModelConfig, depths: Sequence[int] = (2, 4, 8, 16, 32, 48),
                seq_len: int = 64, batch: int = 4, seed: int = 0, data: TokenData | None = None,
                device: str = "cpu", progress: Progress | None = None) -> DepthSweep:
    """Last block's FFN output-projection gradient norm at initialisation vs depth L."""
    if len(set(depths)) < 2 or any(int(d) < 1 for d in depths):
        raise ExperimentError(f"depths={tuple(depths)} needs at least two different depths ≥ 1")
    post, pre, n = [], [], len(depths)
    for i, depth in enumerate(depths):
        result = gradnorms(cfg.replace(n_layers=int(depth)), seq_len, batch, seed=seed,
                           data=data, device=device,
                           progress=sub_progress(progress, i / n, (i + 1) / n,
                                                 f"depth L={depth} ({i + 1}/{n})"))
        post.append(result.post.ffn_out_grad_norm[-1])
        pre.append(result.pre.ffn_out_grad_norm[-1])
    if progress:
        progress(1.0, "done")
    depths = [int(d) for d in depths]
    return DepthSweep(depths=depths, post=post, pre=pre, post_slope=loglog_slope(depths, post),
                      pre_slope=loglog_slope(depths, pre))


# ---- figures and tables --------------------------------------------------------------------
def depth_sweep_figure(sweep: DepthSweep) -> go.Figure:
    """Last block's ‖∇W_down‖ against depth L, log-log, with the fitted power laws."""
    fig = go.Figure()
    for position, values, slope in (("post", sweep.post, sweep.post_slope),
                                    ("pre", sweep.pre, sweep.pre_slope)):
        intercept = loglog_fit(sweep.depths, values)[1]
        fitted = [math.exp(intercept) * depth ** slope for depth in sweep.depths]
        color = ARRANGEMENT_COLORS[position]
        fig.add_trace(go.Scatter(
            x=sweep.depths, y=values, mode="markers", marker=dict(size=10, color=color),
            name=f"{ARRANGEMENT_LABELS[position]} measured",
            hovertemplate=f"{ARRANGEMENT_LABELS[position]} L=%{{x}}: %{{y:.3e}}<extra></extra>"))
        fig.add_trace(go.Scatter(
            x=sweep.depths, y=fitted, mode="lines", line=dict(color=color, dash="dash"),
            name=f"{ARRANGEMENT_LABELS[position]} fit ∝ L^{slope:.2f}", hoverinfo="skip"))
    fig.update_xaxes(type="log", title="depth L (blocks)")
    fig.update_yaxes(type="log", title="‖∇W_down‖ of the last block")
    return layout_figure(fig, "Depth sweep at initialisation (Xiong et al. 2020, Thm 1: Post-LN "
                        "flat, slope 0; Pre-LN ∝ 1/√L, slope −0.5)", height=420)


def depth_sweep_table(sweep: DepthSweep) -> pd.DataFrame:
    """The fitted slopes beside the theorem's."""
    return pd.DataFrame([
        {"norm_position": "post", "fitted_slope": sweep.post_slope, "theory_slope": 0.0,
         "theory": "O(d·√ln d): independent of L"},
        {"norm_position": "pre", "fitted_slope": sweep.pre_slope, "theory_slope": -0.5,
         "theory": "O(d·√(ln d / L)): ∝ 1/√L"}])


def tables(result: DepthSweep, section: str, config: ModelConfig | None = None) -> list[Table]:
    return [Table("depth_sweep_slopes", "Fitted log-log slopes vs Theorem 1", section,
                  depth_sweep_table(result)),
            Table("depth_sweep", "Last block's ‖∇W_down‖ by depth", section, result.to_frame())]


def figures(result: DepthSweep, section: str) -> list[Figure]:
    return [Figure("depth_sweep", "Depth sweep", section, depth_sweep_figure(result))]


KIND = register(ExperimentKind(
    name="depth_sweep", title="Depth sweep (Xiong et al. 2020)", result_type=DepthSweep,
    run=depth_sweep, tables=tables, figures=figures, panel="depth_sweep", order=20))


def check_depth_budget(cfg: ModelConfig, depths: Sequence[int], seq_len: int, batch: int,
                       device: str, hint: str) -> None:
    """Refuse (ExperimentError) a sweep with fewer than two depths, one whose deepest model does
    not fit, or one beyond the CPU's FLOP budget (FLOPs grow with depth: two passes per depth)."""
    if len(depths) < 2:
        raise ExperimentError(f"choose at least two depths (got {len(depths)}) to fit a slope")
    guard(cfg.replace(n_layers=max(depths)), seq_len, batch, device,
          passes=2 * sum(depths) / max(depths), what="the depth sweep", hint=hint)
