"""Inside the model: one real forward pass of a small model of the sidebar's recipe, opened up —
attention maps, RoPE, the residual stream, norms and gates, the logit lens, a mixture's routing."""

import streamlit as st

from llama_lab import ui
from llama_lab.experiments.inside import INSIDE_DEFAULTS

P = "llama_lab.page9."

selection = ui.setup_page(
    "Inside the model",
    "A small model of the sidebar's recipe — its norms, positions, FFN, attention kind, window "
    "and experts, at d = 64 and 4 blocks with a byte-level vocabulary — trained for a few seconds "
    "on the built-in text, then run on the text you type. Every view below is read off that "
    "forward pass.",
)
cfg, steps, text = ui.inside_choice(selection.cfg, P)
st.markdown(
    ui.live_run_note(selection.cfg, cfg)
    + (
        f" Trained {steps} AdamW steps (lr {INSIDE_DEFAULTS['lr']:g}, B = "
        f"{INSIDE_DEFAULTS['batch']}, T = {INSIDE_DEFAULTS['seq_len']})."
        if steps
        else " Untrained: the weights as initialised."
    )
)
trace = ui.forward_trace(cfg, steps, text)
if trace is None:
    st.stop()

ui.attention_section(trace, P)
ui.positions_section(trace, P)
ui.stream_section(trace, cfg.norm_position, P)
ui.lens_section(trace, P)
