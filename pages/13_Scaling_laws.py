"""Scaling laws: Hoffmann et al.'s L(N, D) and Besiroglu et al.'s replication, the compute-optimal
model for a budget, where GPT-3, Chinchilla and the LLaMAs sit, and the lab's own ladder measured."""

import streamlit as st

from llama_lab import ui
from llama_lab.ui.sections import scaling

P = "llama_lab.page13."

ui.setup_page(
    "Scaling laws",
    "How should a training budget be split between parameters and tokens? Hoffmann et al. (2022) "
    "fitted L(N, D) = E + A/N^α + B/D^β and found N and D should grow together; Besiroglu et al. "
    "(2024) refitted it and found the printed fit biased. Pick a budget: the compute-optimal model, "
    "the IsoFLOP curves with the famous models placed, and the lab's own tiny models measured here.",
    needs_config=False,
)
st.subheader("The published fits")
fit = scaling.published_section(P)
st.subheader("IsoFLOP curves and the models placed")
scaling.placements_section(fit, P)
st.subheader("Measured here: the lab's own ladder")
scaling.ladder_section(P)
