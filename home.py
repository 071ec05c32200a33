"""LLaMA Lab's home page (registered by app.py as "Home"): the sidebar's model in four numbers
and a link to every page. It also runs alone (`AppTest.from_file("home.py")`)."""

import streamlit as st

from llama_lab import ui
from llama_lab.analysis import derive

selection = ui.setup_page(
    "🦙 LLaMA Lab",
    "Build a LLaMA-style decoder — or the 2017 Transformer it came from — in the sidebar, and "
    "see where its parameters, FLOPs and KV-cache memory go. Every number is computed from the "
    "config (closed form, cross-checked against the module on the meta device and fvcore), "
    "and the tutorial this lab grew from is checked claim by claim. The sidebar is shared by "
    "all pages and mirrored in the URL: copy the link to share the view.",
)

cfg = selection.cfg
params = ui.param_count(cfg)
flops = ui.flop_count(cfg, selection.seq_len, selection.batch)
kv = ui.kv_report(cfg, selection.seq_len, selection.batch, selection.kv_format)
T, B = selection.seq_len, selection.batch
P = "llama_lab.home."

st.subheader("Current model" + (f": {ui.escape_markdown(selection.name)}" if selection.name else ""))
cols = st.columns(4)
ui.derived_metric(
    cols[0],
    "Parameters",
    ui.human_params(params.total),
    derive.params_total(cfg),
    P + "params",
    help=f"{params.total:,}" + (f"; active per token {params.active:,}" if cfg.is_moe else ""),
    delta=f"active per token {ui.human_params(params.active)}" if cfg.is_moe else None,
    delta_color="off",
)
cols[1].metric(
    "Attention",
    cfg.attention_kind,
    f"{cfg.n_heads:,} q / {cfg.n_kv_heads:,} kv heads",
    delta_color="off",
    delta_arrow="off",
    help=f"head_dim {cfg.head_dim}; {cfg.n_rep} query heads per KV head",
)
ui.derived_metric(
    cols[2],
    f"KV cache per token ({selection.kv_format})",
    ui.human_bytes(kv.bytes_per_token),
    derive.kv_bytes_per_token(cfg, selection.kv_format),
    P + "kv",
    help=f"{kv.bytes_per_token:,} bytes: all {cfg.n_layers} layers, K and V; "
    f"{ui.human_bytes(kv.bytes)} for B={B} × T={T:,}",
)
ui.derived_metric(
    cols[3],
    "Forward FLOPs per token",
    ui.human_count(flops.per_token, "FLOP"),
    derive.forward_flops(cfg, T, B, per_token=True),
    P + "flops",
    help=f"the forward's FLOPs ÷ B·T, at T={T:,}, B={B} (2 FLOPs per multiply-add)",
)
st.caption(
    f"{cfg.n_layers} layers × d={cfg.d_model:,}, FFN {cfg.ffn_type} {cfg.ffn_hidden:,}, "
    f"vocab {cfg.vocab_size:,}, {cfg.norm_position}-norm {cfg.norm_type}, "
    f"{cfg.pos_encoding} positions, max_seq_len {cfg.max_seq_len:,}"
    + (", LLaMA-style" if cfg.is_llama_style else "")
)
for note in ui.family_notes(cfg, params):
    st.markdown(note)
b = ui.dtype_bytes(selection.dtype)
st.latex(
    rf"\text{{KV bytes per token}} = 2 \cdot L \cdot G \cdot D \cdot b = 2 \cdot "
    rf"{cfg.n_layers} \cdot {cfg.n_kv_heads} \cdot {cfg.head_dim} \cdot {b:g} = "
    rf"{kv.bytes_per_token:,}"
)

st.subheader("Pages")
for page in ui.PAGES:
    st.page_link(page.path, label=f"**{page.label}** — {page.description}", query_params=selection.query())
