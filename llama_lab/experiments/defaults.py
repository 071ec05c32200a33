"""The measurements a page shows first, as the page builds them and as ``tools/premeasure.py``
ships them: one definition of each default's config and settings, so that the page finds the
shipped entry (``premeasured.lookup``) for exactly what it would have run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, TypedDict

from ..analysis import count_flops
from ..config import ModelConfig, arrangement, live_config, regime_recipe
from ..model import CausalLM
from ..train.data import TokenData, load_builtin
from ..train.loop import TrainRun, TrainSettings
from ..units import Progress
from . import premeasured
from .depth import DepthSweep, depth_sweep, sweep_config
from .gradient_norms import GradNormSeeds, gradnorms_over_seeds
from .inside import INSIDE_DEFAULTS, inside_config, inside_settings, trained_inside
from .premeasured import entry_key
from .seeds import DEFAULT_SEEDS, seed_list
from .warmup import WARMUP_DEFAULTS, warmup_contrast


class GradientPage(TypedDict):
    regime: str
    d_model: int
    n_layers: int
    seq_len: int
    batch: int
    seeds: int
    seed: int
    data: str
    device: str
    depths: tuple[int, ...]


# The Gradient norms page's live-run size box, as it opens (the URL's grad.* defaults).
GRADIENT_PAGE = GradientPage(
    regime="theory",
    d_model=128,
    n_layers=6,
    seq_len=64,
    batch=4,
    seeds=DEFAULT_SEEDS,
    seed=0,
    data="builtin",
    device="auto",
    depths=(2, 4, 8, 12),
)
INSIDE_ARRANGEMENTS = ("sidebar", "pre", "post")


def gradient_config(sidebar: ModelConfig, regime: str, d_model: int, n_layers: int, seq_len: int):
    """The setting's recipe on the sidebar's model (``base``) and it at the live size."""
    base = regime_recipe(sidebar, regime)
    return base, live_config(base, n_layers, d_model, seq_len)


def size_settings(seq_len: int, batch: int, seeds: tuple[int, ...], tokens: str, device: str) -> dict:
    """The settings every run of the Gradient norms page is kept (and looked up) under."""
    return {"seq_len": seq_len, "batch": batch, "seeds": tuple(seeds), "tokens": tokens, "device": device}


def depth_settings(size: dict, depths: tuple[int, ...]) -> dict:
    return {**size, "depths": tuple(depths)}


def warmup_config(base: ModelConfig) -> ModelConfig:
    """``base``'s recipe at the warmup contrast's size (WARMUP_DEFAULTS)."""
    w = WARMUP_DEFAULTS
    return live_config(base, w["n_layers"], w["d_model"], w["seq_len"])


def warmup_train_settings(steps: int, lr: float, warmup_steps: int, device: str) -> TrainSettings:
    """How each arm of the warmup contrast trains (at WARMUP_DEFAULTS' sequence and batch)."""
    w = WARMUP_DEFAULTS
    return TrainSettings(
        steps=steps, lr=lr, warmup_steps=warmup_steps, seq_len=w["seq_len"], batch=w["batch"], device=device
    )


def warmup_settings(steps: int, lr: float, warmup_steps: int, seeds: tuple[int, ...], device: str) -> dict:
    return {"steps": steps, "lr": lr, "warmup_steps": warmup_steps, "seeds": tuple(seeds), "device": device}


def default_warmup_choice(device: str = "auto") -> tuple[ModelConfig, dict]:
    """The warmup contrast at its defaults in the theory setting: what decides the seed's
    warmup claim until a session measures its own (the Seed claims page, the report, the CLI)."""
    w = WARMUP_DEFAULTS
    cfg = warmup_config(regime_recipe(ModelConfig(), "theory"))
    seeds = tuple(seed_list(0, DEFAULT_SEEDS))
    return cfg, warmup_settings(w["steps"], w["lr"], w["warmup_steps"], seeds, device)


def shipped_warmup() -> "premeasured.Premeasured | None":
    """The default warmup contrast as shipped pre-measured (a ``Premeasured``), or None."""
    return premeasured.lookup("warmup", *default_warmup_choice())


def inside_arrangement(sidebar: ModelConfig, choice: str) -> ModelConfig:
    """The Inside the model page's small copy for the norm position ``choice`` (the sidebar's,
    or Pre-LN / Post-LN arranged as on the Gradient norms page)."""
    return inside_config(sidebar if choice == "sidebar" else arrangement(sidebar, choice))


def text(tokens: str) -> TokenData | None:
    """The page's token source: the built-in text, or None for random token ids."""
    return load_builtin() if tokens == "builtin" else None


def inside_flops(cfg: ModelConfig, steps: int) -> float:
    s = inside_settings(steps)
    return steps * count_flops(cfg, s["seq_len"], s["batch"]).training_step


def _gradnorms_work(cfg: ModelConfig, seeds: tuple[int, ...]) -> Callable[[Progress | None], GradNormSeeds]:
    """The Gradient norms page's run of ``cfg`` over ``seeds`` at its default size."""
    g = GRADIENT_PAGE
    return lambda p: gradnorms_over_seeds(
        cfg, g["seq_len"], g["batch"], seeds, text(g["data"]), g["device"], p
    )


def _depth_sweep_work(sweep: ModelConfig, seeds: tuple[int, ...]) -> Callable[[Progress | None], DepthSweep]:
    """The page's depth sweep of ``sweep`` over its default depths and ``seeds``."""
    g = GRADIENT_PAGE
    return lambda p: depth_sweep(
        sweep, g["depths"], g["seq_len"], g["batch"], seeds, text(g["data"]), g["device"], p
    )


def _inside_work(cfg: ModelConfig, steps: int) -> Callable[[Progress | None], tuple[CausalLM, TrainRun]]:
    """Inside the model's small copy of ``cfg`` trained ``steps`` steps on the CPU."""
    return lambda p: trained_inside(cfg, steps, "cpu", progress=p)


@dataclass(frozen=True)
class DefaultRun:
    """One shipped default: what the page looks it up by, and how to measure it."""

    kind: str
    config: ModelConfig
    settings: dict
    work: Callable[[Progress | None], Any]  # → the result (the trained copy: (model, run))
    flops: float  # training FLOPs of the work (forward + backward per pass)


def default_runs(sidebar: ModelConfig | None = None) -> list[DefaultRun]:
    """Every measurement the pages show first for the sidebar's model ``sidebar`` (default: the
    app's default model): the Gradient norms page's three settings and their depth sweeps, the
    warmup contrast of the seed claim, and Inside the model's trained copy per arrangement."""
    sidebar = sidebar or ModelConfig()
    g = GRADIENT_PAGE
    seeds = tuple(seed_list(g["seed"], g["seeds"]))
    size = size_settings(g["seq_len"], g["batch"], seeds, g["data"], g["device"])
    depths = g["depths"]
    runs = []
    for regime in ("theory", "llama", "sidebar"):
        base, cfg = gradient_config(sidebar, regime, g["d_model"], g["n_layers"], g["seq_len"])
        step = count_flops(cfg, g["seq_len"], g["batch"]).training_step
        runs.append(
            DefaultRun(
                "gradnorms",
                cfg,
                size,
                _gradnorms_work(cfg, seeds),
                2 * len(seeds) * step,
            )
        )
        sweep = sweep_config(cfg, depths)
        runs.append(
            DefaultRun(
                "depth_sweep",
                sweep,
                depth_settings(size, depths),
                _depth_sweep_work(sweep, seeds),
                2
                * len(seeds)
                * sum(depths)
                / max(depths)
                * count_flops(sweep, g["seq_len"], g["batch"]).training_step,
            )
        )
    w = WARMUP_DEFAULTS
    warm = warmup_config(regime_recipe(sidebar, "theory"))
    runs.append(
        DefaultRun(
            "warmup",
            warm,
            warmup_settings(w["steps"], w["lr"], w["warmup_steps"], seeds, g["device"]),
            lambda p: warmup_contrast(
                warm,
                warmup_train_settings(w["steps"], w["lr"], w["warmup_steps"], g["device"]),
                seeds,
                load_builtin(),
                p,
            ),
            3 * w["steps"] * len(seeds) * count_flops(warm, w["seq_len"], w["batch"]).training_step,
        )
    )
    steps = INSIDE_DEFAULTS["steps"]
    for choice in INSIDE_ARRANGEMENTS:
        cfg = inside_arrangement(sidebar, choice)
        runs.append(
            DefaultRun(
                "inside",
                cfg,
                inside_settings(steps),
                _inside_work(cfg, steps),
                inside_flops(cfg, steps),
            )
        )
    unique = {(r.kind, entry_key(r.kind, r.config, r.settings)): r for r in reversed(runs)}
    return list(reversed(unique.values()))  # a setting equal to another (LLaMA's and the demo's) once
