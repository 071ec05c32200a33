"""LLaMA Lab's home page (registered by app.py as "Home"): the sidebar's model in four numbers
and a link to every page. It also runs alone (`AppTest.from_file("home.py")`)."""

import streamlit as st

from llama_lab import ui
from llama_lab.ui.sections import home

P = "llama_lab.home."

selection = ui.setup_page(
    "🦙 LLaMA Lab",
    "Build a LLaMA-style decoder — or the 2017 Transformer it came from — in the sidebar, and "
    "see where its parameters, FLOPs and KV-cache memory go. Every number is computed from the "
    "config (closed form, cross-checked against the module on the meta device and fvcore), "
    "and the tutorial this lab grew from is checked claim by claim. The sidebar is shared by "
    "all pages and mirrored in the URL: copy the link to share the view.",
)
home.current_model(selection, P)

st.subheader("Pages")
home.page_links(selection)
