"""The depth sweep: the Post/Pre ratio against depth with √L, the fitted slopes beside Theorem
1's, what they say (computed), the sweep figure and the table.
"""

from __future__ import annotations

import streamlit as st

from ...experiments import ExperimentEntry
from ...experiments.depth import depth_sweep_figure, depth_sweep_table, ratio_figure
from ...experiments.explain import explain_depth
from ..cached import show_table


def show(entry: ExperimentEntry, prefix: str) -> None:
    result = entry.result
    cols = st.columns(3)
    cols[0].metric(
        "Post-LN fitted slope", f"{result.post_slope:+.3f}", "theory 0", delta_arrow="off", delta_color="off"
    )
    cols[1].metric(
        "Pre-LN fitted slope", f"{result.pre_slope:+.3f}", "theory −0.5", delta_arrow="off", delta_color="off"
    )
    cols[2].metric(
        "Post/Pre ratio's slope",
        f"{result.ratio_slope:+.3f}",
        "√L: +0.5",
        delta_arrow="off",
        delta_color="off",
    )
    st.plotly_chart(ratio_figure(result), key=prefix + "chart_ratio")
    for sentence in explain_depth(result):
        st.markdown(sentence)
    st.plotly_chart(depth_sweep_figure(result), key=prefix + "chart_sweep")
    show_table(depth_sweep_table(result), width="stretch")
    with st.expander("Every depth and seed"):
        show_table(result.to_frame(), width="stretch")
