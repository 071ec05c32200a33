"""Report: everything about the sidebar's model, plus this session's experiments, as files."""

import streamlit as st

from llama_lab import report, ui
from llama_lab.analysis import DEFAULT_GPU
from llama_lab.errors import LabError
from llama_lab.experiments import KINDS
from llama_lab.runtime.hardware import GPUS

P = "llama_lab.page7."
KEY_GPU, KEY_INCLUDE, KEY_BUILT = P + "gpu", P + "include", P + "built"
FILES = {  # format → (button label, file name, MIME type, what it holds)
    "html": (
        "HTML report",
        "llama_lab_report.html",
        "text/html",
        "One self-contained file: plotly.js inlined, opens offline",
    ),
    "json": ("JSON", "llama_lab_report.json", "application/json", "Every number, plain JSON"),
    "csv": (
        "CSV tables (zip)",
        "llama_lab_report_csv.zip",
        "application/zip",
        "One CSV per table, raw numbers, plus index.csv",
    ),
    "md": ("Markdown", "llama_lab_report.md", "text/markdown", "Every table as Markdown"),
}

selection = ui.setup_page(
    "Report",
    "Every table and figure of the analysis pages for the sidebar's model — parameters, "
    "FLOPs, KV cache (MHA/GQA/MQA, by dtype, what fits each GPU), inference and training "
    "memory with ZeRO, rooflines — the seed's claims recomputed, the experiment results of "
    "this browser session, and the environment, as one file. The HTML carries plotly.js "
    "inlined, so it opens without a network.",
)
cfg, T, B, dtype = selection.cfg, selection.seq_len, selection.batch, selection.dtype
st.latex(
    r"N = L\,N_\text{block} + V C\,(1 + [\text{untied}]) + n_\text{norm} \qquad "
    r"\text{FLOPs}_\text{fwd} = 2\,B\,T\,N_\text{matmul} + 4\,B\,T^2 H D L"
)
st.latex(
    r"\text{KV bytes/token} = 2\,L\,G\,D\,b \qquad "
    r"\text{training bytes} = \underbrace{2\Psi + 2\Psi + 12\Psi}_{\text{mixed-precision "
    r"AdamW (ZeRO)}} + \text{activations}"
)

present = ui.session_experiments()
if present:
    st.session_state.setdefault(KEY_INCLUDE, True)
    include = st.toggle(
        f"Include this session's experiment results: {', '.join(KINDS[k].title for k in present)}",
        key=KEY_INCLUDE,
    )
else:
    include = False
    st.caption(
        "No experiment results in this session yet: run them on the Gradient norms, "
        "Live pass and Architecture comparison pages and they are added here."
    )
st.session_state.setdefault(KEY_GPU, DEFAULT_GPU)
gpu = st.selectbox("GPU for the roofline tables", list(GPUS), key=KEY_GPU)

included = present if include else {}
precision = report.Precision.of(dtype, selection.weight_format, selection.kv_format)
build_key = (cfg, T, B, precision, gpu, tuple((k, id(v)) for k, v in included.items()))
built = st.session_state.get(KEY_BUILT)
if built is None or built[0] != build_key:
    files, errors, summary = {}, {}, None
    with st.spinner("Building the report …"):
        try:
            rep = report.build_report(
                cfg, T, B, experiments=included, dtype=precision, gpu=gpu, name=selection.name
            )
        except LabError as exc:
            rep, errors["all"] = None, str(exc)
        if rep is not None:
            summary = (
                len(rep.tables),
                len(rep.figures),
                len(rep.claims),
                sum(c["verdict"] for c in rep.claims),
                list(rep.experiments),
            )
            for fmt in FILES:
                try:
                    content = report.render(rep, fmt)
                    files[fmt] = content.encode("utf-8") if isinstance(content, str) else content
                except Exception as exc:  # noqa: BLE001 — the user sees why, never a traceback
                    errors[fmt] = f"{type(exc).__name__}: {exc}"
    built = (build_key, files, errors, summary)
    if not errors:  # a failure is retried on the next run
        st.session_state[KEY_BUILT] = built

_, files, errors, summary = built
if "all" in errors:
    ui.show_error(f"The report could not be built: {errors['all']}")
    st.stop()
n_tables, n_figures, n_claims, n_hold, kinds = summary
cols = st.columns(4)
cols[0].metric("Tables", n_tables)
cols[1].metric("Figures", n_figures)
cols[2].metric("Seed claims", f"{n_hold} ✓ / {n_claims - n_hold} ✗")
cols[3].metric("Experiments", len(kinds), help=", ".join(kinds) or "none")

st.subheader("Downloads")
cols = st.columns(len(FILES))
for col, (fmt, (label, file_name, mime, description)) in zip(cols, FILES.items()):
    if fmt in errors:
        ui.show_error(f"{fmt.upper()} export failed: {errors[fmt]}", col)
        continue
    col.download_button(
        label,
        files[fmt],
        file_name=file_name,
        mime=mime,
        on_click="ignore",
        key=P + "download_" + fmt,
        help=description,
        type="primary" if fmt == "html" else "secondary",
    )
    col.caption(ui.human_bytes(len(files[fmt])))
st.caption(
    "CSV: a zip with one CSV per table (raw numbers) and index.csv naming each table's "
    "section and title. JSON keeps `python -m llama_lab analyze --json` under "
    "`analysis`. The same report from the command line: "
    "`python -m llama_lab report --preset … -o report.html --format html`."
)
