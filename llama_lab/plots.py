"""Plotly figures and display tables built from analysis results. No Streamlit here: pages
(through ``ui``) and the report both draw these.

Every number drawn comes from ``analysis`` (counts, FLOPs, bytes, rooflines); this module only
arranges them. The one exception is the roof itself (min(peak, intensity × bandwidth)), which
is the definition of the chart, not a model count.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Iterable, Sequence

import pandas as pd
import plotly.graph_objects as go

from . import analysis
from .units import human_bytes, human_count, human_params  # noqa: F401 (re-exported)
from .config import ModelConfig
from .hardware import GPU

GIB = 2**30
ATTENTION_COLORS = {"mha": "#d62728", "gqa": "#1f77b4", "mqa": "#2ca02c"}
COMPONENT_COLORS = {
    "embedding": "#8c564b", "positional": "#c49c94", "attention": "#1f77b4", "ffn": "#ff7f0e",
    "norms": "#2ca02c", "lm_head": "#9467bd",
    "attention_proj": "#1f77b4", "attention_scores": "#d62728",
}
FLOP_COMPONENTS = ("attention_proj", "attention_scores", "ffn", "lm_head")
# The weight matrices of a block: each costs 2·B·T·(its parameters) FLOPs in a forward pass.
MATMUL_TENSORS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# Small fixed margins that automargin grows to fit tick labels and axis titles; the legend sits
# in the figure's bottom margin (yref="container"), below the x-axis title, and pushes it down.
LAYOUT = dict(margin=dict(l=10, r=10, t=60, b=10),
              legend=dict(orientation="h", yref="container", y=0, yanchor="bottom",
                          x=0, xanchor="left"))
INT64_MIN, INT64_MAX = -2**63, 2**63 - 1


# ---- display: numbers that plotly, Arrow and people read --------------------------------------
def display_number(value: Any) -> Any:
    """``value`` as plotly's JSON encoder and Arrow (``st.dataframe``) accept it: an integer
    outside int64 — FLOP and byte counts reach 10²⁹ at the limits of ModelConfig — becomes a
    float; anything else is returned unchanged. JSON and CSV exports keep the exact integers."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) \
            and not INT64_MIN <= value <= INT64_MAX:
        return float(value)
    return value


def display_values(values: Iterable) -> list:
    """``display_number`` of every value (a trace's x or y)."""
    return [display_number(v) for v in values]


def display_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` for plotly and ``st.dataframe``: every column holding an integer
    outside int64 gets ``display_number`` of each value (so it becomes float64 when it is all
    numbers); the other columns are untouched."""
    shown = frame.copy()
    for name in shown.columns:
        column = shown[name]
        if column.dtype == object or pd.api.types.is_unsigned_integer_dtype(column.dtype):
            values = column.tolist()
            if any(display_number(v) is not v for v in values):
                shown[name] = pd.Series(display_values(values), index=shown.index).infer_objects()
    return shown


def _mark(fig: go.Figure, *, x: float | None = None, y: float | None = None, text: str,
          color: str, dash: str, log: bool = True, side: str = "left") -> None:
    """A vertical (x) or horizontal (y) reference line with a label. The label is placed by hand:
    plotly's add_vline/add_hline put annotations at raw values, which a log axis reads as
    exponents (and then stretches its range to reach them). ``side``: which side of a vertical
    line its label is written on."""
    position = lambda v: math.log10(v) if log else v          # noqa: E731
    if x is not None:
        fig.add_vline(x=x, line_dash=dash, line_color=color)
        fig.add_annotation(x=position(x), y=1, yref="paper", text=text, showarrow=False,
                           xanchor="right" if side == "right" else "left", yanchor="top",
                           font=dict(color=color))
    else:
        fig.add_hline(y=y, line_dash=dash, line_color=color)
        fig.add_annotation(y=position(y), x=0, xref="paper", text=text, showarrow=False,
                           xanchor="left", yanchor="bottom", font=dict(color=color))


def layout_figure(fig: go.Figure, title: str, **kwargs) -> go.Figure:
    """Title, LAYOUT (``kwargs`` override it), and automargin on every axis (subplots too), so
    tick labels and axis titles are never cut."""
    fig.update_layout(title=title, **{**LAYOUT, **kwargs})
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    return fig


# ---- parameters ---------------------------------------------------------------------------------
def params_sunburst(params: analysis.ParamCount) -> go.Figure:
    """Total → component → tensor kind; each ring sums to its parent (branchvalues="total")."""
    ids, labels, parents, values, colors = ["total"], [f"total<br>{params.total:,}"], [""], \
        [params.total], ["#ffffff"]
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
    fig = go.Figure(go.Sunburst(
        ids=ids, labels=labels, parents=parents, values=display_values(values),
        branchvalues="total",
        marker=dict(colors=colors), hovertemplate="%{label}: %{value:,} (%{percentRoot:.2%})"
                                                  "<extra></extra>"))
    return layout_figure(fig, f"Parameters by component ({params.total:,})", height=480)


def block_table(cfg: ModelConfig, flops: analysis.FlopCount) -> pd.DataFrame:
    """One decoder block (all L are identical) by tensor kind: its parameters and the forward
    FLOPs it costs per block at the analysed batch and length. A weight matrix costs
    2·B·T·(its parameters) (one multiply-add per weight and token, 2 FLOPs each); the attention
    scores (QKᵀ and AV, no parameters) get their own row; biases and norms are element-wise,
    outside the matmul count (0 here; see ``flops.elementwise``). The column times L, plus
    lm_head, is ``flops.forward``."""
    layer = analysis.layer_param_detail(cfg)
    block_params = sum(layer.values())
    rows = []
    for kind, count in layer.items():
        matmul = kind in MATMUL_TENSORS
        rows.append({"tensor": kind, "component": analysis.COMPONENT_OF[kind], "params": count,
                     "share_of_block": count / block_params,
                     # 2 FLOPs per multiply-add × one per weight × B·T tokens
                     "forward_flops": 2 * flops.tokens * count if matmul else 0,
                     "flops_rule": "2·B·T·params" if matmul else "element-wise, counted apart"})
    keys = "T" if flops.context_len == flops.seq_len else "S"
    rows.append({"tensor": "attention scores (QKᵀ, AV)", "component": "attention", "params": 0,
                 "share_of_block": 0.0,
                 "forward_flops": flops.by_component["attention_scores"] // cfg.n_layers,
                 "flops_rule": f"2·2·B·T·{keys}·H·D (QKᵀ and AV, every key)"})
    return pd.DataFrame(rows)


# ---- FLOPs vs sequence length -------------------------------------------------------------------
def flops_sweep_frame(counts: Sequence[analysis.FlopCount]) -> pd.DataFrame:
    """Long table: seq_len, component, FLOPs per token (forward, matmuls)."""
    rows = [{"seq_len": count.seq_len, "component": name, "flops_per_token": value / count.tokens,
             "flops": value} for count in counts for name, value in count.by_component.items()]
    return pd.DataFrame(rows)


def flops_vs_seq_len(counts: Sequence[analysis.FlopCount], crossover: int | None = None,
                     current_seq_len: int | None = None) -> go.Figure:
    """Stacked forward FLOPs per token by component against sequence length (log x)."""
    frame = flops_sweep_frame(counts)
    fig = go.Figure()
    for name in FLOP_COMPONENTS:
        part = frame[frame.component == name]
        fig.add_trace(go.Scatter(
            x=part.seq_len, y=part.flops_per_token, name=name, mode="lines", stackgroup="flops",
            line=dict(color=COMPONENT_COLORS.get(name, "#7f7f7f")),
            hovertemplate=f"{name}: %{{y:.3s}} FLOP/token at T=%{{x:,}}<extra></extra>"))
    # the x range is the sweep's own; a label in the right half is written left of its line
    low, high = math.log10(frame.seq_len.min()), math.log10(frame.seq_len.max())
    side = lambda x: "right" if math.log10(x) > (low + high) / 2 else "left"    # noqa: E731
    if crossover is not None:
        _mark(fig, x=crossover, text=f"scores > FFN from T={crossover:,}", color="#d62728",
              dash="dash", side=side(crossover))
    if current_seq_len is not None:
        _mark(fig, x=current_seq_len, text=f"T={current_seq_len:,}", color="#444", dash="dot",
              side=side(current_seq_len))
    fig.update_xaxes(type="log", title="sequence length T", range=[low, high])
    fig.update_yaxes(title="forward FLOPs per token")
    return layout_figure(fig, "Forward FLOPs per token by component", height=420)


def flops_bar(flops: analysis.FlopCount) -> go.Figure:
    parts = flops.by_component
    fig = go.Figure(go.Bar(x=list(parts), y=display_values(parts.values()),
                           marker_color=[COMPONENT_COLORS.get(n, "#7f7f7f") for n in parts],
                           text=[f"{v / flops.forward:.1%}" for v in parts.values()],
                           hovertemplate="%{x}: %{y:,} FLOPs<extra></extra>"))
    fig.update_yaxes(title="FLOPs (one forward)", tickformat="~s")          # 5P, not 5×10¹⁵
    return layout_figure(fig, f"Forward FLOPs at B={flops.batch}, T={flops.seq_len:,}: "
                        f"{human_count(flops.forward, 'FLOP')}", height=360)


# ---- KV cache -----------------------------------------------------------------------------------
def sweep_lengths(upper: int, lower: int = 16, points: int = 48) -> tuple[int, ...]:
    """Geometrically spaced sequence lengths from ``lower`` to ``upper`` (both included)."""
    lower = max(1, min(lower, upper))
    ratio = (upper / lower) ** (1 / max(1, points - 1))
    return tuple(sorted({min(upper, round(lower * ratio ** i)) for i in range(points)} | {upper}))


def kv_fit_frame(cfg: ModelConfig, gpu: GPU, seq_len: int, batch: int, dtype: str) -> pd.DataFrame:
    """MHA / GQA / MQA of the same model: KV bytes per token, the cache at B×T, weights, and the
    longest context (at batch B) and largest batch (at length T) that fit on ``gpu``."""
    rows = []
    for kind, variant in analysis.attention_variants(cfg, distinct=True).items():
        report = analysis.kv_cache(variant, seq_len, batch, dtype)
        rows.append({
            "attention": kind.upper(), "n_kv_heads": variant.n_kv_heads,
            "kv_bytes_per_token": report.bytes_per_token, "kv_cache_bytes": report.bytes,
            "weight_bytes": analysis.weight_bytes(variant, dtype),
            "max_context_at_batch": analysis.max_context_that_fits(variant, gpu, batch, dtype),
            "max_batch_at_seq_len": analysis.max_batch_that_fits(variant, gpu, seq_len, dtype),
            "is_current": variant.n_kv_heads == cfg.n_kv_heads,
        })
    return pd.DataFrame(rows)


def kv_memory_curve_frame(cfg: ModelConfig, context_lens: Sequence[int], batch: int,
                          dtype: str) -> pd.DataFrame:
    """Weights + KV cache for each attention variant over context length."""
    rows = []
    for kind, variant in analysis.attention_variants(cfg, distinct=True).items():
        weights = analysis.weight_bytes(variant, dtype)
        for context in context_lens:
            cache = analysis.kv_cache(variant, context, batch, dtype).bytes
            rows.append({"attention": kind, "n_kv_heads": variant.n_kv_heads,
                         "context_len": context, "kv_cache_bytes": cache, "weight_bytes": weights,
                         "total_bytes": weights + cache})
    return pd.DataFrame(rows)


def kv_memory_vs_context(frame: pd.DataFrame, gpu: GPU | None = None) -> go.Figure:
    frame = display_frame(frame)
    fig = go.Figure()
    for kind, part in frame.groupby("attention", sort=False):
        g = int(part.n_kv_heads.iloc[0])
        fig.add_trace(go.Scatter(
            x=part.context_len, y=part.total_bytes / GIB, mode="lines",
            name=f"{kind.upper()} ({g} KV heads)", line=dict(color=ATTENTION_COLORS.get(kind)),
            customdata=part.kv_cache_bytes / GIB,
            hovertemplate="T=%{x:,}: %{y:.2f} GiB total, KV %{customdata:.2f} GiB<extra></extra>"))
    if gpu is not None:
        _mark(fig, y=gpu.memory_bytes / GIB, text=f"{gpu.name}: {gpu.memory_bytes / GIB:.1f} GiB",
              color="#444", dash="dash")
    fig.update_xaxes(type="log", title="context length (tokens per sequence)")
    fig.update_yaxes(type="log", title="weights + KV cache (GiB)")
    return layout_figure(fig, "Memory for serving: weights + KV cache", height=420)


def kv_sharing_diagram(n_heads: int, n_kv_heads: int, max_heads: int = 64) -> go.Figure:
    """Query heads (top) and the KV head each one reads (bottom); a colour per group."""
    shown_q = min(n_heads, max_heads)
    n_rep = n_heads // n_kv_heads
    shown_kv = (shown_q - 1) // n_rep + 1
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
               "#7f7f7f", "#bcbd22", "#17becf"]
    q_x = list(range(shown_q))
    # each KV head sits under the middle of the query heads it serves
    kv_x = [g * n_rep + (min(n_rep, shown_q - g * n_rep) - 1) / 2 for g in range(shown_kv)]
    line_x, line_y = [], []
    for q in q_x:
        line_x += [q, kv_x[q // n_rep], None]
        line_y += [1, 0, None]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=line_x, y=line_y, mode="lines", line=dict(color="#bbb", width=1),
                             hoverinfo="skip", showlegend=False))
    fig.add_trace(go.Scatter(
        x=q_x, y=[1] * shown_q, mode="markers", name="query heads",
        marker=dict(symbol="square", size=14, color=[palette[(q // n_rep) % 10] for q in q_x]),
        hovertemplate="query head %{x}<extra></extra>"))
    fig.add_trace(go.Scatter(
        x=kv_x, y=[0] * shown_kv, mode="markers+text", name="KV heads",
        marker=dict(symbol="diamond", size=18, color=[palette[g % 10] for g in range(shown_kv)]),
        text=[f"kv{g}" for g in range(shown_kv)], textposition="bottom center",
        customdata=list(range(shown_kv)), hovertemplate="KV head %{customdata}<extra></extra>"))
    kind = "MHA" if n_kv_heads == n_heads else ("MQA" if n_kv_heads == 1 else "GQA")
    title = (f"{kind}: {n_heads} query heads share {n_kv_heads} KV heads "
             f"({n_rep} per KV head)")
    if shown_q < n_heads:
        title += f" — first {shown_q} query heads shown"
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False, range=[-0.6, 1.3])
    return layout_figure(fig, title, height=260, showlegend=False)


# ---- roofline -----------------------------------------------------------------------------------
def roofline_points(cfg: ModelConfig, gpu: GPU, batches: Sequence[int], context_len: int,
                    dtype: str) -> pd.DataFrame:
    """Decode steps of MHA / GQA / MQA over batch at one context length."""
    rows = []
    for kind, variant in analysis.attention_variants(cfg, distinct=True).items():
        for batch in batches:
            r = analysis.roofline(variant, gpu, batch, context_len, dtype, phase="decode")
            rows.append({"attention": kind, "n_kv_heads": variant.n_kv_heads, "batch": batch,
                         "context_len": context_len,
                         "arithmetic_intensity": r.arithmetic_intensity,
                         "achieved_flops_per_s": r.flops / r.time_per_step_s,
                         "tokens_per_s": r.tokens_per_s,
                         "time_per_token_ms": r.time_per_token_s * 1e3, "bound": r.bound,
                         "peak_flops": r.peak_flops, "hbm_bytes_per_s": r.hbm_bytes_per_s,
                         "ridge_point": r.ridge_point})
    return pd.DataFrame(rows)


def roofline_figure(points: pd.DataFrame, gpu: GPU) -> go.Figure:
    """The GPU's roof (bandwidth slope, then the compute peak) with decode steps on it."""
    peak, bandwidth = float(points.peak_flops.iloc[0]), float(points.hbm_bytes_per_s.iloc[0])
    ridge = float(points.ridge_point.iloc[0])
    low = min(points.arithmetic_intensity.min(), ridge) / 4
    high = max(points.arithmetic_intensity.max(), ridge) * 4
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[low, ridge, high], y=[low * bandwidth, peak, peak], mode="lines",
                             name=f"{gpu.name} roof", line=dict(color="#444", width=2),
                             hoverinfo="skip"))
    for kind, part in points.groupby("attention", sort=False):
        g = int(part.n_kv_heads.iloc[0])
        fig.add_trace(go.Scatter(
            x=part.arithmetic_intensity, y=part.achieved_flops_per_s, mode="markers+lines",
            name=f"{kind.upper()} ({g} KV heads)", marker=dict(size=9),
            line=dict(color=ATTENTION_COLORS.get(kind), dash="dot"),
            customdata=part[["batch", "tokens_per_s", "bound"]].values,
            hovertemplate=("B=%{customdata[0]}: %{x:.1f} FLOP/byte, %{y:.3s}FLOP/s, "
                           "%{customdata[1]:,.0f} tok/s (%{customdata[2]}-bound)<extra></extra>")))
    fig.update_xaxes(type="log", title="arithmetic intensity (FLOPs per byte moved)")
    fig.update_yaxes(type="log", title="attainable FLOP/s")
    context = int(points.context_len.iloc[0])
    return layout_figure(fig, f"Decode roofline at context {context:,} (points: batch sizes)",
                   height=440)


def decode_throughput(points: pd.DataFrame) -> go.Figure:
    fig = go.Figure()
    for kind, part in points.groupby("attention", sort=False):
        fig.add_trace(go.Scatter(x=part.batch, y=part.tokens_per_s, mode="lines+markers",
                                 name=kind.upper(), line=dict(color=ATTENTION_COLORS.get(kind))))
    fig.update_xaxes(type="log", title="batch (sequences decoded together)")
    fig.update_yaxes(type="log", title="tokens/s (upper bound)")
    return layout_figure(fig, "Decode throughput bound", height=360)


# ---- training curves ----------------------------------------------------------------------------
def training_curves(frame: pd.DataFrame, title: str = "Training loss") -> go.Figure:
    """Loss per step of each run (the long table of ``RunComparison.to_frame()``)."""
    fig = go.Figure()
    for label, part in frame.groupby("label", sort=False):
        fig.add_trace(go.Scatter(x=part.step, y=part.loss, mode="lines", name=str(label)))
    fig.update_xaxes(title="step")
    fig.update_yaxes(title="training loss")
    return layout_figure(fig, title, height=380)
