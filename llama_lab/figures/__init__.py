"""Plotly figures and display tables of the analysis, and what every figure shares (the
figures and tables of an experiment kind live with the kind, in ``llama_lab.experiments``).
No Streamlit here: the pages and the report both draw these."""
