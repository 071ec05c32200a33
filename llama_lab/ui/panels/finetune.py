"""Fine-tuning, live: the loss per step, and the measured trainable parameters and peak bytes
against the prediction for the same model, method and step."""

from __future__ import annotations

import streamlit as st

from ...experiments import ExperimentEntry
from ...figures.finetune import loss_figure, measured_frame
from ...units import human_bytes
from ..cached import show_table
from ..widgets import show_caption


def show(entry: ExperimentEntry, prefix: str) -> None:
    run = entry.result
    cols = st.columns(3)
    cols[0].metric(
        "Trainable parameters, measured",
        f"{run.measured_trainable_params:,}",
        f"predicted {run.predicted_trainable_params:,}",
        delta_arrow="off",
        delta_color="off",
    )
    cols[1].metric(
        "Peak bytes, measured",
        human_bytes(run.measured_peak_bytes),
        f"predicted {human_bytes(run.predicted_peak_bytes)} ({run.peak_ratio - 1:+.1%})",
        delta_arrow="off",
        delta_color="off",
    )
    cols[2].metric(
        "Held-out loss, before → after",
        f"{run.val_loss_after:.3f}",
        f"from {run.val_loss_before:.3f} ({run.val_loss_after - run.val_loss_before:+.3f})",
        delta_arrow="off",
        delta_color="off",
        help="the loss on fixed held-out batches of the fine-tuning text, before the first step and "
        "after the last (a step's own loss swings with its batch)",
    )
    same = run.measured_trainable_params == run.predicted_trainable_params
    st.markdown(
        "✓ The trainable parameters are exactly the predicted count."
        if same
        else "✗ The trainable parameters differ from the prediction."
    )
    if run.merged_logits_max_abs_diff is not None:
        st.markdown(
            f"Merged into the weights, the adapters give the same logits: the largest difference "
            f"is {run.merged_logits_max_abs_diff:.2g}."
        )
    st.plotly_chart(loss_figure(run.losses), key=prefix + "chart_loss")
    show_table(measured_frame(run), width="stretch")
    show_caption(f"Base: {run.base}. Peak bytes measured as {run.peak_source}.")
