"""Gradient norms: Post-LN vs Pre-LN at initialisation, against depth, warmup and training."""

import streamlit as st

from llama_lab import ui

P = "llama_lab.page3."

selection = ui.setup_page(
    "Gradient norms",
    "The same weights arranged as **Post-LN** (2017: normalise after the residual add) and "
    "**Pre-LN** (LLaMA: normalise the branch input), one forward/backward on the same batch, "
    "over several seeds (median line, min–max band). Post-LN puts the norm's Jacobian on the "
    "residual path; Pre-LN keeps an identity path to every block and ends with a final norm.",
)
ui.explain_norm_positions()
setup = ui.gradient_setup(selection.cfg, P)  # the live-run size box, in the URL as grad.*

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
