"""Every number the seed tutorial quotes, recomputed, with ✓ or ✗."""

import streamlit as st

from llama_lab import ui
from llama_lab.ui.sections import claims

P = "llama_lab.page6."

ui.setup_page(
    "Seed claims",
    f"The tutorial this lab grew from (`{claims.SEED_SOURCE}`, “From Transformer to the LLaMA series”) "
    f"quotes many numbers. Each is recomputed here — closed-form counts from `llama_lab.analysis`, "
    f"the published configs, and one real forward pass of the demo model — and marked ✓ when "
    f"the statement holds, ✗ when it does not. These claims concern fixed models, not the "
    f"sidebar's.",
    needs_config=False,
)

st.latex(
    r"N_\text{LayerNorm} = 2d,\; N_\text{RMSNorm} = d \qquad N_\text{FFN}^\text{ReLU}"
    r" = 2\,d\,(4d) = 8d^2,\; N_\text{FFN}^\text{SwiGLU} = 3\,d\,F \qquad"
    r" \text{loss}_0 \approx \ln V + \tfrac{1}{2}\operatorname{Var}(\text{logits})"
)
recomputed = claims.recomputed()
warmup = claims.warmup_claim(P)  # its button runs the contrast at its defaults
claims.verdicts_section(recomputed, warmup, P)
