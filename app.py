"""LLaMA Lab — Streamlit entry point: `streamlit run app.py`.

Registers the pages with st.navigation: the home page (home.py) as "Home", then every page of
ui.PAGES, titled from its file name as the pages/ folder would, in the same order, in the top
bar: the sidebar is the model builder's alone (its preset, shape and T/B fit a 1440×900 window
unscrolled). Each page draws the shared sidebar itself, so it also runs alone."""

import streamlit as st

from llama_lab import ui

home = st.Page(ui.HOME_PAGE, title=ui.HOME_TITLE, icon=ui.HOME_ICON, default=True)
st.navigation([home, *(st.Page(page.path) for page in ui.PAGES)], position="top").run()
