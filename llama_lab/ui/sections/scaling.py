"""The Scaling laws page's sections: a published fit at a chosen budget, its IsoFLOP curves with
the trained models placed, the placements table with the decode argument, and the ladder measured
here (shipped pre-measured; re-measured behind a button with progress, stopped by Streamlit's Stop)."""

from __future__ import annotations

import streamlit as st

from ...analysis.scaling import PUBLISHED_FITS, ScalingFit
from ...errors import LabError
from ...experiments import scaling_ladder
from ...figures import scaling as figures
from ..cached import show_table
from ..runs import run_with_status
from ..state import session


def published_section(prefix: str) -> ScalingFit:
    name = st.radio(
        "Published fit",
        list(PUBLISHED_FITS),
        format_func=lambda k: PUBLISHED_FITS[k].source,
        horizontal=True,
        key=prefix + "fit",
    )
    fit = PUBLISHED_FITS[name]
    exponent = st.slider("Training budget C = 10^x FLOPs", 18.0, 27.0, 23.76, 0.01, key=prefix + "budget")
    compute = 10**exponent
    n_opt, d_opt = fit.compute_optimal(compute)
    cols = st.columns(4)
    cols[0].metric("compute-optimal N", f"{n_opt:.3g}")
    cols[1].metric("compute-optimal D (tokens)", f"{d_opt:.3g}")
    cols[2].metric("tokens per parameter", f"{d_opt / n_opt:.1f}")
    cols[3].metric("loss", f"{fit.loss(n_opt, d_opt):.4f}")
    st.caption(
        f"L(N, D) = {fit.E:g} + {fit.A:g}/N^{fit.alpha:g} + {fit.B:g}/D^{fit.beta:g}; "
        f"N_opt = G·(C/6)^{fit.a:.3f}, D_opt = G⁻¹·(C/6)^{fit.b:.3f} (Hoffmann et al., eq. 4)."
    )
    return fit


def placements_section(fit: ScalingFit, prefix: str) -> None:
    st.plotly_chart(figures.isoflop_figure(fit), key=prefix + "isoflop")
    show_table(figures.placements_frame(fit), width="stretch")
    st.caption(figures.placements_note())
    st.markdown(
        "**Why LLaMA overshoots.** Each model's own budget would buy a larger model on fewer tokens "
        "(N / N_opt < 1 means smaller than compute-optimal). Training is paid once; every token served "
        "pays the decode cost, which grows with N: the last two columns compare the lab's decode FLOPs "
        "per token (at a 2,048-token context) of the model as trained and of the compute-optimal model "
        "of the same budget."
    )


def ladder_section(prefix: str) -> None:
    key = prefix + "ladder"
    try:
        shipped = scaling_ladder.shipped()
        result, where = shipped.result, "pre-measured " + _where(shipped.provenance)
    except LabError as exc:
        st.error(str(exc))
        return
    if key in session():
        result, where = session()[key], "measured now on this machine"
    fit = ScalingFit(**result["fit"], source="this lab's ladder")
    st.caption(f"The ladder, {where}.")
    st.plotly_chart(figures.ladder_isoflop_figure(result), key=prefix + "ladder_isoflop")
    show_table(figures.exponents_frame(result), width="stretch")
    residuals = result["log_residuals"]
    worst, median = max(residuals, key=abs), sorted(map(abs, residuals))[len(residuals) // 2]
    st.caption(
        f"Approach 3's fit against its own points: |ln L̂ − ln L| is {median:.3f} for the median point, "
        f"{abs(worst):.3f} at worst ({len(residuals)} points, the seeds' means)."
    )
    st.plotly_chart(figures.ladder_figure(result["rows"], fit), key=prefix + "ladder_chart")
    st.caption(figures.fixed_data_caption(scaling_ladder.fixed_data_rows(result)))
    st.info(figures.ladder_caveat(result))
    if st.button("Re-measure the ladder here (several minutes)", key=prefix + "remeasure"):
        settings = scaling_ladder.LadderSettings()

        def work(progress):
            def on_event(event: dict) -> None:
                if "step" in event:
                    progress(
                        event["done"] / event["total"],
                        f"run {event['run']}/{event['runs']}: width {event['width']} at "
                        f"{scaling_ladder.budget_label(event['budget'])}, "
                        f"step {event['step']}/{event['steps']}",
                    )

            return scaling_ladder.measure(settings, on_event=on_event)

        measured = run_with_status("The scaling ladder", work)
        if measured is not None:
            session()[key] = measured
            st.rerun()


def _where(p: dict) -> str:
    return (
        f"on {p['date']} ({p['machine']}, torch {p['torch']}, Python {p['python']}; "
        f"{p['seconds']:.0f} s there)"
    )
