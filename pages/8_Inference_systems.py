"""Inference systems: quantisation, FlashAttention, speculative decoding and distillation — counted for the
sidebar's model and measured live."""

import streamlit as st

from llama_lab import ui
from llama_lab.ui.sections import inference

P = "llama_lab.page8."

selection = ui.setup_page(
    "Inference systems",
    "The systems that make LLaMA-class models cheap to serve, beyond the KV cache: weights and "
    "cache in fewer bits, attention that never writes its T×T matrix to memory, a small draft "
    "model guessing several tokens for the big one to check at once, and a small student taught "
    "by a larger teacher's soft targets. Each is counted exactly for the sidebar's model and "
    "measured live on small models of its recipe.",
)
cfg, T, dtype = selection.cfg, selection.seq_len, selection.dtype
gpu = inference.gpu_choice(P)  # in the URL as inf.gpu

tab_q, tab_f, tab_s, tab_d = st.tabs(
    ["Quantisation", "FlashAttention", "Speculative decoding", "Distillation"]
)
with tab_q:
    inference.quantisation_section(
        cfg, selection.preset, gpu, P, (selection.weight_format, selection.kv_format)
    )
with tab_f:
    inference.flash_section(cfg, T, dtype, gpu, P)
with tab_s:
    inference.speculative_section(P)
with tab_d:
    inference.distill_section(P)
