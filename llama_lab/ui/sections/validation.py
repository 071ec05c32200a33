"""The Validation page's sections: the summary per kind, the efficiency parameters and what
they mean, predicted against measured, and every row with its source and quoted line."""

from __future__ import annotations

import streamlit as st

from ...figures import validation as fig
from ...units import escape_markdown
from ...validation import validate
from ..cached import show_table


@st.cache_data(show_spinner=False)
def answer() -> dict:
    """``validate()`` with the shipped parameters (the same for every session)."""
    return validate()


def summary_section(answer: dict) -> None:
    """The held-out median |error| of each predicted kind first, then the whole summary with
    each kind's interval, its level and the share of held-out rows it holds."""
    shown = [(kind, s) for kind, s in answer["summary"].items() if s["held_out_median_abs_error"] is not None]
    for col, (kind, s) in zip(st.columns(len(shown) or 1), shown):
        col.metric(
            f"{kind}: held-out median |error|",
            f"{s['held_out_median_abs_error']:.1%}",
            help=f"{s['predicted']} of {s['n']} rows predicted; "
            f"worst held-out {s['held_out_max_abs_error']:.1%}",
        )
    show_table(fig.summary_frame(answer["summary"]), width="stretch")
    st.caption(interval_note(answer["summary"]))


def interval_note(summaries: dict) -> str:
    """How the intervals are built and checked, and from which rows each kind's comes."""
    level = next(iter(summaries.values()))["interval_level"]
    built = "; ".join(f"{kind}: {s['interval_from']}" for kind, s in summaries.items())
    return (
        f"The interval `predict` and the pages give an estimate, at level {level:.0%}: the range "
        "of measured / estimate (of a rate; a time's is the rate's, inverted) over the fit half's "
        "rows, each predicted by a fit made without it, less their lowest and highest "
        f"{(1 - level) / 2:.0%}, widened to hold the estimate. It never sees the held-out half, "
        f"which measures it: “held out inside” is the share there. {built}."
    )


def scatter_section(answer: dict, prefix: str) -> None:
    st.plotly_chart(fig.scatter_figure(answer["rows"]), key=prefix + "scatter")


def parameters_section(answer: dict) -> None:
    with st.expander("The efficiency parameters and what they mean (fitted on the fit half only)"):
        rows = []
        for name, value in answer["parameters"].items():
            meaning = answer["meaning"][name]
            if isinstance(value, dict):
                rows += [
                    {"parameter": f"{name}[{k}]", "value": v, "meaning": meaning} for k, v in value.items()
                ]
            else:
                rows.append({"parameter": name, "value": value, "meaning": meaning})
        show_table(rows, width="stretch")
        st.caption(
            "Fitted by `python tools/fit_efficiency.py`: coordinate descent over fixed grids on the "
            "mean |log(estimate / measured)| of the fit half's rows; the halves are declared by a "
            "hash of each row's id, alternating within each kind, before any fit."
        )


def mfu_note(answer: dict) -> str:
    """What the MFU columns count, named once (``analysis.MFU_CONVENTION``)."""
    return (
        f"MFU columns (training rows): {answer['mfu_convention']}, against the GPU's dense bf16 peak. "
        "“By the source”: llm-foundry's MFU column (the same convention: LLaMA Lab's count gives its "
        "figures within 0.4 %), Megatron-Bridge's model TFLOP/s per GPU over that peak (its count "
        "halves the causal scores, so it reads lower than the same run in this convention)."
    )


def rows_section(answer: dict, prefix: str) -> None:
    """Every row (sortable by any column) and, for the chosen one, its source and quote."""
    st.subheader("Every measurement")
    show_table(fig.rows_frame(answer["rows"]), width="stretch", height=420)
    st.caption(mfu_note(answer))
    by_id = {row["id"]: row for row in answer["rows"]}
    chosen = st.selectbox("open a row's source and quoted line", list(by_id), key=prefix + "row")
    row = by_id[chosen]
    st.markdown(f"**Source:** {escape_markdown(row['source'])}")
    st.markdown("> " + escape_markdown(row["quote"]))
    if row["estimate"] is None:
        st.caption(f"Not predicted: {escape_markdown(row['not_predicted'])}.")
    else:
        st.caption(
            f"measured {row['measured']:,.4g}, bound {row['bound']:,.4g}, estimate "
            f"{row['estimate']:,.4g} ({row['rel_error']:+.1%}), {row['half'].replace('_', '-')} half"
        )
