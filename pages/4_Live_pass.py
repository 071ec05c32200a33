"""Live pass: one real training step and KV-cache decoding, measured against the predictions."""

import streamlit as st

from llama_lab import analysis, experiments, ui
from llama_lab.config import LIMITS
from llama_lab.runtime.precision import DTYPES

P = "llama_lab.page4."
MODELS = {
    "sidebar": "the sidebar's model",
    "small": "a scaled-down copy (d 64, vocab 256, the sidebar's recipe and attention kind)",
}

selection = ui.setup_page(
    "Live pass",
    "One real training step — forward, backward, AdamW — timed phase by phase on the GPU when "
    "there is one (the CPU otherwise), with the numbers `analysis` predicts beside the "
    "measured ones; then greedy decoding with the KV cache for the MHA, GQA and MQA variants "
    "of the same model.",
)
cfg = selection.cfg

st.latex(
    r"\text{tokens/s} = \frac{B\,T}{t_\text{step}} \qquad "
    r"\text{achieved FLOP/s} = \frac{3\cdot\text{FLOPs}_\text{fwd}(B,T)}{t_\text{step}}"
    r" \qquad \text{MFU} = \frac{\text{achieved FLOP/s}}{\text{peak FLOP/s}}"
)
st.latex(
    r"\mathcal{L}_0 \approx \ln V \;\;(\text{uniform prediction})\qquad "
    r"\text{KV bytes} = 2\,L\,G\,D\,b \cdot B \cdot \text{tokens}"
)

# ---- which model, which device ---------------------------------------------------------------------
quick = ui.runs_live_quickly(cfg, selection.seq_len, selection.batch)
live_seq, live_batch = ui.live_workload(selection.seq_len, selection.batch)
with ui.live_size_box():
    ui.link_widgets(
        "live",
        P,
        [  # in the URL as live.model, live.seq_len, …
            ui.choice_link("model", MODELS, "sidebar" if quick else "small"),
            ui.int_link("n_layers", min(cfg.n_layers, 4), 1, 96),
            ui.choice_link("device", ui.PAGE_DEVICES, "auto"),
            ui.choice_link("dtype", DTYPES, "fp32"),
            ui.int_link("seq_len", live_seq, 1, LIMITS["max_seq_len"]),
            ui.int_link("batch", live_batch, 1, ui.MAX_BATCH),
            ui.int_link("iters", 2, 1, 50),
            ui.int_link("new_tokens", 8, 1, 256),
        ],
    )
    model_choice = st.radio("model", list(MODELS), format_func=MODELS.get, key=P + "model", horizontal=True)
    if model_choice == "small":
        n_layers = ui.bounded_number("blocks of the scaled-down copy", 1, 96, P + "n_layers")
        run_cfg = ui.live_config(cfg, n_layers)
    else:
        run_cfg = cfg
    st.caption(
        f"Live runs use d={run_cfg.d_model}, {run_cfg.n_layers} blocks, "
        f"{run_cfg.n_heads} heads / {run_cfg.n_kv_heads} KV, FFN {ui.ffn_label(run_cfg)}, "
        f"vocab {run_cfg.vocab_size:,} ({analysis.count_params(run_cfg).total:,} "
        f"parameters). On the CPU a run is limited to "
        f"{ui.CPU_FLOP_BUDGET / 1e12:.0f} TFLOP."
    )
    cols = st.columns(5)
    device = cols[0].selectbox(
        "device", ui.PAGE_DEVICES, key=P + "device", help="auto: CUDA, then Apple MPS, then the CPU"
    )
    dtype = cols[1].selectbox(
        "dtype",
        tuple(DTYPES),
        key=P + "dtype",
        help="fp32; or bf16/fp16 autocast with fp32 weights, grads and "
        "AdamW state (mixed precision). fp16 only on a GPU.",
    )
    seq_len = ui.bounded_number(
        "sequence T", 1, run_cfg.max_seq_len, P + "seq_len", cols[2], why=" (the live model's max_seq_len)"
    )
    batch = ui.bounded_number("batch B", 1, ui.MAX_BATCH, P + "batch", cols[3])
    iters = ui.bounded_number("timed steps", 1, 50, P + "iters", cols[4])
settings = {"device": device, "dtype": dtype, "seq_len": seq_len, "batch": batch, "iters": iters}

# ---- the training step --------------------------------------------------------------------------------
st.subheader("One training step")
if st.button("Run the training step", type="primary", key=P + "run_live"):

    def live(progress):
        ui.guard(
            run_cfg,
            seq_len,
            batch,
            device,
            dtype=dtype,
            passes=iters + 3,
            what=f"a training step of this model (B={batch}, T={seq_len}, {dtype})",
            hint="choose the scaled-down copy, fewer blocks, a smaller batch or sequence, or a GPU",
        )
        return experiments.live_pass(
            run_cfg, seq_len, batch, device=device, dtype=dtype, iters=iters, progress=progress
        )

    result = ui.run_with_status("Live pass", live)
    if result is not None:
        ui.keep_experiment("live_pass", result, run_cfg, settings)
ui.show_experiment(ui.KEY_LIVE_PASS, run_cfg, settings, P)

# ---- KV-cache decoding --------------------------------------------------------------------------------
st.subheader("KV-cache decoding: MHA vs GQA vs MQA")
st.markdown(
    "Prefill a prompt of each context length, then decode new tokens one at a time "
    "with the cache; weights and cache in the chosen dtype. The cache bytes are read "
    "from the cache tensors and compared with `analysis.kv_cache_bytes_per_token`."
)
new_tokens = ui.bounded_number("new tokens per prompt", 1, 256, P + "new_tokens")
options = experiments.context_choices(run_cfg.max_seq_len, new_tokens)
st.session_state[P + "contexts"] = [
    c for c in st.session_state.get(P + "contexts", options[-4:]) if c in options
] or options[-4:]
contexts = st.multiselect("context lengths", options, key=P + "contexts")
decode_settings = {
    "device": device,
    "dtype": dtype,
    "batch": batch,
    "new_tokens": new_tokens,
    "contexts": sorted(contexts),
}
if st.button("Run the decode benchmark", type="primary", key=P + "run_decode"):

    def decode(progress):
        experiments.check_decode_budget(run_cfg, contexts, batch, new_tokens, device)
        return experiments.decode_benchmark(
            run_cfg,
            contexts,
            batch=batch,
            device=device,
            dtype=dtype,
            new_tokens=new_tokens,
            progress=progress,
        )

    result = ui.run_with_status("Decode benchmark", decode)
    if result is not None:
        ui.keep_experiment("decode", result, run_cfg, decode_settings)
ui.show_experiment(ui.KEY_DECODE, run_cfg, decode_settings, P)
