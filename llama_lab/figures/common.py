"""What every figure and table shares: the layout (margins, legend, decade ticks on log axes),
the one colour of each norm arrangement and attention kind, how a table is shown to a person
(``table_text``, ``table_styler``: every cell through ``format_cell``, headers through
``column_label``) and how numbers beyond int64 reach plotly and Arrow (``display_frame``),
named tables and figures as a report collects them, and geometric sweeps of lengths.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Iterable

import pandas as pd
import plotly.graph_objects as go

from ..units import SUPERSCRIPT, human_number

GIB = 2**30
# One colour per norm arrangement and one per attention kind, on every page and in the report;
# the six differ, so a red line means Post-LN wherever it is drawn.
ARRANGEMENT_COLORS = {"post": "#d62728", "pre": "#1f77b4"}
ARRANGEMENT_LABELS = {"post": "Post-LN", "pre": "Pre-LN"}
ATTENTION_COLORS = {"mla": "#e7298a", "mha": "#9467bd", "gqa": "#ff7f0e", "mqa": "#2ca02c"}


# Components and the KV groups of the sharing diagram use none of those six colours.
COMPONENT_COLORS = {
    "embedding": "#8c564b",
    "positional": "#c49c94",
    "attention": "#17becf",
    "ffn": "#bcbd22",
    "norms": "#7f7f7f",
    "lm_head": "#e377c2",
    "pooler": "#f7b6d2",  # BERT's pooler (a head of its own)
    "vision": "#6b6ecf",  # a multimodal model's image encoder
    "projector": "#9c9ede",
    "attention_proj": "#17becf",
    "attention_scores": "#393b79",
}
GROUP_PALETTE = (
    "#17becf",
    "#bcbd22",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#393b79",
    "#8c6d31",
    "#637939",
    "#843c39",
    "#7b4173",
)


# Small fixed margins that automargin grows to fit tick labels and axis titles; the legend sits
# in the figure's bottom margin (yref="container"), below the x-axis title, and pushes it down.
LAYOUT = dict(
    margin=dict(l=10, r=10, t=60, b=10),
    legend=dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0, xanchor="left"),
)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def display_number(value: Any) -> Any:
    """``value`` as plotly's JSON encoder and Arrow (``st.dataframe``) accept it: an integer
    outside int64 — FLOP and byte counts reach 10²⁹ at the limits of ModelConfig — becomes a
    float; anything else is returned unchanged. JSON and CSV exports keep the exact integers."""
    if (
        isinstance(value, numbers.Integral)
        and not isinstance(value, bool)
        and not INT64_MIN <= int(value) <= INT64_MAX
    ):
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


# Words of a column name written as people write them ("n_kv_heads" → "n KV heads").
_HEADER_WORDS = {
    "kv": "KV",
    "ffn": "FFN",
    "gpu": "GPU",
    "gpus": "GPUs",
    "hbm": "HBM",
    "mfu": "MFU",
    "mla": "MLA",
    "mha": "MHA",
    "gqa": "GQA",
    "mqa": "MQA",
    "qk": "QK",
    "flops": "FLOPs",
    "tflops": "TFLOPs",
    "zh": "(Chinese)",
}
_HEADER_UNITS = {"ms": "(ms)", "s": "(s)", "pct": "(%)"}


def column_label(name: Any) -> str:
    """A readable header for a raw column name: underscores become spaces, acronyms are
    capitalised, a trailing unit goes in brackets (``bytes_per_token`` → 'bytes per token',
    ``time_per_step_ms`` → 'time per step (ms)'). A name without underscores is kept."""
    text = str(name)
    if "_" not in text:
        return text
    words = [w for w in text.split("_") if w]
    shown = [_HEADER_WORDS.get(w.lower(), w) for w in words]
    if len(words) > 1 and words[-1] in _HEADER_UNITS:
        shown[-1] = "second" if words[-2:] == ["per", "s"] else _HEADER_UNITS[words[-1]]
    return " ".join(shown)


def format_cell(value: Any) -> str:
    """What a person reads in a table cell: integers exactly with thousands separators, floats
    to 4 significant digits (``units.human_number``), booleans ✓ / ✗, None and NaN '—'; text
    unchanged (escaping is the renderer's job)."""
    if value is None or value is pd.NA or value is pd.NaT:
        return "—"
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()  # numpy scalar
    if isinstance(value, bool):
        return "✓" if value else "✗"
    if isinstance(value, numbers.Real):
        return human_number(value)
    return str(value)


def table_text(frame: pd.DataFrame) -> pd.DataFrame:
    """The table as text, the way the report's HTML and Markdown show it: every cell through
    ``format_cell``, every header through ``column_label``. Exports keep ``frame`` itself."""
    columns = {i: [format_cell(v) for v in frame.iloc[:, i].tolist()] for i in range(frame.shape[1])}
    text = pd.DataFrame(columns, index=range(len(frame)), dtype=object)
    return text.set_axis([column_label(c) for c in frame.columns], axis=1)


def table_styler(frame: pd.DataFrame):
    """``display_frame(frame)`` (numbers Arrow accepts, so a page can still sort them) styled
    to show ``format_cell`` of each original value: the pages' tables read as the report's.
    Raw column names stay; ``column_label`` is the page's header."""
    frame = frame.reset_index(drop=True)
    data = display_frame(frame)
    styler = data.style.format(format_cell)
    for position, name in enumerate(data.columns):
        original = frame.iloc[:, position].tolist()
        if data.iloc[:, position].tolist() != original:  # beyond int64: exact text
            for row, value in enumerate(original):
                text = format_cell(value)
                styler.format(lambda _, text=text: text, subset=pd.IndexSlice[[row], [name]])
    return styler


def mark(
    fig: go.Figure,
    *,
    x: float | None = None,
    y: float | None = None,
    text: str,
    color: str,
    dash: str,
    log: bool = True,
    side: str = "left",
    row: int = 0,
) -> None:
    """A vertical (x) or horizontal (y) reference line with a label. The label is placed by hand:
    plotly's add_vline/add_hline put annotations at raw values, which a log axis reads as
    exponents (and then stretches its range to reach them). ``side``: which side of a vertical
    line its label is written on; ``row``: how many label lines below the top (0: at the top), so
    that two nearby lines' labels do not overlap."""
    position = lambda v: math.log10(v) if log else v  # noqa: E731
    if x is not None:
        fig.add_vline(x=x, line_dash=dash, line_color=color)
        fig.add_annotation(
            x=position(x),
            y=1 - 0.07 * row,
            yref="paper",
            text=text,
            showarrow=False,
            xanchor="right" if side == "right" else "left",
            yanchor="top",
            font=dict(color=color),
        )
    else:
        # drawn over the traces, and wide enough to see across stacked bars that pass it
        fig.add_hline(y=y, line_dash=dash, line_color=color, line_width=2, layer="above")
        fig.add_annotation(
            y=position(y),
            x=0,
            xref="paper",
            text=text,
            showarrow=False,
            xanchor="left",
            yanchor="bottom",
            font=dict(color=color),
        )


def rgba(color: str, alpha: float) -> str:
    """``#rrggbb`` as ``rgba(r, g, b, alpha)`` (a band's fill in its line's colour)."""
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r}, {g}, {b}, {alpha})"


def band_traces(
    x: list,
    median: list,
    low: list,
    high: list,
    *,
    name: str,
    color: str,
    hover: str = "%{y:.3e}",
    **common: Any,
) -> list:
    """A median line over its min–max band (a filled area in the line's colour, drawn only
    when there is more than one seed: ``low`` differs from ``high``); ``common`` goes to every
    trace (legendgroup, showlegend, …) but ``dash``, which only the median line takes."""
    dash = common.pop("dash", "solid")
    traces = []
    if any(lo != hi for lo, hi in zip(low, high)):
        group = common.get("legendgroup", name)
        traces += [
            go.Scatter(
                x=x,
                y=high,
                mode="lines",
                line=dict(width=0),
                hoverinfo="skip",
                showlegend=False,
                legendgroup=group,
            ),
            go.Scatter(
                x=x,
                y=low,
                mode="lines",
                line=dict(width=0),
                fill="tonexty",
                fillcolor=rgba(color, 0.18),
                hoverinfo="skip",
                showlegend=False,
                legendgroup=group,
            ),
        ]
    traces.append(
        go.Scatter(
            x=x,
            y=median,
            mode="lines+markers",
            name=name,
            line=dict(color=color, dash=dash),
            hovertemplate=f"{name}: {hover}<extra></extra>",
            **common,
        )
    )
    return traces


def decade_label(exponent: int) -> str:
    """The tick label of 10^exponent: 0.001 … 1, 10, 100, then SI prefixes (1k, 10k, 1M, 1G,
    1T, …, 100Y), beyond them 10ⁿ."""
    if 0 <= exponent < 3:
        return str(10**exponent)
    if -3 <= exponent < 0:
        return f"{10.0**exponent:.{-exponent}f}"
    if 3 <= exponent < 27:
        return f"{10 ** (exponent % 3)}{'kMGTPEZY'[exponent // 3 - 1]}"
    return "10" + str(exponent).translate(SUPERSCRIPT)


def _positive_values(fig: go.Figure, letter: str, ref: str) -> list[float]:
    """Every positive finite number drawn against the axis ``ref`` ("x", "y2", …): trace data
    and reference lines (``mark``)."""
    values: list = []
    for trace in fig.data:
        if hasattr(trace, f"{letter}axis") and (trace[f"{letter}axis"] or letter) == ref:
            data = trace[letter]
            values += list(data) if data is not None else []
    for shape in fig.layout.shapes:
        if shape[f"{letter}ref"] == ref:
            values += [shape[f"{letter}0"], shape[f"{letter}1"]]
    numbers_drawn = (float(v) for v in values if isinstance(v, numbers.Real) and not isinstance(v, bool))
    return [v for v in numbers_drawn if math.isfinite(v) and v > 0]


def decade_ticks(fig: go.Figure) -> None:
    """Label every log axis at whole decades only (1, 10, 100, 1k, …). An axis without its own
    range gets the data's, padded, and widened to whole decades when fewer than two fall in
    it, so every log axis shows at least two labels."""
    for name in list(fig.layout):
        if not name.startswith(("xaxis", "yaxis")) or fig.layout[name].type != "log":
            continue
        axis, letter = fig.layout[name], name[0]
        span = axis.range
        if span is None:
            values = _positive_values(fig, letter, letter + name[5:])
            if not values:
                continue
            low, high = math.log10(min(values)), math.log10(max(values))
            pad = 0.04 * (high - low) or 0.1
            span = [low - pad, high + pad]
            if math.floor(span[1]) - math.ceil(span[0]) < 1:
                span = [min(span[0], math.floor(low)), max(span[1], math.ceil(high))]
            if math.floor(span[1]) - math.ceil(span[0]) < 1:
                span[1] = math.ceil(span[0]) + 1
            axis.range = span
        exponents = range(math.ceil(span[0] - 1e-9), math.floor(span[1] + 1e-9) + 1)
        axis.update(
            tickmode="array",
            tickvals=[10.0**k for k in exponents],
            ticktext=[decade_label(k) for k in exponents],
        )


def layout_figure(fig: go.Figure, title: str, **kwargs) -> go.Figure:
    """Title, LAYOUT (``kwargs`` override it), automargin on every axis (subplots too), so
    tick labels and axis titles are never cut; SI tick labels with thousands separators ("1G",
    never plotly's "1B" for a billion), and decade ticks on every log axis (``decade_ticks``)."""
    fig.update_layout(title=title, **{**LAYOUT, **kwargs})
    fig.update_xaxes(automargin=True, exponentformat="SI", separatethousands=True)
    fig.update_yaxes(automargin=True, exponentformat="SI", separatethousands=True)
    decade_ticks(fig)
    return fig


def sweep_lengths(upper: int, lower: int = 16, points: int = 48) -> tuple[int, ...]:
    """Geometrically spaced sequence lengths from ``lower`` to ``upper`` (both included)."""
    lower = max(1, min(lower, upper))
    ratio = (upper / lower) ** (1 / max(1, points - 1))
    return tuple(sorted({min(upper, round(lower * ratio**i)) for i in range(points)} | {upper}))


@dataclass(frozen=True, eq=False)
class Table:
    name: str  # file-safe id; the CSV file name
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
        rows.append(
            {
                "logits": label,
                "std": stats.std,
                "max_abs": stats.max_abs,
                "mean_max_prob": stats.max_prob_mean,
                "mean_entropy_nats": stats.entropy_mean,
                "uniform_entropy_ln_V": ln_vocab,
            }
        )
    return pd.DataFrame(rows)
