"""Sharded training on local torch.distributed processes: each rank's measured shards and
activations against the prediction, and the loss against one process."""

from __future__ import annotations

import streamlit as st

from ...experiments import ExperimentEntry
from ...experiments.shard import rank_frame, shard_figure
from ..cached import show_table


def show(entry: ExperimentEntry, prefix: str) -> None:
    result = entry.result
    d = result.to_dict()
    cols = st.columns(4)
    cols[0].metric("max relative error (parameters, gradients, optimizer)", f"{d['max_rel_error']:.3g}")
    cols[1].metric("activations, max relative error", f"{d['activation_max_rel_error']:.3g}")
    cols[2].metric("loss vs one process, largest difference", f"{d['max_loss_diff']:.2g}")
    cols[3].metric(
        "wall time",
        f"{d['wall_s']:.1f} s",
        f"dp {d['dp']} × tp {d['tp']}",
        delta_arrow="off",
        delta_color="off",
    )
    st.markdown(
        "✓ Every rank's parameter, gradient and optimizer shard is the predicted size."
        if d["max_rel_error"] == 0
        else "✗ A rank's shard differs from the prediction (see the table)."
    )
    st.plotly_chart(shard_figure(result), key=prefix + "chart_shard")
    show_table(rank_frame(result), width="stretch")
