"""Speculative decoding, live: measured against Leviathan et al.'s formula for a trained and an
untrained draft, and whether the output is the target's own greedy output."""

from __future__ import annotations

import streamlit as st

from ...analysis import derive_measured
from ...experiments import ExperimentEntry
from ...experiments.speculative import speculative_figure
from ..cached import show_table
from ..derivations import derived_metric


def show(entry: ExperimentEntry, prefix: str) -> None:
    run = entry.result
    cols = st.columns(len(run.results) * 2)
    for i, r in enumerate(run.results):
        cols[2 * i].metric(f"{r.label}: measured α", f"{r.measured_alpha:.3f}")
        derived_metric(
            cols[2 * i + 1],
            f"{r.label}: speedup",
            f"{r.measured_speedup:.2f}×",
            derive_measured.speculative_speedup(
                r.measured_speedup,
                run.greedy_s,
                r.speculative_s,
                r.measured_alpha,
                run.gamma,
                r.cost_ratio,
                r.predicted_speedup,
            ),
            f"{prefix}d.speedup.{i}",
            delta=f"formula {r.predicted_speedup:.2f}×",
            delta_arrow="off",
            delta_color="off",
        )
    st.markdown(
        f"The target's greedy continuation ({run.new_tokens} byte tokens, "
        f"{run.distinct_tokens} different) after the validation prompt:"
    )
    st.code(f"{run.prompt_text}⟪{run.target_text}⟫", language=None, wrap_lines=True)
    if run.distinct_tokens <= run.new_tokens // 4:
        st.caption(
            f"Only {run.distinct_tokens} different tokens: a briefly trained byte model "
            f"repeats itself, and a small draft agrees easily with a model that repeats "
            f"itself — the reason α is {run.results[0].measured_alpha:.2f} here. More "
            f"training steps (CLI `speculate --live --steps N`) give the target more to "
            f"say, and the draft more to miss."
        )
    same = all(r.identical_to_target_greedy for r in run.results)
    st.markdown(
        (
            "✓ Both runs' output is the target's own greedy output, token for token."
            if same
            else "✗ A speculative output differs from the target's greedy output."
        )
    )
    for r in run.results:
        st.markdown(
            f"**Where the time goes ({r.label})**: the draft's {run.gamma} forwards per "
            f"step {r.draft_share:.0%}, the target's verification of γ + 1 = "
            f"{run.gamma + 1} tokens {r.verify_share:.0%}, the loop's own work "
            f"{r.overhead_share:.0%}. A verification costs {r.verify_cost:.2f} one-token "
            f"steps (the formula counts 1) and a draft step c = {r.cost_ratio:.2f}, so the "
            f"formula with the measured costs gives "
            f"{r.predicted_speedup_measured_costs:.2f}× against "
            f"{r.measured_speedup:.2f}× measured."
        )
    st.plotly_chart(speculative_figure(run), key=prefix + "chart_speculative")
    show_table(run.to_frame(), width="stretch")
