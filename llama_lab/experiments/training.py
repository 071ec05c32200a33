"""Training runs compared: every arm on the same data, seed and batches (Post-LN / Pre-LN, each
without and with warmup, on the Gradient norms page), with their figures and tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any, Callable, Protocol, Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..config import ModelConfig, arrangement
from ..errors import ExperimentError
from ..figures.common import (
    ARRANGEMENT_COLORS,
    GROUP_PALETTE,
    Figure,
    Table,
    band_traces,
    layout_figure,
    logits_table,
)
from ..train.data import TokenData
from ..train.loop import TrainRun, TrainSettings, train
from ..units import Progress, sub_progress
from .registry import ExperimentKind, register
from .seeds import band, median_list, median_of, over_seeds


@dataclass(frozen=True)
class RunSpec:
    """One arm of a comparison: a config and its optimisation recipe."""

    label: str
    cfg: ModelConfig
    lr: float
    warmup_steps: int = 0
    schedule: str = "cosine"
    grad_clip: float | None = None


class LabelledRuns(Protocol):
    """Runs by arm: a RunComparison (one run each) or SeedRuns (one per seed)."""

    def by_label(self) -> dict[str, list[TrainRun]]: ...


@dataclass(frozen=True)
class RunComparison:
    runs: dict[str, TrainRun]  # label → run (same data, same batches, same seed)

    def by_label(self) -> dict[str, list[TrainRun]]:
        """label → its runs (one here; one per seed in ``SeedRuns``)."""
        return {label: [run] for label, run in self.runs.items()}

    def summary_frame(self):
        return pd.DataFrame([run.summary() for run in self.runs.values()])

    def to_frame(self):
        """Long format: label, step, loss, lr, grad_norm."""
        frames = [run.to_frame().assign(label=label) for label, run in self.runs.items()]
        return pd.concat(frames, ignore_index=True)

    def to_dict(self) -> dict:
        return {
            "runs": {label: run.to_dict() for label, run in self.runs.items()},
            "summary": [run.summary() for run in self.runs.values()],
        }


def compare_runs(
    specs: Sequence[RunSpec],
    settings: TrainSettings,
    *,
    data: TokenData | None = None,
    on_step: Callable[[str, dict], None] | None = None,
    progress: Progress | None = None,
) -> RunComparison:
    """Train every spec on the same data with the same seed (so the same batch at each step):
    ``settings`` are shared (steps, seq_len, batch, seed, device, ...), each spec's lr,
    warmup_steps, schedule and grad_clip replace the settings' own."""
    labels = [spec.label for spec in specs]
    if len(set(labels)) != len(labels):
        raise ExperimentError(f"run labels must differ, got {labels}")
    runs, n = {}, len(specs)
    for i, spec in enumerate(specs):
        part = sub_progress(progress, i / n, (i + 1) / n, f"run {i + 1}/{n} ({spec.label})")
        if part:
            part(0.0, "building the model")
        callback = (lambda record, label=spec.label: on_step(label, record)) if on_step else None
        own = replace(
            settings,
            lr=spec.lr,
            warmup_steps=spec.warmup_steps,
            schedule=spec.schedule,
            grad_clip=spec.grad_clip,
        )
        runs[spec.label] = train(spec.cfg, own, data=data, on_step=callback, label=spec.label, progress=part)
    if progress:
        progress(1.0, "done")
    return RunComparison(runs=runs)


@dataclass(frozen=True)
class SeedRuns:
    """One comparison per seed: the same arms, the weights and the batches following the seed."""

    comparisons: list[RunComparison]  # per seed
    seeds: list[int]

    def by_label(self) -> dict[str, list[TrainRun]]:
        return {label: [c.runs[label] for c in self.comparisons] for label in self.comparisons[0].runs}

    @property
    def runs(self) -> dict:
        """label → every seed's TrainRun, one after the other (divergences, tables)."""
        return {
            f"{label}, seed {seed}": c.runs[label]
            for seed, c in zip(self.seeds, self.comparisons)
            for label in c.runs
        }

    def summary_frame(self):
        frames = [c.summary_frame().assign(seed=seed) for seed, c in zip(self.seeds, self.comparisons)]
        return pd.concat(frames, ignore_index=True)

    def seed_summary(self) -> pd.DataFrame:
        """Per arm over the seeds: how many diverged, and the final validation loss (median,
        min, max) of those that did not."""
        rows = []
        for label, runs in self.by_label().items():
            finals = [r.final_val_loss for r in runs if not r.diverged and r.final_val_loss is not None]
            rows.append(
                {
                    "label": label,
                    "seeds": len(runs),
                    "diverged": sum(r.diverged for r in runs),
                    "final_val_loss_median": median_of(finals),
                    "final_val_loss_min": min(finals, default=None),
                    "final_val_loss_max": max(finals, default=None),
                    "wall_s": sum(r.wall_s for r in runs),
                }
            )
        return pd.DataFrame(rows)

    def to_frame(self):
        frames = [c.to_frame().assign(seed=seed) for seed, c in zip(self.seeds, self.comparisons)]
        return pd.concat(frames, ignore_index=True)

    def to_dict(self) -> dict:
        return {
            "seeds": list(self.seeds),
            "by_seed": [c.to_dict() for c in self.comparisons],
            "summary": self.seed_summary().to_dict("records"),
        }


def compare_runs_over_seeds(
    specs: Sequence[RunSpec],
    settings: TrainSettings,
    seeds: Sequence[int] = (0,),
    *,
    data: TokenData | None = None,
    progress: Progress | None = None,
) -> SeedRuns:
    """``compare_runs`` once per seed (each seed replaces ``settings.seed``)."""
    seeds, comparisons = over_seeds(
        seeds,
        progress,
        lambda seed, part: compare_runs(specs, replace(settings, seed=seed), data=data, progress=part),
    )
    return SeedRuns(comparisons=comparisons, seeds=seeds)


def norm_position_specs(
    cfg: ModelConfig, lr: float, warmup_steps: int, schedule: str = "cosine"
) -> list[RunSpec]:
    """Post-LN and Pre-LN, each without and with warmup."""
    return [
        RunSpec(
            f"{name}-LN, {'warmup ' + str(w) if w else 'no warmup'}",
            arrangement(cfg, position),
            lr,
            w,
            schedule,
        )
        for position, name in (("post", "Post"), ("pre", "Pre"))
        for w in (0, warmup_steps)
    ]


# ---- figures and tables --------------------------------------------------------------------
def run_styles(comparison: LabelledRuns) -> dict[str, tuple[str, str]]:
    """label → (colour, dash). Runs that differ in norm_position take Post-LN's and Pre-LN's
    colours (the same on every page and in the report), warmup dashed; any other contrast takes
    the group palette, which no fixed meaning uses."""
    runs = {label: arm[0] for label, arm in comparison.by_label().items()}
    positions = {run.config.get("norm_position") for run in runs.values()}
    styles = {}
    for i, (label, run) in enumerate(runs.items()):
        if positions == {"post", "pre"}:
            dash = "dash" if run.settings.get("warmup_steps") else "solid"
            styles[label] = (ARRANGEMENT_COLORS[run.config["norm_position"]], dash)
        else:
            styles[label] = (GROUP_PALETTE[i % len(GROUP_PALETTE)], "solid")
    return styles


def _seed_of(run) -> str:
    return f"seed {run.settings.get('seed')}"


def training_curves(comparison: RunComparison | SeedRuns) -> go.Figure:
    """Training loss per step (the median over seeds, with the min–max band), validation loss
    (markers), each diverged run (×), and the learning-rate schedule below."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.72, 0.28], vertical_spacing=0.06)
    styles = run_styles(comparison)
    for label, runs in comparison.by_label().items():
        color, dash = styles[label]
        losses = [run.loss for run in runs]
        steps = list(range(max(run.steps_run for run in runs)))
        low, high = band(losses)
        for trace in band_traces(
            steps,
            median_list(losses),
            low,
            high,
            name=label,
            color=color,
            dash=dash,
            legendgroup=label,
            hover="step %{x}: %{y:.4f}",
        ):
            trace.update(mode="lines")
            fig.add_trace(trace, row=1, col=1)
        for run in runs:
            fig.add_trace(
                go.Scatter(
                    x=run.val_step,
                    y=run.val_loss,
                    mode="markers",
                    name=f"{label} (validation)",
                    legendgroup=label,
                    showlegend=False,
                    marker=dict(color=color, symbol="circle-open", size=7),
                    hovertemplate=f"validation, {_seed_of(run)}, after %{{x}} "
                    f"updates: %{{y:.4f}}<extra></extra>",
                ),
                row=1,
                col=1,
            )
            step = run.divergence_step
            if step is not None:  # the run diverged at this step
                finite = [x for x in run.loss if math.isfinite(x)]
                loss = run.loss[step] if math.isfinite(run.loss[step]) else max(finite, default=0.0)
                fig.add_trace(
                    go.Scatter(
                        x=[step],
                        y=[loss],
                        mode="markers",
                        legendgroup=label,
                        showlegend=False,
                        marker=dict(color=color, symbol="x", size=14),
                        hovertext=f"{_seed_of(run)}: {run.divergence_reason}",
                        hoverinfo="text",
                    ),
                    row=1,
                    col=1,
                )
        fig.add_trace(
            go.Scatter(
                x=list(range(runs[0].steps_run)),
                y=runs[0].lr,
                mode="lines",
                legendgroup=label,
                showlegend=False,
                line=dict(color=color, width=1, dash=dash),
            ),
            row=2,
            col=1,
        )
    fig.update_yaxes(title_text="loss (nats/byte)", row=1, col=1)
    fig.update_yaxes(title_text="learning rate", row=2, col=1)
    fig.update_xaxes(title_text="step", row=2, col=1)
    n_seeds = len(next(iter(comparison.by_label().values())))
    seeds = f"median of {n_seeds} seeds, band min–max; " if n_seeds > 1 else ""
    return layout_figure(
        fig, f"Training loss ({seeds}lines), validation loss (○), divergence (×)", height=520
    )


def _median_run(runs: list) -> Any:
    """What a heatmap draws of an arm: its one run, or over seeds the median of every block at
    every step (steps_run: the longest run's; layer_grad_norm per step)."""
    if len(runs) == 1:
        return runs[0]
    longest = max(run.steps_run for run in runs)
    per_step = [
        median_list([run.layer_grad_norm[i] for run in runs if i < run.steps_run]) for i in range(longest)
    ]
    return SimpleNamespace(steps_run=longest, layer_grad_norm=per_step)


def training_heatmaps(comparison: RunComparison | SeedRuns) -> go.Figure:
    """‖∇θ_l‖ of every block at every step (before clipping and the update), one panel per
    arm (over seeds: the median), log10 colour scale shared by all panels."""
    runs = [(label, _median_run(arm)) for label, arm in comparison.by_label().items()]
    columns = min(2, len(runs))
    rows = math.ceil(len(runs) / columns)
    # room between rows for the x-axis title of one and the panel titles of the next
    fig = make_subplots(
        rows=rows,
        cols=columns,
        subplot_titles=[label for label, _ in runs],
        shared_yaxes=True,
        vertical_spacing=0.24 if rows > 1 else 0.16,
        horizontal_spacing=0.06,
    )
    finite = [
        x
        for _, run in runs
        for step in run.layer_grad_norm
        for x in step
        if x is not None and math.isfinite(x) and x > 0
    ]
    low, high = (math.log10(min(finite)), math.log10(max(finite))) if finite else (-3.0, 1.0)
    for i, (_label, run) in enumerate(runs):
        z = [
            [math.log10(x) if x is not None and math.isfinite(x) and x > 0 else None for x in step]
            for step in run.layer_grad_norm
        ]  # (steps, blocks)
        layers = [list(col) for col in zip(*z)]  # (blocks, steps)
        fig.add_trace(
            go.Heatmap(
                z=layers,
                x=list(range(run.steps_run)),
                y=list(range(len(layers))),
                zmin=low,
                zmax=high,
                colorscale="Viridis",
                showscale=i == 0,
                colorbar=dict(title="log10 ‖∇θ_l‖"),
                hovertemplate="step %{x}, block %{y}: 10^%{z:.2f}<extra></extra>",
            ),
            row=i // columns + 1,
            col=i % columns + 1,
        )
    n_blocks = len(runs[0][1].layer_grad_norm[0]) if runs[0][1].layer_grad_norm else 1
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(dtick=max(1, n_blocks // 8))  # whole blocks only
    fig.update_yaxes(title_text="block", col=1)
    fig.update_annotations(font_size=12)
    return layout_figure(
        fig, "Per-block gradient norm during training (block × step)", height=260 * rows + 80
    )


def layer_grad_long(comparison: LabelledRuns) -> pd.DataFrame:
    """label, step, block, layer_grad_norm: the heatmaps as one long table."""
    rows = [
        {
            "label": label,
            "seed": run.settings.get("seed"),
            "step": step,
            "block": block,
            "layer_grad_norm": value,
        }
        for label, runs in comparison.by_label().items()
        for run in runs
        for step, values in enumerate(run.layer_grad_norm)
        for block, value in enumerate(values)
    ]
    return pd.DataFrame(rows)


def run_logits_table(comparison: LabelledRuns) -> pd.DataFrame:
    """Logit statistics after training, on a validation batch, with and without the final
    norm, for every run."""
    frames = [
        logits_table(run.logits, run.logits_without_final_norm).assign(
            run=label, seed=run.settings.get("seed")
        )
        for label, runs in comparison.by_label().items()
        for run in runs
    ]
    frame = pd.concat(frames, ignore_index=True).drop(columns="uniform_entropy_ln_V")
    return frame[["run", "seed", *[c for c in frame.columns if c not in ("run", "seed")]]]


def run_tables(name: str) -> Callable[..., list[Table]]:
    """The report tables of a kind whose result is a RunComparison, named after the kind."""

    def tables(
        result: RunComparison | SeedRuns, section: str, config: ModelConfig | None = None
    ) -> list[Table]:
        over_seeds = (
            [Table(f"{name}_seeds", "Each arm over the seeds", section, result.seed_summary())]
            if isinstance(result, SeedRuns)
            else []
        )
        return over_seeds + [
            Table(f"{name}_summary", "Runs", section, result.summary_frame()),
            Table(f"{name}_steps", "Every step of every run", section, result.to_frame()),
            Table(
                f"{name}_layer_grad_norm",
                "Per-block gradient norm at every step",
                section,
                layer_grad_long(result),
            ),
            Table(
                f"{name}_logits",
                "Logits after training, with and without the final norm",
                section,
                run_logits_table(result),
            ),
        ]

    return tables


def run_figures(name: str) -> Callable[..., list[Figure]]:
    def figures(result: RunComparison, section: str) -> list[Figure]:
        return [
            Figure(f"{name}_curves", "Loss and learning rate", section, training_curves(result)),
            Figure(
                f"{name}_heatmaps",
                "Per-block gradient norms (block × step)",
                section,
                training_heatmaps(result),
            ),
        ]

    return figures


KIND = register(
    ExperimentKind(
        name="training",
        title="Training runs: Post-LN / Pre-LN × warmup",
        result_type=SeedRuns,
        run=compare_runs_over_seeds,
        tables=run_tables("training"),
        figures=run_figures("training"),
        panel="training",
        order=30,
    )
)
