"""The Live pass page's sections: the live-run size (the sidebar's model or a scaled-down copy,
device, dtype, sequence, batch, timed steps; mirrored in the URL as live.<name>), one real
training step and the KV-cache decoding benchmark, each under the job slot behind its button."""

from __future__ import annotations

import streamlit as st

from ... import analysis, experiments
from ...analysis import derive, derive_measured, derive_memory
from ...config import LIMITS, MAX_BATCH, ModelConfig, live_config
from ...errors import LabError
from ...runtime.devices import PAGE_DEVICES, device_name, pick_device
from ...runtime.precision import DTYPES
from ...train.budgets import CPU_FLOP_BUDGET, guard, live_workload, runs_live_quickly
from ...validation.device import DeviceCalibration, PassTiming
from ..derivations import show_equation
from ..runs import ffn_label, keep_experiment, run_with_status, show_experiment
from ..state import KEY_DECODE, KEY_LIVE_PASS, Selection
from ..widgets import Link, bounded_number, choice_link, int_link, link_widgets, live_size_box

MODELS = {
    "sidebar": "the sidebar's model",
    "small": "a scaled-down copy (d 64, vocab 256, the sidebar's recipe, attention kind and "
    "queries per KV head)",
}


def _links(selection: Selection) -> list[Link]:
    """The live widgets as mirrored in the URL (live.model, live.seq_len, …); by default the
    sidebar's model when it runs quickly, else the scaled-down copy."""
    cfg = selection.cfg
    quick = runs_live_quickly(cfg, selection.seq_len, selection.batch)
    live_seq, live_batch = live_workload(selection.seq_len, selection.batch)
    return [
        choice_link("model", MODELS, "sidebar" if quick else "small"),
        int_link("n_layers", min(cfg.n_layers, 4), 1, 96),
        choice_link("device", PAGE_DEVICES, "auto"),
        choice_link("dtype", DTYPES, "fp32"),
        int_link("seq_len", live_seq, 1, LIMITS["max_seq_len"]),
        int_link("batch", live_batch, 1, MAX_BATCH),
        int_link("iters", 2, 1, 50),
        int_link("new_tokens", 8, 1, 256),
    ]


def _live_model(cfg: ModelConfig, prefix: str) -> ModelConfig:
    """The sidebar's model or its scaled-down copy, and what it is."""
    model_choice = st.radio(
        "model", list(MODELS), format_func=MODELS.get, key=prefix + "model", horizontal=True
    )
    if model_choice == "small":
        n_layers = bounded_number("blocks of the scaled-down copy", 1, 96, prefix + "n_layers")
        run_cfg = live_config(cfg, n_layers)
    else:
        run_cfg = cfg.replace(vision=None)  # the live model is the text decoder
    if cfg.vision is not None:
        st.caption(
            f"The live model builds the text decoder only: the {cfg.vision.kind} vision tower and "
            f"its projector are counted on the Parameters & FLOPs page, not run here."
        )
    st.caption(
        f"Live runs use d={run_cfg.d_model}, {run_cfg.n_layers} blocks, "
        f"{run_cfg.n_heads} heads / {run_cfg.n_kv_heads} KV, FFN {ffn_label(run_cfg)}, "
        f"vocab {run_cfg.vocab_size:,} ({analysis.count_params(run_cfg).total:,} "
        f"parameters). On the CPU a run is limited to "
        f"{CPU_FLOP_BUDGET / 1e12:.0f} TFLOP."
    )
    return run_cfg


def formulas(run_cfg: ModelConfig, settings: dict) -> None:
    """What a pass measures, defined, and what it is held to, with the live model's numbers:
    the initial loss ≈ ln V and the KV bytes per token its decoding caches (× B × tokens)."""
    st.latex(derive_measured.live_definitions())
    show_equation(
        (None, derive.initial_loss(run_cfg.vocab_size), "uniform prediction"),
        (r"\text{KV bytes/token}", derive_memory.kv_bytes_per_token(run_cfg, settings["dtype"])),
    )


def setup(selection: Selection, prefix: str) -> tuple[ModelConfig, dict]:
    """The live-run size box: the model the runs use and their settings (device, dtype,
    seq_len, batch, iters)."""
    links = _links(selection)
    with live_size_box():
        link_widgets("live", prefix, links)
        run_cfg = _live_model(selection.cfg, prefix)
        cols = st.columns(5)
        device = cols[0].selectbox(
            "device", PAGE_DEVICES, key=prefix + "device", help="auto: CUDA, then Apple MPS, then the CPU"
        )
        dtype = cols[1].selectbox(
            "dtype",
            tuple(DTYPES),
            key=prefix + "dtype",
            help="fp32; or bf16/fp16 autocast with fp32 weights, grads and "
            "AdamW state (mixed precision). fp16 only on a GPU.",
        )
        seq_len = bounded_number(
            "sequence T",
            1,
            run_cfg.max_seq_len,
            prefix + "seq_len",
            cols[2],
            why=" (the live model's max_seq_len)",
        )
        batch = bounded_number("batch B", 1, MAX_BATCH, prefix + "batch", cols[3])
        iters = bounded_number("timed steps", 1, 50, prefix + "iters", cols[4])
    settings = {"device": device, "dtype": dtype, "seq_len": seq_len, "batch": batch, "iters": iters}
    return run_cfg, settings


CALIBRATIONS = "llama_lab.device_calibrations"  # session: (device name, dtype) → DeviceCalibration


def _calibration(device: str, dtype: str) -> DeviceCalibration | None:
    """This session's calibration of ``device`` in ``dtype``, if a pass has made one."""
    try:
        dev = pick_device(device)
    except LabError:
        return None
    return st.session_state.get(CALIBRATIONS, {}).get((device_name(dev), dtype))


def _calibrate(live, run_cfg: ModelConfig) -> None:
    """Add a live pass's timings to its device's calibration."""
    calibrations = st.session_state.setdefault(CALIBRATIONS, {})
    key = (live.device_name, live.dtype)
    start = DeviceCalibration(*key, overlapped=live.device.startswith("cuda"), peak_flops=live.peak_flops)
    calibrations[key] = calibrations.get(key, start).with_pass(
        PassTiming.of(run_cfg, live.seq_len, live.batch, live)
    )


def training_step_section(run_cfg: ModelConfig, settings: dict, prefix: str) -> None:
    """One training step of ``run_cfg``, timed phase by phase, behind its button; once a pass
    has calibrated the device, the next step's time is predicted before it runs and shown
    beside what it measured."""
    device, dtype, iters = settings["device"], settings["dtype"], settings["iters"]
    seq_len, batch = settings["seq_len"], settings["batch"]
    calibration = _calibration(device, dtype)
    predicted_ms = None
    if calibration is not None:
        predicted_ms = 1e3 * calibration.predict_step_s(run_cfg, seq_len, batch)
        st.caption(f"The next step should take {predicted_ms:,.1f} ms: {calibration.label}.")
    if st.button("Run the training step", type="primary", key=prefix + "run_live"):

        def live(progress):
            guard(
                run_cfg,
                seq_len,
                batch,
                device,
                dtype=dtype,
                passes=iters + 3,
                what=f"a training step of this model (B={batch}, T={seq_len}, {dtype})",
                hint="choose the scaled-down copy, fewer blocks, a smaller batch or sequence, or a GPU",
            )
            live_settings = experiments.LiveSettings(device=device, dtype=dtype, iters=iters)
            return experiments.live_pass(run_cfg, seq_len, batch, live_settings, progress=progress)

        result = run_with_status("Live pass", live)
        if result is not None:
            kept = dict(settings)
            if predicted_ms is not None and calibration is not None:
                kept |= {"predicted_step_ms": predicted_ms, "calibration": calibration.label}
            keep_experiment("live_pass", result, run_cfg, kept)
            _calibrate(result, run_cfg)
    show_experiment(KEY_LIVE_PASS, run_cfg, settings, prefix)


def _contexts(run_cfg: ModelConfig, new_tokens: int, prefix: str) -> list[int]:
    """The prompts' context lengths (the last four choices until some are picked)."""
    options = experiments.context_choices(run_cfg.max_seq_len, new_tokens)
    st.session_state[prefix + "contexts"] = [
        c for c in st.session_state.get(prefix + "contexts", options[-4:]) if c in options
    ] or options[-4:]
    return st.multiselect("context lengths", options, key=prefix + "contexts")


def decode_section(run_cfg: ModelConfig, settings: dict, prefix: str) -> None:
    """Greedy decoding with the KV cache for each context length, behind its button."""
    device, dtype, batch = settings["device"], settings["dtype"], settings["batch"]
    new_tokens = bounded_number("new tokens per prompt", 1, 256, prefix + "new_tokens")
    contexts = _contexts(run_cfg, new_tokens, prefix)
    decode_settings = {
        "device": device,
        "dtype": dtype,
        "batch": batch,
        "new_tokens": new_tokens,
        "contexts": sorted(contexts),
    }
    if st.button("Run the decode benchmark", type="primary", key=prefix + "run_decode"):

        def decode(progress):
            experiments.check_decode_budget(run_cfg, contexts, batch, new_tokens, device)
            return experiments.decode_benchmark(
                run_cfg,
                contexts,
                batch=batch,
                device=device,
                dtype=dtype,
                new_tokens=new_tokens,
                progress=progress,
            )

        result = run_with_status("Decode benchmark", decode)
        if result is not None:
            keep_experiment("decode", result, run_cfg, decode_settings)
    show_experiment(KEY_DECODE, run_cfg, decode_settings, prefix)
