"""The depth sweep: fitted slopes beside Theorem 1's, the figure, the table.
"""
from __future__ import annotations

import streamlit as st

from ...experiments import ExperimentEntry
from ...experiments.depth import depth_sweep_figure
from ..cached import show_table


def show(entry: ExperimentEntry, prefix: str) -> None:
    result = entry.result
    cols = st.columns(2)
    cols[0].metric("Post-LN fitted slope", f"{result.post_slope:+.3f}", "theory 0",
                   delta_color="off")
    cols[1].metric("Pre-LN fitted slope", f"{result.pre_slope:+.3f}", "theory −0.5",
                   delta_color="off")
    st.plotly_chart(depth_sweep_figure(result), key=prefix + "chart_sweep")
    show_table(result.to_frame())
