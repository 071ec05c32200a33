"""Plotly figures and display tables built from ``llama_lab.experiments`` results. No
Streamlit here: the pages and the report both draw these.

Every number drawn is a field of a result dataclass (``GradNormComparison``, ``DepthSweep``,
``RunComparison``, ``LivePass``, ``DecodeBench``); this module only arranges them. The one
derived quantity is the fitted power law of the depth sweep, whose slope is the sweep's own
``post_slope`` / ``pre_slope`` (least squares in log-log) and whose intercept is the matching
least-squares intercept.
"""
from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from . import analysis
from .config import ModelConfig
from .experiments import (DecodeBench, DepthSweep, GradNormComparison, LivePass, RunComparison,
                          loglog_fit)
from .plots import display_frame, human_bytes, layout_figure

NORM_COLORS = {"post": "#d62728", "pre": "#1f77b4"}
NORM_LABELS = {"post": "Post-LN", "pre": "Pre-LN"}
VARIANT_COLORS = {"mha": "#d62728", "gqa": "#1f77b4", "mqa": "#2ca02c"}
RUN_COLORS = ("#d62728", "#ff9896", "#1f77b4", "#aec7e8", "#2ca02c", "#98df8a", "#9467bd",
              "#c5b0d5")
GRADNORM_METRICS = {  # field of GradNorms → axis title
    "layer_grad_norm": "‖∇θ_l‖ (all parameters of block l)",
    "ffn_out_grad_norm": "‖∇W_down‖ (FFN output projection)",
    "residual_grad_norm": "‖∂L/∂x_l‖ (residual stream at block input)",
}
CUDA_PEAK_SOURCE = "CUDA allocator"          # how experiments.live_pass names a measured peak


# ---- gradient norms: Post-LN vs Pre-LN -------------------------------------------------------------
def gradnorm_profile(comparison: GradNormComparison) -> go.Figure:
    """The three per-layer norms of SPEC's ``gradnorms``, Post-LN vs Pre-LN, log y."""
    fig = make_subplots(rows=1, cols=3, subplot_titles=list(GRADNORM_METRICS.values()),
                        horizontal_spacing=0.07)
    for col, metric in enumerate(GRADNORM_METRICS, start=1):
        for result in (comparison.post, comparison.pre):
            values = getattr(result, metric)                    # per block, 0 = nearest input
            position = result.norm_position
            fig.add_trace(go.Scatter(
                x=list(range(len(values))), y=values, mode="lines+markers",
                name=f"{NORM_LABELS[position]} (loss {result.loss:.3f})",
                legendgroup=position, showlegend=col == 1,
                line=dict(color=NORM_COLORS[position]),
                hovertemplate=f"{NORM_LABELS[position]} block %{{x}}: %{{y:.3e}}<extra></extra>"),
                row=1, col=col)
        fig.update_xaxes(title_text="block (0 = nearest the input)", dtick=max(1, len(values) // 8),
                         row=1, col=col)
        fig.update_yaxes(type="log", row=1, col=col)
    fig.update_annotations(font_size=12)
    n_layers = len(comparison.post.layer_grad_norm)
    return layout_figure(fig, f"Gradient norms at initialisation, {n_layers} blocks, "
                        f"B={comparison.batch}, T={comparison.seq_len} (same weights, same batch)",
                   height=420)


def group_table(comparison: GradNormComparison) -> pd.DataFrame:
    """One row per (norm position, parameter group); one column per block."""
    rows = []
    for result in (comparison.post, comparison.pre):
        for group, values in result.group_grad_norm.items():
            row = {"norm_position": result.norm_position, "group": group}
            row.update({f"block {i}": value for i, value in enumerate(values)})
            rows.append(row)
    return pd.DataFrame(rows)


def gradnorm_summary(comparison: GradNormComparison) -> pd.DataFrame:
    """Loss and whole-model norms of both arrangements; the last-over-first ratio of each
    per-layer list says which way the gradient grows through depth."""
    rows = []
    for result in (comparison.post, comparison.pre):
        row = {"norm_position": result.norm_position, "loss": result.loss,
               "total_grad_norm": result.total_grad_norm,
               "embedding_grad_norm": result.embedding_grad_norm}
        for metric in GRADNORM_METRICS:
            values = getattr(result, metric)
            row[f"{metric}_last_over_first"] = values[-1] / values[0] if values[0] else None
        rows.append(row)
    return pd.DataFrame(rows)


# ---- depth sweep ------------------------------------------------------------------------------------
def depth_sweep_figure(sweep: DepthSweep) -> go.Figure:
    """Last block's ‖∇W_down‖ against depth L, log-log, with the fitted power laws."""
    fig = go.Figure()
    for position, values, slope in (("post", sweep.post, sweep.post_slope),
                                    ("pre", sweep.pre, sweep.pre_slope)):
        intercept = loglog_fit(sweep.depths, values)[1]
        fitted = [math.exp(intercept) * depth ** slope for depth in sweep.depths]
        color = NORM_COLORS[position]
        fig.add_trace(go.Scatter(
            x=sweep.depths, y=values, mode="markers", marker=dict(size=10, color=color),
            name=f"{NORM_LABELS[position]} measured",
            hovertemplate=f"{NORM_LABELS[position]} L=%{{x}}: %{{y:.3e}}<extra></extra>"))
        fig.add_trace(go.Scatter(
            x=sweep.depths, y=fitted, mode="lines", line=dict(color=color, dash="dash"),
            name=f"{NORM_LABELS[position]} fit ∝ L^{slope:.2f}", hoverinfo="skip"))
    fig.update_xaxes(type="log", title="depth L (blocks)")
    fig.update_yaxes(type="log", title="‖∇W_down‖ of the last block")
    return layout_figure(fig, "Depth sweep at initialisation (Xiong et al. 2020, Thm 1: Post-LN "
                        "flat, slope 0; Pre-LN ∝ 1/√L, slope −0.5)", height=420)


def depth_sweep_table(sweep: DepthSweep) -> pd.DataFrame:
    """The fitted slopes beside the theorem's."""
    return pd.DataFrame([
        {"norm_position": "post", "fitted_slope": sweep.post_slope, "theory_slope": 0.0,
         "theory": "O(d·√ln d): independent of L"},
        {"norm_position": "pre", "fitted_slope": sweep.pre_slope, "theory_slope": -0.5,
         "theory": "O(d·√(ln d / L)): ∝ 1/√L"}])


# ---- training runs ------------------------------------------------------------------------------------
def _run_color(i: int) -> str:
    return RUN_COLORS[i % len(RUN_COLORS)]


def training_curves(comparison: RunComparison) -> go.Figure:
    """Training loss per step (lines), validation loss (markers), divergence (×), and the
    learning-rate schedule below."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.72, 0.28],
                        vertical_spacing=0.06)
    for i, (label, run) in enumerate(comparison.runs.items()):
        color = _run_color(i)
        steps = list(range(run.steps_run))
        fig.add_trace(go.Scatter(x=steps, y=run.loss, mode="lines", name=label, legendgroup=label,
                                 line=dict(color=color)), row=1, col=1)
        fig.add_trace(go.Scatter(x=run.val_step, y=run.val_loss, mode="markers",
                                 name=f"{label} (validation)", legendgroup=label, showlegend=False,
                                 marker=dict(color=color, symbol="circle-open", size=8),
                                 hovertemplate="validation after %{x} updates: %{y:.4f}"
                                               "<extra></extra>"), row=1, col=1)
        if run.diverged:
            step = run.divergence_step
            finite = [x for x in run.loss if math.isfinite(x)]
            loss = run.loss[step] if math.isfinite(run.loss[step]) else max(finite, default=0.0)
            fig.add_trace(go.Scatter(x=[step], y=[loss], mode="markers", legendgroup=label,
                                     showlegend=False, marker=dict(color=color, symbol="x", size=14),
                                     hovertext=run.divergence_reason, hoverinfo="text"),
                          row=1, col=1)
        fig.add_trace(go.Scatter(x=steps, y=run.lr, mode="lines", legendgroup=label,
                                 showlegend=False, line=dict(color=color, width=1)), row=2, col=1)
    fig.update_yaxes(title_text="loss (nats/byte)", row=1, col=1)
    fig.update_yaxes(title_text="learning rate", row=2, col=1)
    fig.update_xaxes(title_text="step", row=2, col=1)
    return layout_figure(fig, "Training loss (lines), validation loss (○), divergence (×)",
                         height=520)


def training_heatmaps(comparison: RunComparison) -> go.Figure:
    """‖∇θ_l‖ of every block at every step (before clipping and the update), one panel per
    run, log10 colour scale shared by all panels."""
    runs = list(comparison.runs.items())
    columns = min(2, len(runs))
    rows = math.ceil(len(runs) / columns)
    # room between rows for the x-axis title of one and the panel titles of the next
    fig = make_subplots(rows=rows, cols=columns, subplot_titles=[label for label, _ in runs],
                        shared_yaxes=True, vertical_spacing=0.24 if rows > 1 else 0.16,
                        horizontal_spacing=0.06)
    finite = [x for _, run in runs for step in run.layer_grad_norm for x in step
              if x is not None and math.isfinite(x) and x > 0]
    low, high = (math.log10(min(finite)), math.log10(max(finite))) if finite else (-3.0, 1.0)
    for i, (label, run) in enumerate(runs):
        z = [[math.log10(x) if x is not None and math.isfinite(x) and x > 0 else None
              for x in step] for step in run.layer_grad_norm]               # (steps, blocks)
        layers = [list(col) for col in zip(*z)]                              # (blocks, steps)
        fig.add_trace(go.Heatmap(
            z=layers, x=list(range(run.steps_run)), y=list(range(len(layers))),
            zmin=low, zmax=high, colorscale="Viridis", showscale=i == 0,
            colorbar=dict(title="log10 ‖∇θ_l‖"),
            hovertemplate="step %{x}, block %{y}: 10^%{z:.2f}<extra></extra>"),
            row=i // columns + 1, col=i % columns + 1)
    n_blocks = len(runs[0][1].layer_grad_norm[0]) if runs[0][1].layer_grad_norm else 1
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(dtick=max(1, n_blocks // 8))                     # whole blocks only
    fig.update_yaxes(title_text="block", col=1)
    fig.update_annotations(font_size=12)
    return layout_figure(fig, "Per-block gradient norm during training (block × step)",
                   height=260 * rows + 80)


def layer_grad_long(comparison: RunComparison) -> pd.DataFrame:
    """label, step, block, layer_grad_norm: the heatmaps as one long table."""
    rows = [{"label": label, "step": step, "block": block, "layer_grad_norm": value}
            for label, run in comparison.runs.items()
            for step, values in enumerate(run.layer_grad_norm)
            for block, value in enumerate(values)]
    return pd.DataFrame(rows)


# ---- live pass ----------------------------------------------------------------------------------------
def live_phase_figure(live: LivePass) -> go.Figure:
    phases = {"forward": live.forward_ms, "backward": live.backward_ms,
              "optimizer (AdamW)": live.optimizer_ms}
    fig = go.Figure(go.Bar(x=list(phases), y=list(phases.values()),
                           marker_color=["#1f77b4", "#ff7f0e", "#2ca02c"],
                           text=[f"{v:.1f} ms" for v in phases.values()],
                           hovertemplate="%{x}: %{y:.2f} ms<extra></extra>"))
    fig.update_yaxes(title="milliseconds (median of timed steps)")
    return layout_figure(fig, f"One training step on {live.device_name}, {live.dtype}: "
                        f"{live.step_ms:.1f} ms, {live.tokens_per_s:,.0f} tokens/s", height=360)


def peak_memory_is_measured(live: LivePass) -> bool:
    """Whether ``live.peak_memory_bytes`` is the CUDA allocator's peak. Elsewhere it is an
    estimate: weights + gradients + AdamW state + saved tensors added up, not measured RSS."""
    return live.peak_memory_source.startswith(CUDA_PEAK_SOURCE)


def peak_memory_label(live: LivePass) -> str:
    return "peak memory" if peak_memory_is_measured(live) else "peak memory (estimate)"


def has_causal_mfu(live: LivePass) -> bool:
    """Whether the result carries the causal-attention MFU (results from before it was added
    do not)."""
    return getattr(live, "mfu_causal", None) is not None


CAUSAL_MFU_NOTE = ("MFU counts the attention scores over the full T×T (SPEC, PaLM); SDPA with "
                   "is_causal=True computes only about half of them, so “causal” counts that "
                   "half (analysis.count_flops(...).forward_causal).")


def live_summary(live: LivePass) -> pd.DataFrame:
    """quantity, value, unit: the headline numbers of a live pass."""
    rows = [
        ("device", live.device_name, ""), ("dtype", live.dtype, ""),
        ("batch × sequence", f"{live.batch} × {live.seq_len}", "tokens"),
        ("parameters", live.n_params, ""),
        ("forward", live.forward_ms, "ms"), ("backward", live.backward_ms, "ms"),
        ("optimizer", live.optimizer_ms, "ms"), ("step", live.step_ms, "ms"),
        ("tokens/s", live.tokens_per_s, "tokens/s"),
        ("training FLOPs per step (analysis)", live.training_flops, "FLOP"),
        ("achieved", live.achieved_tflops, "TFLOP/s"),
        ("peak", live.peak_flops / 1e12, "TFLOP/s"), ("peak source", live.peak_flops_source, ""),
        ("MFU", live.mfu, "fraction"),
    ]
    if has_causal_mfu(live):
        rows += [("achieved, causal attention scores", live.achieved_tflops_causal, "TFLOP/s"),
                 ("MFU, causal attention scores", live.mfu_causal, "fraction")]
    rows += [
        ("initial loss", live.initial_loss, "nats"), ("ln V", live.ln_vocab, "nats"),
        ("loss after the timed steps", live.last_loss, "nats"),
        (peak_memory_label(live), live.peak_memory_bytes, "bytes"),
        ("peak memory source", live.peak_memory_source, ""),
        ("activations measured (saved for backward)", live.activation_bytes_measured, "bytes"),
        ("activations predicted (analysis.activation_bytes)", live.activation_bytes_estimated,
         "bytes"),
        ("measured / predicted activations", live.activation_ratio, "ratio"),
        ("memory guard estimate (analysis.training_memory)", live.estimated_training_bytes,
         "bytes"),
    ]
    return pd.DataFrame(rows, columns=["quantity", "value", "unit"])


def predicted_live_memory(live: LivePass, cfg: ModelConfig) -> dict[str, int]:
    """What ``analysis`` predicts for each entry of ``live.memory_breakdown``. The live pass
    keeps fp32 weights, gradients and AdamW moments whatever its dtype (bf16/fp16 run under
    autocast, which also keeps a 16-bit copy of every weight): analysis.training_memory at fp32
    without mixed precision, analysis.weight_bytes for the copies, and the activations it
    predicted at the run's dtype."""
    states = analysis.training_memory(cfg, live.seq_len, live.batch, dtype="fp32",
                                      mixed_precision=False).components
    return {"weights": states["weights"], "gradients": states["gradients"],
            "optimizer": states["optimizer_moments"] + states["master_weights"],
            "weight_casts": 0 if live.dtype == "fp32" else analysis.weight_bytes(cfg, live.dtype),
            "activations": live.activation_bytes_estimated}


_PREDICTION_SOURCES = {
    "weights": "analysis.training_memory: weights, fp32",
    "gradients": "analysis.training_memory: gradients, fp32",
    "optimizer": "analysis.training_memory: AdamW m and v, fp32 (torch also keeps a 4-byte "
                 "step per tensor)",
    "weight_casts": "analysis.weight_bytes at the run's dtype (autocast's copies; none in fp32)",
    "activations": "analysis.activation_bytes",
    "total": "the rows above",
}


def live_memory_table(live: LivePass, cfg: ModelConfig | None = None) -> pd.DataFrame:
    """What the tensors hold after the warm-up step beside what ``analysis`` predicts for
    ``cfg`` (the model that ran; without it only the activations are predicted), in bytes and
    human-readable. A prediction that cannot be made reads "—"."""
    predicted = predicted_live_memory(live, cfg) if cfg is not None else \
        {"activations": live.activation_bytes_estimated}
    rows = [{"component": name, "measured_bytes": value,
             "predicted_bytes": predicted.get(name),
             "source_of_prediction": _PREDICTION_SOURCES.get(name, "")}
            for name, value in live.memory_breakdown.items()]
    known = [row["predicted_bytes"] for row in rows]
    rows.append({"component": "total", "measured_bytes": sum(live.memory_breakdown.values()),
                 "predicted_bytes": sum(known) if None not in known else None,
                 "source_of_prediction": _PREDICTION_SOURCES["total"]})
    for row in rows:
        row["measured"] = human_bytes(row["measured_bytes"])
        row["predicted"] = human_bytes(row["predicted_bytes"])
    columns = ["component", "measured", "predicted", "measured_bytes", "predicted_bytes",
               "source_of_prediction"]
    return pd.DataFrame(rows)[columns]


def logits_table(with_norm, without_norm, ln_vocab: float | None = None) -> pd.DataFrame:
    """Logit statistics with and without the final norm (``LogitStats`` pairs)."""
    rows = []
    for label, stats in (("with final norm", with_norm), ("without final norm", without_norm)):
        rows.append({"logits": label, "std": stats.std, "max_abs": stats.max_abs,
                     "mean_max_prob": stats.max_prob_mean, "mean_entropy_nats": stats.entropy_mean,
                     "uniform_entropy_ln_V": ln_vocab})
    return pd.DataFrame(rows)


def run_logits_table(comparison: RunComparison) -> pd.DataFrame:
    """Logit statistics after training, on a validation batch, with and without the final
    norm, for every run."""
    frames = [logits_table(run.logits, run.logits_without_final_norm).assign(run=label)
              for label, run in comparison.runs.items()]
    frame = pd.concat(frames, ignore_index=True).drop(columns="uniform_entropy_ln_V")
    return frame[["run", *[c for c in frame.columns if c != "run"]]]


# ---- KV-cache decoding --------------------------------------------------------------------------------
def decode_figure(bench: DecodeBench) -> go.Figure:
    """ms per new token and cache bytes (measured ● vs predicted —) against context length."""
    frame = display_frame(bench.to_frame())
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=["decode time per new token",
                                        "KV cache bytes: measured (●) vs predicted (—)"])
    for variant, part in frame.groupby("variant", sort=False):
        color = VARIANT_COLORS.get(variant, "#7f7f7f")
        g = int(part.n_kv_heads.iloc[0])
        name = f"{variant.upper()} ({g} KV head{'s' if g > 1 else ''})"
        fig.add_trace(go.Scatter(x=part.context_len, y=part.ms_per_token, mode="lines+markers",
                                 name=name, legendgroup=variant, line=dict(color=color)),
                      row=1, col=1)
        fig.add_trace(go.Scatter(x=part.cache_tokens, y=part.cache_bytes_predicted, mode="lines",
                                 legendgroup=variant, showlegend=False, line=dict(color=color),
                                 hovertemplate="predicted %{y:,} B at %{x} tokens<extra></extra>"),
                      row=1, col=2)
        fig.add_trace(go.Scatter(x=part.cache_tokens, y=part.cache_bytes_measured, mode="markers",
                                 legendgroup=variant, showlegend=False,
                                 marker=dict(color=color, size=9),
                                 hovertemplate="measured %{y:,} B at %{x} tokens<extra></extra>"),
                      row=1, col=2)
    fig.update_xaxes(title_text="context length (prompt tokens)", row=1, col=1)
    fig.update_xaxes(title_text="tokens in the cache", row=1, col=2)
    fig.update_yaxes(title_text="ms per token (median)", row=1, col=1)
    fig.update_yaxes(title_text="bytes", row=1, col=2)
    fig.update_annotations(font_size=12)
    return layout_figure(fig, f"KV-cache decoding on {bench.device}, {bench.dtype}, "
                              f"B={bench.batch}, {bench.new_tokens} new tokens", height=400)
