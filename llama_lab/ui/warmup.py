"""The warmup contrast as two pages measure it: the Gradient norms page's Warmup tab runs it with
its own settings (``warmup_work``), and the Seed claims page decides the tutorial's warmup row
with this session's entry (``session_warmup``: its own run, else the default shipped
pre-measured) or measures the default (``default_warmup``). Every run goes through the same
cached measurement (``cached.warmup_measured``)."""

from __future__ import annotations

from typing import Any

from ..config import ModelConfig
from ..experiments import WARMUP_DEFAULTS, WarmupContrast
from ..experiments.defaults import default_warmup_choice, shipped_warmup
from ..train.budgets import guard
from ..units import plural
from .cached import warmup_measured
from .runs import PREMEASURED, keep_experiment, run_with_status
from .state import EXPERIMENT_KEYS, session

W = WARMUP_DEFAULTS


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
            what=f"3 runs of {plural(steps, 'step')} × {plural(len(seeds), 'seed')}",
        )
        return warmup_measured(
            cfg, steps, lr, warmup_steps, seeds, (W["seq_len"], W["batch"]), device, _progress=progress
        )

    return work


def session_warmup() -> Any:
    """This session's warmup contrast entry: its own run, else the default one shipped with the
    package (kept as this session's entry, labelled pre-measured), else None."""
    entry = session().get(EXPERIMENT_KEYS["warmup"])
    if entry is None:
        cfg, settings = default_warmup_choice()
        shipped = shipped_warmup()
        if shipped is not None:
            entry = keep_experiment("warmup", shipped.result, cfg, {**settings, PREMEASURED: shipped.label})
    return entry


def default_warmup(device: str = "auto") -> WarmupContrast | None:
    """Measure the default contrast here (the Seed claims page's button) and keep it."""
    cfg, settings = default_warmup_choice(device)
    result = run_with_status(
        "Warmup contrast",
        warmup_work(
            cfg,
            W["steps"],
            W["lr"],
            W["warmup_steps"],
            settings["seeds"],
            device,
            "use a GPU, or fewer seeds on the Gradient norms page",
        ),
    )
    if result is not None:
        keep_experiment("warmup", result, cfg, settings)
    return result
