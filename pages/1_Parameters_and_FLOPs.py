"""Parameters and FLOPs: where they go, how FLOPs grow with the sequence, fvcore's opinion."""

import streamlit as st

from llama_lab import ui
from llama_lab.ui.sections import params

P = "llama_lab.page1."
selection = ui.setup_page(
    "Parameters & FLOPs",
    "Closed-form counts for the sidebar's model, by component. FLOPs count 2 per multiply-add "
    "over one forward pass of B×T tokens, attention scores over the full T×T (the causal half "
    "is listed too); norms, softmax, RoPE and activations are element-wise and listed apart.",
)
cfg, T, B = selection.cfg, selection.seq_len, selection.batch

params.metrics(cfg, T, B, P)
params.charts(cfg, T, B)  # the charts first; the formulas they follow below
params.image_encoder(cfg)  # a multimodal model's tower, per image
with st.expander("The formulas behind the counts"):
    params.formulas(cfg, T, B)

st.subheader("FLOPs against sequence length")
params.flops_sweep_section(cfg, T, B)
if any(cfg.local_layer_flags):  # a window or a sparse pattern: linear against quadratic
    st.subheader("Score FLOPs against T: dense vs the attention pattern")
    params.score_cost_section(cfg, T)

st.subheader("One decoder block")
params.block_section(cfg, T, B)

st.subheader("Cross-check with fvcore")
params.fvcore_section(cfg, T, B, P)
params.counting_conventions(cfg, T, B)
