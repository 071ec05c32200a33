"""Gradient norms: Post-LN vs Pre-LN at initialisation, against depth, warmup and training."""

import streamlit as st

from llama_lab import experiments, ui
from llama_lab.config import REGIMES, regime_recipe

P = "llama_lab.page3."
HINT = "use fewer layers, steps, seeds or depths, a smaller width, batch or sequence, or a GPU"
W = experiments.WARMUP_DEFAULTS

selection = ui.setup_page(
    "Gradient norms",
    "The same weights arranged as **Post-LN** (2017: normalise after the residual add) and "
    "**Pre-LN** (LLaMA: normalise the branch input), one forward/backward on the same batch, "
    "over several seeds (median line, min–max band). Post-LN puts the norm's Jacobian on the "
    "residual path; Pre-LN keeps an identity path to every block and ends with a final norm.",
)
ui.explain_norm_positions()

ui.set_defaults(
    P,
    depths=[2, 4, 8, 12],
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
with ui.live_size_box():
    ui.link_widgets(
        "grad",
        P,
        [  # in the URL as grad.regime, grad.d_model, …
            ui.choice_link("regime", list(REGIMES), "theory"),
            ui.choice_link("d_model", experiments.WIDTH_CHOICES, 128),
            ui.int_link("n_layers", 6, 1, 96),
            ui.int_link("seq_len", 64, 2, 8192),
            ui.int_link("batch", 4, 1, ui.MAX_BATCH),
            ui.int_link("seeds", experiments.DEFAULT_SEEDS, 1, experiments.MAX_SEEDS),
            ui.int_link("seed", 0, 0, 2**31 - 1),
            ui.choice_link("data", ("builtin", "random"), "builtin"),
            ui.choice_link("device", ui.PAGE_DEVICES, "auto"),
        ],
    )
    regime = st.radio(
        "setting",
        list(REGIMES),
        format_func=REGIMES.get,
        horizontal=True,
        key=P + "regime",
        help="Theory: the setting of Xiong et al.'s Theorem 1. "
        "LLaMA init: why the picture differs there. Sidebar: your recipe.",
    )
    cols = st.columns(4) + st.columns(4)
    d_model = cols[0].selectbox("width d", experiments.WIDTH_CHOICES, key=P + "d_model")
    n_layers = ui.bounded_number("blocks L", 1, 96, P + "n_layers", cols[1])
    seq_len = ui.bounded_number("sequence T", 2, 8192, P + "seq_len", cols[2])
    batch = ui.bounded_number("batch B", 1, ui.MAX_BATCH, P + "batch", cols[3])
    n_seeds = ui.bounded_number("seeds", 1, experiments.MAX_SEEDS, P + "seeds", cols[4])
    first = ui.bounded_number("first seed", 0, 2**31 - experiments.MAX_SEEDS, P + "seed", cols[5])
    source = cols[6].selectbox(
        "tokens",
        ("builtin", "random"),
        key=P + "data",
        format_func={"builtin": "built-in text", "random": "random ids"}.get,
    )
    device = cols[7].selectbox("device", ui.PAGE_DEVICES, key=P + "device")
    base = regime_recipe(selection.cfg, regime)
    run_cfg = ui.live_config(base, n_layers, d_model, seq_len)
    st.info(
        ui.live_run_note(
            base, run_cfg, both_arms=True, whose="the sidebar's" if regime == "sidebar" else "this setting's"
        )
    )
seeds = tuple(experiments.seed_list(first, n_seeds))
size = {"seq_len": seq_len, "batch": batch, "seeds": seeds, "tokens": source, "device": device}

tab_init, tab_depth, tab_warm, tab_train = st.tabs(
    ["Post-LN vs Pre-LN", "Ratio vs depth", "Warmup", "Training run"]
)

with tab_init:

    def measure(progress):
        ui.guard(
            run_cfg,
            seq_len,
            batch,
            device,
            passes=2 * len(seeds),
            hint=HINT,
            what=f"{2 * len(seeds)} forward/backward passes (B={batch}, T={seq_len})",
        )
        return ui.gradnorms_measured(run_cfg, seq_len, batch, seeds, source, device, _progress=progress)

    ui.measure_on_view(
        "gradnorms",
        run_cfg,
        size,
        measure,
        auto=ui.small_run(run_cfg, seq_len, batch, 2 * len(seeds)),
        button="Measure gradient norms",
        prefix=P,
    )

with tab_depth:
    st.markdown(
        "The last block's ‖∇W_down‖ at initialisation for each depth L, both "
        "arrangements, every seed; slopes of log‖∇‖ against log L by least squares."
    )
    depths = tuple(sorted(st.multiselect("depths L", experiments.DEPTH_CHOICES, key=P + "depths")))
    sweep_settings = {**size, "depths": depths}
    sweep_cfg = experiments.sweep_config(run_cfg, depths)  # the sweep sets each depth

    def sweep(progress):
        experiments.check_depth_budget(sweep_cfg, depths, seq_len, batch, device, HINT, n_seeds=len(seeds))
        return ui.depth_measured(sweep_cfg, depths, seq_len, batch, seeds, source, device, _progress=progress)

    ui.measure_on_view(
        "depth_sweep",
        sweep_cfg,
        sweep_settings,
        sweep,
        auto=len(depths) >= 2
        and ui.small_run(
            run_cfg.replace(n_layers=max(depths)), seq_len, batch, 2 * len(seeds) * sum(depths) / max(depths)
        ),
        button="Run the depth sweep",
        prefix=P,
        not_on_view=None if len(depths) >= 2 else "Choose two depths or more.",
    )

with tab_warm:
    ui.warmup_tab(P, base, seeds, device, HINT)

with tab_train:
    ui.training_tab(P, run_cfg, size, device, HINT)
