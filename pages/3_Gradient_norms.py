"""Gradient norms: Post-LN vs Pre-LN at initialisation, against depth, and during training."""
from dataclasses import replace

import streamlit as st

from llama_lab import experiments, ui
from llama_lab.train.schedules import SCHEDULES

P = "llama_lab.page3."
KEY_TRAINING = P + "training"     # this page's runs (also under ui.KEY_TRAINING for the report)
HINT = "use fewer layers, steps or depths, a smaller width, batch or sequence, or a GPU"

selection = ui.setup_page(
    "Gradient norms",
    "The same weights arranged as **Post-LN** (2017: normalise after the residual add) and "
    "**Pre-LN** (LLaMA: normalise the branch input), one forward/backward on the same batch. "
    "Post-LN puts the norm's Jacobian on the residual path, so the gradient reaching block "
    "*l* has passed through every later norm; Pre-LN keeps an identity path to every block.")
cfg = selection.cfg

ui.explain_norm_positions()

ui.set_defaults(P, depths=[2, 4, 8, 16], steps=30, lr=3e-3, warmup=10, schedule="cosine",
                source="builtin", grad_clip=0.0)
with ui.live_size_box():
    ui.link_widgets("grad", P, [  # in the URL as grad.d_model, grad.n_layers, …
        ui.choice_link("d_model", experiments.WIDTH_CHOICES, 64),
        ui.int_link("n_layers", min(cfg.n_layers, 8), 1, 96), ui.int_link("seq_len", 64, 2, 8192),
        ui.int_link("batch", 4, 1, ui.MAX_BATCH), ui.int_link("seed", 0, 0, 2**31 - 1),
        ui.choice_link("device", ui.PAGE_DEVICES, "auto")])
    cols = st.columns(6)
    d_model = cols[0].selectbox("width d", experiments.WIDTH_CHOICES, key=P + "d_model")
    n_layers = ui.bounded_number("blocks L", 1, 96, P + "n_layers", cols[1])
    seq_len = ui.bounded_number("sequence T", 2, 8192, P + "seq_len", cols[2])
    batch = ui.bounded_number("batch B", 1, ui.MAX_BATCH, P + "batch", cols[3])
    seed = ui.bounded_number("seed", 0, 2**31 - 1, P + "seed", cols[4])
    device = cols[5].selectbox("device", ui.PAGE_DEVICES, key=P + "device")
    run_cfg = ui.live_config(cfg, n_layers, d_model, seq_len)
    st.info(ui.live_run_note(cfg, run_cfg, both_arms=True))
size = {"seq_len": seq_len, "batch": batch, "seed": seed, "device": device}

tab_init, tab_depth, tab_train = st.tabs(["Post-LN vs Pre-LN", "Depth sweep", "Training run"])

with tab_init:
    st.markdown("Random token ids, one forward/backward per arrangement, fp32. "
                "`residual_grad_norm` is ‖∂L/∂xₗ‖ at block *l*'s input.")
    if st.button("Measure gradient norms", type="primary", key=P + "run_grad"):
        def measure(progress):
            ui.guard(run_cfg, seq_len, batch, device, passes=2, hint=HINT,
                     what=f"two forward/backward passes (B={batch}, T={seq_len})")
            return experiments.gradnorms(run_cfg, seq_len, batch, seed=seed, device=device,
                                         progress=progress)
        result = ui.run_with_status("Post-LN and Pre-LN forward/backward", measure)
        if result is not None:
            ui.keep_experiment("gradnorms", result, run_cfg, size)
    ui.show_experiment(ui.KEY_GRADNORMS, run_cfg, size, P)

with tab_depth:
    st.markdown("The last block's ‖∇W_down‖ at initialisation for each depth L, both "
                "arrangements; the slope of log‖∇‖ against log L is fitted by least squares.")
    depths = sorted(st.multiselect("depths L", experiments.DEPTH_CHOICES, key=P + "depths"))
    sweep_settings = {**size, "depths": depths}
    if st.button("Run the depth sweep", type="primary", key=P + "run_sweep"):
        def sweep(progress):
            experiments.check_depth_budget(run_cfg, depths, seq_len, batch, device, HINT)
            return experiments.depth_sweep(run_cfg, depths, seq_len, batch, seed=seed,
                                           device=device, progress=progress)
        result = ui.run_with_status("Depth sweep", sweep)
        if result is not None:
            ui.keep_experiment("depth_sweep", result, run_cfg, sweep_settings)
    ui.show_experiment(ui.KEY_DEPTH_SWEEP, run_cfg, sweep_settings, P)

with tab_train:
    st.markdown(f"Four short AdamW runs — Post-LN and Pre-LN, each without and with linear "
                f"warmup — on the same batches (seed {seed}), with every block's gradient norm "
                f"recorded at every step. The training config has **vocab_size = 256**: the "
                f"text is tokenised byte by byte.")
    st.latex(r"\eta_t = \eta\,\frac{t+1}{t_\text{warmup}}\;(t < t_\text{warmup}),\quad"
             r"\text{then cosine / linear decay to } 0.1\,\eta")
    cols = st.columns(5)
    steps = cols[0].number_input("steps", 1, 2000, key=P + "steps")
    lr = cols[1].number_input("peak learning rate", 1e-6, 1.0, format="%.1e", key=P + "lr")
    warmup = cols[2].number_input("warmup steps (the 'with warmup' runs)", 1, 2000,
                                  key=P + "warmup")
    schedule = cols[3].selectbox("schedule", SCHEDULES, key=P + "schedule")
    clip = cols[4].number_input("gradient clipping (max norm, 0 = off)", 0.0, 1e6, step=0.5,
                                key=P + "grad_clip", help="Every arm's gradients are scaled "
                                "down to this total L2 norm when above it (the divergence hint)")
    source = st.radio("text", ("builtin", "upload"), horizontal=True, key=P + "source",
                      format_func={"builtin": "built-in corpus (Python's help topics, ~460 KB)",
                                   "upload": "upload a UTF-8 text file"}.get)
    upload = st.file_uploader("UTF-8 text", key=P + "upload") if source == "upload" else None
    train_settings = {**size, "steps": steps, "lr": lr, "warmup_steps": warmup,
                      "schedule": schedule, "grad_clip": clip or None}
    if st.button("Train the four runs", type="primary", key=P + "run_train"):
        def train(progress):
            text = ui.text_source(source, upload)
            specs = [replace(spec, grad_clip=clip or None)
                     for spec in experiments.norm_position_specs(run_cfg, lr, warmup, schedule)]
            ui.guard(run_cfg, seq_len, batch, device, passes=len(specs) * steps, hint=HINT,
                     what=f"{len(specs)} runs of {steps} steps")
            return experiments.compare_runs(specs, steps, data=text, seq_len=seq_len,
                                            batch=batch, seed=seed, device=device,
                                            progress=progress), text.source
        outcome = ui.run_with_status("Training", train)
        if outcome is not None:
            comparison, source_name = outcome
            ui.keep_experiment("training", comparison, run_cfg,
                               {**train_settings, "data": source_name}, KEY_TRAINING)
    ui.show_experiment(KEY_TRAINING, run_cfg, train_settings, P)
