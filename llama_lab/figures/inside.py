"""Figures of one forward pass opened up (``experiments.inside.ForwardTrace``, read by duck
typing: figures sit below experiments): attention maps per head grouped by the KV head they
share, RoPE's rotation and the score against offset, the residual stream through the blocks,
the SwiGLU gates, the logit lens and a mixture's routing.
"""

from __future__ import annotations

import html
import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..model import attention_mask
from .common import ARRANGEMENT_COLORS, GROUP_PALETTE, layout_figure

HEADS_PER_ROW = 4


def token_label(piece: str) -> str:
    """A byte token as a tick label: whitespace made visible, other control bytes as \\xNN."""
    shown = {" ": "␣", "\n": "↵", "\t": "⇥"}
    if piece in shown:
        return shown[piece]
    if len(piece) == 1 and (ord(piece) < 32 or ord(piece) == 127):
        return f"\\x{ord(piece):02x}"
    return html.escape(piece, quote=False)  # plotly reads tick text as markup (not attributes)


def _ticks(pieces: list, most: int = 24) -> dict:
    """Positions as ticks, labelled by their token (labels may repeat, positions do not): every
    k-th position, at most ``most`` of them, so that the labels stay legible (the hover names
    every cell)."""
    step = max(1, math.ceil(len(pieces) / most))
    shown = range(0, len(pieces), step)
    return dict(
        tickmode="array",
        tickvals=list(shown),
        ticktext=[token_label(pieces[i]) for i in shown],
        tickfont=dict(size=9),
    )


def attention_figure(trace, layer: int) -> go.Figure:
    """Every query head's attention map in ``layer``; heads that share a KV head sit together,
    titled by it. Masked cells (the future, and outside a sliding window) are left blank."""
    block = trace.layers[layer]
    weights = block.attention  # (H, T, T)
    H, T = weights.shape[0], weights.shape[1]
    cols = min(HEADS_PER_ROW, H)
    rows = math.ceil(H / cols)
    titles = [f"q head {h} · KV head {block.kv_head_of[h]}" for h in range(H)]
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=titles,
        horizontal_spacing=0.03,
        vertical_spacing=0.12 / max(1, rows - 1) if rows > 1 else 0.1,
    )
    # the model's own mask; NaN (a gap) where a query may not look. A numpy array, not nested
    # lists: plotly validates lists element by element (half a second for 8 heads at T = 96)
    chunk_start = 0 if block.chunked else None  # Llama 4's chunks, from position 0
    mask = attention_mask(T, T, block.window, weights.device, chunk_start, block.sparse)
    shown = weights.float().masked_fill(~mask, math.nan).numpy()
    for h in range(H):
        fig.add_trace(
            go.Heatmap(
                z=shown[h],
                zmin=0,
                zmax=1,
                colorscale="Blues",
                showscale=h == 0,
                hovertemplate="query %{y} → key %{x}: %{z:.3f}<extra></extra>",
            ),
            row=h // cols + 1,
            col=h % cols + 1,
        )
    # a head's map is a fraction of the width: fewer labels the more heads share a row
    most = max(6, 32 // cols)
    fig.update_xaxes(**_ticks(trace.pieces, most), tickangle=0)
    fig.update_yaxes(**_ticks(trace.pieces, most), autorange="reversed")
    kind = "chunks of" if block.chunked else "sliding window"
    window = f", {kind} W={block.window}" if block.window else ""
    return layout_figure(
        fig,
        f"Block {layer}: attention weights (rows: queries, columns: keys; blank = masked{window})",
        height=max(320, 260 * rows),
    )


def rope_figure(rope: dict) -> go.Figure:
    """Left: block 0's q vector rotated to positions 0…n−1, three of its frequency pairs — each
    turns by θ_i per position. Right: the score q_m·k_n against m at fixed offsets m − n."""
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=(
            "q's frequency pairs (x_i, x_i+D/2) as the position grows",
            "score q_m · k_n against m, at fixed offsets m − n",
        ),
    )
    for n, (pair, (xs, ys)) in enumerate(rope["trajectory"].items()):
        theta = rope["theta"][n]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines+markers",
                name=f"pair {pair}: θ = {theta:.3g}",
                marker=dict(size=5, color=GROUP_PALETTE[n]),
                line=dict(color=GROUP_PALETTE[n]),
                hovertemplate="position %{text}<extra></extra>",
                text=list(range(len(xs))),
            ),
            row=1,
            col=1,
        )
    for n, (offset, scores) in enumerate(rope["scores_by_offset"].items()):
        fig.add_trace(
            go.Scatter(
                x=list(range(int(offset), int(offset) + len(scores))),
                y=scores,
                mode="lines",
                name=f"offset {offset}",
                line=dict(color=GROUP_PALETTE[3 + n]),
            ),
            row=1,
            col=2,
        )
    fig.update_xaxes(title_text="position m (query)", row=1, col=2)
    fig.update_yaxes(scaleanchor="x", scaleratio=1, row=1, col=1)
    return layout_figure(
        fig,
        f"RoPE on block 0, head {rope['head']}: rotation, and a score that depends only on the offset",
        height=420,
    )


def offset_figure(positions: dict) -> go.Figure:
    """The score between the text's first two tokens at offset 1, placed at every m: flat for
    RoPE, wandering for positions added to the input."""
    fig = go.Figure()
    for n, (name, found) in enumerate(positions.items()):
        fig.add_trace(
            go.Scatter(
                x=list(range(1, len(found["scores"]) + 1)),
                y=found["scores"],
                mode="lines+markers",
                name=name,
                line=dict(color=GROUP_PALETTE[5 + n]),
            )
        )
    fig.update_xaxes(title_text="query position m (key at m − 1)")
    fig.update_yaxes(title_text="q_m · k_(m−1), block 0, head 0")
    return layout_figure(fig, "The same two tokens, one apart, at every position", height=360)


def residual_figure(trace, arrangement: str) -> go.Figure:
    """RMS of the residual stream entering each block and leaving the last (median over the
    tokens, with the range), and what the attention and FFN sublayers add."""
    rms = [layer.residual_in_rms for layer in trace.layers] + [trace.layers[-1].residual_out_rms]
    x = list(range(len(rms)))
    median = [float(r.median()) for r in rms]
    fig = go.Figure()
    color = ARRANGEMENT_COLORS.get(arrangement, GROUP_PALETTE[0])
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[float(r.max()) for r in rms],
            mode="lines",
            line=dict(width=0),
            showlegend=False,
            hoverinfo="skip",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[float(r.min()) for r in rms],
            mode="lines",
            fill="tonexty",
            line=dict(width=0),
            name="tokens' range",
            fillcolor="rgba(0,0,0,0.1)",
        )
    )
    fig.add_trace(
        go.Scatter(x=x, y=median, mode="lines+markers", name="residual stream RMS", line=dict(color=color))
    )
    fig.add_trace(
        go.Scatter(
            x=x[:-1],
            y=[layer.attn_out_rms for layer in trace.layers],
            mode="markers",
            name="attention adds (RMS)",
            marker=dict(symbol="diamond", color=GROUP_PALETTE[2]),
        )
    )
    fig.add_trace(
        go.Scatter(
            x=x[:-1],
            y=[layer.ffn_out_rms for layer in trace.layers],
            mode="markers",
            name="FFN adds (RMS)",
            marker=dict(symbol="square", color=GROUP_PALETTE[1]),
        )
    )
    fig.update_xaxes(
        title_text="block input (the last point: the last block's output)", tickmode="array", tickvals=x
    )
    fig.update_yaxes(title_text="RMS over d", type="log")
    return layout_figure(fig, "The residual stream through the blocks", height=380)


def norm_frame(trace) -> pd.DataFrame:
    """What each block's first norm does: its input's and output's mean (|mean over d|), std
    and RMS, averaged over the tokens."""
    rows = []
    for i, layer in enumerate(trace.layers):
        rows.append(
            {
                "block": i,
                **{f"in_{k}": v for k, v in layer.norm_in.items()},
                **{f"out_{k}": v for k, v in layer.norm_out.items()},
                "gates_closed_share": layer.gate_closed_share,
            }
        )
    return pd.DataFrame(rows)


def lens_figure(trace) -> go.Figure:
    """The logit lens: the head applied after each block, the top guess for the next token at
    every position (text) and its probability (colour); the last row is the model's output."""
    z, text = [], []
    for layer in trace.layers:
        z.append([row[0][1] for row in layer.lens])
        text.append([token_label(_piece(row[0][0])) for row in layer.lens])
    T = len(trace.pieces)
    fig = go.Figure(
        go.Heatmap(
            z=z,
            text=text,
            texttemplate="%{text}",
            zmin=0,
            zmax=1,
            colorscale="Greens",
            colorbar=dict(title="p(top)"),
            hovertemplate="after block %{y}, position %{x}: %{text} (%{z:.3f})<extra></extra>",
        )
    )
    fig.update_xaxes(**_ticks(trace.pieces), title_text="position (its token)")
    fig.update_yaxes(
        tickmode="array",
        tickvals=list(range(len(z))),
        ticktext=[f"after block {i}" for i in range(len(z))],
        autorange="reversed",
    )
    return layout_figure(
        fig,
        f"Logit lens: the top next-token guess after each block, T = {T}",
        height=max(260, 60 * len(z) + 120),
    )


def _piece(token: int) -> str:
    return bytes([token]).decode("utf-8", errors="replace") if token < 256 else f"<{token}>"


def final_figure(trace, position: int = -1) -> go.Figure:
    """The model's next-token distribution at one position: its top-k."""
    top = trace.final[position]
    fig = go.Figure(
        go.Bar(
            x=[token_label(_piece(t)) for t, _ in top], y=[p for _, p in top], marker_color=GROUP_PALETTE[0]
        )
    )
    fig.update_yaxes(title_text="probability", range=[0, 1])
    shown = html.escape("".join(trace.pieces)[-24:], quote=False)  # the user's text: never markup
    return layout_figure(fig, f"Next token after “{shown}”", height=300)


def routing_figure(trace) -> go.Figure | None:
    """A mixture's routing: each token's first-choice expert in every sparse block."""
    sparse = [(i, layer) for i, layer in enumerate(trace.layers) if layer.experts is not None]
    if not sparse:
        return None
    z = [layer.experts[:, 0].tolist() for _, layer in sparse]
    hover = [[", ".join(map(str, row)) for row in layer.experts.tolist()] for _, layer in sparse]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            customdata=hover,
            colorscale="Turbo",
            colorbar=dict(title="expert"),
            hovertemplate="block %{y}, position %{x}: experts %{customdata}<extra></extra>",
        )
    )
    fig.update_xaxes(**_ticks(trace.pieces))
    fig.update_yaxes(
        tickmode="array",
        tickvals=list(range(len(sparse))),
        ticktext=[f"block {i}" for i, _ in sparse],
        autorange="reversed",
    )
    return layout_figure(
        fig, "Routing: each token's first expert (hover: all k)", height=max(240, 50 * len(sparse) + 140)
    )
