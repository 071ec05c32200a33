"""The seed's 2017 Transformer vs LLaMA table (section 七), each row computed on the config;
the three kinds of Transformer (causal decoder, bidirectional encoder, encoder-decoder) side by
side."""

import streamlit as st

from llama_lab import ui
from llama_lab.ui.sections import comparison

P = "llama_lab.page5."

selection = ui.setup_page(
    "Architecture comparison",
    "The tutorial's table of what LLaMA changed from the 2017 Transformer, row by row. For "
    "each row the lab switches that one option on the sidebar's model — everything else "
    "equal — and reports what it does to the parameters, the forward FLOPs and the KV cache.",
)
cfg, T, B, kv_dtype = selection.cfg, selection.seq_len, selection.batch, selection.kv_format

comparison.formulas(cfg, kv_dtype)
comparison.tables(cfg, T, B, kv_dtype)

st.subheader("Causal decoder vs bidirectional encoder vs encoder-decoder")
comparison.kinds_section(T, kv_dtype)

st.subheader("Train the contrast (small model, CPU)")
comparison.contrast_section(cfg, P)
