"""Training runs (and the architecture table's contrasts): divergences, curves, per-block
heatmaps, the summary and the logits after training.
"""

from __future__ import annotations

import streamlit as st

from ...experiments import ExperimentEntry
from ...experiments.training import SeedRuns, run_logits_table, training_curves, training_heatmaps
from ..cached import show_table
from ..widgets import show_caption, show_warning


def show(entry: ExperimentEntry, prefix: str) -> None:
    comparison = entry.result
    clip = entry.settings.get("grad_clip")
    show_caption(
        f"Data: {entry.settings['data']}."  # an uploaded file's name
        + (f" Gradients clipped to a total norm of {clip:g}." if clip else "")
    )
    for name, run in comparison.runs.items():
        if run.diverged:
            show_warning(f"{name} diverged: {run.divergence_reason}. Hint: {run.hint}.")
    st.plotly_chart(training_curves(comparison), key=prefix + "chart_loss")
    st.plotly_chart(training_heatmaps(comparison), key=prefix + "chart_heat")
    if isinstance(comparison, SeedRuns):
        show_table(comparison.seed_summary(), width="stretch")
    summary = comparison.summary_frame()
    show_table(
        summary[
            [
                c
                for c in (
                    "label",
                    "seed",
                    "steps_run",
                    "first_loss",
                    "final_loss",
                    "final_val_loss",
                    "diverged",
                    "wall_s",
                    "tokens_per_s",
                )
                if c in summary
            ]
        ],
        width="stretch",
    )
    st.markdown(
        "**Logits after training**, on a validation batch, with and without the final "
        "norm (the seed's “forgot the final norm” bug):"
    )
    show_table(run_logits_table(comparison), width="stretch")
