"""Figures and tables of 3-D parallelism: per-stage memory of one GPU against its capacity, the
communication per step, what fits on N GPUs for serving, the layout search, and Korthikanti et
al.'s activation terms beside ours."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from ..analysis.korthikanti import KorthikantiComparison
from ..analysis.parallel import ParallelEstimate
from ..config import ModelConfig
from ..runtime.hardware import GPU
from ..validation.efficiency import Efficiency, layout_step_estimate
from ..validation.predict import time_interval
from .common import GROUP_PALETTE, display_values, layout_figure, mark

STATE_PARTS = (
    ("params_bytes", "weights"),
    ("grads_bytes", "gradients"),
    ("optimizer_bytes", "optimizer state"),
    ("activation_bytes", "activations"),
)


def stage_frame(est: ParallelEstimate) -> pd.DataFrame:
    """One row per pipeline stage: blocks, parameters per GPU, bytes by kind, in-flight
    micro-batches, bytes sent per step."""
    rows = []
    for s in est.stages:
        rows.append(
            {
                "stage": s["stage"],
                "blocks": s["blocks"],
                "block_indices": s["layers"],
                "params_per_gpu": s["params"],
                **{label.replace(" ", "_") + "_bytes": s[key] for key, label in STATE_PARTS},
                "total_bytes": s["total_bytes"],
                "micro_batches_in_flight": s["in_flight"],
                **{f"sends_{kind}_bytes": v for kind, v in s["comm_bytes"].items()},
            }
        )
    return pd.DataFrame(rows)


def stage_memory_figure(est: ParallelEstimate, gpu_name: str, gpu_bytes: int) -> go.Figure:
    """Stacked bytes per GPU of each stage, with the GPU's memory marked."""
    fig = go.Figure()
    stages = [f"stage {s['stage']}" for s in est.stages]
    for i, (key, label) in enumerate(STATE_PARTS):
        fig.add_trace(
            go.Bar(
                x=stages,
                y=display_values([s[key] for s in est.stages]),
                name=label,
                marker_color=GROUP_PALETTE[i],
            )
        )
    fig.update_layout(barmode="stack")
    mark(
        fig,
        y=gpu_bytes,
        text=f"{gpu_name}: {gpu_bytes / 1e9:,.0f} GB",
        color="#222222",
        dash="dot",
        log=False,
    )
    fig.update_yaxes(title_text="bytes per GPU")
    return layout_figure(
        fig, f"Per-GPU memory by pipeline stage ({est.dtype}, T={est.seq_len:,})", height=380
    )


def comm_frame(est: ParallelEstimate) -> pd.DataFrame:
    names = {
        "tp": "tensor parallel (all-reduce / reduce-scatter + all-gather)",
        "pp": "pipeline (activations and their gradients)",
        "dp": "data parallel (gradients; ZeRO's gathers)",
    }
    return pd.DataFrame([{"kind": names[k], "bytes_sent_per_step": v} for k, v in est.comm_by_kind.items()])


def serving_frame(fits: list) -> pd.DataFrame:
    return pd.DataFrame([f.to_dict() for f in fits])


def search_frame(rows: list, cfg: ModelConfig, seq_len: int, gpu: GPU) -> pd.DataFrame:
    """The layouts, with each modeled step (nothing overlapped, at the dense peak) beside its
    calibrated estimate (the shares fitted on public measurements: ``validation.efficiency``)."""
    keep = (
        "layout",
        "tp",
        "pp",
        "dp",
        "zero",
        "recompute",
        "micro_batches",
        "total_bytes_per_gpu",
        "comm_bytes_per_step",
        "bubble_fraction",
        "compute_s",
        "comm_s",
        "step_s",
    )
    eff = Efficiency.load()
    return pd.DataFrame(
        [
            {
                **{k: r.to_dict()[k] for k in keep},
                **_estimate(cfg, gpu, seq_len, r, eff),
            }
            for r in rows
        ]
    )


def _estimate(cfg: ModelConfig, gpu: GPU, seq_len: int, cost, eff: Efficiency) -> dict[str, float]:
    """A layout's estimated step and its interval from the training rows' held-out errors."""
    seconds = layout_step_estimate(cfg, gpu, seq_len, cost, eff)
    low, high = time_interval(seconds, "train")
    return {"step_s_estimate": seconds, "step_s_low": low, "step_s_high": high}


def korthikanti_frames(cmp: KorthikantiComparison) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Their terms; our rows for their recipe and this config; Table 2's variants."""
    terms = pd.DataFrame(
        cmp.terms
        + [
            {
                "term": "total (34sbh + 5as²b)",
                "bytes": cmp.korthikanti_total,
                "sbh": 34,
                "as2b": 5,
                "replicated_under_tp": None,
            }
        ]
    )
    ours = pd.DataFrame(
        cmp.ours
        + [{"row": "total", "gpt_recipe_bytes": cmp.ours_gpt_total, "this_config_bytes": cmp.ours_total}]
    )
    variants = pd.DataFrame(cmp.variants)
    variants["ours_over_theirs"] = variants.ours_bytes / variants.korthikanti_bytes
    return terms, ours, variants
