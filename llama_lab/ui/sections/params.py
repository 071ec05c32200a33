"""The Parameters & FLOPs page's sections: the headline counts with their derivations, where
the parameters and FLOPs go, FLOPs against the sequence length (and a windowed or sparse
pattern's score FLOPs against dense attention's), one decoder block's tensors,
fvcore's cross-check and the counting conventions."""

from __future__ import annotations

import streamlit as st

from ...analysis import derive
from ...analysis.summary import family_notes
from ...config import ModelConfig
from ...figures.common import sweep_lengths
from ...figures.params import (
    block_table,
    flops_bar,
    flops_sweep_upper,
    flops_vs_seq_len,
    params_sunburst,
    typical_block,
)
from ...figures.sparse import score_cost_figure, score_cost_lengths
from ...units import escape_markdown, human_count, human_params
from ..cached import (
    flop_count,
    flops_sweep,
    fvcore_or_error,
    image_cost,
    param_count,
    score_cost,
    scores_crossover,
    show_table,
)
from ..derivations import derived_metric, show_equation


def metrics(cfg: ModelConfig, seq_len: int, batch: int, prefix: str) -> None:
    """Parameters, non-embedding, per block, forward and training-step FLOPs, each with its
    derivation; then the model family's notes."""
    T, B = seq_len, batch
    params, flops = param_count(cfg), flop_count(cfg, T, B)
    cols = st.columns(5)
    derived_metric(
        cols[0],
        "Parameters",
        human_params(params.total),
        derive.params_total(cfg),
        prefix + "params",
        help=f"{params.total:,}",
        delta=f"active {human_params(params.active)}" if cfg.is_moe else None,
        delta_arrow="off",
        delta_color="off",
    )
    derived_metric(
        cols[1],
        "Non-embedding",
        human_params(params.non_embedding),
        derive.params_non_embedding(cfg),
        prefix + "non_embedding",
        help=f"{params.non_embedding:,} (total − token embedding − learned positions)",
    )
    derived_metric(
        cols[2],
        "Per block",
        human_params(params.per_layer),
        derive.params_per_block(cfg),
        prefix + "per_block",
        help=f"{params.per_layer:,}",
    )
    derived_metric(
        cols[3],
        "Forward FLOPs",
        human_count(flops.forward, "FLOP"),
        derive.forward_flops(cfg, T, B),
        prefix + "forward",
        help=f"{flops.forward:,}: one forward over B={B} × T={T:,} tokens; causal "
        f"scores only: {flops.forward_causal:,}",
    )
    derived_metric(
        cols[4],
        "Training step FLOPs",
        human_count(flops.training_step, "FLOP"),
        derive.training_flops(cfg, T, B),
        prefix + "training",
        help=f"{derive.training_flops(cfg, T, B).text('F_step')}; PaLM's per token: "
        f"{derive.palm_training_per_token(cfg, T).text()}",
    )
    for note in family_notes(cfg, params):
        st.info(note)


def image_encoder(cfg: ModelConfig) -> None:
    """A multimodal model's image encoder: the tower's and the projector's parameters, the tokens
    one image adds and the encoder's FLOPs per image (nothing for a text-only model)."""
    if cfg.vision is None:
        return
    cost = image_cost(cfg)
    height, width = cost["image_size"]
    st.subheader("The image encoder, per image")
    cols = st.columns(4)
    cols[0].metric("Vision tower", human_params(cost["vision_params"]), help=f"{cost['vision_params']:,}")
    cols[1].metric("Projector", human_params(cost["projector_params"]), help=f"{cost['projector_params']:,}")
    cols[2].metric("Image tokens", f"{cost['image_tokens']:,}", help=f"one {height}×{width} image")
    cols[3].metric(
        "Encoder FLOPs / image",
        human_count(cost["flops_per_image"], "FLOP"),
        help=f"{cost['flops_per_image']:,}: patch embedding, every block, the projector",
    )
    show_table(
        [{"part": part, "FLOPs": flops} for part, flops in cost["flops_per_image_by_part"].items()],
        width="stretch",
    )
    st.caption(
        f"A {cfg.vision.kind} tower ({cfg.vision.n_layers} blocks of width {cfg.vision.hidden_size}) and "
        f"the {cfg.vision.projector} projector: each image adds {cost['image_tokens']:,} tokens to the "
        f"text decoder's sequence, whose FLOPs above are the text decoder's alone. The parameter "
        f"counts include the tower; the live model builds the text decoder only."
    )


def formulas(cfg: ModelConfig, seq_len: int, batch: int) -> None:
    """The counts' formulas written out with the model's numbers: one block (block 0), the
    whole model, one forward over B×T tokens."""
    show_equation((r"N_\text{block}", derive.params_per_block(cfg)))
    show_equation(("N", derive.params_total(cfg)))
    show_equation((r"\text{FLOPs}_\text{fwd}", derive.forward_flops(cfg, seq_len, batch)))


def charts(cfg: ModelConfig, seq_len: int, batch: int) -> None:
    """Where the parameters go (sunburst) beside where the forward's FLOPs go (bars)."""
    left, right = st.columns(2)
    left.plotly_chart(params_sunburst(param_count(cfg)))
    right.plotly_chart(flops_bar(flop_count(cfg, seq_len, batch)))


def flops_sweep_section(cfg: ModelConfig, seq_len: int, batch: int) -> None:
    """FLOPs against the sequence length, and where the scores overtake the FFN."""
    T = seq_len
    crossover = scores_crossover(cfg)
    seq_lens = sweep_lengths(flops_sweep_upper(cfg, T, crossover))
    st.plotly_chart(flops_vs_seq_len(flops_sweep(cfg, seq_lens, batch), crossover, T))
    if crossover is None:
        st.caption("The attention scores never overtake the FFN within the allowed lengths.")
    else:
        scores = derive.score_flops_per_token(cfg, crossover)
        st.caption(
            f"Per token the projections and FFN cost a constant, the scores grow with T "
            f"({escape_markdown(scores.text())} at T = {crossover:,}): "
            f"they overtake the FFN from T = {crossover:,} "
            f"({'within' if crossover <= cfg.max_seq_len else 'beyond'} max_seq_len "
            f"{cfg.max_seq_len:,})."
        )


def score_cost_section(cfg: ModelConfig, seq_len: int) -> None:
    """The causal score FLOPs against T: dense causal attention (quadratic) beside the model's
    windows and sparse pattern (linear once past them), by ``flops.attention_scores_causal``."""
    frame = score_cost(cfg, score_cost_lengths(cfg, seq_len))
    st.plotly_chart(score_cost_figure(frame))
    last = frame.iloc[-1]
    st.caption(
        f"One sequence's QKᵀ and AV over the query-key pairs the mask allows (analyze's "
        f"flops.attention_scores_causal), every block. Dense causal attention grows as T²; a windowed "
        f"block's queries see at most W keys (+ the global ones and the random blocks'), so the "
        f"pattern grows linearly once T passes them: at T = {int(last['T']):,} it costs "
        f"{last['pattern'] / last['dense causal']:.2%} of dense."
    )


def block_section(cfg: ModelConfig, seq_len: int, batch: int) -> None:
    """One decoder block's tensors: parameters, share and forward FLOPs of each."""
    T, B = seq_len, batch
    flags, shown = cfg.moe_layer_flags, typical_block(cfg)
    alike = flags.count(flags[shown])
    kind, other = ("sparse", "dense") if flags[shown] else ("dense", "sparse")
    rest = cfg.n_layers - alike
    if cfg.n_layers == 1:
        which = "The model has one block."
    elif alike == cfg.n_layers:
        which = f"All {cfg.n_layers} blocks are identical."
    else:
        which = (
            f"Block {shown}, one of the {alike} {kind} blocks"
            if alike > 1
            else f"Block {shown}, the one {kind} block"
        ) + (f" (the other {rest} are {other})." if rest > 1 else f" (the other one is {other}).")
    head = "lm_head + the pooler" if cfg.pooler else "lm_head"
    total = (
        f"{cfg.n_layers} × the column + {head} = the forward total."
        if alike == cfg.n_layers
        else f"Each kind of block × its count, + {head} = the forward total."
    )
    st.caption(
        f"{which} Forward FLOPs of each tensor in one block "
        f"at B={B}, T={T:,}: a weight matrix costs 2·B·T·(its parameters); the attention "
        f"scores have no parameters and their own row; biases and norms are element-wise, "
        f"counted apart (Counting conventions below). {total}"
    )
    show_table(
        block_table(cfg, flop_count(cfg, T, B)),
        column_config={
            "params": st.column_config.NumberColumn(format="localized"),
            "share_of_block": st.column_config.NumberColumn(format="percent"),
            "forward_flops": st.column_config.NumberColumn("forward FLOPs per block", format="localized"),
            "flops_rule": "rule",
        },
    )


def fvcore_section(cfg: ModelConfig, seq_len: int, batch: int, prefix: str) -> None:
    """On its toggle: the model traced by fvcore on the meta device, beside our count."""
    check = None
    if st.toggle("Trace the model with fvcore (meta device, no memory) and compare", key=prefix + "fvcore"):
        check = fvcore_or_error(cfg, seq_len, batch)
    if check is None:
        return
    cols = st.columns(3)
    for col, label, flops_ in zip(
        cols,
        ("fvcore (×2)", "LLaMA Lab", "Difference"),
        (check.fvcore_flops, check.ours_flops, check.difference),
    ):
        col.metric(
            label,
            human_count(flops_, "FLOP"),
            help=f"{flops_:,} FLOPs",
            delta=f"{check.relative_difference:.2e} relative" if label == "Difference" else None,
            delta_arrow="off",
            delta_color="off",
        )
    show_table(
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


def counting_conventions(cfg: ModelConfig, seq_len: int, batch: int) -> None:
    """The FLOP count's conventions and its every row, folded away."""
    flops = flop_count(cfg, seq_len, batch)
    with st.expander("Counting conventions"):
        for line in flops.conventions:
            st.markdown(f"- {line}")
        show_table(flops.to_frame())
