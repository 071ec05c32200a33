"""Every headline number opens its derivation: the metric, and beside it a popover with the
formula, the formula with the config's values put in and what it evaluates to, the counting
convention — a choice where conventions differ, each with its own value — and the source.
Every equation a page writes out is a derivation's own (``show_equation``): the formula in
symbols = the same with the numbers put in = the value, so what is written multiplies out to
what is printed."""

from __future__ import annotations

from typing import Any, Union

import streamlit as st

from ..analysis.derive import Derivation
from ..analysis.equations import number, side_by_side
from ..units import escape_markdown

LAB_CONVENTION = "this lab's count"
# a derivation, or (its left side — None: its own —, it) or (its left side, it, words after its value)
Part = Union[Derivation, tuple[str | None, Derivation], tuple[str | None, Derivation, str]]


def equations(*parts: Part, lead: str = "", omit: tuple[str, ...] = ()) -> str:
    """The LaTeX of ``parts`` side by side, or one below the other when they do not fit a line
    (``lead`` before them; ``omit``: terms whose own derivation the page has just written)."""
    written = []
    for part in parts:
        lhs, d, note = (None, part, "") if isinstance(part, Derivation) else (*part, "")[:3]
        written.append(d.equation(lhs, note=note, omit=omit))
    return lead + side_by_side(*written)


def show_equation(*parts: Part, lead: str = "", omit: tuple[str, ...] = ()) -> None:
    """One ``st.latex`` of the derivations' equations, side by side."""
    st.latex(equations(*parts, lead=lead, omit=omit))


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
    st.markdown(f"= {chosen.substituted()} = **{number(chosen.evaluate())}**")
    lines = [
        f"- {escape_markdown(name)} = {number(value)}"
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
