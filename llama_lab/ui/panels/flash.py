"""FlashAttention, live: kept bytes measured against predicted and the time, naive vs fused,
over the sequence lengths; where the naive path stops fitting the whole model on a GPU."""

from __future__ import annotations

import streamlit as st

from ...experiments import ExperimentEntry
from ...experiments.flash import flash_figure
from ..cached import show_table


def show(entry: ExperimentEntry, prefix: str) -> None:
    sweep = entry.result
    frame = sweep.to_frame()
    exact = bool((frame.measured_bytes == frame.predicted_bytes).all())
    longest = frame[frame.seq_len == frame.seq_len.max()].set_index("path")
    cols = st.columns(3)
    cols[0].metric(
        "Kept bytes, naive ÷ fused (longest T)",
        f"{longest.measured_bytes['naive'] / longest.measured_bytes['flash']:.3g}×",
    )
    cols[1].metric(
        "Time, naive ÷ fused (longest T)", f"{longest.fwd_bwd_ms['naive'] / longest.fwd_bwd_ms['flash']:.3g}×"
    )
    cols[2].metric(
        f"Naive stops fitting on {sweep.gpu} at",
        f"T = {sweep.naive_fits_up_to:,}",
        f"fused: {sweep.flash_fits_up_to:,}",
        delta_arrow="off",
        delta_color="off",
        help="The whole model's attention memory for backward next to its weights",
    )
    st.markdown(
        "✓ Every measured figure equals the prediction."
        if exact
        else "✗ A measured figure differs from the prediction (see the table)."
    )
    st.plotly_chart(flash_figure(sweep), key=prefix + "chart_flash")
    show_table(frame, width="stretch")
