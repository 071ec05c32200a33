"""Inside the model: one real forward pass of a small model of the sidebar's recipe, opened up —
attention maps, RoPE, the residual stream, norms and gates, the logit lens, a mixture's routing."""

import streamlit as st

from llama_lab import ui

P = "llama_lab.page9."

selection = ui.setup_page(
    "Inside the model",
    "A small model of the sidebar's recipe — its norms, positions, FFN, attention kind, window "
    "and experts, at d = 64 and 4 blocks with a byte-level vocabulary — trained briefly on the "
    "built-in text, then run on the text you type. Every view below is read off that forward "
    "pass.",
)
cfg, steps, text = ui.inside_choice(selection.cfg, P)
ui.inside_note(selection.cfg, cfg, steps)
trace = ui.forward_trace(cfg, steps, text, P)
if trace is None:
    st.stop()

ui.attention_section(trace, P)
ui.positions_section(trace, P)
ui.stream_section(trace, cfg.norm_position, P)
ui.lens_section(trace, P)
