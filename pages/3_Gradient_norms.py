"""Gradient norms: Post-LN vs Pre-LN at initialisation, against depth, warmup and training."""

import streamlit as st

from llama_lab import ui

P = "llama_lab.page3."

selection = ui.setup_page(
    "Gradient norms",
    "**Post-LN** (2017) against **Pre-LN** (LLaMA): the same weights, one forward/backward on "
    "the same batch, each block's gradient norm over several seeds (median line, min–max band).",
)
results = st.container()  # the answer first; the live-run size box and the theory below it
setup = ui.gradient_setup(selection.cfg, P)  # the live-run size box, in the URL as grad.*
with st.expander("Why they differ: the two Jacobians and Xiong et al.'s bound"):
    st.markdown(
        "Post-LN normalises after the residual add, so the norm's Jacobian sits on the residual "
        "path; Pre-LN normalises the branch input, keeps an identity path to every block and "
        "ends with a final norm."
    )
    ui.explain_norm_positions()

with results:
    tab_init, tab_depth, tab_warm, tab_train = st.tabs(
        ["Post-LN vs Pre-LN", "Ratio vs depth", "Warmup", "Training run"]
    )
    with tab_init:
        ui.init_tab(setup, P)
    with tab_depth:
        ui.depth_tab(setup, P)
    with tab_warm:
        ui.warmup_tab(setup, P)
    with tab_train:
        ui.training_tab(setup, P)
