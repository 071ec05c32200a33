"""The Gradient norms page's heavier tabs: the warmup contrast (its widgets and run, and the
seed claim it decides on the Seed claims page, both from the same cached measurement) and the
training runs over seeds; and which measurements are small enough to run on view."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import streamlit as st

from .. import experiments
from ..analysis import count_flops
from ..config import ModelConfig, live_config, regime_recipe
from ..experiments import DEFAULT_SEEDS, WARMUP_DEFAULTS, WarmupContrast, norm_position_specs, seed_list
from ..train.budgets import guard
from ..train.schedules import SCHEDULES
from .cached import warmup_measured
from .runs import keep_experiment, measure_on_view, run_with_status, show_experiment, text_choice, text_source
from .state import EXPERIMENT_KEYS, _state

W = WARMUP_DEFAULTS
AUTO_RUN_FLOPS = 1e11  # a page measures on view what stays under this (a few seconds on a CPU)


def small_run(cfg: ModelConfig, seq_len: int, batch: int, passes: float) -> bool:
    """Whether ``passes`` training steps of ``cfg`` are small enough to run on view."""
    return passes * count_flops(cfg, seq_len, batch).training_step <= AUTO_RUN_FLOPS


def warmup_config(base: ModelConfig) -> ModelConfig:
    """``base``'s recipe at the contrast's size (WARMUP_DEFAULTS)."""
    return live_config(base, W["n_layers"], W["d_model"], W["seq_len"])


def warmup_work(
    cfg: ModelConfig, steps: int, lr: float, warmup_steps: int, seeds: tuple, device: str, hint: str
):
    """The contrast as a run for ``run_with_status``: the guard, then the cached measurement."""

    def work(progress):
        guard(
            cfg,
            W["seq_len"],
            W["batch"],
            device,
            passes=3 * steps * len(seeds),
            hint=hint,
            what=f"3 runs of {steps} steps × {len(seeds)} seeds",
        )
        return warmup_measured(
            cfg, steps, lr, warmup_steps, seeds, (W["seq_len"], W["batch"]), device, _progress=progress
        )

    return work


def warmup_tab(prefix: str, base: ModelConfig, seeds: tuple, device: str, hint: str) -> None:
    """Widgets, run and result of the warmup contrast on the Gradient norms page."""
    cfg = warmup_config(base)
    st.markdown(
        f"Post-LN **without** warmup, Post-LN **with** linear warmup and Pre-LN **without** "
        f"warmup, AdamW with cosine decay on the built-in text, the same batches in each seed, "
        f"at d={cfg.d_model}, {cfg.n_layers} blocks, B={W['batch']}, T={W['seq_len']} (the "
        f"setting above). The seed tutorial's table says Post-LN needs warmup and Pre-LN does "
        f"not; the defaults are where that shows at this size in the theory setting."
    )
    cols = st.columns(3)
    steps = cols[0].number_input("steps", 1, 2000, key=prefix + "w_steps")
    lr = cols[1].number_input("peak learning rate", 1e-6, 1.0, format="%.1e", key=prefix + "w_lr")
    warmup = cols[2].number_input("warmup steps", 1, 2000, key=prefix + "w_warmup")
    settings = {"steps": steps, "lr": lr, "warmup_steps": warmup, "seeds": seeds, "device": device}
    measure_on_view(
        "warmup",
        cfg,
        settings,
        warmup_work(cfg, steps, lr, warmup, seeds, device, hint),
        auto=False,
        button="Train the three arms",
        prefix=prefix,
        not_on_view="Not trained in this session yet (a few minutes on a CPU).",
    )


def session_warmup() -> Any:
    """This session's warmup contrast entry, if it ran one."""
    return _state().get(EXPERIMENT_KEYS["warmup"])


def default_warmup(device: str = "auto") -> WarmupContrast | None:
    """The contrast at its defaults in the theory setting (the claim's measurement)."""
    cfg = warmup_config(regime_recipe(ModelConfig(), "theory"))
    seeds = tuple(seed_list(0, DEFAULT_SEEDS))
    result = run_with_status(
        "Warmup contrast",
        warmup_work(
            cfg,
            W["steps"],
            W["lr"],
            W["warmup_steps"],
            seeds,
            device,
            "use a GPU, or fewer seeds on the Gradient norms page",
        ),
    )
    if result is not None:
        keep_experiment(
            "warmup",
            result,
            cfg,
            {
                "steps": W["steps"],
                "lr": W["lr"],
                "warmup_steps": W["warmup_steps"],
                "seeds": seeds,
                "device": device,
            },
        )
    return result


def training_tab(prefix: str, run_cfg: ModelConfig, size: dict, device: str, hint: str) -> None:
    """Post-LN and Pre-LN, each without and with warmup, trained once per seed of ``size``."""
    seeds, seq_len, batch = size["seeds"], size["seq_len"], size["batch"]
    st.markdown(
        "Four short AdamW runs per seed — Post-LN and Pre-LN, each without and with "
        "linear warmup — on the same batches, every block's gradient norm recorded at "
        "every step. Byte-level text: **vocab_size = 256**."
    )
    cols = st.columns(5)
    steps = cols[0].number_input("steps", 1, 2000, key=prefix + "steps")
    lr = cols[1].number_input("peak learning rate", 1e-6, 1.0, format="%.1e", key=prefix + "lr")
    warmup = cols[2].number_input("warmup steps (the 'with warmup' runs)", 1, 2000, key=prefix + "warmup")
    schedule = cols[3].selectbox("schedule", SCHEDULES, key=prefix + "schedule")
    clip = cols[4].number_input(
        "gradient clipping (max norm, 0 = off)",
        0.0,
        1e6,
        step=0.5,
        key=prefix + "grad_clip",
        help="Every arm's gradients are scaled "
        "down to this total L2 norm when above it (the divergence hint)",
    )
    source, upload = text_choice(prefix)
    settings = {
        **size,
        "steps": steps,
        "lr": lr,
        "warmup_steps": warmup,
        "tokens": source,
        "schedule": schedule,
        "grad_clip": clip or None,
    }
    if st.button("Train the four runs", type="primary", key=prefix + "run_train"):

        def train(progress):
            text = text_source(source, upload)
            specs = [
                replace(spec, grad_clip=clip or None)
                for spec in norm_position_specs(run_cfg, lr, warmup, schedule)
            ]
            guard(
                run_cfg,
                seq_len,
                batch,
                device,
                passes=len(specs) * steps * len(seeds),
                hint=hint,
                what=f"{len(specs)} runs of {steps} steps × {len(seeds)} seeds",
            )
            return experiments.compare_runs_over_seeds(
                specs, steps, seeds, data=text, seq_len=seq_len, batch=batch, device=device, progress=progress
            ), text.source

        outcome = run_with_status("Training", train)
        if outcome is not None:
            keep_experiment(
                "training", outcome[0], run_cfg, {**settings, "data": outcome[1]}, prefix + "training"
            )
    show_experiment(prefix + "training", run_cfg, settings, prefix)
