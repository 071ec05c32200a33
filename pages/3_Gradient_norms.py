"""Gradient norms: Post-LN vs Pre-LN at initialisation, against depth, and during training."""
import streamlit as st

from llama_lab import analysis, claims, data, experiments
from llama_lab import experiment_plots as ep
from llama_lab import ui
from llama_lab.config import ConfigError, seed_ffn_hidden
from llama_lab.report import ExperimentEntry, experiment_state_key

P = "llama_lab.page3."
KEY_D, KEY_LAYERS, KEY_SEQ, KEY_BATCH, KEY_SEED, KEY_DEVICE = (
    P + "d_model", P + "n_layers", P + "seq_len", P + "batch", P + "seed", P + "device")
KEY_DEPTHS, KEY_STEPS, KEY_LR, KEY_WARMUP, KEY_SCHEDULE, KEY_SOURCE, KEY_UPLOAD = (
    P + "depths", P + "steps", P + "lr", P + "warmup", P + "schedule", P + "source", P + "upload")
KEY_GRAD, KEY_SWEEP, KEY_TRAIN = (experiment_state_key("gradnorms"),
                                  experiment_state_key("depth_sweep"),
                                  experiment_state_key("training"))
WIDTHS = (32, 64, 128, 256)
DEPTHS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
CPU_FLOP_BUDGET = 3e12   # ≈ a minute on two busy cores at ~50 GFLOP/s: live runs stay interactive

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


# ---- the live-run size ---------------------------------------------------------------------------
def live_config(d_model: int, n_layers: int, seq_len: int):
    """The sidebar's recipe (norms, positions, FFN type, biases, init, KV sharing) at a size that
    runs live: 4 heads, byte-level vocabulary 256 (claims.small_training_config), then the
    chosen width and depth; the FFN width follows the recipe's rule."""
    small = claims.small_training_config(cfg)
    ffn = seed_ffn_hidden(d_model) if small.ffn_type == "swiglu" else \
        max(1, round(cfg.ffn_hidden / cfg.d_model * d_model))
    return small.replace(d_model=d_model, n_layers=n_layers, ffn_hidden=ffn,
                         max_seq_len=max(seq_len, small.max_seq_len))


def guard(run_cfg, seq_len: int, batch: int, device: str, passes: float, what: str) -> None:
    """experiments' memory guard, then a compute budget on the CPU; ExperimentError says why."""
    dev = experiments.pick_device(device)
    experiments.check_memory(experiments.training_bytes_needed(run_cfg, seq_len, batch, "fp32"),
                             dev, what)
    flops = passes * analysis.count_flops(run_cfg, seq_len, batch).training_step
    if dev.type == "cpu" and flops > CPU_FLOP_BUDGET:
        raise experiments.ExperimentError(
            f"{what} needs about {flops / 1e12:.1f} TFLOP; live runs on the CPU are limited to "
            f"{CPU_FLOP_BUDGET / 1e12:.0f} TFLOP (about a minute); use fewer layers, steps or "
            f"depths, a smaller width, batch or sequence, or a GPU")


def run_with_status(label: str, work):
    """Run ``work(progress)`` inside st.status with a progress bar; None (and st.error) on a
    refusal."""
    with st.status(label, expanded=True) as status:
        bar = st.progress(0.0, text="starting …")
        try:
            result = work(lambda fraction, text: bar.progress(min(1.0, max(0.0, fraction)),
                                                              text=text))
        except (experiments.ExperimentError, ConfigError) as exc:
            status.update(label=f"{label}: refused", state="error")
            st.error(str(exc))
            return None
        status.update(label=f"{label}: done", state="complete", expanded=False)
    return result


def stale_note(entry: ExperimentEntry, run_cfg, settings: dict) -> None:
    if entry.config != run_cfg or any(entry.settings.get(k) != v for k, v in settings.items()):
        st.caption("These results are from earlier choices; run again to update them.")


st.subheader("Live-run size")
defaults = {KEY_D: 64, KEY_LAYERS: min(cfg.n_layers, 8), KEY_SEQ: 64, KEY_BATCH: 4, KEY_SEED: 0,
            KEY_DEVICE: "auto"}
for key, value in defaults.items():
    st.session_state.setdefault(key, value)
cols = st.columns(6)
d_model = cols[0].selectbox("width d", WIDTHS, key=KEY_D)
n_layers = cols[1].number_input("blocks L", 1, 96, key=KEY_LAYERS)
seq_len = cols[2].number_input("sequence T", 2, 8192, key=KEY_SEQ)
batch = cols[3].number_input("batch B", 1, 65_536, key=KEY_BATCH)
seed = cols[4].number_input("seed", 0, 2**31 - 1, key=KEY_SEED)
device = cols[5].selectbox("device", ("auto", "cpu", "cuda"), key=KEY_DEVICE)
run_cfg = live_config(d_model, n_layers, seq_len)
st.info(f"Live runs use **d={run_cfg.d_model}, {run_cfg.n_layers} blocks, {run_cfg.n_heads} "
        f"heads / {run_cfg.n_kv_heads} KV, FFN {run_cfg.ffn_hidden}, vocab "
        f"{run_cfg.vocab_size}** (byte-level: one token per UTF-8 byte) with the sidebar's "
        f"recipe ({cfg.norm_type}, {cfg.pos_encoding} positions, {cfg.ffn_type}, "
        f"{'biases' if cfg.bias else 'no biases'}, {cfg.init} init). Both arrangements share "
        f"the weights; only norm_position differs. On the CPU a run is limited to "
        f"{CPU_FLOP_BUDGET / 1e12:.0f} TFLOP.")
size = {"seq_len": seq_len, "batch": batch, "seed": seed, "device": device}

tab_init, tab_depth, tab_train = st.tabs(["Post-LN vs Pre-LN", "Depth sweep", "Training run"])

with tab_init:
    st.markdown("Random token ids, one forward/backward per arrangement, fp32. "
                "`residual_grad_norm` is ‖∂L/∂xₗ‖ at block *l*'s input.")
    if st.button("Measure gradient norms", type="primary", key=P + "run_grad"):
        def measure(progress):
            guard(run_cfg, seq_len, batch, device, 2,
                  f"two forward/backward passes (B={batch}, T={seq_len})")
            return experiments.gradnorms(run_cfg, seq_len, batch, seed=seed, device=device,
                                         progress=progress)
        result = run_with_status("Post-LN and Pre-LN forward/backward", measure)
        if result is not None:
            st.session_state[KEY_GRAD] = ExperimentEntry("gradnorms", result, run_cfg, size)
    entry = st.session_state.get(KEY_GRAD)
    if entry is not None:
        stale_note(entry, run_cfg, size)
        result = entry.result
        cols = st.columns(4)
        for col, arm in zip(cols[:2], (result.post, result.pre)):
            col.metric(f"{ep.NORM_LABELS[arm.norm_position]} loss", f"{arm.loss:.4f}")
        for col, arm in zip(cols[2:], (result.post, result.pre)):
            first, last = arm.residual_grad_norm[0], arm.residual_grad_norm[-1]
            col.metric(f"{ep.NORM_LABELS[arm.norm_position]} ‖∂L/∂x₀‖ ÷ ‖∂L/∂x_last‖",
                       f"{first / last:.3g}",
                       help="> 1: the gradient grows towards the input; < 1: it shrinks")
        st.plotly_chart(ep.gradnorm_profile(result), key=P + "chart_grad")
        st.markdown("**Per parameter group** (‖∇‖ of each group in each block)")
        st.dataframe(ep.group_table(result), hide_index=True, width="stretch")
        with st.expander("Per-block table and summary"):
            st.dataframe(ep.gradnorm_summary(result), hide_index=True, width="stretch")
            st.dataframe(result.to_frame(), hide_index=True, width="stretch")

with tab_depth:
    st.markdown("The last block's ‖∇W_down‖ at initialisation for each depth L, both "
                "arrangements; the slope of log‖∇‖ against log L is fitted by least squares.")
    st.session_state.setdefault(KEY_DEPTHS, [2, 4, 8, 16])
    depths = st.multiselect("depths L", DEPTHS, key=KEY_DEPTHS)
    if st.button("Run the depth sweep", type="primary", key=P + "run_sweep"):
        def sweep(progress):
            if len(depths) < 2:
                raise experiments.ExperimentError(f"choose at least two depths (got "
                                                  f"{len(depths)}) to fit a slope")
            deepest = run_cfg.replace(n_layers=max(depths))
            passes = 2 * sum(depths) / max(depths)           # FLOPs scale with depth
            guard(deepest, seq_len, batch, device, passes, "the depth sweep")
            return experiments.depth_sweep(run_cfg, sorted(depths), seq_len, batch, seed=seed,
                                           device=device, progress=progress)
        result = run_with_status("Depth sweep", sweep)
        if result is not None:
            st.session_state[KEY_SWEEP] = ExperimentEntry("depth_sweep", result, run_cfg,
                                                          {**size, "depths": sorted(depths)})
    entry = st.session_state.get(KEY_SWEEP)
    if entry is not None:
        stale_note(entry, run_cfg, size)
        result = entry.result
        cols = st.columns(2)
        cols[0].metric("Post-LN fitted slope", f"{result.post_slope:+.3f}", "theory 0",
                       delta_color="off")
        cols[1].metric("Pre-LN fitted slope", f"{result.pre_slope:+.3f}", "theory −0.5",
                       delta_color="off")
        st.plotly_chart(ep.depth_sweep_figure(result), key=P + "chart_sweep")
        st.dataframe(result.to_frame(), hide_index=True)

with tab_train:
    st.markdown(f"Four short AdamW runs — Post-LN and Pre-LN, each without and with linear "
                f"warmup — on the same batches (seed {seed}), with every block's gradient norm "
                f"recorded at every step. The training config has **vocab_size = 256**: the "
                f"text is tokenised byte by byte.")
    st.latex(r"\eta_t = \eta\,\frac{t+1}{t_\text{warmup}}\;(t < t_\text{warmup}),\quad"
             r"\text{then cosine / linear decay to } 0.1\,\eta")
    st.session_state.setdefault(KEY_STEPS, 30)
    st.session_state.setdefault(KEY_LR, 3e-3)
    st.session_state.setdefault(KEY_WARMUP, 10)
    st.session_state.setdefault(KEY_SCHEDULE, "cosine")
    st.session_state.setdefault(KEY_SOURCE, "builtin")
    cols = st.columns(4)
    steps = cols[0].number_input("steps", 1, 2000, key=KEY_STEPS)
    lr = cols[1].number_input("peak learning rate", 1e-6, 1.0, format="%.1e", key=KEY_LR)
    warmup = cols[2].number_input("warmup steps (the 'with warmup' runs)", 1, 2000,
                                  key=KEY_WARMUP)
    schedule = cols[3].selectbox("schedule", experiments.SCHEDULES, key=KEY_SCHEDULE)
    source = st.radio("text", ("builtin", "upload"), horizontal=True, key=KEY_SOURCE,
                      format_func={"builtin": "built-in corpus (Python's help topics, ~460 KB)",
                                   "upload": "upload a UTF-8 text file"}.get)
    upload = st.file_uploader("UTF-8 text", key=KEY_UPLOAD) if source == "upload" else None
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
            guard(run_cfg, seq_len, batch, device, len(specs) * steps,
                  f"{len(specs)} runs of {steps} steps")
            return experiments.compare_runs(specs, steps, data=text, seq_len=seq_len,
                                            batch=batch, seed=seed, device=device,
                                            progress=progress), text.source
        outcome = run_with_status("Training", train)
        if outcome is not None:
            comparison, source_name = outcome
            st.session_state[KEY_TRAIN] = ExperimentEntry(
                "training", comparison, run_cfg,
                {**size, "steps": steps, "lr": lr, "warmup_steps": warmup, "schedule": schedule,
                 "data": source_name})
    entry = st.session_state.get(KEY_TRAIN)
    if entry is not None:
        stale_note(entry, run_cfg, {**size, "steps": steps, "lr": lr, "warmup_steps": warmup,
                                    "schedule": schedule})
        comparison = entry.result
        st.caption(f"Data: {entry.settings['data']}.")
        for run in comparison.runs.values():
            if run.diverged:
                st.warning(f"{run.label} diverged: {run.divergence_reason}. Hint: {run.hint}.")
        st.plotly_chart(ep.training_curves(comparison), key=P + "chart_loss")
        st.plotly_chart(ep.training_heatmaps(comparison), key=P + "chart_heat")
        st.dataframe(comparison.summary_frame()[["label", "steps_run", "first_loss",
                                                 "final_loss", "final_val_loss", "diverged",
                                                 "wall_s", "tokens_per_s"]],
                     hide_index=True, width="stretch")
        st.markdown("**Logits after training**, on a validation batch, with and without the "
                    "final norm (the seed's “forgot the final norm” bug):")
        st.dataframe(ep.run_logits_table(comparison), hide_index=True, width="stretch")
