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
ui.report_formulas(selection)  # parameters, FLOPs, KV bytes, training bytes: written out

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
