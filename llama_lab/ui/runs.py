"""Live runs from a page: the job slot with a visible waiting state, progress inside st.status,
refusals shown with st.error, and where results are kept and drawn (each kind's panel).
"""

from __future__ import annotations

import importlib
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, TypeVar

import streamlit as st

from ..config import ModelConfig
from ..errors import ExperimentError, LabError
from ..experiments import KINDS, ExperimentEntry, premeasured
from ..runtime import jobs
from ..runtime.devices import pick_device
from ..runtime.memory import allocation_failures_refused
from ..train.budgets import CPU_FLOP_BUDGET
from ..train.data import TokenData, load_builtin, load_user_text
from ..units import Progress, escape_markdown
from .state import EXPERIMENT_KEYS, session


@contextmanager
def exclusive_run(what: str) -> Iterator[None]:
    """Hold this process's experiment slot (llama_lab.jobs) for the block, so sessions running
    at once take turns instead of oversubscribing the cores or the GPU. While another session's
    run holds it, the page says so and counts the seconds; each update is also where a waiting
    run that was stopped (rerun, Stop, closed tab) leaves the queue."""
    notice = st.empty()

    def on_wait(n_running: int, waited_s: float) -> None:
        notice.info(
            f"⏳ Waiting {waited_s:.0f} s: {n_running} other run(s) are using this "
            f"machine; {escape_markdown(what)} starts as soon as they finish."
        )

    try:
        with jobs.LIMITER.slot(on_wait=on_wait):
            notice.empty()
            yield
    finally:
        notice.empty()


PREMEASURED = "pre-measured"  # the settings key of an entry shipped with the package
STALE_NOTE = "These results are from earlier choices; run again to update them."


Result = TypeVar("Result")


def set_defaults(prefix: str, **values: Any) -> None:
    """A page's initial widget values, under ``prefix + name`` (kept once they are changed)."""
    for name, value in values.items():
        session().setdefault(prefix + name, value)


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def progress_bar(bar: Any, min_interval_s: float = 0.1) -> Progress:
    """A Progress that draws on ``bar`` with the time elapsed and the time left (from the rate
    so far), at most every ``min_interval_s`` (and always at the end). Every drawing is a
    point where Streamlit stops a run that was rerun, stopped or whose tab was closed."""
    start, last = time.monotonic(), [0.0]

    def progress(fraction: float, text: str) -> None:
        now, fraction = time.monotonic(), min(1.0, max(0.0, fraction))
        if now - last[0] < min_interval_s and fraction < 1.0:
            return
        last[0], elapsed = now, now - start
        timing = f"{_duration(elapsed)} elapsed"
        if 0.02 <= fraction < 1.0 and elapsed >= 1.0:
            timing += f", about {_duration(elapsed * (1 - fraction) / fraction)} left"
        bar.progress(fraction, text=f"{escape_markdown(text)} · {timing}")

    return progress


def run_with_status(label: str, work: Callable[[Progress], Result], what: str | None = None) -> Result | None:
    """Run ``work(progress)`` in this process's experiment slot (``exclusive_run``), inside
    st.status with a progress bar (step, time elapsed, time left). A refusal — a guard, a bad
    input, no slot free, memory running out part-way — gives None and is shown at once below
    the status, expanded, as st.error with its reason."""
    refusal = None
    with st.status(label, expanded=True) as status:
        bar = st.progress(0.0, text="starting …")
        try:
            with exclusive_run(what or label), allocation_failures_refused(what or label):
                result = work(progress_bar(bar))
        except LabError as exc:
            refusal = str(exc)
            status.update(label=f"{label}: refused", state="error", expanded=False)
        else:
            status.update(label=f"{label}: done", state="complete", expanded=False)
    if refusal is not None:
        st.error(f"**{escape_markdown(label)} refused:** {escape_markdown(refusal)}")
        return None
    return result


def keep_experiment(
    kind: str, result: Any, config: ModelConfig | None, settings: Mapping[str, Any], *also_under: str
) -> ExperimentEntry:
    """Store a result where the Report page collects it (and under the keys ``also_under``)."""
    entry = ExperimentEntry(kind, result, config, dict(settings))
    for key in (EXPERIMENT_KEYS[kind], *also_under):
        session()[key] = entry
    return entry


def session_experiments() -> dict[str, ExperimentEntry]:
    """This session's experiment results, kind → entry, in the registry's (KINDS) order."""
    state = session()
    return {kind: state[key] for kind, key in EXPERIMENT_KEYS.items() if key in state}


def is_stale(entry: ExperimentEntry, config: ModelConfig | None, settings: Mapping[str, Any]) -> bool:
    """Whether ``entry`` ran on another config, or with other values of ``settings``' keys."""
    return entry.config != config or any(
        entry.settings.get(name) != value for name, value in settings.items()
    )


def show_experiment(key: str, config: ModelConfig | None, settings: Mapping[str, Any], prefix: str) -> None:
    """Draw the result stored under ``key``, if any, after a note when it is stale for the
    current ``config`` and ``settings``; ``prefix`` starts the keys of its charts."""
    entry = session().get(key)
    if entry is None:
        return
    if is_stale(entry, config, settings):
        st.caption(STALE_NOTE)
    panel = importlib.import_module(f"{__package__}.panels.{KINDS[entry.kind].panel}")
    panel.show(entry, prefix)


def expected_time(flops: float, device: str) -> str:
    """About how long ``flops`` of training work take here: on a CPU at the rate the shipped
    measurements reached (``premeasured.shipped_rate``); on a GPU, not estimated."""
    rate = premeasured.shipped_rate()
    if rate is None or str(device) not in ("cpu", "auto") or pick_device(device).type != "cpu":
        return ""
    return f" (about {_duration(max(1.0, flops / rate))} on this CPU)"


def measure_on_view(
    kind: str,
    config: ModelConfig | None,  # None: a measurement that does not depend on the sidebar's model
    settings: Mapping[str, Any],
    work: Callable[[Progress], Any],
    *,
    button: str,
    prefix: str,
    flops: float | None = None,
    not_on_view: str | None = None,
) -> None:
    """A measurement a page shows without running anything on view: this session's result for
    ``config`` and ``settings``, else the one shipped with the package (``premeasured``, labelled
    as such and kept as this session's entry, so the report carries it), else a note. ``work``
    runs only on ``button`` (under the job slot, with its progress bar, stoppable), whose label
    gives the expected time of ``flops`` of training work when given; then the kind's panel."""
    key = EXPERIMENT_KEYS[kind]
    entry = session().get(key)
    fresh = entry is not None and not is_stale(entry, config, settings)
    if not fresh:
        shipped = premeasured.lookup(kind, config, settings)
        if shipped is not None:
            entry = keep_experiment(kind, shipped.result, config, {**settings, PREMEASURED: shipped.label})
            fresh = True
    from_shipped = fresh and PREMEASURED in entry.settings
    label = "Re-measure here" if from_shipped else button
    if flops is not None:
        label += expected_time(flops, settings.get("device", "cpu"))
    if st.button(label, type="secondary" if fresh else "primary", key=prefix + "run_" + kind):
        result = run_with_status(button, work)
        if result is not None:
            keep_experiment(kind, result, config, settings)
    elif from_shipped:
        st.caption(f"Shown at once: {escape_markdown(entry.settings[PREMEASURED])}.")
    elif not fresh:
        st.caption(not_on_view or f"Not measured for these settings yet; press “{button}”.")
    show_experiment(key, config, settings, prefix)


def text_choice(prefix: str) -> tuple[str, Any]:
    """The training text's radio (built-in or upload) and, for an upload, the file widget."""
    source = st.radio(
        "text",
        ("builtin", "upload"),
        horizontal=True,
        key=prefix + "source",
        format_func={
            "builtin": "built-in corpus (Python's help topics, ~460 KB)",
            "upload": "upload a UTF-8 text file",
        }.get,
    )
    upload = st.file_uploader("UTF-8 text", key=prefix + "upload") if source == "upload" else None
    return source, upload


def text_source(source: str, upload: Any) -> TokenData:
    """The training text a page chose: the built-in corpus, or an uploaded UTF-8 file."""
    if source != "upload":
        return load_builtin()
    if upload is None:
        raise ExperimentError("upload a UTF-8 text file first (or choose the built-in corpus)")
    return load_user_text(upload.getvalue(), name=upload.name)


def live_run_note(
    cfg: ModelConfig, run_cfg: ModelConfig, both_arms: bool = False, whose: str = "the sidebar's"
) -> str:
    """What a page's live runs use: the scaled-down model and ``whose`` recipe (``cfg``'s);
    with ``both_arms``, how the Post-LN and Pre-LN arms of it differ."""
    note = (
        f"Live runs use **d={run_cfg.d_model}, {run_cfg.n_layers} blocks, {run_cfg.n_heads} "
        f"heads / {run_cfg.n_kv_heads} KV, FFN {ffn_label(run_cfg)}, vocab "
        f"{run_cfg.vocab_size}** (byte-level: one token per UTF-8 byte) with {whose} "
        f"recipe ({cfg.norm_type}, {cfg.pos_encoding} positions, {cfg.ffn_type}, "
        f"{'biases' if cfg.bias else 'no biases'}, {cfg.init} init"
        f"{', embeddings × √d' if cfg.embed_scale else ''})."
    )
    if both_arms:
        note += (
            " Both arrangements share the weights; they differ in norm_position and, as in "
            f"Xiong et al. 2020 and LLaMA, in the final norm whatever {whose} "
            f"final_norm ({'on' if cfg.final_norm else 'off'}): the Pre-LN arm always "
            "normalises before lm_head; the Post-LN arm, whose last block already ends "
            "with a norm, gets none on top of it (no LN(LN(x)))."
        )
    return note + f" On the CPU a run is limited to {CPU_FLOP_BUDGET / 1e12:.0f} TFLOP."


def ffn_label(cfg: ModelConfig) -> str:
    """The FFN in a few words: its width, or the experts and the top-k."""
    if cfg.is_moe:
        return f"{cfg.n_experts} experts of {cfg.expert_ffn_hidden}, top-{cfg.experts_per_token}"
    return str(cfg.ffn_hidden)
