"""The live pass: time, throughput, MFU, memory measured vs predicted, logits with and without
the final norm.
"""

from __future__ import annotations

import streamlit as st

from ...analysis import MFU_CONVENTION, derive, derive_measured
from ...errors import ExperimentError
from ...experiments import ExperimentEntry
from ...experiments.live import (
    CAUSAL_MFU_NOTE,
    has_causal_mfu,
    live_memory_table,
    live_phase_figure,
    peak_memory_is_measured,
)
from ...figures.common import logits_table
from ...units import human_bytes, human_count
from ..cached import show_table
from ..derivations import derived_metric


def _speed(live, prefix: str) -> None:
    """Step time, throughput, achieved FLOP/s and MFU, each with its derivation."""
    causal = has_causal_mfu(live)
    cols = st.columns(4)
    cols[0].metric("Step", f"{live.step_ms:.1f} ms", help=f"median of {live.iters} timed steps")
    derived_metric(
        cols[1],
        "Tokens/s",
        human_count(live.tokens_per_s),
        derive_measured.throughput(live.batch, live.seq_len, live.step_ms, live.tokens_per_s),
        prefix + "d.tokens",
        help=f"{live.tokens_per_s:,.0f} tokens per second",
    )
    derived_metric(
        cols[2],
        "Achieved",
        human_count(live.achieved_tflops * 1e12, "FLOP/s"),
        derive_measured.achieved_flops(live.training_flops, live.step_ms, live.achieved_tflops * 1e12),
        prefix + "d.achieved",
        help=f"{live.training_flops:.3e} FLOPs per step: {MFU_CONVENTION}",
    )
    # the causal-attention MFU rides under the full-T×T one, as its delta
    derived_metric(
        cols[3],
        "MFU",
        f"{live.mfu:.1%}",
        derive_measured.mfu(
            live.achieved_tflops * 1e12,
            live.peak_flops,
            live.peak_flops_source,
            sparse_quoted=live.device != "cpu",
        ),
        prefix + "d.mfu",
        delta=f"causal scores: {live.mfu_causal:.1%}" if causal else None,
        delta_color="off",
        delta_arrow="off",
        help=f"peak {live.peak_flops / 1e12:.3g} TFLOP/s; {MFU_CONVENTION}"
        + (
            "; causal half only: " + human_count(live.achieved_tflops_causal * 1e12, "FLOP/s")
            if causal
            else ""
        ),
    )
    st.caption(
        f"MFU is measured against {live.peak_flops / 1e12:.3g} TFLOP/s: "
        f"{live.peak_flops_source}; FLOPs: {MFU_CONVENTION}. Warm-up step (excluded): "
        f"{live.warmup_s:.2f} s." + (" " + CAUSAL_MFU_NOTE if causal else "")
    )
    st.plotly_chart(live_phase_figure(live), key=prefix + "chart_phases")


def _prediction(entry: ExperimentEntry) -> None:
    """The step time predicted before the run (the device calibrated by earlier passes) beside
    the one measured."""
    predicted = entry.settings.get("predicted_step_ms")
    if predicted is None:
        st.caption(
            "This pass calibrates the device: the next one's step time is predicted from it "
            "before it runs, and shown here beside what it measures."
        )
        return
    measured = entry.result.step_ms
    cols = st.columns(3)
    cols[0].metric("Predicted step", f"{predicted:,.1f} ms", help=entry.settings["calibration"])
    cols[1].metric("Measured step", f"{measured:,.1f} ms")
    cols[2].metric("Error", f"{(predicted - measured) / measured:+.1%}")
    st.caption(f"Predicted before this run, {entry.settings['calibration']}.")


def show(entry: ExperimentEntry, prefix: str) -> None:
    live, cfg = entry.result, entry.config
    if cfg is None:
        raise ExperimentError("a live pass is shown with the config it ran on")
    _speed(live, prefix)
    _prediction(entry)

    measured_peak = peak_memory_is_measured(live)
    cols = st.columns(4)
    derived_metric(
        cols[0],
        "Initial loss",
        f"{live.initial_loss:.4f}",
        derive.initial_loss(cfg.vocab_size),
        prefix + "d.loss",
        delta=f"{live.initial_loss - live.ln_vocab:+.4f} vs ln V",
        delta_arrow="off",
        delta_color="off",
    )
    derived_metric(
        cols[1],
        "ln V",
        f"{live.ln_vocab:.4f}",
        derive.initial_loss(cfg.vocab_size),
        prefix + "d.lnv",
        help=f"V = {cfg.vocab_size:,}",
    )
    cols[2].metric(
        "Peak memory" if measured_peak else "Peak memory (estimate)",
        human_bytes(live.peak_memory_bytes),
        help=live.peak_memory_source,
    )
    cols[3].metric(
        "Activations measured / predicted",
        f"{live.activation_ratio:.3f}",
        f"{human_bytes(live.activation_bytes_measured)} vs {human_bytes(live.activation_bytes_estimated)}",
        delta_arrow="off",
        delta_color="off",
    )
    peak_note = (
        f"Peak memory: {live.peak_memory_source}."
        if measured_peak
        else f"Peak memory is an estimate, not a measurement: {live.peak_memory_source}, "
        f"added up from the tensors (the process's resident memory is not read)."
    )
    st.caption(
        f"{peak_note} Activations measured: the tensors autograd saves for backward, "
        f"each storage once; predicted: analysis.autocast_activation_bytes. The memory guard "
        f"checked {human_bytes(live.estimated_training_bytes)}, the step's peak as "
        f"train.budgets.training_peak writes it out (backward at the loss, or the AdamW "
        f"update with its temporaries) — "
        f"{live.estimated_training_bytes / max(1, live.peak_memory_bytes):.2f}× the peak "
        f"shown."
    )
    show_table(live_memory_table(live, cfg), width="stretch")

    st.markdown(
        "**Logits at the initial weights, with and without the final norm** — the "
        "seed's most common Pre-LN bug is forgetting the final norm: the last block's "
        "output reaches lm_head unnormalised."
    )
    show_table(logits_table(live.logits, live.logits_without_final_norm, live.ln_vocab), width="stretch")
    growth = live.logits_without_final_norm.std / max(live.logits.std, 1e-30)
    st.caption(
        f"Without the final norm the logits' std is {growth:.3g}× the normed one"
        + ("" if cfg.final_norm else " (this config has no final norm: both rows are the same model)")
        + ". The final norm rescales the last hidden state to unit RMS whatever its "
        "size: at initialisation the residual stream is small (embeddings ~N(0, 0.02)), "
        "after training it grows with depth — the Gradient norms page shows both "
        "after a training run."
    )
