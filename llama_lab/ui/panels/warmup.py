"""Warmup, measured: the verdict on the seed's row (computed), the loss curves over seeds, the
final losses seed by seed.
"""

from __future__ import annotations

import streamlit as st

from ...experiments import ExperimentEntry
from ...experiments.training import training_curves
from ...seed import WARMUP_QUOTE
from ..cached import show_table
from ..widgets import show_warning


def show(entry: ExperimentEntry, prefix: str) -> None:
    result = entry.result
    verdict = result.verdict()
    mark = ":green[✓ holds]" if verdict["holds"] else ":red[✗ does not hold here]"
    st.markdown(
        f"**The seed's row “warmup: Post-LN required / Pre-LN optional”: {mark}.** {result.verdict_text()}",
        help=f"The tutorial's words: {WARMUP_QUOTE}",
    )
    for label, runs in result.runs.by_label().items():
        diverged = [run for run in runs if run.diverged]
        if diverged:
            show_warning(
                f"{label} diverged in {len(diverged)} of {len(runs)} seeds (first: "
                f"{diverged[0].divergence_reason})."
            )
    st.plotly_chart(training_curves(result.runs), key=prefix + "chart_warmup")
    show_table(result.verdict_frame(), width="stretch")
    show_table(result.runs.seed_summary(), width="stretch")
