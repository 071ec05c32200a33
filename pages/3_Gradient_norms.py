"""Gradient norms: Post-LN vs Pre-LN at initialisation, against depth, warmup and training."""

import streamlit as st

from llama_lab import ui
from llama_lab.ui.sections import gradient

P = "llama_lab.page3."

selection = ui.setup_page(
    "Gradient norms",
    "**Post-LN** (2017) against **Pre-LN** (LLaMA): the same weights, one forward/backward on "
    "the same batch, each block's gradient norm over several seeds (median line, min–max band).",
)
results = st.container()  # the answer first; the live-run size box and the theory below it
ui.stop_unless_decoder_only(selection.cfg, "The Gradient norms page's live run")
setup = gradient.setup(selection.cfg, P)  # the live-run size box, in the URL as grad.*
with st.expander("Why they differ: the two Jacobians and Xiong et al.'s bound"):
    st.markdown(
        "Post-LN normalises after the residual add, so the norm's Jacobian sits on the residual "
        "path; Pre-LN normalises the branch input, keeps an identity path to every block and "
        "ends with a final norm."
    )
    gradient.explain_norm_positions()

with results:
    tab_init, tab_depth, tab_warm, tab_train = st.tabs(
        ["Post-LN vs Pre-LN", "Ratio vs depth", "Warmup", "Training run"]
    )
    with tab_init:
        gradient.init_tab(setup, P)
    with tab_depth:
        gradient.depth_tab(setup, P)
    with tab_warm:
        gradient.warmup_tab(setup, P)
    with tab_train:
        gradient.training_tab(setup, P)
