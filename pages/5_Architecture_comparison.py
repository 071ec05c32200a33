"""The seed's 2017 Transformer vs LLaMA table (section 七), each row computed on the config."""

import streamlit as st

from llama_lab import ui
from llama_lab.config import small_training_config
from llama_lab.experiments import ABLATIONS, CONTRAST_SETTINGS
from llama_lab.train.data import load_builtin

P = "llama_lab.page5."
KEY_ABLATION, KEY_STEPS = P + "ablation", P + "steps"
KEY_RESULT = P + "result"  # this page's ExperimentEntry (also ui.KEY_ABLATION)
TRAIN = CONTRAST_SETTINGS

selection = ui.setup_page(
    "Architecture comparison",
    "The tutorial's table of what LLaMA changed from the 2017 Transformer, row by row. For "
    "each row the lab switches that one option on the sidebar's model — everything else "
    "equal — and reports what it does to the parameters, the forward FLOPs and the KV cache.",
)
cfg, T, B, kv_dtype = selection.cfg, selection.seq_len, selection.batch, selection.kv_format
comparison = ui.architecture(cfg, T, B, kv_dtype)

st.latex(
    r"\text{ReLU FFN: } 2\,d\,(4d) = 8d^2 \qquad \text{SwiGLU: } 3\,d\,F"
    r" = 3d\cdot\tfrac{8}{3}d = 8d^2"
)
st.latex(
    r"\text{LayerNorm: } 2d \;\text{vs RMSNorm: } d \qquad"
    r"\text{KV bytes/token} = 2\,L\,G\,D\,b \;\propto\; G"
)
frame = comparison.to_frame()
st.table(
    frame[["aspect_zh", "aspect", "transformer_2017", "llama", "seed_reason", "current", "lab"]].rename(
        columns={
            "aspect_zh": "seed row",
            "transformer_2017": "2017 Transformer",
            "llama": "LLaMA",
            "seed_reason": "seed's reason (原因)",
            "current": "this config",
            "lab": "what the lab computes (2017 option → LLaMA option, on this config)",
        }
    ),
    hide_index=True,
)
numbers = frame.dropna(subset=["params_2017"])
count_columns = [
    "params_2017",
    "params_llama",
    "flops_2017",
    "flops_llama",
    "kv_bytes_per_token_2017",
    "kv_bytes_per_token_llama",
]
ui.show_table(
    numbers[["aspect", *count_columns]],
    column_config={name: st.column_config.NumberColumn(format="localized") for name in count_columns},
)
st.caption(
    f"FLOPs: one forward over B={B} × T={T:,} tokens (matmuls, 2 per multiply-add). "
    f"KV bytes at {kv_dtype} (the sidebar's KV cache format)."
)

st.subheader("Train the contrast (small model, CPU)")
train_cfg = small_training_config(cfg)
st.caption(
    f"Short AdamW runs on the built-in byte-level corpus, same data, seed and batches "
    f"for every arm, at d={train_cfg.d_model}, {train_cfg.n_layers} layers, "
    f"{train_cfg.n_heads} heads / {train_cfg.n_kv_heads} KV, vocab {train_cfg.vocab_size} "
    f"with this config's recipe; lr {TRAIN['lr']}, {TRAIN['warmup_steps']} warmup steps, "
    f"T={TRAIN['seq_len']}, B={TRAIN['batch']}."
)
kind = st.selectbox("contrast", list(ABLATIONS), format_func=ABLATIONS.get, key=KEY_ABLATION)
steps = st.slider("steps", 20, 300, 60, step=10, key=KEY_STEPS)
chosen = {"contrast": ABLATIONS[kind], "steps": steps}
if st.button("Train", type="primary"):

    def train(progress):
        return ui.ablation_runs(
            kind,
            train_cfg,
            steps,
            TRAIN["lr"],
            TRAIN["warmup_steps"],
            TRAIN["seq_len"],
            TRAIN["batch"],
            _progress=progress,
        )

    result = ui.run_with_status("Training comparison", train, "this training comparison")
    if result is not None:
        ui.keep_experiment(
            "ablation", result, train_cfg, {**chosen, **TRAIN, "data": load_builtin().source}, KEY_RESULT
        )
ui.show_experiment(KEY_RESULT, train_cfg, chosen, P)
