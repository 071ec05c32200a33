"""Fine-tuning's tables and figures — the Fine-tuning page's and the report's: one step's peak
bytes by part, the peak against context length with the GPU's memory as a line, the prediction
in a few rows, and a live run's loss and its measured against predicted numbers. Every number
is ``analysis.finetune``'s (or ``predict_finetune``'s); nothing is recomputed here."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go

from ..analysis.finetune import FinetuneSpec
from ..analysis.finetune_step import finetune_memory
from ..config import ModelConfig
from ..config.hf.quant import StoredQuant
from ..runtime.hardware import GPU
from .common import GIB, GROUP_PALETTE, layout_figure, mark, sweep_lengths

CURVE_POINTS = 24  # context lengths on the curve: a bounded sweep, cheap on view
PART_LABELS = {
    "frozen_weights": "frozen weights",
    "trainable_weights": "trainable weights",
    "master_weights": "float32 master copy",
    "optimizer_states": "optimizer states",
    "gradients": "gradients",
    "activations": "activations",
    "logits_and_loss": "logits and loss",
    "dequantised_weight": "dequantised weight (one layer)",
    "dora_weight_norm": "DoRA's weight norm (one layer)",
}


def curve_lengths(cfg: ModelConfig, seq_len: int | None = None) -> tuple[int, ...]:
    """The context lengths of the peak-vs-context curve: ``CURVE_POINTS`` geometric steps from
    16 to the model's max_seq_len, with the analysed length ``seq_len`` (when allowed) added."""
    lengths = set(sweep_lengths(cfg.max_seq_len, points=CURVE_POINTS))
    if seq_len is not None and 1 <= seq_len <= cfg.max_seq_len:
        lengths.add(seq_len)
    return tuple(sorted(lengths))


def curve_frame(
    cfg: ModelConfig,
    spec: FinetuneSpec,
    lengths: Sequence[int],
    batch: int,
    stored: StoredQuant | None = None,
    factor: float = 1.0,
) -> pd.DataFrame:
    """``finetune_memory`` at each length: its parts as counted and its peak, the count ×
    ``factor`` (``predict_finetune``'s ``peak_bytes.factor``: the estimate its ``fits`` and the
    longest context that fits are judged by, so the curve crosses the GPU's line where they say)."""
    rows = []
    for length in lengths:
        memory = finetune_memory(cfg, spec, length, batch, stored)
        rows.append({"seq_len": length, "peak_bytes": memory.peak_bytes * factor, **memory.by_part})
    return pd.DataFrame(rows)


def memory_vs_context(frame: pd.DataFrame, gpu: GPU, seq_len: int | None = None) -> go.Figure:
    """The step's peak against context length, the persistent states beneath it, and the GPU's
    usable memory as a horizontal line (the analysed length marked)."""
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=frame.seq_len,
            y=frame.peak_bytes / GIB,
            mode="lines+markers",
            name="peak of a step",
            line=dict(color=GROUP_PALETTE[0]),
            hovertemplate="T=%{x:,}: %{y:.2f} GiB<extra></extra>",
        )
    )
    states = ["frozen_weights", "trainable_weights", "master_weights", "optimizer_states"]
    fig.add_trace(
        go.Scatter(
            x=frame.seq_len,
            y=frame[states].sum(axis=1) / GIB,
            mode="lines",
            name="weights + optimizer states",
            line=dict(color="#999", dash="dot"),
            hovertemplate="T=%{x:,}: %{y:.2f} GiB<extra></extra>",
        )
    )
    mark(
        fig,
        y=gpu.usable_bytes / GIB,
        text=f"{gpu.name}: {gpu.usable_bytes / GIB:.1f} GiB",
        color="#444",
        dash="dash",
    )
    if seq_len is not None:
        mark(fig, x=seq_len, text=f"T = {seq_len:,}", color="#888", dash="dot")
    fig.update_xaxes(type="log", title="context length (tokens per sequence)")
    fig.update_yaxes(type="log", title="peak memory of a step (GiB)")
    return layout_figure(fig, "Fine-tuning: peak memory against context", height=420)


def parts_frame(by_part: Mapping[str, int]) -> pd.DataFrame:
    """Each part of the peak (the empty ones left out), its bytes and its share."""
    total = sum(by_part.values()) or 1
    rows = [
        {"part": PART_LABELS.get(name, name), "bytes": value, "share_pct": 100 * value / total}
        for name, value in by_part.items()
        if value
    ]
    return pd.DataFrame(rows, columns=["part", "bytes", "share_pct"])


def parts_bar(by_part: Mapping[str, int], gpu: GPU) -> go.Figure:
    """The peak as one stacked bar of its parts, beside the GPU's usable memory."""
    fig = go.Figure()
    frame = parts_frame(by_part)
    for i, row in enumerate(frame.itertuples()):
        fig.add_trace(
            go.Bar(
                y=["peak"],
                x=[row.bytes / GIB],
                name=row.part,
                orientation="h",
                marker_color=GROUP_PALETTE[i % len(GROUP_PALETTE)],
                hovertemplate=f"{row.part}: %{{x:.2f}} GiB ({row.share_pct:.1f} %)<extra></extra>",
            )
        )
    mark(fig, x=gpu.usable_bytes / GIB, text=f"{gpu.name}", color="#444", dash="dash", log=False)
    fig.update_layout(barmode="stack", legend=dict(orientation="h", y=-0.4))
    fig.update_xaxes(title="GiB")
    return layout_figure(fig, "The peak of a step, by part", height=260)


def prediction_frame(prediction: Mapping[str, Any]) -> pd.DataFrame:
    """``predict_finetune``'s answer in rows: the counts, the peak with its interval, whether it
    fits, the longest context and largest batch that fit, tokens/s with its interval."""
    peak, rate = prediction["peak_bytes"], prediction["tokens_per_s"]
    longest, largest = prediction["longest_seq_len_that_fits"], prediction["largest_batch_that_fits"]
    rows = [
        ("method", prediction["method"]),
        ("GPU", prediction["gpu"]),
        ("context (T)", prediction["seq_len"]),
        ("batch (B)", prediction["batch"]),
        ("trainable parameters", prediction["trainable_params"]),
        ("frozen parameters", prediction["frozen_params"]),
        ("peak bytes (estimate)", peak["estimate"]),
        ("peak bytes (low)", peak["low"]),
        ("peak bytes (high)", peak["high"]),
        ("GPU's usable bytes", prediction["gpu_memory_bytes"]),
        ("fits", "yes" if prediction["fits"] else "no"),
        ("longest context that fits (at B)", longest if longest is not None else "none"),
        ("largest batch that fits (at T)", largest if largest is not None else "none"),
        ("tokens/s (bound)", rate["bound"]),
        ("tokens/s (estimate)", rate["estimate"]),
        ("tokens/s (low)", rate["low"]),
        ("tokens/s (high)", rate["high"]),
    ]
    return pd.DataFrame({"quantity": [r[0] for r in rows], "value": [r[1] for r in rows]})


def loss_figure(losses: Sequence[float], title: str = "Fine-tuning loss, per step") -> go.Figure:
    fig = go.Figure(
        go.Scatter(
            x=list(range(1, len(losses) + 1)),
            y=list(losses),
            mode="lines+markers",
            name="loss",
            line=dict(color=GROUP_PALETTE[0]),
            hovertemplate="step %{x}: %{y:.4f}<extra></extra>",
        )
    )
    fig.update_xaxes(title="step")
    fig.update_yaxes(title="loss (nats)")
    return layout_figure(fig, title, height=320)


def measured_frame(run: Any) -> pd.DataFrame:
    """A live run's measured trainable parameters and peak bytes beside the prediction."""
    return pd.DataFrame(
        [
            {
                "quantity": "trainable parameters",
                "measured": run.measured_trainable_params,
                "predicted": run.predicted_trainable_params,
                "measured / predicted": run.measured_trainable_params
                / max(1, run.predicted_trainable_params),
            },
            {
                "quantity": "peak bytes",
                "measured": run.measured_peak_bytes,
                "predicted": run.predicted_peak_bytes,
                "measured / predicted": run.peak_ratio,
            },
        ]
    )
