"""A training contrast of the architecture table: the loss curves of its arms and their summary."""

from __future__ import annotations

import streamlit as st

from ...experiments import ExperimentEntry
from ...experiments.training import training_curves
from ..cached import show_table
from ..widgets import show_warning


def show(entry: ExperimentEntry, prefix: str) -> None:
    comparison = entry.result
    for run in comparison.runs.values():
        if run.diverged:
            show_warning(f"{run.label} diverged: {run.divergence_reason}. Hint: {run.hint}.")
    st.plotly_chart(training_curves(comparison), key=prefix + "chart_loss")
    show_table(
        comparison.summary_frame()[
            ["label", "first_loss", "final_loss", "final_val_loss", "diverged", "n_params", "wall_s"]
        ]
    )
