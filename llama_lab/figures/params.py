"""Figures and tables of where parameters and FLOPs go."""

from __future__ import annotations

import math
from typing import Sequence

import pandas as pd
import plotly.graph_objects as go

from .. import analysis
from ..config import LIMITS, ModelConfig
from ..units import human_count, human_params
from .common import COMPONENT_COLORS, display_values, layout_figure, mark

FLOP_COMPONENTS = ("attention_proj", "attention_scores", "ffn", "lm_head")


# The weight matrices of a block: each costs 2·B·T·(its parameters) FLOPs in a forward pass.
MATMUL_TENSORS = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
    "router",
    "experts",
    "shared_experts",
    "shared_expert_gate",
    # Gated DeltaNet: its projections and the depthwise convolution (one multiply-add per weight
    # and token)
    "linear_in_proj",
    "linear_out_proj",
    "linear_conv",
    *analysis.params.MLA_KEYS,
    # DSA's lightning indexer: wq_b, wk, weights_proj
    "indexer_wq_b",
    "indexer_wk",
    "indexer_weights_proj",
)


def params_sunburst(params: analysis.ParamCount) -> go.Figure:
    """Total → component → tensor kind; each ring sums to its parent (branchvalues="total")."""
    ids, labels, parents, values, colors = (
        ["total"],
        [f"total<br>{params.total:,}"],
        [""],
        [params.total],
        ["#ffffff"],
    )
    for component, count in params.by_component.items():
        if count == 0:
            continue
        ids.append(component)
        labels.append(component)
        parents.append("total")
        values.append(count)
        colors.append(COMPONENT_COLORS[component])
        for kind, kind_count in params.detail.items():
            if kind_count and analysis.COMPONENT_OF[kind] == component and kind != component:
                ids.append(f"{component}/{kind}")
                labels.append(kind)
                parents.append(component)
                values.append(kind_count)
                colors.append(COMPONENT_COLORS[component])
                if kind == "experts" and params.active < params.total:  # a ring of their own
                    idle = params.total - params.active
                    ids += [f"{component}/{kind}/routed", f"{component}/{kind}/idle"]
                    labels += ["routed to a token", "idle for that token"]
                    parents += [f"{component}/{kind}"] * 2
                    values += [kind_count - idle, idle]
                    colors += [COMPONENT_COLORS[component], "#dddddd"]
    active = (
        f": {human_params(params.total)}, {human_params(params.active)} active per token"
        if params.active < params.total
        else f" ({params.total:,})"
    )
    fig = go.Figure(
        go.Sunburst(
            ids=ids,
            labels=labels,
            parents=parents,
            values=display_values(values),
            branchvalues="total",
            marker=dict(colors=colors),
            hovertemplate="%{label}: %{value:,} (%{percentRoot:.2%})<extra></extra>",
        )
    )
    return layout_figure(fig, f"Parameters by component{active}", height=480)


def typical_block(cfg: ModelConfig) -> int:
    """The first block of the most common kind (dense or sparse; attention or Gated DeltaNet):
    the one a block table shows."""
    kinds = list(zip(cfg.moe_layer_flags, cfg.linear_layer_flags))
    return kinds.index(max(sorted(set(kinds)), key=kinds.count))


def block_table(cfg: ModelConfig, flops: analysis.FlopCount, layer: int | None = None) -> pd.DataFrame:
    """One decoder block (``layer``, default ``typical_block``; blocks differ when only some
    are sparse or windowed) by tensor kind (the kinds it has): its parameters and the forward
    FLOPs it costs at the analysed batch and length. A weight matrix costs
    2·B·T·(its parameters) (one multiply-add per weight and token, 2 FLOPs each); the attention
    scores (QKᵀ and AV, no parameters) get their own row; biases and norms are element-wise,
    outside the matmul count (0 here; see ``flops.elementwise``). The column times L, plus
    lm_head (and BERT's pooler), is ``flops.forward`` when every block is alike."""
    s = analysis.Shapes.of(cfg)
    layer = typical_block(cfg) if layer is None else layer
    detail = analysis.layer_param_detail(cfg, layer)
    block_params = sum(detail.values())
    rows = []
    for kind, count in detail.items():
        matmul = kind in MATMUL_TENSORS
        rule = "2·B·T·params" if matmul else "element-wise, counted apart"
        # 2 FLOPs per multiply-add × one per weight × B·T tokens
        forward = 2 * flops.tokens * count if matmul else 0
        if kind == "experts" and count:  # each token meets k of the E experts
            forward, rule = 2 * flops.tokens * count * s.K // s.E, "2·B·T·params·k/E"
        if count or matmul:
            rows.append(
                {
                    "tensor": kind,
                    "component": analysis.COMPONENT_OF[kind],
                    "params": count,
                    "share_of_block": count / block_params,
                    "forward_flops": forward,
                    "flops_rule": rule,
                }
            )
    keys = "T" if flops.context_len == flops.seq_len else "S"
    if cfg.linear_layer_flags[layer]:  # Gated DeltaNet: the convolution and the delta rule
        rows.append(
            {
                "tensor": "gated delta rule",
                "component": "attention",
                "params": 0,
                "share_of_block": 0.0,
                "forward_flops": flops.by_component["delta_rule"] // sum(cfg.linear_layer_flags)
                - 2 * flops.tokens * detail["linear_conv"],  # (the convolution: its own row)
                "flops_rule": "c = 64: 2·B·H_v·n·(2c²d_k + c²d_v + 3c·d_k·d_v + c(c−1)/2·(d_k + d_v))",
            }
        )
        return pd.DataFrame(rows)
    rows.append(
        {
            "tensor": "attention scores (QKᵀ, AV)",
            "component": "attention",
            "params": 0,
            "share_of_block": 0.0,
            "forward_flops": flops.by_component["attention_scores"] // cfg.full_attention_layers,
            "flops_rule": (
                f"2·B·T·{keys}·H·(D + D_v) (QKᵀ over D, AV over D_v, every key)"
                if cfg.is_mla
                else f"2·2·B·T·{keys}·H·D (QKᵀ and AV, every key)"
            ),
        }
    )
    if cfg.has_indexer:  # DSA: the indexer's scores over every earlier key
        rows.append(
            {
                "tensor": "indexer scores (q·k, Σ_h w_h)",
                "component": "attention",
                "params": 0,
                "share_of_block": 0.0,
                "forward_flops": flops.by_component["indexer_scores"] // cfg.full_attention_layers,
                "flops_rule": f"2·B·T·{keys}·H_I·(D_I + 1) (every earlier key)",
            }
        )
    return pd.DataFrame(rows)


def flops_sweep_frame(counts: Sequence[analysis.FlopCount]) -> pd.DataFrame:
    """Long table: seq_len, component, FLOPs per token (forward, matmuls)."""
    rows = [
        {"seq_len": count.seq_len, "component": name, "flops_per_token": value / count.tokens, "flops": value}
        for count in counts
        for name, value in count.by_component.items()
    ]
    return pd.DataFrame(rows)


def flops_sweep_upper(cfg: ModelConfig, seq_len: int, crossover: int | None) -> int:
    """The longest length of the FLOPs-vs-length sweep: past max_seq_len, the analysed T and
    twice the scores/FFN crossover (so the crossover sits inside), at least 1024, at most the
    largest allowed length."""
    upper = max(cfg.max_seq_len, seq_len, 2 * crossover if crossover else 0, 1024)
    return min(upper, LIMITS["max_seq_len"])


def flops_vs_seq_len(
    counts: Sequence[analysis.FlopCount], crossover: int | None = None, current_seq_len: int | None = None
) -> go.Figure:
    """Stacked forward FLOPs per token by component against sequence length (log x)."""
    frame = flops_sweep_frame(counts)
    fig = go.Figure()
    present = set(frame.component)
    for name in FLOP_COMPONENTS + tuple(c for c in present if c not in FLOP_COMPONENTS):
        part = frame[frame.component == name]
        fig.add_trace(
            go.Scatter(
                x=part.seq_len,
                y=part.flops_per_token,
                name=name,
                mode="lines",
                stackgroup="flops",
                line=dict(color=COMPONENT_COLORS.get(name, "#7f7f7f")),
                hovertemplate=f"{name}: %{{y:.3s}} FLOP/token at T=%{{x:,}}<extra></extra>",
            )
        )
    # the x range is the sweep's own; a label in the right half is written left of its line
    low, high = math.log10(frame.seq_len.min()), math.log10(frame.seq_len.max())
    side = lambda x: "right" if math.log10(x) > (low + high) / 2 else "left"  # noqa: E731
    if crossover is not None:
        mark(
            fig,
            x=crossover,
            text=f"scores > FFN from T={crossover:,}",
            color=COMPONENT_COLORS["attention_scores"],
            dash="dash",
            side=side(crossover),
        )
    if current_seq_len is not None:
        mark(
            fig,
            x=current_seq_len,
            text=f"T={current_seq_len:,}",
            color="#444",
            dash="dot",
            side=side(current_seq_len),
            row=1 if crossover is not None else 0,  # under the crossover's label, never on it
        )
    fig.update_xaxes(type="log", title="sequence length T", range=[low, high])
    fig.update_yaxes(title="forward FLOPs per token")
    return layout_figure(fig, "Forward FLOPs per token by component", height=420)


def flops_bar(flops: analysis.FlopCount) -> go.Figure:
    parts = flops.by_component
    fig = go.Figure(
        go.Bar(
            x=list(parts),
            y=display_values(parts.values()),
            marker_color=[COMPONENT_COLORS.get(n, "#7f7f7f") for n in parts],
            text=[f"{v / flops.forward:.1%}" for v in parts.values()],
            hovertemplate="%{x}: %{y:,} FLOPs<extra></extra>",
        )
    )
    fig.update_yaxes(title="FLOPs (one forward)", tickformat="~s")  # 5P, not 5×10¹⁵
    return layout_figure(
        fig,
        f"Forward FLOPs at B={flops.batch}, T={flops.seq_len:,}: {human_count(flops.forward, 'FLOP')}",
        height=360,
    )
