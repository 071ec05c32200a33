"""Sharded training, measured: a small model of the sidebar's recipe trained for a few steps on
local ``torch.distributed`` processes (gloo) with PyTorch's FSDP2, tensor parallelism or both
(``train.shard``), each rank's local parameter, gradient and optimizer shards and saved
activations against the prediction, and the loss against one process."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go

from ..config import ModelConfig, small_training_config
from ..figures.common import GROUP_PALETTE, Figure, Table, layout_figure
from ..train.shard import ShardResult, ShardSettings, run_shard
from ..units import Progress
from .registry import ExperimentKind, register

SHARD_DEFAULTS = {"steps": 2, "seq_len": 32, "batch": 2}
KINDS = (
    ("params_bytes", "parameters"),
    ("grads_bytes", "gradients"),
    ("optimizer_bytes", "optimizer state"),
    ("activation_bytes", "activations"),
)


@dataclass(frozen=True)
class ShardModel:
    cfg: ModelConfig
    note: str


def shard_config(cfg: ModelConfig) -> ShardModel:
    """The sidebar model's recipe at the size of a few-second run (d 64, 4 blocks, byte
    vocabulary): every shard is exact at any size, so a small one shows it as well."""
    small = small_training_config(cfg)
    return ShardModel(
        small,
        f"The sidebar model's recipe at d = {small.d_model}, "
        f"{small.n_layers} blocks, {small.n_heads} heads / "
        f"{small.n_kv_heads} KV heads, FFN {small.ffn_hidden}, vocabulary "
        f"{small.vocab_size}.",
    )


def shard_run(
    cfg: ModelConfig, ranks: int = 2, strategy: str = "fsdp", progress: Progress | None = None
) -> ShardResult:
    return run_shard(cfg, ShardSettings(ranks, strategy, **SHARD_DEFAULTS), progress=progress)


def rank_frame(result: ShardResult) -> pd.DataFrame:
    rows = []
    for rank in result.to_dict()["ranks"]:
        for key, label in KINDS:
            measured, predicted = rank["measured"][key], rank["predicted"][key]
            rows.append(
                {
                    "rank": rank["rank"],
                    "dp_rank": rank["dp_rank"],
                    "tp_rank": rank["tp_rank"],
                    "state": label,
                    "measured_bytes": measured,
                    "predicted_bytes": predicted,
                    "measured_over_predicted": measured / predicted if predicted else None,
                }
            )
    return pd.DataFrame(rows)


def shard_figure(result: ShardResult) -> go.Figure:
    """Measured (bars) and predicted (markers) bytes per rank and state."""
    frame = rank_frame(result)
    fig = go.Figure()
    for i, (_, label) in enumerate(KINDS):
        part = frame[frame.state == label]
        x = [f"rank {r}" for r in part["rank"]]
        fig.add_trace(
            go.Bar(
                x=x,
                y=part.measured_bytes,
                name=f"{label}, measured",
                marker_color=GROUP_PALETTE[i],
                offsetgroup=i,
            )
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=part.predicted_bytes,
                mode="markers",
                name="predicted",
                showlegend=i == 0,
                offsetgroup=i,
                marker=dict(symbol="line-ew-open", size=28, color="#222", line=dict(width=3)),
                legendgroup="predicted",
            )
        )
    fig.update_layout(barmode="group", scattermode="group")
    fig.update_yaxes(title_text="bytes on the rank")
    d = result.to_dict()
    return layout_figure(
        fig,
        f"{d['strategy']} on {len(d['ranks'])} gloo processes: measured (bars) vs predicted (marks)",
        height=400,
    )


def tables(result: ShardResult, section: str, config: ModelConfig | None = None) -> list[Table]:
    d = result.to_dict()
    losses = pd.DataFrame(
        {
            "step": range(1, len(d["loss_single"]) + 1),
            "loss_one_process": d["loss_single"],
            "loss_sharded": d["loss_sharded"],
        }
    )
    return [
        Table(
            "shard_ranks",
            "Per rank: measured against predicted bytes",
            section,
            rank_frame(result),
            note=f"max relative error {d['max_rel_error']:.3g} "
            f"(parameters, gradients, optimizer); activations "
            f"{d['activation_max_rel_error']:.3g}",
        ),
        Table("shard_loss", "Loss: sharded against one process", section, losses),
    ]


def figures(result: ShardResult, section: str) -> list[Figure]:
    return [Figure("shard_ranks", "Measured vs predicted per rank", section, shard_figure(result))]


KIND = register(
    ExperimentKind(
        name="shard",
        title="Sharded training on torch.distributed, measured",
        result_type=ShardResult,
        run=shard_run,
        tables=tables,
        figures=figures,
        panel="shard",
        order=75,
    )
)
