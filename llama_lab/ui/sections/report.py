"""The Report page's sections: which of this session's experiment results go in, the GPU of the
roofline tables, the report built once per choice (kept in the session), its contents in four
numbers and one download per format."""

from __future__ import annotations

from typing import Any

import streamlit as st

from ... import report
from ...analysis import DEFAULT_GPU, derive, derive_memory
from ...analysis.common import training_dtype
from ...errors import LabError
from ...experiments import KINDS
from ...runtime.hardware import GPUS
from ...units import human_bytes
from ..derivations import show_equation
from ..runs import session_experiments
from ..state import KEY_FINETUNE, Selection
from ..widgets import show_error

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


def formulas(selection: Selection) -> None:
    """The report's headline counts written out for the sidebar's model: parameters, one
    forward's FLOPs, KV bytes per token and one GPU's training memory (AdamW, unsharded)."""
    cfg, T, B = selection.cfg, selection.seq_len, selection.batch
    show_equation(("N", derive.params_total(cfg)))
    show_equation((r"\text{FLOPs}_\text{fwd}", derive.forward_flops(cfg, T, B)))
    show_equation((r"\text{KV bytes/token}", derive_memory.kv_bytes_per_token(cfg, selection.kv_format)))
    show_equation(derive_memory.training_bytes(cfg, T, B, training_dtype(selection.dtype)))


def included_experiments(prefix: str) -> dict:
    """This session's experiment results the report includes (all of them while the toggle is
    on; none when there are none yet, with a note saying where they come from)."""
    key = prefix + "include"
    present = session_experiments()
    if present:
        st.session_state.setdefault(key, True)
        include = st.toggle(
            f"Include this session's experiment results: {', '.join(KINDS[k].title for k in present)}",
            key=key,
        )
    else:
        include = False
        st.caption(
            "No experiment results in this session yet: run them on the Gradient norms, "
            "Live pass and Architecture comparison pages and they are added here."
        )
    return present if include else {}


def gpu_choice(prefix: str) -> str:
    """The GPU of the roofline tables (the analysis' default GPU at first)."""
    st.session_state.setdefault(prefix + "gpu", DEFAULT_GPU)
    return st.selectbox("GPU for the roofline tables", list(GPUS), key=prefix + "gpu")


def finetune_workload(selection: Selection) -> Any:
    """The Fine-tuning page's last valid recipe for this model (None: the report's default)."""
    kept = st.session_state.get(KEY_FINETUNE)
    return kept[1] if kept is not None and kept[0] == selection.cfg else None


def _build(
    selection: Selection, included: dict, precision: Any, gpu: str, finetune: Any = None
) -> tuple[dict, dict, Any]:
    """The report's files by format, the errors (format, or "all" → why) and its summary."""
    cfg, T, B = selection.cfg, selection.seq_len, selection.batch
    files, errors, summary = {}, {}, None
    with st.spinner("Building the report …"):
        try:
            rep = report.build_report(
                cfg,
                T,
                B,
                experiments=included,
                dtype=precision,
                gpu=gpu,
                name=selection.name or "",
                finetune=finetune,
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
    return files, errors, summary


def built_report(selection: Selection, included: dict, gpu: str, prefix: str) -> tuple:
    """(build key, files, errors, summary) of the sidebar's report with ``included`` at
    ``gpu``: built when a choice changed, kept in the session once it built without error (a
    failure is retried on the next run)."""
    key_built = prefix + "built"
    cfg, T, B, dtype = selection.cfg, selection.seq_len, selection.batch, selection.dtype
    precision = report.Precision.of(dtype, selection.weight_format, selection.kv_format)
    finetune = finetune_workload(selection)
    build_key = (cfg, T, B, precision, gpu, finetune, tuple((k, id(v)) for k, v in included.items()))
    built = st.session_state.get(key_built)
    if built is None or built[0] != build_key:
        files, errors, summary = _build(selection, included, precision, gpu, finetune)
        built = (build_key, files, errors, summary)
        if not errors:  # a failure is retried on the next run
            st.session_state[key_built] = built
    return built


def summary(built: tuple) -> None:
    """Tables, figures, seed claims and experiments in the report; if it could not be built,
    why, and the page stops there."""
    _, files, errors, summary = built
    if "all" in errors:
        show_error(f"The report could not be built: {errors['all']}")
        st.stop()
    n_tables, n_figures, n_claims, n_hold, kinds = summary
    cols = st.columns(4)
    cols[0].metric("Tables", n_tables)
    cols[1].metric("Figures", n_figures)
    cols[2].metric("Seed claims", f"{n_hold} ✓ / {n_claims - n_hold} ✗")
    cols[3].metric("Experiments", len(kinds), help=", ".join(kinds) or "none")


def downloads(built: tuple, prefix: str) -> None:
    """One download button per format with its size, or why its export failed."""
    _, files, errors, _ = built
    cols = st.columns(len(FILES))
    for col, (fmt, (label, file_name, mime, description)) in zip(cols, FILES.items()):
        if fmt in errors:
            show_error(f"{fmt.upper()} export failed: {errors[fmt]}", col)
            continue
        col.download_button(
            label,
            files[fmt],
            file_name=file_name,
            mime=mime,
            on_click="ignore",
            key=prefix + "download_" + fmt,
            help=description,
            type="primary" if fmt == "html" else "secondary",
        )
        col.caption(human_bytes(len(files[fmt])))
