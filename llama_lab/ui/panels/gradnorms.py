"""Post-LN vs Pre-LN gradient norms: the two arms' loss and residual ratio, the profile, the
per-group table.
"""

from __future__ import annotations

import streamlit as st

from ...analysis import derive_measured
from ...experiments import ExperimentEntry
from ...experiments.explain import explain_profile
from ...experiments.gradient_norms import gradnorm_profile, gradnorm_summary, group_table, seed_table
from ...figures.common import ARRANGEMENT_LABELS
from ..cached import show_table
from ..derivations import derived_metric


def show(entry: ExperimentEntry, prefix: str) -> None:
    result = entry.result
    ratios = result.last_ratio_by_seed()
    ratio = result.last_ratio()
    cols = st.columns(4)
    derived_metric(
        cols[0],
        "Post ÷ Pre, last block",
        f"{ratio:.3g}",
        derive_measured.seed_median_ratio(ratios, ratio, "the last block's FFN output projection ‖∇W_down‖"),
        prefix + "d.ratio",
        delta=f"{sum(r > 1 for r in ratios)} of {len(ratios)} seeds above 1",
        delta_arrow="off",
        delta_color="off",
        help="Post-LN's last-block FFN output-projection gradient norm ‖∇W_down‖ "
        "over Pre-LN's: the median of the seeds' ratios (Xiong et al. 2020, Thm 1)",
    )
    cols[1].metric("Ratio's range over seeds", f"{min(ratios):.2g}–{max(ratios):.2g}")
    for col, arm in zip(cols[2:], (result.post, result.pre)):
        col.metric(f"{ARRANGEMENT_LABELS[arm.norm_position]} loss (median)", f"{arm.loss:.4f}")
    st.plotly_chart(gradnorm_profile(result), key=prefix + "chart_grad")
    sentences = explain_profile(result)
    if sentences:  # the finding in one paragraph; how the stream and the norms explain it, under "why"
        st.markdown(sentences[0])
    if sentences[1:]:
        with st.expander("Why: through depth, and what the last norm divides by"):
            for sentence in sentences[1:]:
                st.markdown(sentence)
    with st.expander("Seed by seed, per block, per parameter group"):
        show_table(seed_table(result), width="stretch")
        show_table(gradnorm_summary(result), width="stretch")
        st.markdown("**Per parameter group** (‖∇‖ of each group in each block, medians)")
        show_table(group_table(result), width="stretch")
        show_table(result.to_frame(), width="stretch")
