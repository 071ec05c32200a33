"""Parameters and FLOPs: where they go, how FLOPs grow with the sequence, fvcore's opinion."""

import streamlit as st

from llama_lab import ui

P = "llama_lab.page1."
selection = ui.setup_page(
    "Parameters & FLOPs",
    "Closed-form counts for the sidebar's model, by component. FLOPs count 2 per multiply-add "
    "over one forward pass of B×T tokens, attention scores over the full T×T (the causal half "
    "is listed too); norms, softmax, RoPE and activations are element-wise and listed apart.",
)
cfg, T, B = selection.cfg, selection.seq_len, selection.batch

ui.params_metrics(cfg, T, B, P)
ui.params_charts(cfg, T, B)  # the charts first; the formulas they follow below
with st.expander("The formulas behind the counts"):
    st.latex(
        r"N_\text{block} = \underbrace{C H D + 2\,C G D + H D C}_{\text{attention}}"
        r" + \underbrace{k\,C F}_{\text{FFN},\;k=3\text{ SwiGLU},\;2\text{ ReLU/GELU}}"
        r" + \underbrace{2\,n_\text{norm}}_{n_\text{norm}=C\text{ or }2C}"
    )
    st.latex(
        r"N = L\,N_\text{block} + V C\,(\text{embedding}) + V C\,(\text{untied head})"
        r" + n_\text{norm}\,(\text{final}) \quad (+\text{biases if enabled})"
    )
    st.latex(
        r"\text{FLOPs}_\text{fwd} = 2\,B\,T \cdot N_\text{matmul}"
        r" + \underbrace{4\,B\,T^2 H D L}_{QK^\top\text{ and }AV\text{, full }T\times T}"
    )

st.subheader("FLOPs against sequence length")
ui.flops_sweep_section(cfg, T, B)

st.subheader("One decoder block")
ui.block_section(cfg, T, B)

st.subheader("Cross-check with fvcore")
ui.fvcore_section(cfg, T, B, P)
ui.counting_conventions(cfg, T, B)
