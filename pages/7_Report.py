"""Report: everything about the sidebar's model, plus this session's experiments, as files."""

import streamlit as st

from llama_lab import ui

P = "llama_lab.page7."

selection = ui.setup_page(
    "Report",
    "Every table and figure of the analysis pages for the sidebar's model — parameters, "
    "FLOPs, KV cache (MHA/GQA/MQA, by dtype, what fits each GPU), inference and training "
    "memory with ZeRO, rooflines — the seed's claims recomputed, the experiment results of "
    "this browser session, and the environment, as one file. The HTML carries plotly.js "
    "inlined, so it opens without a network.",
)
st.latex(
    r"N = L\,N_\text{block} + V C\,(1 + [\text{untied}]) + n_\text{norm} \qquad "
    r"\text{FLOPs}_\text{fwd} = 2\,B\,T\,N_\text{matmul} + 4\,B\,T^2 H D L"
)
st.latex(
    r"\text{KV bytes/token} = 2\,L\,G\,D\,b \qquad "
    r"\text{training bytes} = \underbrace{2\Psi + 2\Psi + 12\Psi}_{\text{mixed-precision "
    r"AdamW (ZeRO)}} + \text{activations}"
)

included = ui.report_experiments(P)
gpu = ui.report_gpu(P)
built = ui.built_report(selection, included, gpu, P)  # kept in the session per choice
ui.report_summary(built)  # stops the page when the report could not be built

st.subheader("Downloads")
ui.report_downloads(built, P)
st.caption(
    "CSV: a zip with one CSV per table (raw numbers) and index.csv naming each table's "
    "section and title. JSON keeps `python -m llama_lab analyze --json` under "
    "`analysis`. The same report from the command line: "
    "`python -m llama_lab report --preset … -o report.html --format html`."
)
