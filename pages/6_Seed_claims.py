"""Every number the seed tutorial quotes, recomputed, with ✓ or ✗."""

import json

import streamlit as st

from llama_lab import ui
from llama_lab.seed import SEED_SOURCE, WARMUP_QUOTE, claims_frame, warmup_claim

ui.setup_page(
    "Seed claims",
    f"The tutorial this lab grew from (`{SEED_SOURCE}`, “从 Transformer 到 LLaMA 系列”) quotes "
    f"many numbers. Each is recomputed here — closed-form counts from `llama_lab.analysis`, "
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
with st.spinner("Recomputing (one forward pass of the 43.8M-parameter demo model) …"):
    claims = ui.seed_claims()
warmup = ui.session_warmup()  # the Gradient norms page's run, or one made here
if warmup is None:
    with st.container(border=True):
        st.markdown(
            f"**Measured claim: Post-LN needs warmup, Pre-LN does not** (seed §三 3.3)  \n> {WARMUP_QUOTE}"
        )
        st.markdown(
            "Not measured in this session yet: three arms trained on the built-in text "
            "over five seeds (a few minutes on a CPU; the Gradient norms page's "
            "Warmup tab runs the same measurement with any settings)."
        )
        if st.button("Measure it", key="llama_lab.page6.warmup"):
            ui.default_warmup()
            warmup = ui.session_warmup()
if warmup is not None:
    claims = [*claims, warmup_claim(warmup.result)]
wrong = sum(not claim.verdict for claim in claims)
cols = st.columns(3)
cols[0].metric("Claims checked", len(claims))
cols[1].metric("Hold ✓", len(claims) - wrong)
cols[2].metric("Wrong ✗", wrong)

for claim in claims:
    mark = ":green[✓]" if claim.verdict else ":red[✗]"
    with st.container(border=True):
        st.markdown(
            f"**{mark} {claim.claim_en}**  \n<small>seed §{claim.section} · `{claim.id}`</small>",
            unsafe_allow_html=True,
        )
        st.markdown(f"> {claim.quote}")
        st.markdown(f"**Lab:** {claim.computed}  \n{claim.explanation}")

st.download_button(
    "Claims (JSON)",
    json.dumps([c.to_dict() for c in claims], indent=2, ensure_ascii=False).encode("utf-8"),
    file_name="seed_claims.json",
    mime="application/json",
    on_click="ignore",
)
st.download_button(
    "Claims (CSV)",
    claims_frame(claims).to_csv(index=False).encode("utf-8"),
    file_name="seed_claims.csv",
    mime="text/csv",
    on_click="ignore",
)
