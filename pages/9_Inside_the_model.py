"""Inside the model: one real forward pass of a small model of the sidebar's recipe, opened up —
attention maps, RoPE, the residual stream, norms and gates, the logit lens, a mixture's routing."""

import streamlit as st

from llama_lab import ui
from llama_lab.ui.sections import inside

P = "llama_lab.page9."

selection = ui.setup_page(
    "Inside the model",
    "A small model of the sidebar's recipe — its norms, positions, FFN, attention kind, window "
    "and experts, at d = 64 and 4 blocks with a byte-level vocabulary — trained briefly on the "
    "built-in text, then run on the text you type. Every view below is read off that forward "
    "pass.",
)
ui.stop_unless_decoder_only(selection.cfg, "The Inside the model page")
cfg, steps, text = inside.choice(selection.cfg, P)
inside.note(selection.cfg, cfg, steps)
trace = inside.forward_trace(cfg, steps, text, P)
if trace is None:
    st.stop()

inside.attention_section(trace, P)
inside.positions_section(trace, P)
inside.stream_section(trace, cfg.norm_position, P)
inside.lens_section(trace, P)
