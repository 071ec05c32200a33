"""Speculative decoding, live: measured against Leviathan et al.'s formula for a trained and an
untrained draft, and whether the output is the target's own greedy output."""
from __future__ import annotations

import streamlit as st

from ...experiments import ExperimentEntry
from ...experiments.speculative import speculative_figure
from ..cached import show_table


def show(entry: ExperimentEntry, prefix: str) -> None:
    run = entry.result
    cols = st.columns(len(run.results) * 2)
    for i, r in enumerate(run.results):
        cols[2 * i].metric(f"{r.label}: measured α", f"{r.measured_alpha:.3f}")
        cols[2 * i + 1].metric(f"{r.label}: speedup", f"{r.measured_speedup:.2f}×",
                               f"formula {r.predicted_speedup:.2f}×", delta_color="off")
    same = all(r.identical_to_target_greedy for r in run.results)
    st.markdown(("✓ Both runs' output is the target's own greedy output, token for token."
                 if same else "✗ A speculative output differs from the target's greedy output."))
    st.plotly_chart(speculative_figure(run), key=prefix + "chart_speculative")
    show_table(run.to_frame(), width="stretch")
