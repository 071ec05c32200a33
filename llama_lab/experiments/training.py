"""Training runs compared: every arm on the same data, seed and batches (Post-LN / Pre-LN, each
without and with warmup, on the Gradient norms page), with their figures and tables.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..config import ModelConfig, arrangement
from ..errors import ExperimentError
from ..figures.common import (ARRANGEMENT_COLORS, GROUP_PALETTE, Figure, Table, layout_figure,
                              logits_table)
from ..train.data import TokenData
from ..train.loop import train
from ..units import Progress, sub_progress
from .registry import ExperimentKind, register


@dataclass(frozen=True)
class RunSpec:
    """One arm of a comparison: a config and its optimisation recipe."""
    label: str
    cfg: ModelConfig
    lr: float
    warmup_steps: int = 0
    schedule: str = "cosine"
    grad_clip: float | None = None


@dataclass(frozen=True)
class RunComparison:
    runs: dict                         # label → TrainRun (same data, same batches, same seed)

    def summary_frame(self):
        return pd.DataFrame([run.summary() for run in self.runs.values()])

    def to_frame(self):
        """Long format: label, step, loss, lr, grad_norm."""
        frames = [run.to_frame().assign(label=label) for label, run in self.runs.items()]
        return pd.concat(frames, ignore_index=True)

    def to_dict(self) -> dict:
        return {"runs": {label: run.to_dict() for label, run in self.runs.items()},
                "summary": [run.summary() for run in self.runs.values()]}


def compare_runs(specs: Sequence[RunSpec], steps: int, *, data: TokenData | None = None,
                 on_step: Callable[[str, dict], None] | None = None,
                 progress: Progress | None = None, **options: Any) -> RunComparison:
    """Train every spec on the same data with the same seed (so the same batch at each step);
    ``options`` are the shared ``TrainSettings`` fields (seq_len, batch, seed, device, ...)."""
    labels = [spec.label for spec in specs]
    if len(set(labels)) != len(labels):
        raise ExperimentError(f"run labels must differ, got {labels}")
    runs, n = {}, len(specs)
    for i, spec in enumerate(specs):
        part = sub_progress(progress, i / n, (i + 1) / n, f"run {i + 1}/{n} ({spec.label})")
        if part:
            part(0.0, "building the model")
        callback = (lambda record, label=spec.label: on_step(label, record)) if on_step else None
        runs[spec.label] = train(spec.cfg, steps, spec.lr, data=data, on_step=callback,
                                 label=spec.label, warmup_steps=spec.warmup_steps,
                                 schedule=spec.schedule, grad_clip=spec.grad_clip,
                                 progress=part, **options)
    if progress:
        progress(1.0, "done")
    return RunComparison(runs=runs)


def norm_position_specs(cfg: ModelConfig, lr: float, warmup_steps: int,
                        schedule: str = "cosine") -> list[RunSpec]:
    """Post-LN and Pre-LN, each without and with warmup."""
    return [RunSpec(f"{name}-LN, {'warmup ' + str(w) if w else 'no warmup'}",
                    arrangement(cfg, position), lr, w, schedule)
            for position, name in (("post", "Post"), ("pre", "Pre")) for w in (0, warmup_steps)]


# ---- figures and tables --------------------------------------------------------------------
def run_styles(comparison: RunComparison) -> dict[str, tuple[str, str]]:
    """label → (colour, dash). Runs that differ in norm_position take Post-LN's and Pre-LN's
    colours (the same on every page and in the report), warmup dashed; any other contrast takes
    the group palette, which no fixed meaning uses."""
    runs = comparison.runs
    positions = {run.config.get("norm_position") for run in runs.values()}
    styles = {}
    for i, (label, run) in enumerate(runs.items()):
        if positions == {"post", "pre"}:
            dash = "dash" if run.settings.get("warmup_steps") else "solid"
            styles[label] = (ARRANGEMENT_COLORS[run.config["norm_position"]], dash)
        else:
            styles[label] = (GROUP_PALETTE[i % len(GROUP_PALETTE)], "solid")
    return styles


def training_curves(comparison: RunComparison) -> go.Figure:
    """Training loss per step (lines), validation loss (markers), divergence (×), and the
    learning-rate schedule below."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.72, 0.28],
                        vertical_spacing=0.06)
    styles = run_styles(comparison)
    for label, run in comparison.runs.items():
        color, dash = styles[label]
        steps = list(range(run.steps_run))
        fig.add_trace(go.Scatter(x=steps, y=run.loss, mode="lines", name=label, legendgroup=label,
                                 line=dict(color=color, dash=dash)), row=1, col=1)
        fig.add_trace(go.Scatter(x=run.val_step, y=run.val_loss, mode="markers",
                                 name=f"{label} (validation)", legendgroup=label, showlegend=False,
                                 marker=dict(color=color, symbol="circle-open", size=8),
                                 hovertemplate="validation after %{x} updates: %{y:.4f}"
                                               "<extra></extra>"), row=1, col=1)
        if run.diverged:
            step = run.divergence_step
            finite = [x for x in run.loss if math.isfinite(x)]
            loss = run.loss[step] if math.isfinite(run.loss[step]) else max(finite, default=0.0)
            fig.add_trace(go.Scatter(x=[step], y=[loss], mode="markers", legendgroup=label,
                                     showlegend=False, marker=dict(color=color, symbol="x", size=14),
                                     hovertext=run.divergence_reason, hoverinfo="text"),
                          row=1, col=1)
        fig.add_trace(go.Scatter(x=steps, y=run.lr, mode="lines", legendgroup=label,
                                 showlegend=False, line=dict(color=color, width=1)), row=2, col=1)
    fig.update_yaxes(title_text="loss (nats/byte)", row=1, col=1)
    fig.update_yaxes(title_text="learning rate", row=2, col=1)
    fig.update_xaxes(title_text="step", row=2, col=1)
    return layout_figure(fig, "Training loss (lines), validation loss (○), divergence (×)",
                         height=520)


def training_heatmaps(comparison: RunComparison) -> go.Figure:
    """‖∇θ_l‖ of every block at every step (before clipping and the update), one panel per
    run, log10 colour scale shared by all panels."""
    runs = list(comparison.runs.items())
    columns = min(2, len(runs))
    rows = math.ceil(len(runs) / columns)
    # room between rows for the x-axis title of one and the panel titles of the next
    fig = make_subplots(rows=rows, cols=columns, subplot_titles=[label for label, _ in runs],
                        shared_yaxes=True, vertical_spacing=0.24 if rows > 1 else 0.16,
                        horizontal_spacing=0.06)
    finite = [x for _, run in runs for step in run.layer_grad_norm for x in step
              if x is not None and math.isfinite(x) and x > 0]
    low, high = (math.log10(min(finite)), math.log10(max(finite))) if finite else (-3.0, 1.0)
    for i, (label, run) in enumerate(runs):
        z = [[math.log10(x) if x is not None and math.isfinite(x) and x > 0 else None
              for x in step] for step in run.layer_grad_norm]               # (steps, blocks)
        layers = [list(col) for col in zip(*z)]                              # (blocks, steps)
        fig.add_trace(go.Heatmap(
            z=layers, x=list(range(run.steps_run)), y=list(range(len(layers))),
            zmin=low, zmax=high, colorscale="Viridis", showscale=i == 0,
            colorbar=dict(title="log10 ‖∇θ_l‖"),
            hovertemplate="step %{x}, block %{y}: 10^%{z:.2f}<extra></extra>"),
            row=i // columns + 1, col=i % columns + 1)
    n_blocks = len(runs[0][1].layer_grad_norm[0]) if runs[0][1].layer_grad_norm else 1
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(dtick=max(1, n_blocks // 8))                     # whole blocks only
    fig.update_yaxes(title_text="block", col=1)
    fig.update_annotations(font_size=12)
    return layout_figure(fig, "Per-block gradient norm during training (block × step)",
                   height=260 * rows + 80)


def layer_grad_long(comparison: RunComparison) -> pd.DataFrame:
    """label, step, block, layer_grad_norm: the heatmaps as one long table."""
    rows = [{"label": label, "step": step, "block": block, "layer_grad_norm": value}
            for label, run in comparison.runs.items()
            for step, values in enumerate(run.layer_grad_norm)
            for block, value in enumerate(values)]
    return pd.DataFrame(rows)


def run_logits_table(comparison: RunComparison) -> pd.DataFrame:
    """Logit statistics after training, on a validation batch, with and without the final
    norm, for every run."""
    frames = [logits_table(run.logits, run.logits_without_final_norm).assign(run=label)
              for label, run in comparison.runs.items()]
    frame = pd.concat(frames, ignore_index=True).drop(columns="uniform_entropy_ln_V")
    return frame[["run", *[c for c in frame.columns if c != "run"]]]


def run_tables(name: str) -> Callable[..., list[Table]]:
    """The report tables of a kind whose result is a RunComparison, named after the kind."""
    def tables(result: RunComparison, section: str, config: ModelConfig | None = None) -> list[Table]:
        return [Table(f"{name}_summary", "Runs", section, result.summary_frame()),
                Table(f"{name}_steps", "Every step of every run", section, result.to_frame()),
                Table(f"{name}_layer_grad_norm", "Per-block gradient norm at every step",
                      section, layer_grad_long(result)),
                Table(f"{name}_logits", "Logits after training, with and without the final norm",
                      section, run_logits_table(result))]
    return tables


def run_figures(name: str) -> Callable[..., list[Figure]]:
    def figures(result: RunComparison, section: str) -> list[Figure]:
        return [Figure(f"{name}_curves", "Loss and learning rate", section,
                       training_curves(result)),
                Figure(f"{name}_heatmaps", "Per-block gradient norms (block × step)", section,
                       training_heatmaps(result))]
    return figures


KIND = register(ExperimentKind(
    name="training", title="Training runs: Post-LN / Pre-LN × warmup", result_type=RunComparison,
    run=compare_runs, tables=run_tables("training"), figures=run_figures("training"),
    panel="training", order=30))
