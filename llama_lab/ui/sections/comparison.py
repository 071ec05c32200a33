"""The Architecture comparison page's sections: the seed's 2017 Transformer vs LLaMA table, each
row switched on the sidebar's model and counted, and the contrast trained on a small model."""

from __future__ import annotations

import streamlit as st

from ...analysis import derive_memory
from ...analysis.model_kinds import KIND_PRESETS
from ...config import ModelConfig, small_training_config
from ...experiments import ABLATIONS, CONTRAST_SETTINGS
from ...seed.comparison import in_english
from ...train.data import load_builtin
from ..cached import ablation_runs, architecture, model_kinds, show_table
from ..derivations import show_equation
from ..runs import keep_experiment, run_with_status, show_experiment

TRAIN = CONTRAST_SETTINGS
COUNT_COLUMNS = [
    "params_2017",
    "params_llama",
    "flops_2017",
    "flops_llama",
    "kv_bytes_per_token_2017",
    "kv_bytes_per_token_llama",
]


def formulas(cfg: ModelConfig, kv_dtype: str) -> None:
    """The table's rules: the FFN widths' parameters and the norms' (the seed's identities), and
    this config's KV bytes per token written out (``derive_memory.kv_bytes_per_token``)."""
    st.latex(
        r"\text{ReLU FFN: } 2\,d\,(4d) = 8d^2 \qquad \text{SwiGLU: } 3\,d\,F"
        r" = 3d\cdot\tfrac{8}{3}d = 8d^2"
    )
    show_equation(
        (r"\text{KV bytes/token}", derive_memory.kv_bytes_per_token(cfg, kv_dtype)),
        lead=r"\text{LayerNorm: } 2d \;\text{vs RMSNorm: } d \qquad ",
    )


def tables(cfg: ModelConfig, seq_len: int, batch: int, kv_dtype: str) -> None:
    """The seed's table with this config's column and what the lab computes, then each row's
    parameters, forward FLOPs and KV bytes per token under both options."""
    frame = architecture(cfg, seq_len, batch, kv_dtype).to_frame()
    english = frame.copy()
    for column in ("transformer_2017", "llama", "seed_reason"):
        english[column] = english[column].map(in_english)
    st.table(
        english[["aspect", "transformer_2017", "llama", "seed_reason", "current", "lab"]].rename(
            columns={
                "transformer_2017": "2017 Transformer",
                "llama": "LLaMA",
                "seed_reason": "seed's reason",
                "current": "this config",
                "lab": "what the lab computes (2017 option → LLaMA option, on this config)",
            }
        ),
        hide_index=True,
    )
    with st.expander("The seed's table in its own words (Chinese)"):
        st.table(
            frame[["aspect", "aspect_zh", "transformer_2017", "llama", "seed_reason"]].rename(
                columns={"aspect_zh": "行", "transformer_2017": "Transformer (2017)", "seed_reason": "原因"}
            ),
            hide_index=True,
        )
    numbers = frame.dropna(subset=["params_2017"])
    show_table(
        numbers[["aspect", *COUNT_COLUMNS]],
        column_config={name: st.column_config.NumberColumn(format="localized") for name in COUNT_COLUMNS},
    )
    st.caption(
        f"FLOPs: one forward over B={batch} × T={seq_len:,} tokens (matmuls, 2 per multiply-add). "
        f"KV bytes at {kv_dtype} (the sidebar's KV cache format)."
    )


def kinds_section(seq_len: int, kv_dtype: str, names: tuple[str, ...] = KIND_PRESETS) -> None:
    """Causal decoder vs bidirectional encoder vs encoder-decoder: one preset of each kind
    (``analysis.model_kinds.KIND_PRESETS``) side by side, every number the lab's count."""
    st.table(model_kinds(names, seq_len, kv_dtype), hide_index=True)
    st.caption(
        f"Forward FLOPs: one sequence of T tokens (the sidebar's T={seq_len:,}, at most the model's "
        f"positions), matmuls at 2 per multiply-add, the attention scores over the query-key pairs "
        f"the mask allows (causal: T(T+1)/2; bidirectional: all T²). KV cache at {kv_dtype}. The "
        f"mask decides what each kind can do: a causal decoder generates, a bidirectional encoder "
        f"fills in and classifies, an encoder-decoder translates."
    )


def contrast_section(cfg: ModelConfig, prefix: str) -> None:
    """One contrast of the table trained on a small copy of ``cfg``'s recipe (same data, seed
    and batches for both arms), behind its button; the result also under ``prefix + "result"``."""
    key_result = prefix + "result"  # this page's ExperimentEntry (also ui.KEY_ABLATION)
    train_cfg = small_training_config(cfg)
    st.caption(
        f"Short AdamW runs on the built-in byte-level corpus, same data, seed and batches "
        f"for every arm, at d={train_cfg.d_model}, {train_cfg.n_layers} layers, "
        f"{train_cfg.n_heads} heads / {train_cfg.n_kv_heads} KV, vocab {train_cfg.vocab_size} "
        f"with this config's recipe; lr {TRAIN['lr']}, {TRAIN['warmup_steps']} warmup steps, "
        f"T={TRAIN['seq_len']}, B={TRAIN['batch']}."
    )
    kind = st.selectbox(
        "contrast", list(ABLATIONS), format_func=ABLATIONS.__getitem__, key=prefix + "ablation"
    )
    steps = st.slider("steps", 20, 300, 60, step=10, key=prefix + "steps")
    chosen = {"contrast": ABLATIONS[kind], "steps": steps}
    if st.button("Train", type="primary"):

        def train(progress):
            return ablation_runs(
                kind,
                train_cfg,
                steps,
                TRAIN["lr"],
                TRAIN["warmup_steps"],
                TRAIN["seq_len"],
                TRAIN["batch"],
                _progress=progress,
            )

        result = run_with_status("Training comparison", train, "this training comparison")
        if result is not None:
            keep_experiment(
                "ablation", result, train_cfg, {**chosen, **TRAIN, "data": load_builtin().source}, key_result
            )
    show_experiment(key_result, train_cfg, chosen, prefix)
