"""The Validation page's figure and tables: predicted against measured per kind (log-log, the
y = x line, the fit and held-out halves marked) and the rows as a table."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..validation.validate import percent, ratio_range
from .common import layout_figure

HALF_STYLE = {"fit": ("circle-open", "#7f7f7f"), "held_out": ("circle", "#1f77b4")}
UNITS = {
    "tokens_per_s": "tokens/s",
    "tokens_per_s_per_gpu": "tokens/s per GPU",
    "seconds": "s",
    "peak_memory_bytes": "bytes",
}


PANELS_PER_ROW = 4  # kinds side by side; more go on the next row


def scatter_figure(rows: list[dict]) -> go.Figure:
    """One panel per kind with predictions: each row's estimate against its measured value
    (the roofline bound as a faint mark above it), the y = x line, the halves marked."""
    predicted = [r for r in rows if r["estimate"] is not None]
    kinds = sorted({r["kind"] for r in predicted})
    cols = min(PANELS_PER_ROW, max(1, len(kinds)))
    n_rows = max(1, -(-len(kinds) // cols))
    fig = make_subplots(
        rows=n_rows, cols=cols, subplot_titles=kinds, vertical_spacing=0.16, horizontal_spacing=0.07
    )
    for i, kind in enumerate(kinds):
        row, col = divmod(i, cols)
        row, col = row + 1, col + 1
        mine = [r for r in predicted if r["kind"] == kind]
        values = [v for r in mine for v in (r["measured"], r["estimate"], r["bound"])]
        low, high = min(values) / 1.5, max(values) * 1.5
        fig.add_trace(
            go.Scatter(
                x=[low, high],
                y=[low, high],
                mode="lines",
                line=dict(color="#bbbbbb", dash="dot"),
                name="y = x",
                showlegend=i == 0,
                hoverinfo="skip",
            ),
            row=row,
            col=col,
        )
        for half, (symbol, color) in HALF_STYLE.items():
            part = [r for r in mine if r["half"] == half]
            fig.add_trace(
                go.Scatter(
                    x=[r["measured"] for r in part],
                    y=[r["estimate"] for r in part],
                    mode="markers",
                    marker=dict(symbol=symbol, color=color, size=9),
                    name="held out" if half == "held_out" else "fit half",
                    showlegend=i == 0,
                    text=[f"{r['id']}<br>error {r['rel_error']:+.1%}" for r in part],
                    hovertemplate="%{text}<br>measured %{x:,.4g}<br>estimate %{y:,.4g}<extra></extra>",
                ),
                row=row,
                col=col,
            )
        fig.update_xaxes(type="log", title_text="measured", row=row, col=col)
        fig.update_yaxes(type="log", title_text="estimate" if col == 1 else None, row=row, col=col)
    return layout_figure(
        fig,
        "Estimate against measurement, per kind (log-log; on the line = exact)",
        height=80 + 340 * n_rows,
    )


def rows_frame(rows: list[dict]) -> pd.DataFrame:
    """The rows, predicted first, largest |error| first (the table sorts by any column); a
    training row's rates also as MFU (``analysis.MFU_CONVENTION``) beside its source's own."""
    frame = pd.DataFrame(
        [
            {
                "id": r["id"],
                "kind": r["kind"],
                "half": r["half"].replace("_", "-"),
                "model": r["model"],
                "gpu": r["gpu"],
                "measured": r["measured"],
                "bound": r["bound"],
                "estimate": r["estimate"],
                "error_pct": None if r["rel_error"] is None else 100 * r["rel_error"],
                "unit": UNITS.get(r["metric"], r["metric"]),
                "MFU measured %": _pct(r.get("mfu_measured")),
                "MFU estimate %": _pct(r.get("mfu_estimate")),
                "MFU by the source %": _pct(r.get("mfu_source")),
                "not predicted": r["not_predicted"] or "",
            }
            for r in rows
        ]
    )
    order = frame["error_pct"].abs().fillna(-1)
    return frame.loc[order.sort_values(ascending=False).index].reset_index(drop=True)


def _pct(value: float | None) -> float | None:
    return None if value is None else 100 * value


def summary_frame(summary: dict) -> pd.DataFrame:
    """Per kind: rows, predicted rows, the median and worst |error| of each half, and the
    interval at its level (measured / estimate) with the share of held-out rows inside, as text."""
    return pd.DataFrame(
        [
            {
                "kind": kind,
                "rows": s["n"],
                "predicted": s["predicted"],
                "fit half: median |error|": percent(s["fit_median_abs_error"]),
                "held out: median |error|": percent(s["held_out_median_abs_error"]),
                "held out: worst |error|": percent(s["held_out_max_abs_error"]),
                "interval: measured / estimate": ratio_range(s["interval_ratio"]),
                "interval level": percent(s["interval_level"]),
                "held out inside the interval": percent(s["held_out_coverage"]),
            }
            for kind, s in summary.items()
        ]
    )
