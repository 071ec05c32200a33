"""The home page's sections: the sidebar's model in four numbers (each with its derivation), its
shape in a line, and a link to every page that keeps the sidebar's choice."""

from __future__ import annotations

import streamlit as st

from ...analysis import derive, derive_memory
from ...analysis.summary import family_notes
from ...units import escape_markdown, human_bytes, human_count, human_params, plural
from ..cached import flop_count, kv_report, param_count
from ..derivations import derived_metric, show_equation
from ..pages import PAGES
from ..state import Selection


def current_model(selection: Selection, prefix: str) -> None:
    """Parameters, attention, KV cache per token and forward FLOPs per token of the sidebar's
    model; its shape, its family's notes and the KV formula with its numbers."""
    cfg, T, B = selection.cfg, selection.seq_len, selection.batch
    params = param_count(cfg)
    flops = flop_count(cfg, T, B)
    kv = kv_report(cfg, T, B, selection.kv_format)
    st.subheader("Current model" + (f": {escape_markdown(selection.name)}" if selection.name else ""))
    cols = st.columns(4)
    derived_metric(
        cols[0],
        "Parameters",
        human_params(params.total),
        derive.params_total(cfg),
        prefix + "params",
        help=f"{params.total:,}" + (f"; active per token {params.active:,}" if cfg.is_moe else ""),
        delta=f"active per token {human_params(params.active)}" if cfg.is_moe else None,
        delta_arrow="off",
        delta_color="off",
    )
    cols[1].metric(
        "Attention",
        cfg.attention_kind,
        f"{cfg.n_heads:,} q / {cfg.n_kv_heads:,} kv heads",
        delta_color="off",
        delta_arrow="off",
        help=f"head_dim {cfg.head_dim}; {plural(cfg.n_rep, 'query head')} per KV head",
    )
    derived_metric(
        cols[2],
        f"KV cache per token ({selection.kv_format})",
        human_bytes(kv.bytes_per_token),
        derive_memory.kv_bytes_per_token(cfg, selection.kv_format),
        prefix + "kv",
        help=f"{kv.bytes_per_token:,} bytes: {'all ' if cfg.n_layers > 1 else ''}"
        f"{plural(cfg.n_layers, 'layer')}, K and V; "
        f"{human_bytes(kv.bytes)} for B={B} × T={T:,}",
    )
    derived_metric(
        cols[3],
        "Forward FLOPs per token",
        human_count(flops.per_token, "FLOP"),
        derive.forward_flops(cfg, T, B, per_token=True),
        prefix + "flops",
        help=f"the forward's FLOPs ÷ B·T, at T={T:,}, B={B} (2 FLOPs per multiply-add)",
    )
    _shape(selection)


def _shape(selection: Selection) -> None:
    """The model's shape in a line, its family's notes and its KV bytes per token written out
    (``derive_memory.kv_bytes_per_token``)."""
    cfg = selection.cfg
    st.caption(
        f"{plural(cfg.n_layers, 'layer')} × d={cfg.d_model:,}, FFN {cfg.ffn_type} {cfg.ffn_hidden:,}, "
        f"vocab {cfg.vocab_size:,}, {cfg.norm_position}-norm {cfg.norm_type}, "
        f"{cfg.pos_encoding} positions, max_seq_len {cfg.max_seq_len:,}"
        + (", LLaMA-style" if cfg.is_llama_style else "")
    )
    for note in family_notes(cfg, param_count(cfg)):
        st.markdown(note)
    # the KV cache format's bytes, MLA's latent, only the blocks that attend: the derivation's own
    show_equation((r"\text{KV bytes per token}", derive_memory.kv_bytes_per_token(cfg, selection.kv_format)))


def page_links(selection: Selection) -> None:
    """A link to every page, carrying the sidebar's choice in its URL."""
    query = selection.query()
    for page in PAGES:
        st.page_link(page.path, label=f"**{page.label}** — {page.description}", query_params=query)
