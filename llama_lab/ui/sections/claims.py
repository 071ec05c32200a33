"""The Seed claims page's sections: the tutorial's numbers recomputed, the measured warmup claim
(this session's contrast or the shipped pre-measured one, and a button that runs it), each
claim with its verdict, and the claims as JSON and CSV. The warmup contrast is the Gradient
norms page's too (``ui.warmup``)."""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from ...seed import SEED_SOURCE as SEED_SOURCE  # the tutorial's file, named in the page's intro
from ...seed import WARMUP_QUOTE, WARMUP_QUOTE_EN, checked_claims, claims_frame
from ..cached import seed_claims, show_table
from ..runs import PREMEASURED
from ..warmup import default_warmup, session_warmup


def recomputed() -> list:
    """Every claim the seed's numbers make, recomputed (cached for the process)."""
    with st.spinner("Recomputing (one forward pass of the 43.8M-parameter demo model) …"):
        return seed_claims()


def warmup_claim(prefix: str) -> Any:
    """This session's warmup contrast entry (the Gradient norms page's run, one made here, or
    the default one shipped pre-measured, said so) with a button that measures the default
    here (``warmup.default_warmup``); without any, the claim's quote and that button."""
    warmup = session_warmup()
    with st.container(border=True):
        if warmup is None:
            st.markdown(
                "**Measured claim: Post-LN needs warmup, Pre-LN does not** (seed §3.3)  \n> "
                + WARMUP_QUOTE_EN
            )
            with st.expander("The tutorial's words (Chinese original)"):
                st.markdown(f"> {WARMUP_QUOTE}")
            st.markdown(
                "Not measured in this session yet: three arms trained on the built-in text "
                "over five seeds (a few minutes on a CPU; the Gradient norms page's "
                "Warmup tab runs the same measurement with any settings)."
            )
        elif PREMEASURED in warmup.settings:
            st.caption(
                f"The warmup claim below is decided by the contrast {warmup.settings[PREMEASURED]}: "
                f"three arms trained on the built-in text over five seeds."
            )
        if st.button("Measure it here" if warmup is not None else "Measure it", key=prefix + "warmup"):
            default_warmup()
            warmup = session_warmup()
    return warmup


def verdicts_section(claims: list, warmup: Any, prefix: str = "llama_lab.page6.") -> None:
    """The counts, each claim (with the warmup one when measured) and its verdict — all or the
    wrong ones, as cards (the English claim first, the tutorial's Chinese words folded away) or
    as one table — and the downloads."""
    claims = checked_claims(warmup.result if warmup is not None else None, recomputed=claims)
    wrong = sum(not claim.verdict for claim in claims)
    cols = st.columns(3)
    cols[0].metric("Claims checked", len(claims))
    cols[1].metric("Hold ✓", len(claims) - wrong)
    cols[2].metric("Wrong ✗", wrong)

    left, right = st.columns(2)
    which = left.radio("Show", ("all", "wrong ✗ only"), horizontal=True, key=prefix + "claims_show")
    view = right.radio("View", ("cards", "table"), horizontal=True, key=prefix + "claims_view")
    shown = [claim for claim in claims if which == "all" or not claim.verdict]
    if view == "table":  # one row per claim, English first; the tutorial's words in the last column
        table = claims_frame(shown)
        table.insert(0, "holds", ["✓" if v else "✗" for v in table.pop("verdict")])
        show_table(
            table[["holds", "claim_en", "computed", "explanation", "section", "quote"]], width="stretch"
        )
    for claim in shown if view == "cards" else []:
        mark = ":green[✓]" if claim.verdict else ":red[✗]"
        with st.container(border=True):
            st.markdown(
                f"**{mark} {claim.claim_en}**  \n<small>seed §{claim.section} · `{claim.id}`</small>",
                unsafe_allow_html=True,
            )
            st.markdown(f"**Lab:** {claim.computed}  \n{claim.explanation}")
            with st.expander("The tutorial's words (Chinese original)"):
                st.markdown(f"> {claim.quote}")

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
