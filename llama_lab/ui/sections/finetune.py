"""The Fine-tuning page's sections: the recipe (method, rank, alpha, targets, optimizer,
checkpointing, GPU, context, batch), what one GPU's step needs and whether it fits, its peak by
part, the peak against context with the GPU's memory as a line, the analysis' notes, and the
live run on the preset's small copy (start, stop, the loss per step, measured vs predicted)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from ...analysis import DEFAULT_GPU
from ...analysis.finetune import (
    ALL_LINEAR,
    METHODS,
    OPTIMIZERS,
    FinetuneSpec,
    default_targets,
    target_choices,
)
from ...config import LIMITS, MAX_BATCH, PRESETS, ModelConfig
from ...config.hf.quant import StoredQuant
from ...errors import LabError
from ...experiments.finetune import (
    FINETUNE_DEFAULTS,
    MAX_FINETUNE_STEPS,
    FinetuneSettings,
    finetune_config,
    finetune_run,
)
from ...figures.finetune import curve_lengths, memory_vs_context, parts_bar, parts_frame
from ...report import FinetuneWorkload
from ...runtime.hardware import GPU, GPUS
from ...units import human_bytes, human_count, human_params, plural
from ...validation.intervals import INTERVAL_LEVEL
from ..cached import finetune_curve, finetune_prediction, show_table
from ..runs import keep_experiment, run_with_status, show_experiment
from ..state import EXPERIMENT_KEYS, KEY_FINETUNE, KEY_STORED_QUANT, Selection, session
from ..widgets import show_caption, show_error, show_info

METHOD_LABELS = {
    "lora": "LoRA",
    "qlora": "QLoRA (NF4 base, double quantisation)",
    "dora": "DoRA (LoRA + magnitudes)",
    "full": "full fine-tuning",
}
OPTIMIZER_LABELS = {
    "adamw": "AdamW (float32 states)",
    "adamw8bit": "8-bit AdamW (bitsandbytes)",
    "paged_adamw8bit": "paged 8-bit AdamW",
}
LIVE_PRESET = "seed-demo"  # an uploaded model's live runs use this preset's small copy


@dataclass(frozen=True)
class Recipe:
    """The page's choice: a valid spec, the GPU, the context and the batch."""

    spec: FinetuneSpec
    gpu: GPU
    seq_len: int
    batch: int
    stored: StoredQuant | None


def stored_checkpoint() -> StoredQuant | None:
    """The uploaded checkpoint's stored format (its quantization_config), if it declared one."""
    return session().get(KEY_STORED_QUANT)


def _targets_widget(cfg: ModelConfig, prefix: str) -> tuple[str, ...] | str:
    """The target modules: the family's linear layers and all-linear. The first choice is
    ``default_targets``, and follows the model while the user has not changed it; a choice the
    model lacks (after switching models) stays shown, and the analysis refuses it by name."""
    state, key, shown_default = session(), prefix + "targets", prefix + "targets_default"
    default = default_targets(cfg)
    default_list = [default] if isinstance(default, str) else list(default)
    if key not in state or state[key] == state.get(shown_default):
        state[key] = default_list
    state[shown_default] = default_list
    options = list(dict.fromkeys([*target_choices(cfg), *state[key]]))
    chosen = st.multiselect(
        "target modules",
        options,
        key=key,
        help="PEFT's names: a module is targeted when its full name ends with one of them; "
        "all-linear = every nn.Linear but the output layer",
    )
    return ALL_LINEAR if ALL_LINEAR in chosen else tuple(chosen)


def recipe(selection: Selection, prefix: str) -> Recipe | None:
    """The recipe's widgets; None (with the rule broken, in one line) when it is refused."""
    cfg, state = selection.cfg, session()
    state.setdefault(prefix + "gpu", DEFAULT_GPU)
    state.setdefault(prefix + "seq_len", selection.seq_len)
    state.setdefault(prefix + "batch", selection.batch)
    top = st.columns(4)
    method: str = top[0].selectbox(
        "method", METHODS, format_func=METHOD_LABELS.__getitem__, key=prefix + "method"
    )
    adapters = method != "full"
    rank = top[1].number_input("rank r", 0, 1_048_576, 8, key=prefix + "rank", disabled=not adapters)
    alpha = top[2].number_input(
        "alpha",
        0.0,
        1e6,
        16.0,
        key=prefix + "alpha",
        disabled=not adapters,
        help="scales the update by alpha / r; it changes no count on this page",
    )
    optimizer: str = top[3].selectbox(
        "optimizer", OPTIMIZERS, format_func=OPTIMIZER_LABELS.__getitem__, key=prefix + "optimizer"
    )
    targets = _targets_widget(cfg, prefix) if adapters else ALL_LINEAR
    row = st.columns(4)
    gpu = row[0].selectbox("GPU", list(GPUS), key=prefix + "gpu")
    seq_len = row[1].number_input(
        f"context T (model max {cfg.max_seq_len:,})", 1, LIMITS["max_seq_len"], key=prefix + "seq_len"
    )
    batch = row[2].number_input("batch B", 1, MAX_BATCH, key=prefix + "batch")
    checkpointing = row[3].toggle("gradient checkpointing", key=prefix + "checkpointing")
    if adapters and not targets:
        show_error("This recipe is refused: targets must name at least one module (or all-linear)")
        return None
    try:
        spec = FinetuneSpec(
            method=method,
            rank=int(rank),
            alpha=float(alpha),
            targets=targets if adapters else ALL_LINEAR,
            optimizer=optimizer,
            grad_checkpointing=checkpointing,
            dtype="bf16",
        )
    except LabError as exc:
        show_error(f"This recipe is refused: {exc}")
        return None
    chosen = Recipe(spec, GPUS[gpu], int(seq_len), int(batch), stored_checkpoint())
    state[KEY_FINETUNE] = (cfg, FinetuneWorkload(spec, gpu, chosen.seq_len, chosen.batch, chosen.stored))
    return chosen


def predicted(cfg: ModelConfig, r: Recipe) -> dict | None:
    """``predict_finetune`` for the recipe; None (the rule, in one line) when it is refused."""
    try:
        return finetune_prediction(cfg, r.gpu, r.spec, r.seq_len, r.batch, r.stored)
    except LabError as exc:
        show_error(f"This recipe is refused: {exc}")
        return None


def _or_none(value: int | None, unit: str) -> str:
    return "none" if value is None else plural(value, unit)


def summary_section(cfg: ModelConfig, r: Recipe, answer: dict) -> None:
    """Trainable and frozen parameters, the peak with its interval, whether it fits, the
    longest context and the largest batch that fit, tokens/s with its interval."""
    peak, rate = answer["peak_bytes"], answer["tokens_per_s"]
    trainable, frozen = answer["trainable_params"], answer["frozen_params"]
    total = trainable if r.spec.method == "full" else frozen
    longest, largest = answer["longest_seq_len_that_fits"], answer["largest_batch_that_fits"]
    top = st.columns(3)
    top[0].metric(
        "Trainable parameters",
        human_params(trainable),
        f"{trainable / max(1, total):.3%} of {human_params(total)}",
        delta_arrow="off",
        delta_color="off",
        help=f"{trainable:,}, as PEFT's get_nb_trainable_parameters() counts them",
    )
    top[1].metric(
        "Frozen parameters",
        human_params(frozen),
        help=f"{frozen:,}" + (" (full fine-tuning freezes none)" if not frozen else ""),
    )
    top[2].metric(
        "Peak of a step",
        human_bytes(peak["estimate"]),
        f"{human_bytes(peak['low'])} – {human_bytes(peak['high'])}",
        delta_arrow="off",
        delta_color="off",
        help=f"{peak['estimate']:,} bytes; interval at level {INTERVAL_LEVEL:.0%}: {answer['interval_from']}",
    )
    row = st.columns(4)
    usable = answer["gpu_memory_bytes"]
    row[0].metric(
        f"Fits one {r.gpu.name}?",
        "yes" if answer["fits"] else "no",
        f"{peak['estimate'] / usable:.0%} of {human_bytes(usable)} usable",
        delta_arrow="off",
        delta_color="off",
    )
    row[1].metric(f"Longest context that fits (B = {r.batch:,})", _or_none(longest, "token"))
    row[2].metric(f"Largest batch that fits (T = {r.seq_len:,})", _or_none(largest, "sequence"))
    row[3].metric(
        "Tokens/s (estimate)",
        human_count(rate["estimate"]),
        f"{human_count(rate['low'])} – {human_count(rate['high'])}",
        delta_arrow="off",
        delta_color="off",
        help=f"bound (the roofline): {human_count(rate['bound'])} tokens/s",
    )


def parts_section(r: Recipe, answer: dict, prefix: str) -> None:
    st.plotly_chart(parts_bar(answer["by_part"], r.gpu), key=prefix + "parts")
    phases = answer["phases"]
    show_table(parts_frame(answer["by_part"]), width="stretch")
    show_caption(
        f"The parts as counted, at the largest of three moments: the start of backward "
        f"({human_bytes(phases['backward_start'])}: every activation, the logits and the first "
        f"gradients alive), backward's high point ({human_bytes(phases['backward_peak'])}: in the "
        f"last block's FFN, its temporaries alive) and the optimizer step "
        f"({human_bytes(phases['optimizer_step'])}: every gradient alive, the activations freed). "
        f"The peak above is that count × {answer['peak_bytes']['factor']:.2f}, the factor fitted on public "
        "fine-tuning rows (the caching allocator's reserve)."
    )


def curve_section(cfg: ModelConfig, r: Recipe, answer: dict, prefix: str) -> None:
    """The peak at a bounded set of context lengths up to the model's max (the estimate that
    ``answer``'s fits is judged by), the GPU's line."""
    lengths = curve_lengths(cfg, r.seq_len)
    factor = answer["peak_bytes"]["factor"]
    frame = finetune_curve(cfg, r.spec, lengths, r.batch, r.stored, factor)
    shown = r.seq_len if r.seq_len <= cfg.max_seq_len else None
    st.plotly_chart(memory_vs_context(frame, r.gpu, shown), key=prefix + "curve")
    show_caption(
        f"finetune_memory × {factor:.2f} at {len(lengths)} context lengths from {lengths[0]:,} to the "
        f"model's {cfg.max_seq_len:,}, batch {r.batch:,}; the dashed line is what a process can fill on "
        f"one {r.gpu.name} (its memory less the CUDA context)."
    )


def notes_section(answer: dict) -> None:
    st.markdown("\n".join(f"- {note}" for note in answer["notes"]))


def _live_preset(selection: Selection) -> str:
    return selection.preset if selection.preset in PRESETS else LIVE_PRESET


def live_section(selection: Selection, r: Recipe | None, prefix: str) -> None:
    """The live run on the preset's small copy (nothing runs on view): Start, Stop, the loss
    per step as it comes, then measured against predicted."""
    preset = _live_preset(selection)
    spec = r.spec if r is not None else FinetuneSpec()
    cols = st.columns([1, 1, 2])
    steps = cols[0].number_input("steps", 1, MAX_FINETUNE_STEPS, 20, key=prefix + "live_steps")
    device = cols[1].selectbox("device", ("cpu", "auto"), key=prefix + "live_device")
    every = spec.method != "full" and cols[2].checkbox(
        "adapters on every linear layer",
        value=True,
        key=prefix + "live_all_linear",
        help="all-linear: on the small copy, rank 8 on q_proj, v_proj alone barely moves the loss "
        "in 20 steps; off: the recipe's targets above",
    )
    settings = FinetuneSettings(
        method=spec.method,
        rank=spec.rank,
        alpha=16.0 if spec.alpha is None else spec.alpha,
        targets=ALL_LINEAR if every else spec.targets,
        steps=int(steps),
        device=device,
    )
    run_cfg = finetune_config(preset, settings.seq_len)
    F = FINETUNE_DEFAULTS
    st.caption(
        f"The live copy of **{preset}**"
        + ("" if preset == selection.preset else " (the uploaded model has no live copy)")
        + f": its recipe at d_model {F['d_model']}, {F['n_layers']} blocks, byte vocabulary, "
        f"pre-trained {F['pretrain_steps']} AdamW steps on the first half of the built-in text, then "
        f"fine-tuned with this page's method and rank"
        + (" on every linear layer" if every else " and targets")
        + f" for {int(steps)} steps on the second "
        f"half (B = {settings.batch}, T = {settings.seq_len}, float32, chunked loss, AdamW)."
    )
    keyed = {"preset": preset, **{k: str(v) for k, v in vars(settings).items()}}
    buttons = st.columns([1, 1, 3])
    start = buttons[0].button("Start fine-tuning run", type="primary", key=prefix + "live_start")
    stop = buttons[1].button("Stop", key=prefix + "live_stop", help="stops a run at its next step")
    if stop:
        show_info("Stopped: the run ended at its last step; press Start to run again.")
    elif start:
        result = run_with_status("Fine-tuning run", lambda progress: _run_live(preset, settings, progress))
        if result is not None:
            keep_experiment("finetune", result, run_cfg, keyed)
    elif EXPERIMENT_KEYS["finetune"] not in session():
        st.caption("Nothing runs on view: press “Start fine-tuning run”.")
    show_experiment(EXPERIMENT_KEYS["finetune"], run_cfg, keyed, prefix)


def _run_live(preset: str, settings: FinetuneSettings, progress) -> object:
    """``finetune_run`` with the loss drawn as each step comes (each drawing is where a Stop or
    a rerun ends the run)."""
    chart = st.empty()
    losses: list[float] = []
    progress(0.0, f"pre-training the base ({settings.pretrain_steps} steps)")

    def on_step(update: dict) -> None:
        losses.append(update["loss"])
        progress(
            update["step"] / settings.steps,
            f"step {update['step']}/{settings.steps}: loss {update['loss']:.3f}",
        )
        chart.line_chart(pd.DataFrame({"loss": losses}, index=range(1, len(losses) + 1)), height=220)

    return finetune_run(preset, settings, on_step=on_step)
