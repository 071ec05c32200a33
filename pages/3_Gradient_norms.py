"""Gradient norms: Post-LN vs Pre-LN at initialisation, against depth, and during training."""
import streamlit as st

from llama_lab import data, experiments, ui

P = "llama_lab.page3."
KEY_TRAINING = P + "training"     # this page's runs (also under ui.KEY_TRAINING for the report)
WIDTHS = (32, 64, 128, 256)
DEPTHS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
HINT = "use fewer layers, steps or depths, a smaller width, batch or sequence, or a GPU"

selection = ui.setup_page(
    "Gradient norms",
    "The same weights arranged as **Post-LN** (2017: normalise after the residual add) and "
    "**Pre-LN** (LLaMA: normalise the branch input), one forward/backward on the same batch. "
    "Post-LN puts the norm's Jacobian on the residual path, so the gradient reaching block "
    "*l* has passed through every later norm; Pre-LN keeps an identity path to every block.")
cfg = selection.cfg

st.latex(r"\text{Post-LN: } x_{l+1} = \mathrm{LN}\big(x_l + F(x_l)\big) \;\Rightarrow\; "
         r"\frac{\partial x_{l+1}}{\partial x_l} = \mathrm{LN}'\big(x_l + F(x_l)\big)"
         r"\,\big(I + F'(x_l)\big)")
st.latex(r"\text{Pre-LN: } x_{l+1} = x_l + F\big(\mathrm{LN}(x_l)\big) \;\Rightarrow\; "
         r"\frac{\partial x_{l+1}}{\partial x_l} = I + F'\big(\mathrm{LN}(x_l)\big)\,"
         r"\mathrm{LN}'(x_l)")
st.caption("The seed writes the Pre-LN Jacobian as I + F′(LN(xₗ)); the chain rule adds the "
           "factor LN′(xₗ) inside the branch, but the identity term — the point — is exact. "
           "Xiong et al. 2020 (Theorem 1) bound the last FFN's weight gradient at "
           "initialisation:")
st.latex(r"\Big\|\tfrac{\partial \mathcal{L}}{\partial W_\text{down}^{(L)}}\Big\|_F \le "
         r"\mathcal{O}\big(d\sqrt{\ln d}\big)\;\text{(Post-LN)} \qquad "
         r"\Big\|\tfrac{\partial \mathcal{L}}{\partial W_\text{down}^{(L)}}\Big\|_F \le "
         r"\mathcal{O}\Big(d\sqrt{\ln d / L}\Big)\;\text{(Pre-LN)}")

st.subheader("Live-run size")
ui.set_defaults(P, d_model=64, n_layers=min(cfg.n_layers, 8), seq_len=64, batch=4, seed=0,
                device="auto", depths=[2, 4, 8, 16], steps=30, lr=3e-3, warmup=10,
                schedule="cosine", source="builtin")
cols = st.columns(6)
d_model = cols[0].selectbox("width d", WIDTHS, key=P + "d_model")
n_layers = cols[1].number_input("blocks L", 1, 96, key=P + "n_layers")
seq_len = cols[2].number_input("sequence T", 2, 8192, key=P + "seq_len")
batch = cols[3].number_input("batch B", 1, 65_536, key=P + "batch")
seed = cols[4].number_input("seed", 0, 2**31 - 1, key=P + "seed")
device = cols[5].selectbox("device", ("auto", "cpu", "cuda"), key=P + "device")
run_cfg = ui.live_config(cfg, n_layers, d_model, seq_len)
st.info(f"Live runs use **d={run_cfg.d_model}, {run_cfg.n_layers} blocks, {run_cfg.n_heads} "
        f"heads / {run_cfg.n_kv_heads} KV, FFN {run_cfg.ffn_hidden}, vocab "
        f"{run_cfg.vocab_size}** (byte-level: one token per UTF-8 byte) with the sidebar's "
        f"recipe ({cfg.norm_type}, {cfg.pos_encoding} positions, {cfg.ffn_type}, "
        f"{'biases' if cfg.bias else 'no biases'}, {cfg.init} init). Both arrangements share "
        f"the weights; only norm_position differs — everything else equal, including the "
        f"sidebar's final_norm ({'on' if run_cfg.final_norm else 'off'}): "
        + ("so the Post-LN arm, whose last block already ends with a norm, applies the final "
           "norm on top of it — LN(LN(x)) before lm_head. "
           if run_cfg.final_norm else "neither arm normalises before lm_head; the Post-LN arm's "
                                      "last block still ends with its own norm. ")
        + f"On the CPU a run is limited to {ui.CPU_FLOP_BUDGET / 1e12:.0f} TFLOP.")
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
    depths = sorted(st.multiselect("depths L", DEPTHS, key=P + "depths"))
    sweep_settings = {**size, "depths": depths}
    if st.button("Run the depth sweep", type="primary", key=P + "run_sweep"):
        def sweep(progress):
            if len(depths) < 2:
                raise experiments.ExperimentError(f"choose at least two depths (got "
                                                  f"{len(depths)}) to fit a slope")
            ui.guard(run_cfg.replace(n_layers=max(depths)), seq_len, batch, device,
                     passes=2 * sum(depths) / max(depths),        # FLOPs scale with depth
                     what="the depth sweep", hint=HINT)
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
    cols = st.columns(4)
    steps = cols[0].number_input("steps", 1, 2000, key=P + "steps")
    lr = cols[1].number_input("peak learning rate", 1e-6, 1.0, format="%.1e", key=P + "lr")
    warmup = cols[2].number_input("warmup steps (the 'with warmup' runs)", 1, 2000,
                                  key=P + "warmup")
    schedule = cols[3].selectbox("schedule", experiments.SCHEDULES, key=P + "schedule")
    source = st.radio("text", ("builtin", "upload"), horizontal=True, key=P + "source",
                      format_func={"builtin": "built-in corpus (Python's help topics, ~460 KB)",
                                   "upload": "upload a UTF-8 text file"}.get)
    upload = st.file_uploader("UTF-8 text", key=P + "upload") if source == "upload" else None
    train_settings = {**size, "steps": steps, "lr": lr, "warmup_steps": warmup,
                      "schedule": schedule}
    if st.button("Train the four runs", type="primary", key=P + "run_train"):
        def train(progress):
            if source == "upload":
                if upload is None:
                    raise experiments.ExperimentError("upload a UTF-8 text file first (or "
                                                      "choose the built-in corpus)")
                text = data.load_user_text(upload.getvalue(), name=upload.name)
            else:
                text = data.load_builtin()
            specs = experiments.norm_position_specs(run_cfg, lr, warmup, schedule)
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
