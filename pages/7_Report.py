"""Report: everything about the sidebar's model, plus this session's experiments, as files."""

import streamlit as st

from llama_lab import ui
from llama_lab.ui.sections import report

P = "llama_lab.page7."

selection = ui.setup_page(
    "Report",
    "Every table and figure of the analysis pages for the sidebar's model — parameters, "
    "FLOPs, KV cache (MHA/GQA/MQA, by dtype, what fits each GPU), inference and training "
    "memory with ZeRO, rooflines — the seed's claims recomputed, the experiment results of "
    "this browser session, and the environment, as one file. The HTML carries plotly.js "
    "inlined, so it opens without a network.",
)
report.formulas(selection)  # parameters, FLOPs, KV bytes, training bytes: written out

included = report.included_experiments(P)
gpu = report.gpu_choice(P)
built = report.built_report(selection, included, gpu, P)  # kept in the session per choice
report.summary(built)  # stops the page when the report could not be built

st.subheader("Downloads")
report.downloads(built, P)
st.caption(
    "CSV: a zip with one CSV per table (raw numbers) and index.csv naming each table's "
    "section and title. JSON keeps `python -m llama_lab analyze --json` under "
    "`analysis`. The same report from the command line: "
    "`python -m llama_lab report --preset … -o report.html --format html`."
)
