"""Live pass: one real training step and KV-cache decoding, measured against the predictions."""

import streamlit as st

from llama_lab import ui
from llama_lab.ui.sections import live

P = "llama_lab.page4."

selection = ui.setup_page(
    "Live pass",
    "One real training step — forward, backward, AdamW — timed phase by phase on the GPU when "
    "there is one (the CPU otherwise), with the numbers `analysis` predicts beside the "
    "measured ones; then greedy decoding with the KV cache for the MHA, GQA and MQA variants "
    "of the same model.",
)

ui.stop_unless_decoder_only(selection.cfg, "The Live pass page")
formulas = st.container()  # written once the live model is chosen, below

# ---- which model, which device (in the URL as live.*) ---------------------------------------------
run_cfg, settings = live.setup(selection, P)
with formulas:  # the definitions, and the live model's ln V and KV bytes per token
    live.formulas(run_cfg, settings)

# ---- the training step --------------------------------------------------------------------------------
st.subheader("One training step")
live.training_step_section(run_cfg, settings, P)

# ---- KV-cache decoding --------------------------------------------------------------------------------
st.subheader("KV-cache decoding: MHA vs GQA vs MQA")
st.markdown(
    "Prefill a prompt of each context length, then decode new tokens one at a time "
    "with the cache; weights and cache in the chosen dtype. The cache bytes are read "
    "from the cache tensors and compared with `analysis.kv_cache_bytes_per_token`."
)
live.decode_section(run_cfg, settings, P)
