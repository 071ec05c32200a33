"""Every headline number opens its derivation: the metric, and beside it a popover with the
formula, the formula with the config's values put in and what it evaluates to, the counting
convention — a choice where conventions differ, each with its own value — and the source."""

from __future__ import annotations

from typing import Any

import streamlit as st

from ..analysis.derive import Derivation
from ..units import escape_markdown

LAB_CONVENTION = "this lab's count"


def _number(value: Any) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.6g}"
    return f"{int(value):,}"


def show_derivation(d: Derivation, key: str) -> None:
    """The derivation of ``d`` (or of the alternative convention the radio picks)."""
    chosen = d
    if d.alternatives:
        labels = [LAB_CONVENTION, *(label for label, _ in d.alternatives)]
        pick = st.radio("counting convention", labels, key=key)
        chosen = d if pick == LAB_CONVENTION else dict(d.alternatives)[pick]
    st.markdown(f"**{escape_markdown(chosen.title)}**")
    st.latex(chosen.formula)
    # our own arithmetic (numbers, names, · + − ÷ ( )): nothing Markdown would read as markup
    st.markdown(f"= {chosen.substituted()} = **{_number(chosen.evaluate())}**")
    lines = [
        f"- {escape_markdown(name)} = {_number(value)}"
        + (f" ({escape_markdown(chosen.describe(name))})" if chosen.describe(name) else "")
        for name, value in chosen.terms.items()
    ]
    st.markdown("\n".join(lines))
    if chosen.convention:
        st.caption("Convention: " + escape_markdown(chosen.convention))
    st.caption("Source: " + escape_markdown(chosen.source))


def derived_metric(col, label: str, value: str, d: Derivation, key: str, **metric: Any) -> None:
    """``col.metric(label, value, …)`` with its derivation one click away."""
    col.metric(label, value, **metric)
    with col.popover("derivation", icon=":material/function:"):
        show_derivation(d, key)
