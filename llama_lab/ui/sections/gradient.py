"""The Gradient norms page's sections: the live-run size (its widgets, the setting's recipe and
the seeds), Post-LN vs Pre-LN at initialisation, the ratio against depth, the warmup contrast (its
widgets; its run is ``ui.warmup``'s, shared with the Seed claims page) and the training runs over
seeds; the two Jacobians and Xiong et al.'s bound (the page's "why")."""

from __future__ import annotations

from dataclasses import dataclass, replace

import streamlit as st

from ... import experiments
from ...analysis import count_flops
from ...config import MAX_BATCH, REGIMES, ModelConfig
from ...experiments import WARMUP_DEFAULTS, norm_position_specs
from ...experiments.defaults import (
    GRADIENT_PAGE,
    depth_settings,
    gradient_config,
    size_settings,
    warmup_config,
    warmup_settings,
)
from ...runtime.devices import PAGE_DEVICES
from ...train.budgets import guard
from ...train.loop import TrainSettings
from ...train.schedules import SCHEDULES
from ...units import plural
from ..cached import depth_measured, gradnorms_measured
from ..runs import (
    keep_experiment,
    live_run_note,
    measure_on_view,
    run_with_status,
    set_defaults,
    show_experiment,
    text_choice,
    text_source,
)
from ..warmup import warmup_work
from ..widgets import bounded_number, choice_link, int_link, link_widgets, live_size_box

W = WARMUP_DEFAULTS
G = GRADIENT_PAGE
HINT = "use fewer layers, steps, seeds or depths, a smaller width, batch or sequence, or a GPU"


def training_flops(cfg: ModelConfig, seq_len: int, batch: int, passes: float) -> float:
    """FLOPs of ``passes`` training steps of ``cfg`` (what a button's expected time is of)."""
    return passes * count_flops(cfg, seq_len, batch).training_step


@dataclass(frozen=True)
class GradientSetup:
    """The page's choices for its live runs: ``base`` is the setting's recipe on the sidebar's
    model, ``run_cfg`` it at the live size; ``size`` holds seq_len, batch, seeds, tokens and
    device (the settings every run of the page is kept under)."""

    base: ModelConfig
    run_cfg: ModelConfig
    size: dict

    @property
    def workload(self) -> tuple:
        """``size``'s seeds, seq_len, batch and device."""
        return self.size["seeds"], self.size["seq_len"], self.size["batch"], self.size["device"]


def _initial_values(prefix: str) -> None:
    set_defaults(
        prefix,
        depths=list(G["depths"]),
        steps=30,
        lr=3e-3,
        warmup=10,
        schedule="cosine",
        source="builtin",
        grad_clip=0.0,
        w_steps=W["steps"],
        w_lr=W["lr"],
        w_warmup=W["warmup_steps"],
    )


def _link_size(prefix: str) -> None:
    link_widgets(
        "grad",
        prefix,
        [  # in the URL as grad.regime, grad.d_model, …
            choice_link("regime", list(REGIMES), G["regime"]),
            choice_link("d_model", experiments.WIDTH_CHOICES, G["d_model"]),
            int_link("n_layers", G["n_layers"], 1, 96),
            int_link("seq_len", G["seq_len"], 2, 8192),
            int_link("batch", G["batch"], 1, MAX_BATCH),
            int_link("seeds", G["seeds"], 1, experiments.MAX_SEEDS),
            int_link("seed", G["seed"], 0, 2**31 - 1),
            choice_link("data", ("builtin", "random"), G["data"]),
            choice_link("device", PAGE_DEVICES, G["device"]),
        ],
    )


def setup(cfg: ModelConfig, prefix: str) -> GradientSetup:
    """The live-run size box: the setting (theory, LLaMA init or the sidebar's recipe for
    ``cfg``), width, blocks, sequence, batch, seeds, tokens and device, mirrored in the URL as
    grad.<name>; and what the runs use."""
    _initial_values(prefix)
    with live_size_box():
        _link_size(prefix)
        regime = st.radio(
            "setting",
            list(REGIMES),
            format_func=REGIMES.get,
            horizontal=True,
            key=prefix + "regime",
            help="Theory: the setting of Xiong et al.'s Theorem 1. "
            "LLaMA init: why the picture differs there. Sidebar: your recipe.",
        )
        cols = st.columns(4) + st.columns(4)
        d_model = cols[0].selectbox("width d", experiments.WIDTH_CHOICES, key=prefix + "d_model")
        n_layers = bounded_number("blocks L", 1, 96, prefix + "n_layers", cols[1])
        seq_len = bounded_number("sequence T", 2, 8192, prefix + "seq_len", cols[2])
        batch = bounded_number("batch B", 1, MAX_BATCH, prefix + "batch", cols[3])
        n_seeds = bounded_number("seeds", 1, experiments.MAX_SEEDS, prefix + "seeds", cols[4])
        first = bounded_number("first seed", 0, 2**31 - experiments.MAX_SEEDS, prefix + "seed", cols[5])
        source = cols[6].selectbox(
            "tokens",
            ("builtin", "random"),
            key=prefix + "data",
            format_func={"builtin": "built-in text", "random": "random ids"}.__getitem__,
        )
        device = cols[7].selectbox("device", PAGE_DEVICES, key=prefix + "device")
        base, run_cfg = gradient_config(cfg, regime, d_model, n_layers, seq_len)
        st.info(
            live_run_note(
                base,
                run_cfg,
                both_arms=True,
                whose="the sidebar's" if regime == "sidebar" else "this setting's",
            )
        )
    seeds = tuple(experiments.seed_list(first, n_seeds))
    return GradientSetup(base, run_cfg, size_settings(seq_len, batch, seeds, source, device))


def init_tab(setup: GradientSetup, prefix: str) -> None:
    """Post-LN vs Pre-LN at initialisation over the seeds: shown at once where it is shipped
    (the defaults), measured on the button."""
    run_cfg, size = setup.run_cfg, setup.size
    seq_len, batch, seeds = size["seq_len"], size["batch"], size["seeds"]
    source, device = size["tokens"], size["device"]

    def measure(progress):
        guard(
            run_cfg,
            seq_len,
            batch,
            device,
            passes=2 * len(seeds),
            hint=HINT,
            what=f"{2 * len(seeds)} forward/backward passes (B={batch}, T={seq_len})",
        )
        return gradnorms_measured(run_cfg, seq_len, batch, seeds, source, device, _progress=progress)

    measure_on_view(
        "gradnorms",
        run_cfg,
        size,
        measure,
        button="Measure gradient norms",
        flops=training_flops(run_cfg, seq_len, batch, 2 * len(seeds)),
        prefix=prefix,
    )


def depth_tab(setup: GradientSetup, prefix: str) -> None:
    """The last block's gradient at initialisation against the depth L, both arrangements."""
    run_cfg, size = setup.run_cfg, setup.size
    seq_len, batch, seeds = size["seq_len"], size["batch"], size["seeds"]
    source, device = size["tokens"], size["device"]
    st.markdown(
        "The last block's ‖∇W_down‖ at initialisation for each depth L, both "
        "arrangements, every seed; slopes of log‖∇‖ against log L by least squares."
    )
    depths = tuple(sorted(st.multiselect("depths L", experiments.DEPTH_CHOICES, key=prefix + "depths")))
    sweep_settings = depth_settings(size, depths)
    sweep_cfg = experiments.sweep_config(run_cfg, depths)  # the sweep sets each depth

    def sweep(progress):
        experiments.check_depth_budget(sweep_cfg, depths, seq_len, batch, device, HINT, n_seeds=len(seeds))
        return depth_measured(sweep_cfg, depths, seq_len, batch, seeds, source, device, _progress=progress)

    measure_on_view(
        "depth_sweep",
        sweep_cfg,
        sweep_settings,
        sweep,
        button="Run the depth sweep",
        flops=training_flops(sweep_cfg, seq_len, batch, 2 * len(seeds) * sum(depths) / max(depths or [1])),
        prefix=prefix,
        not_on_view=None if len(depths) >= 2 else "Choose two depths or more.",
    )


def warmup_tab(setup: GradientSetup, prefix: str) -> None:
    """Widgets, run and result of the warmup contrast on the Gradient norms page."""
    seeds, device, hint = setup.size["seeds"], setup.size["device"], HINT
    cfg = warmup_config(setup.base)
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
    measure_on_view(
        "warmup",
        cfg,
        warmup_settings(steps, lr, warmup, seeds, device),
        warmup_work(cfg, steps, lr, warmup, seeds, device, hint),
        button="Train the three arms",
        prefix=prefix,
        flops=training_flops(cfg, W["seq_len"], W["batch"], 3 * steps * len(seeds)),
    )


def training_tab(setup: GradientSetup, prefix: str) -> None:
    """Post-LN and Pre-LN, each without and with warmup, trained once per seed of the setup."""
    run_cfg, size, (seeds, seq_len, batch, device) = setup.run_cfg, setup.size, setup.workload
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
                hint=HINT,
                what=f"{len(specs)} runs of {plural(steps, 'step')} × {plural(len(seeds), 'seed')}",
            )
            settings = TrainSettings(steps=steps, seq_len=seq_len, batch=batch, device=device)
            return experiments.compare_runs_over_seeds(
                specs, settings, seeds, data=text, progress=progress
            ), text.source

        outcome = run_with_status("Training", train)
        if outcome is not None:
            keep_experiment(
                "training", outcome[0], run_cfg, {**settings, "data": outcome[1]}, prefix + "training"
            )
    show_experiment(prefix + "training", run_cfg, settings, prefix)


def explain_norm_positions() -> None:
    """The Post-LN and Pre-LN Jacobians and Xiong et al.'s bound (the page's "why")."""
    st.latex(
        r"\text{Post-LN: } x_{l+1} = \mathrm{LN}\big(x_l + F(x_l)\big) \;\Rightarrow\; "
        r"\frac{\partial x_{l+1}}{\partial x_l} = \mathrm{LN}'\big(x_l + F(x_l)\big)"
        r"\,\big(I + F'(x_l)\big)"
    )
    st.latex(
        r"\text{Pre-LN: } x_{l+1} = x_l + F\big(\mathrm{LN}(x_l)\big) \;\Rightarrow\; "
        r"\frac{\partial x_{l+1}}{\partial x_l} = I + F'\big(\mathrm{LN}(x_l)\big)\,"
        r"\mathrm{LN}'(x_l)"
    )
    st.caption(
        "The seed writes the Pre-LN Jacobian as I + F′(LN(xₗ)); the chain rule adds the "
        "factor LN′(xₗ) inside the branch, but the identity term — the point — is exact. "
        "Xiong et al. 2020 (Theorem 1) bound the last FFN's weight gradient at "
        "initialisation:"
    )
    st.latex(
        r"\Big\|\tfrac{\partial \mathcal{L}}{\partial W_\text{down}^{(L)}}\Big\|_F \le "
        r"\mathcal{O}\big(d\sqrt{\ln d}\big)\;\text{(Post-LN)} \qquad "
        r"\Big\|\tfrac{\partial \mathcal{L}}{\partial W_\text{down}^{(L)}}\Big\|_F \le "
        r"\mathcal{O}\Big(d\sqrt{\ln d / L}\Big)\;\text{(Pre-LN)}"
    )
