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
from ..errors import ConfigError, ExperimentError
from ..figures.common import (
    ARRANGEMENT_COLORS,
    ARRANGEMENT_LABELS,
    GROUP_PALETTE,
    Figure,
    Table,
    band_traces,
    layout_figure,
)
from ..train.budgets import guard
from ..train.data import TokenData
from ..units import Progress, plain_fields, sub_progress
from .gradient_norms import gradnorms_over_seeds
from .registry import ExperimentKind, register
from .seeds import band, median_of

# The depths a page offers, and the widths of the small live models the sweep builds.
DEPTH_CHOICES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
WIDTH_CHOICES = (32, 64, 128, 256, 512)
RATIO_COLOR = GROUP_PALETTE[6]  # the Post/Pre ratio: neither arm's colour


def loglog_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares (slope, intercept) of log y = intercept + slope·log x (y ∝ x^slope)."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    slope = sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)
    return slope, my - slope * mx


def loglog_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    return loglog_fit(xs, ys)[0]


def sqrt_reference(depths: Sequence[int], ratios: Sequence[float]) -> list[float]:
    """Theorem 1's √L for the Post/Pre ratio, c·√L with c fitted to the measured ratios by least
    squares in log space (the slope fixed at 0.5): the reference a ratio growing as √L follows."""
    c = math.exp(statistics.fmean(math.log(r) - 0.5 * math.log(d) for d, r in zip(depths, ratios)))
    return [c * math.sqrt(d) for d in depths]


@dataclass(frozen=True)
class DepthSweep:
    depths: list[int]
    seeds: list[int]
    post: list[float]  # ‖∇W_down‖ of the last block, Post-LN, per depth (median of seeds)
    pre: list[float]
    post_by_seed: list[list[float | None]]  # per depth, one value per seed
    pre_by_seed: list[list[float | None]]
    post_slope: float  # log-log slope of the medians; Xiong et al. Thm 1: ≈ 0
    pre_slope: float  # ≈ -0.5 (1/√L)
    ratio: list[float]  # Post/Pre per depth: median of the seeds' ratios
    ratio_by_seed: list[list[float]]
    ratio_slope: float  # ≈ +0.5 (√L)
    seq_len: int
    batch: int
    data: str

    def to_dict(self) -> dict:
        return plain_fields(self)

    def slopes_by_seed(self, position: str) -> list[float]:
        """Each seed's own fitted slope (``position``: post, pre or ratio)."""
        rows = getattr(self, f"{position}_by_seed")
        return [loglog_slope(self.depths, values) for values in _per_seed(rows)]

    def to_frame(self):
        import pandas as pd

        rows = []
        for d, post, pre, ratio in zip(self.depths, self.post_by_seed, self.pre_by_seed, self.ratio_by_seed):
            rows += [
                {
                    "n_layers": d,
                    "seed": seed,
                    "post_last_ffn_grad_norm": a,
                    "pre_last_ffn_grad_norm": b,
                    "post_over_pre": r,
                }
                for seed, a, b, r in zip(self.seeds, post, pre, ratio)
            ]
        return pd.DataFrame(rows)


def depth_sweep(
    cfg: ModelConfig,
    depths: Sequence[int] = (2, 4, 8, 12),
    seq_len: int = 64,
    batch: int = 4,
    seeds: Sequence[int] = (0,),
    data: TokenData | None = None,
    device: str = "cpu",
    progress: Progress | None = None,
) -> DepthSweep:
    """Last block's FFN output-projection gradient norm at initialisation vs depth L, both
    arms, once per seed."""
    if len(set(depths)) < 2 or any(int(d) < 1 for d in depths):
        raise ExperimentError(f"depths={tuple(depths)} needs at least two different depths ≥ 1")
    depths = sorted(int(d) for d in depths)
    post: list[list[float | None]] = []  # per depth, one value per seed
    pre: list[list[float | None]] = []
    ratio: list[list[float]] = []
    n = len(depths)
    for i, depth in enumerate(depths):
        result = gradnorms_over_seeds(
            cfg.replace(n_layers=depth),
            seq_len,
            batch,
            seeds=seeds,
            data=data,
            device=device,
            progress=sub_progress(progress, i / n, (i + 1) / n, f"depth L={depth} ({i + 1}/{n})"),
        )
        post.append([arm.ffn_out_grad_norm[-1] for arm in result.arms("post")])
        pre.append([arm.ffn_out_grad_norm[-1] for arm in result.arms("pre")])
        ratio.append(result.last_ratio_by_seed())
    if progress:
        progress(1.0, "done")
    post_median = _positive_medians("post", depths, post)
    pre_median = _positive_medians("pre", depths, pre)
    ratio_median = _positive_medians("ratio", depths, ratio)
    return DepthSweep(
        depths=depths,
        seeds=list(result.seeds),
        post=post_median,
        pre=pre_median,
        post_by_seed=post,
        pre_by_seed=pre,
        post_slope=loglog_slope(depths, post_median),
        pre_slope=loglog_slope(depths, pre_median),
        ratio=ratio_median,
        ratio_by_seed=ratio,
        ratio_slope=loglog_slope(depths, ratio_median),
        seq_len=seq_len,
        batch=batch,
        data=result.data,
    )


def _positive_medians(name: str, depths: list[int], rows: Sequence[Sequence[float | None]]) -> list[float]:
    """The median of each depth's seeds; a power law needs them positive (ExperimentError)."""
    medians = []
    for depth, row in zip(depths, rows):
        median = median_of(row)
        if median is None or not math.isfinite(median) or median <= 0:
            raise ExperimentError(
                f"the last block's {name} gradient {'ratio ' if name == 'ratio' else ''}is 0 or not "
                f"finite at depth L={depth} (of {tuple(depths)}): its log-log slope against depth is "
                f"undefined; the model's last block gets no gradient there (a zero-initialised layer?)"
            )
        medians.append(median)
    return medians


# ---- figures and tables --------------------------------------------------------------------
def _per_seed(rows: list) -> list[list]:
    """Per-depth rows of per-seed values, turned into one list over the depths per seed."""
    return [list(column) for column in zip(*rows)]


def _seeds_note(sweep: DepthSweep) -> str:
    return (
        f"median of {len(sweep.seeds)} seeds, band min–max"
        if len(sweep.seeds) > 1
        else f"seed {sweep.seeds[0]}"
    )


def depth_sweep_figure(sweep: DepthSweep) -> go.Figure:
    """Last block's ‖∇W_down‖ against depth L, log-log, with the fitted power laws."""
    fig = go.Figure()
    for position, slope in (("post", sweep.post_slope), ("pre", sweep.pre_slope)):
        values = getattr(sweep, position)
        low, high = band(_per_seed(getattr(sweep, f"{position}_by_seed")))
        intercept = loglog_fit(sweep.depths, values)[1]
        fitted = [math.exp(intercept) * depth**slope for depth in sweep.depths]
        color, label = ARRANGEMENT_COLORS[position], ARRANGEMENT_LABELS[position]
        for trace in band_traces(
            sweep.depths, values, low, high, name=f"{label} measured", color=color, hover="L=%{x}: %{y:.3e}"
        ):
            fig.add_trace(trace)
        fig.add_trace(
            go.Scatter(
                x=sweep.depths,
                y=fitted,
                mode="lines",
                line=dict(color=color, dash="dash"),
                name=f"{label} fit ∝ L^{slope:.2f}",
                hoverinfo="skip",
            )
        )
    fig.update_xaxes(type="log", title="depth L (blocks)")
    fig.update_yaxes(type="log", title="‖∇W_down‖ of the last block")
    return layout_figure(
        fig,
        f"Depth sweep at initialisation ({_seeds_note(sweep)}); Xiong et "
        "al. 2020, Thm 1: Post-LN flat (slope 0), Pre-LN ∝ 1/√L (slope −0.5)",
        height=420,
    )


def ratio_figure(sweep: DepthSweep) -> go.Figure:
    """The last block's Post/Pre ‖∇W_down‖ ratio against depth, with Theorem 1's √L."""
    fig = go.Figure()
    low, high = band(_per_seed(sweep.ratio_by_seed))
    for trace in band_traces(
        sweep.depths,
        sweep.ratio,
        low,
        high,
        name=f"Post/Pre measured (∝ L^{sweep.ratio_slope:.2f})",
        color=RATIO_COLOR,
        hover="L=%{x}: %{y:.3g}",
    ):
        fig.add_trace(trace)
    fig.add_trace(
        go.Scatter(
            x=sweep.depths,
            y=sqrt_reference(sweep.depths, sweep.ratio),
            mode="lines",
            line=dict(color="#7f7f7f", dash="dot"),
            name="Theorem 1: c·√L (c fitted)",
            hoverinfo="skip",
        )
    )
    fig.add_hline(y=1.0, line=dict(color="#7f7f7f", width=1))
    fig.update_xaxes(type="log", title="depth L (blocks)")
    fig.update_yaxes(type="log", title="Post-LN ÷ Pre-LN, last block's ‖∇W_down‖")
    return layout_figure(
        fig, f"Post-LN ÷ Pre-LN, the last block's gradient, by depth ({_seeds_note(sweep)})", height=420
    )


def depth_sweep_table(sweep: DepthSweep) -> pd.DataFrame:
    """The fitted slopes beside the theorem's, with the seeds' own range."""
    rows = []
    for position, theory, note in (
        ("post", 0.0, "O(d·√ln d): independent of L"),
        ("pre", -0.5, "O(d·√(ln d / L)): ∝ 1/√L"),
        ("ratio", 0.5, "Post/Pre ∝ √L"),
    ):
        per_seed = sweep.slopes_by_seed(position)
        rows.append(
            {
                "measured": position if position != "ratio" else "post_over_pre",
                "fitted_slope": getattr(sweep, f"{position}_slope"),
                "seed_min": min(per_seed),
                "seed_max": max(per_seed),
                "theory_slope": theory,
                "theory": note,
            }
        )
    return pd.DataFrame(rows)


def tables(result: DepthSweep, section: str, config: ModelConfig | None = None) -> list[Table]:
    return [
        Table("depth_sweep_slopes", "Fitted log-log slopes vs Theorem 1", section, depth_sweep_table(result)),
        Table("depth_sweep", "Last block's ‖∇W_down‖ by depth and seed", section, result.to_frame()),
    ]


def figures(result: DepthSweep, section: str) -> list[Figure]:
    return [
        Figure("depth_ratio", "Post/Pre ratio against depth", section, ratio_figure(result)),
        Figure("depth_sweep", "Depth sweep", section, depth_sweep_figure(result)),
    ]


KIND = register(
    ExperimentKind(
        name="depth_sweep",
        title="Depth sweep (Xiong et al. 2020)",
        result_type=DepthSweep,
        run=depth_sweep,
        tables=tables,
        figures=figures,
        panel="depth_sweep",
        order=20,
    )
)


def sweep_config(cfg: ModelConfig, depths: Sequence[int]) -> ModelConfig:
    """What identifies a sweep of ``cfg`` (its depth does not count: the sweep sets each one):
    ``cfg`` at its deepest depth, or ``cfg`` itself where that depth is not a valid config
    (a layer set naming blocks it lacks: the sweep refuses it when it runs)."""
    try:
        return cfg.replace(n_layers=max(depths)) if depths else cfg
    except ConfigError:
        return cfg


def check_depth_budget(
    cfg: ModelConfig,
    depths: Sequence[int],
    seq_len: int,
    batch: int,
    device: str,
    hint: str,
    n_seeds: int = 1,
) -> None:
    """Refuse (ExperimentError) a sweep with fewer than two depths, one whose deepest model does
    not fit, or one beyond the CPU's FLOP budget (FLOPs grow with depth: two passes per depth
    and seed)."""
    if len(depths) < 2:
        raise ExperimentError(f"choose at least two depths (got {len(depths)}) to fit a slope")
    guard(
        cfg.replace(n_layers=max(depths)),
        seq_len,
        batch,
        device,
        passes=2 * n_seeds * sum(depths) / max(depths),
        what="the depth sweep",
        hint=hint,
    )
