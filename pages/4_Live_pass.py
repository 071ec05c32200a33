"""Live pass: one real training step and KV-cache decoding, measured against the predictions."""
import streamlit as st

from llama_lab import analysis, claims, experiments
from llama_lab import experiment_plots as ep
from llama_lab import ui
from llama_lab.config import ConfigError
from llama_lab.report import ExperimentEntry, experiment_state_key

P = "llama_lab.page4."
KEY_MODEL, KEY_LAYERS, KEY_DEVICE, KEY_DTYPE, KEY_SEQ, KEY_BATCH, KEY_ITERS = (
    P + "model", P + "n_layers", P + "device", P + "dtype", P + "seq_len", P + "batch", P + "iters")
KEY_CONTEXTS, KEY_NEW_TOKENS = P + "contexts", P + "new_tokens"
KEY_LIVE, KEY_DECODE = experiment_state_key("live_pass"), experiment_state_key("decode")
CPU_FLOP_BUDGET = 3e12   # ≈ a minute on two busy cores at ~50 GFLOP/s: live runs stay interactive
MODELS = {"sidebar": "the sidebar's model", "small": "a scaled-down copy (d 64, 4 heads, "
                                                     "vocab 256, the sidebar's recipe)"}

selection = ui.setup_page(
    "Live pass",
    "One real training step — forward, backward, AdamW — timed phase by phase on the GPU when "
    "there is one (the CPU otherwise), with the numbers `analysis` predicts beside the "
    "measured ones; then greedy decoding with the KV cache for the MHA, GQA and MQA variants "
    "of the same model.")
cfg = selection.cfg

st.latex(r"\text{tokens/s} = \frac{B\,T}{t_\text{step}} \qquad "
         r"\text{achieved FLOP/s} = \frac{3\cdot\text{FLOPs}_\text{fwd}(B,T)}{t_\text{step}}"
         r" \qquad \text{MFU} = \frac{\text{achieved FLOP/s}}{\text{peak FLOP/s}}")
st.latex(r"\mathcal{L}_0 \approx \ln V \;\;(\text{uniform prediction})\qquad "
         r"\text{KV bytes} = 2\,L\,G\,D\,b \cdot B \cdot \text{tokens}")


def guard(run_cfg, seq_len: int, batch: int, device: str, dtype: str, flops: float,
          what: str) -> None:
    """experiments' memory guard, then a compute budget on the CPU; ExperimentError says why."""
    dev = experiments.pick_device(device)
    experiments.check_memory(experiments.training_bytes_needed(run_cfg, seq_len, batch, dtype),
                             dev, what)
    if dev.type == "cpu" and flops > CPU_FLOP_BUDGET:
        raise experiments.ExperimentError(
            f"{what} needs about {flops / 1e12:.1f} TFLOP; live runs on the CPU are limited to "
            f"{CPU_FLOP_BUDGET / 1e12:.0f} TFLOP (about a minute); choose the scaled-down copy, "
            f"fewer blocks, a smaller batch or sequence, or a GPU")


def run_with_status(label: str, work):
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


# ---- which model, which device ---------------------------------------------------------------------
step_flops = analysis.count_flops(cfg, min(selection.seq_len, 128), min(selection.batch, 8))
st.session_state.setdefault(KEY_MODEL, "sidebar" if 4 * step_flops.training_step
                            <= CPU_FLOP_BUDGET / 10 else "small")
model_choice = st.radio("model", list(MODELS), format_func=MODELS.get, key=KEY_MODEL,
                        horizontal=True)
if model_choice == "small":
    st.session_state.setdefault(KEY_LAYERS, min(cfg.n_layers, 4))
    n_layers = st.number_input("blocks of the scaled-down copy", 1, 96, key=KEY_LAYERS)
    run_cfg = claims.small_training_config(cfg).replace(n_layers=n_layers)
else:
    run_cfg = cfg
st.caption(f"Live runs use d={run_cfg.d_model}, {run_cfg.n_layers} blocks, {run_cfg.n_heads} "
           f"heads / {run_cfg.n_kv_heads} KV, FFN {run_cfg.ffn_hidden}, vocab "
           f"{run_cfg.vocab_size:,} ({analysis.count_params(run_cfg).total:,} parameters). On "
           f"the CPU a run is limited to {CPU_FLOP_BUDGET / 1e12:.0f} TFLOP.")

st.session_state.setdefault(KEY_DEVICE, "auto")
st.session_state.setdefault(KEY_DTYPE, "fp32")
st.session_state.setdefault(KEY_BATCH, min(selection.batch, 8))
st.session_state.setdefault(KEY_ITERS, 2)
st.session_state[KEY_SEQ] = min(st.session_state.get(KEY_SEQ, min(selection.seq_len, 128)),
                                run_cfg.max_seq_len)
cols = st.columns(5)
device = cols[0].selectbox("device", ("auto", "cpu", "cuda"), key=KEY_DEVICE,
                           help="auto: CUDA, then Apple MPS, then the CPU")
dtype = cols[1].selectbox("dtype", tuple(experiments.DTYPES), key=KEY_DTYPE,
                          help="fp32; or bf16/fp16 autocast with fp32 weights, grads and AdamW "
                               "state (mixed precision). fp16 only on a GPU.")
seq_len = cols[2].number_input("sequence T", 1, run_cfg.max_seq_len, key=KEY_SEQ)
batch = cols[3].number_input("batch B", 1, 65_536, key=KEY_BATCH)
iters = cols[4].number_input("timed steps", 1, 50, key=KEY_ITERS)
settings = {"device": device, "dtype": dtype, "seq_len": seq_len, "batch": batch, "iters": iters}

# ---- the training step --------------------------------------------------------------------------------
st.subheader("One training step")
if st.button("Run the training step", type="primary", key=P + "run_live"):
    def live(progress):
        flops = (iters + 3) * analysis.count_flops(run_cfg, seq_len, batch).training_step
        guard(run_cfg, seq_len, batch, device, dtype, flops,
              f"a training step of this model (B={batch}, T={seq_len}, {dtype})")
        return experiments.live_pass(run_cfg, seq_len, batch, device=device, dtype=dtype,
                                     iters=iters, progress=progress)
    result = run_with_status("Live pass", live)
    if result is not None:
        st.session_state[KEY_LIVE] = ExperimentEntry("live_pass", result, run_cfg, settings)

entry = st.session_state.get(KEY_LIVE)
if entry is not None:
    live = entry.result
    if entry.config != run_cfg or entry.settings != settings:
        st.caption("These results are from earlier choices; run again to update them.")
    cols = st.columns(4)
    cols[0].metric("Step", f"{live.step_ms:.1f} ms", help=f"median of {live.iters} timed steps")
    cols[1].metric("Tokens/s", f"{live.tokens_per_s:,.0f}")
    cols[2].metric("Achieved", ui.human_count(live.achieved_tflops * 1e12) + "FLOP/s",
                   help=f"{live.training_flops:.3e} FLOPs per step (3 × forward, analysis)")
    cols[3].metric("MFU", f"{live.mfu:.1%}", help=f"peak {live.peak_flops / 1e12:.3g} TFLOP/s")
    st.caption(f"MFU is measured against {live.peak_flops / 1e12:.3g} TFLOP/s: "
               f"{live.peak_flops_source}. Warm-up step (excluded): {live.warmup_s:.2f} s.")
    st.plotly_chart(ep.live_phase_figure(live), key=P + "chart_phases")

    cols = st.columns(4)
    cols[0].metric("Initial loss", f"{live.initial_loss:.4f}",
                   f"{live.initial_loss - live.ln_vocab:+.4f} vs ln V", delta_color="off")
    cols[1].metric("ln V", f"{live.ln_vocab:.4f}", help=f"V = {entry.config.vocab_size:,}")
    cols[2].metric("Peak memory", ui.human_bytes(live.peak_memory_bytes),
                   help=live.peak_memory_source)
    cols[3].metric("Activations measured / predicted", f"{live.activation_ratio:.3f}",
                   f"{ui.human_bytes(live.activation_bytes_measured)} vs "
                   f"{ui.human_bytes(live.activation_bytes_estimated)}", delta_color="off")
    st.caption(f"Peak memory: {live.peak_memory_source}. Activations measured: the tensors "
               f"autograd saves for backward, each storage once; predicted: "
               f"analysis.activation_bytes. The memory guard checked "
               f"{ui.human_bytes(live.estimated_training_bytes)} (analysis.training_memory).")
    st.dataframe(ep.live_memory_table(live), hide_index=True)

    st.markdown("**Logits at the initial weights, with and without the final norm** — the "
                "seed's most common Pre-LN bug is forgetting the final norm: the last block's "
                "output reaches lm_head unnormalised.")
    st.dataframe(ep.logits_table(live.logits, live.logits_without_final_norm, live.ln_vocab),
                 hide_index=True, width="stretch")
    growth = live.logits_without_final_norm.std / max(live.logits.std, 1e-30)
    st.caption(f"Without the final norm the logits' std is {growth:.3g}× the normed one"
               + ("" if entry.config.final_norm else " (this config has no final norm: both rows "
                                                     "are the same model)")
               + ". The final norm rescales the last hidden state to unit RMS whatever its "
                 "size: at initialisation the residual stream is small (embeddings ~N(0, 0.02)), "
                 "after training it grows with depth — the Gradient norms page shows both "
                 "after a training run.")

# ---- KV-cache decoding --------------------------------------------------------------------------------
st.subheader("KV-cache decoding: MHA vs GQA vs MQA")
st.markdown("Prefill a prompt of each context length, then decode new tokens one at a time "
            "with the cache; weights and cache in the chosen dtype. The cache bytes are read "
            "from the cache tensors and compared with `analysis.kv_cache_bytes_per_token`.")
st.session_state.setdefault(KEY_NEW_TOKENS, 8)
new_tokens = st.number_input("new tokens per prompt", 1, 256, key=KEY_NEW_TOKENS)
room = max(1, run_cfg.max_seq_len - new_tokens)
options = sorted({c for c in (2 ** k for k in range(3, 21)) if c <= room} | {room})
st.session_state[KEY_CONTEXTS] = [c for c in st.session_state.get(KEY_CONTEXTS, options[-4:])
                                  if c in options] or options[-4:]
contexts = st.multiselect("context lengths", options, key=KEY_CONTEXTS)
decode_settings = {"device": device, "dtype": dtype, "batch": batch, "new_tokens": new_tokens,
                   "contexts": sorted(contexts)}
if st.button("Run the decode benchmark", type="primary", key=P + "run_decode"):
    def decode(progress):
        if not contexts:
            raise experiments.ExperimentError("choose at least one context length")
        variants = experiments.decode_variants(run_cfg)
        flops = sum(analysis.count_flops(v, c, batch).forward
                    + new_tokens * analysis.decode_flops(v, c + new_tokens, batch).forward
                    for v in variants.values() for c in contexts)
        if experiments.pick_device(device).type == "cpu" and flops > CPU_FLOP_BUDGET:
            raise experiments.ExperimentError(
                f"decoding needs about {flops / 1e12:.1f} TFLOP; live runs on the CPU are "
                f"limited to {CPU_FLOP_BUDGET / 1e12:.0f} TFLOP; use shorter contexts, fewer "
                f"new tokens or the scaled-down copy")
        return experiments.decode_benchmark(run_cfg, contexts, batch=batch, device=device,
                                            dtype=dtype, new_tokens=new_tokens, progress=progress)
    result = run_with_status("Decode benchmark", decode)
    if result is not None:
        st.session_state[KEY_DECODE] = ExperimentEntry("decode", result, run_cfg, decode_settings)

entry = st.session_state.get(KEY_DECODE)
if entry is not None:
    bench = entry.result
    if entry.config != run_cfg or entry.settings != decode_settings:
        st.caption("These results are from earlier choices; run again to update them.")
    frame = bench.to_frame()
    longest = frame[frame.context_len == frame.context_len.max()]
    cols = st.columns(len(longest))
    for col, row in zip(cols, longest.itertuples()):
        col.metric(f"{row.variant.upper()} · {row.n_kv_heads} KV head"
                   f"{'s' if row.n_kv_heads > 1 else ''}",
                   f"{row.ms_per_token:.2f} ms/token",
                   f"cache {ui.human_bytes(row.cache_bytes_measured)}", delta_color="off")
    if bench.bytes_agree:
        st.success("Measured cache bytes equal the prediction 2·L·G·D·b·B·tokens for every row.")
    else:
        st.error("Measured cache bytes differ from analysis.kv_cache_bytes_per_token × B × "
                 "tokens; see the table.")
    st.plotly_chart(ep.decode_figure(bench), key=P + "chart_decode")
    st.dataframe(frame, hide_index=True, width="stretch")
    st.caption("On a GPU decoding one token is memory-bound: its time follows the bytes read "
               "(weights + cache), which is where fewer KV heads pay off at long context and "
               "large batch. At small sizes on a CPU, fixed per-call overheads dominate.")
