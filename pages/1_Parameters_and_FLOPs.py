"""Parameters and FLOPs: where they go, how FLOPs grow with the sequence, fvcore's opinion."""

import streamlit as st

from llama_lab import ui
from llama_lab.analysis import derive
from llama_lab.figures.params import (
    block_table,
    flops_bar,
    flops_sweep_upper,
    flops_vs_seq_len,
    params_sunburst,
)

P = "llama_lab.page1."
selection = ui.setup_page(
    "Parameters & FLOPs",
    "Closed-form counts for the sidebar's model, by component. FLOPs count 2 per multiply-add "
    "over one forward pass of B×T tokens, attention scores over the full T×T (the causal half "
    "is listed too); norms, softmax, RoPE and activations are element-wise and listed apart.",
)
cfg, T, B = selection.cfg, selection.seq_len, selection.batch
params = ui.param_count(cfg)
flops = ui.flop_count(cfg, T, B)

cols = st.columns(5)
ui.derived_metric(
    cols[0],
    "Parameters",
    ui.human_params(params.total),
    derive.params_total(cfg),
    P + "params",
    help=f"{params.total:,}",
    delta=f"active {ui.human_params(params.active)}" if cfg.is_moe else None,
    delta_color="off",
)
ui.derived_metric(
    cols[1],
    "Non-embedding",
    ui.human_params(params.non_embedding),
    derive.params_non_embedding(cfg),
    P + "non_embedding",
    help=f"{params.non_embedding:,} (total − token embedding − learned positions)",
)
ui.derived_metric(
    cols[2],
    "Per block",
    ui.human_params(params.per_layer),
    derive.params_per_block(cfg),
    P + "per_block",
    help=f"{params.per_layer:,}",
)
ui.derived_metric(
    cols[3],
    "Forward FLOPs",
    ui.human_count(flops.forward, "FLOP"),
    derive.forward_flops(cfg, T, B),
    P + "forward",
    help=f"{flops.forward:,}: one forward over B={B} × T={T:,} tokens; causal "
    f"scores only: {flops.forward_causal:,}",
)
ui.derived_metric(
    cols[4],
    "Training step FLOPs",
    ui.human_count(flops.training_step, "FLOP"),
    derive.training_flops(cfg, T, B),
    P + "training",
    help=f"3 × forward = {flops.training_step:,}; PaLM's 6N + 12·L·H·Q·T per "
    f"token: {flops.palm_training_per_token:,}",
)

for note in ui.family_notes(cfg, params):
    st.info(note)
st.latex(
    r"N_\text{block} = \underbrace{C H D + 2\,C G D + H D C}_{\text{attention}}"
    r" + \underbrace{k\,C F}_{\text{FFN},\;k=3\text{ SwiGLU},\;2\text{ ReLU/GELU}}"
    r" + \underbrace{2\,n_\text{norm}}_{n_\text{norm}=C\text{ or }2C}"
)
st.latex(
    r"N = L\,N_\text{block} + V C\,(\text{embedding}) + V C\,(\text{untied head})"
    r" + n_\text{norm}\,(\text{final}) \quad (+\text{biases if enabled})"
)
st.latex(
    r"\text{FLOPs}_\text{fwd} = 2\,B\,T \cdot N_\text{matmul}"
    r" + \underbrace{4\,B\,T^2 H D L}_{QK^\top\text{ and }AV\text{, full }T\times T}"
)

left, right = st.columns(2)
left.plotly_chart(params_sunburst(params))
right.plotly_chart(flops_bar(flops))

st.subheader("FLOPs against sequence length")
crossover = ui.scores_crossover(cfg)
seq_lens = ui.sweep_lengths(flops_sweep_upper(cfg, T, crossover))
st.plotly_chart(flops_vs_seq_len(ui.flops_sweep(cfg, seq_lens, B), crossover, T))
if crossover is None:
    st.caption("The attention scores never overtake the FFN within the allowed lengths.")
else:
    st.caption(
        f"Per token the projections and FFN cost a constant, the scores 4·T·H·D·L: "
        f"they overtake the FFN from T = {crossover:,} "
        f"({'within' if crossover <= cfg.max_seq_len else 'beyond'} max_seq_len "
        f"{cfg.max_seq_len:,})."
    )

st.subheader("One decoder block")
st.caption(
    f"All {cfg.n_layers} blocks are identical. Forward FLOPs of each tensor in one block "
    f"at B={B}, T={T:,}: a weight matrix costs 2·B·T·(its parameters); the attention "
    f"scores have no parameters and their own row; biases and norms are element-wise, "
    f"counted apart (Counting conventions below). {cfg.n_layers} × the column + lm_head "
    f"= the forward total."
)
ui.show_table(
    block_table(cfg, flops),
    column_config={
        "params": st.column_config.NumberColumn(format="localized"),
        "share_of_block": st.column_config.NumberColumn(format="percent"),
        "forward_flops": st.column_config.NumberColumn("forward FLOPs per block", format="localized"),
        "flops_rule": "rule",
    },
)

st.subheader("Cross-check with fvcore")
check = None
if st.toggle(
    "Trace the model with fvcore (meta device, no memory) and compare", key="llama_lab.page1.fvcore"
):
    check = ui.fvcore_or_error(cfg, T, B)
if check is not None:
    cols = st.columns(3)
    for col, label, flops_ in zip(
        cols,
        ("fvcore (×2)", "LLaMA Lab", "Difference"),
        (check.fvcore_flops, check.ours_flops, check.difference),
    ):
        col.metric(
            label,
            ui.human_count(flops_, "FLOP"),
            help=f"{flops_:,} FLOPs",
            delta=f"{check.relative_difference:.2e} relative" if label == "Difference" else None,
            delta_color="off",
        )
    ui.show_table(
        {
            "operator": list(check.fvcore_by_operator),
            "FLOPs (fvcore × 2)": list(check.fvcore_by_operator.values()),
        },
        column_config={"FLOPs (fvcore × 2)": st.column_config.NumberColumn(format="localized")},
    )
    st.caption(
        "Operators fvcore skipped (element-wise; times seen): "
        + (", ".join(f"{name} ×{count}" for name, count in check.unsupported_ops.items()) or "none")
    )
    for note in check.notes:
        st.caption(note)

with st.expander("Counting conventions"):
    for line in flops.conventions:
        st.markdown(f"- {line}")
    ui.show_table(flops.to_frame())
