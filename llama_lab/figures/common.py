"""What every figure and table shares: the layout (margins, legend), colours, the display of
numbers beyond int64, named tables and figures as a report collects them, and geometric
sweeps of lengths.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Iterable

import pandas as pd
import plotly.graph_objects as go


GIB = 2**30
# One colour per attention kind, used by every figure that compares MHA, GQA and MQA.
ATTENTION_COLORS = {"mha": "#d62728", "gqa": "#1f77b4", "mqa": "#2ca02c"}


COMPONENT_COLORS = {
    "embedding": "#8c564b", "positional": "#c49c94", "attention": "#1f77b4", "ffn": "#ff7f0e",
    "norms": "#2ca02c", "lm_head": "#9467bd",
    "attention_proj": "#1f77b4", "attention_scores": "#d62728",
}


# Small fixed margins that automargin grows to fit tick labels and axis titles; the legend sits
# in the figure's bottom margin (yref="container"), below the x-axis title, and pushes it down.
LAYOUT = dict(margin=dict(l=10, r=10, t=60, b=10),
              legend=dict(orientation="h", yref="container", y=0, yanchor="bottom",
                          x=0, xanchor="left"))
INT64_MIN, INT64_MAX = -2**63, 2**63 - 1


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


def mark(fig: go.Figure, *, x: float | None = None, y: float | None = None, text: str,
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


def sweep_lengths(upper: int, lower: int = 16, points: int = 48) -> tuple[int, ...]:
    """Geometrically spaced sequence lengths from ``lower`` to ``upper`` (both included)."""
    lower = max(1, min(lower, upper))
    ratio = (upper / lower) ** (1 / max(1, points - 1))
    return tuple(sorted({min(upper, round(lower * ratio ** i)) for i in range(points)} | {upper}))


@dataclass(frozen=True, eq=False)
class Table:
    name: str                                     # file-safe id; the CSV file name
    title: str
    section: str
    frame: pd.DataFrame
    note: str = ""


@dataclass(frozen=True, eq=False)
class Figure:
    name: str
    title: str
    section: str
    figure: go.Figure


def logits_table(with_norm, without_norm, ln_vocab: float | None = None) -> pd.DataFrame:
    """Logit statistics with and without the final norm (``LogitStats`` pairs)."""
    rows = []
    for label, stats in (("with final norm", with_norm), ("without final norm", without_norm)):
        rows.append({"logits": label, "std": stats.std, "max_abs": stats.max_abs,
                     "mean_max_prob": stats.max_prob_mean, "mean_entropy_nats": stats.entropy_mean,
                     "uniform_entropy_ln_V": ln_vocab})
    return pd.DataFrame(rows)
