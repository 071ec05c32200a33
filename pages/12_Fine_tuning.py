"""Fine-tuning: can this model be fine-tuned on one GPU — LoRA, QLoRA, DoRA or full — at what
context and batch, how fast, and a live run on its small copy measured against the prediction."""

import streamlit as st

from llama_lab import ui
from llama_lab.ui.sections import finetune

P = "llama_lab.page12."

selection = ui.setup_page(
    "Fine-tuning",
    "Can the sidebar's model be fine-tuned on one GPU, and at what context and batch? Pick the "
    "method — LoRA, QLoRA over an NF4 base, DoRA or full fine-tuning — its rank and target "
    "modules, the optimizer and the GPU: the trainable parameters are counted as PEFT counts "
    "them, a step's peak memory part by part, and the tokens per second from the lab's "
    "calibrated training model. A live run fine-tunes the preset's small copy here and sets "
    "what it measures beside the prediction.",
)
cfg = selection.cfg

st.subheader("The recipe")
recipe = finetune.recipe(selection, P)
answer = finetune.predicted(cfg, recipe) if recipe is not None else None
if recipe is not None and answer is not None:
    st.subheader(f"One {recipe.gpu.name}, T = {recipe.seq_len:,}, B = {recipe.batch:,}")
    finetune.summary_section(cfg, recipe, answer)
    st.subheader("The peak, part by part")
    finetune.parts_section(recipe, answer, P)
    st.subheader("The peak against context")
    finetune.curve_section(cfg, recipe, answer, P)
    with st.expander("What the count assumes"):
        finetune.notes_section(answer)
st.subheader("Live: fine-tune the small copy here")
finetune.live_section(selection, recipe, P)
