"""Quantisation, live: measured bytes against the prediction, the logit error and the loss
change, greedy decoding time for fp32, bf16 and the quantised model."""

from __future__ import annotations

import streamlit as st

from ...analysis import derive_measured
from ...experiments import ExperimentEntry
from ...units import human_bytes
from ..cached import show_table
from ..derivations import derived_metric


def show(entry: ExperimentEntry, prefix: str) -> None:
    run = entry.result
    cols = st.columns(4)
    cols[0].metric(
        f"{run.weight_dtype} weights, measured",
        human_bytes(run.measured_weight_bytes),
        f"predicted {human_bytes(run.predicted_weight_bytes)}",
        delta_arrow="off",
        delta_color="off",
    )
    cols[1].metric(
        "Largest logit error",
        f"{run.logit_max_abs_error:.3g}",
        f"bf16: {run.logit_max_abs_error_bf16:.3g}",
        delta_arrow="off",
        delta_color="off",
    )
    cols[2].metric(
        "Loss change",
        f"{run.loss_quantized - run.loss_fp:+.4f} nats",
        f"bf16: {run.loss_bf16 - run.loss_fp:+.4f}",
        delta_arrow="off",
        delta_color="off",
    )
    derived_metric(
        cols[3],
        "Bytes vs fp32",
        f"{run.measured_weight_bytes / run.fp32_weight_bytes:.1%}",
        derive_measured.quantised_share(run.measured_weight_bytes, run.fp32_weight_bytes, run.weight_dtype),
        prefix + "d.share",
    )
    same = run.measured_weight_bytes == run.predicted_weight_bytes
    st.markdown(
        (
            "✓ The quantised tensors hold exactly the predicted bytes."
            if same
            else "✗ The measured bytes differ from the prediction."
        )
    )
    show_table(run.to_frame(), width="stretch")
