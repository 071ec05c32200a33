"""Distillation, live: the distilled and the scratch student's validation loss over seeds, the
teacher's beside them, what each costs to serve, and what the soft targets carry."""

from __future__ import annotations

import math

import streamlit as st

from ...experiments import ExperimentEntry
from ...experiments.distill import distill_figure
from ..cached import show_table


def show(entry: ExperimentEntry, prefix: str) -> None:
    run = entry.result
    gain = run.gain
    cols = st.columns(4)
    cols[0].metric(
        "Student's parameters",
        f"{run.student.params:,}",
        f"{run.teacher.params / run.student.params:.1f}× fewer than the teacher's",
        delta_arrow="off",
        delta_color="off",
    )
    cols[1].metric(
        "Decode FLOPs per token",
        f"{run.student.decode_flops_per_token:,.0f}",
        f"teacher {run.teacher.decode_flops_per_token:,.0f} "
        f"({run.teacher.decode_flops_per_token / run.student.decode_flops_per_token:.1f}×)",
        delta_arrow="off",
        delta_color="off",
    )
    cols[2].metric(
        "Val loss, scratch − distilled",
        "—" if gain is None else f"{gain:+.4f} nats",
        f"median over {len(run.seeds)} seeds; teacher {run.teacher_val_loss:.4f}",
        delta_arrow="off",
        delta_color="off",
    )
    cols[3].metric(
        f"Soft-target entropy (T={run.temperature:g})",
        f"{run.soft_target_entropy:.2f} nats",
        f"one-hot label 0; uniform {math.log(run.vocab_size):.2f}",
        delta_arrow="off",
        delta_color="off",
    )
    st.markdown(
        f"Every label says one byte (entropy 0); the teacher's softened distribution spreads "
        f"{run.soft_target_entropy:.2f} nats per position over the bytes it finds plausible "
        f"({run.teacher_entropy_t1:.2f} at T = 1) — what the student learns besides the label. "
        + (
            "Here the distilled student ends lower than the one from scratch."
            if gain is not None and gain > 0
            else "Here the distilled student does not end lower than the one from scratch: a "
            "small teacher briefly trained has little more to say than the labels."
        )
    )
    st.plotly_chart(distill_figure(run), key=prefix + "chart_distill")
    show_table(run.sizes_frame(), width="stretch")
    show_table(run.to_frame(), width="stretch")
    show_table(run.soft_targets_frame(), width="stretch")
