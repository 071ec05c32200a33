"""The Inside the model page's sections: the small model of the sidebar's recipe (untrained, or
trained: shipped pre-trained for the default model's recipe, or trained here on a button under
the job slot, stoppable, cached for every session), one forward pass of the text the user
types, and each view of it."""

from __future__ import annotations

import streamlit as st

from ...config import ModelConfig
from ...experiments import premeasured
from ...experiments.defaults import inside_arrangement, inside_flops
from ...experiments.inside import (
    DEFAULT_TEXT,
    INSIDE_DEFAULTS,
    inside_model,
    inside_settings,
    text_tokens,
    trace,
    trained_inside,
)
from ...figures import inside as fig
from ...model import build_model
from ...units import plural
from ..cached import measured, show_table
from ..runs import expected_time, live_run_note, run_with_status
from ..state import session
from ..widgets import show_error

ARRANGEMENTS = {"sidebar": "as the sidebar", "pre": "Pre-LN", "post": "Post-LN"}


@measured(max_entries=6)
def _untrained(cfg: ModelConfig, _progress=None):
    return inside_model(cfg, 0, device="cpu")


@measured(max_entries=6)
def _trained(cfg: ModelConfig, steps: int, _progress=None):
    """The small copy trained here and its run's record, shared by every session."""
    return trained_inside(cfg, steps, device="cpu", progress=_progress)


@measured(max_entries=6)
def _shipped(cfg: ModelConfig, steps: int, _progress=None):
    """The small copy with the weights ``tools/premeasure.py`` trained and shipped, and its
    entry; None where it ships none."""
    entry = premeasured.lookup("inside", cfg, inside_settings(steps))
    if entry is None:
        return None
    model = build_model(cfg, device="cpu").eval()
    model.load_state_dict(premeasured.load_weights(entry))
    return model, entry


def _run_note(run) -> str:
    """A training run's losses, and where it stopped if it diverged."""
    note = f"training loss {run.loss[0]:.3f} → {min(run.loss):.3f} at its lowest"
    if run.diverged:
        note += (
            f"; it diverged and stopped after {plural(run.steps_run, 'step')} ({run.divergence_reason}): "
            f"the views show the weights as it stopped"
        )
    return note


@measured(max_entries=32)
def _traced(model, text: str, _progress=None):
    """The trace of ``text`` through ``model`` (keyed on the model object): once per text, not
    on every rerun (moving the block slider redraws, it does not recompute)."""
    return trace(model, text_tokens(text, model.cfg))


def choice(base: ModelConfig, prefix: str) -> tuple[ModelConfig, int, str]:
    """The page's controls: which arrangement, trained or not, and the text."""
    cols = st.columns([2, 2, 5])
    arrangement = cols[0].radio(
        "norm position",
        list(ARRANGEMENTS),
        format_func=ARRANGEMENTS.get,
        key=prefix + "arrangement",
        horizontal=True,
    )
    trained = cols[1].radio(
        "weights",
        ("trained", "untrained"),
        key=prefix + "weights",
        horizontal=True,
        help=f"trained: {INSIDE_DEFAULTS['steps']} AdamW steps on the built-in "
        f"text (shipped pre-trained for the default model's recipe; any recipe trains here on "
        f"its button, once for every session)",
    )
    session().setdefault(prefix + "text", DEFAULT_TEXT)
    text = cols[2].text_input(
        f"text (at most {INSIDE_DEFAULTS['max_text']} bytes)",
        key=prefix + "text",
        max_chars=INSIDE_DEFAULTS["max_text"],
    )
    # the toggle's arms as on the Gradient norms page: Pre-LN with a final norm, Post-LN without
    return (
        inside_arrangement(base, arrangement),
        INSIDE_DEFAULTS["steps"] if trained == "trained" else 0,
        text,
    )


def note(base: ModelConfig, cfg: ModelConfig, steps: int) -> None:
    """What the small model ``cfg`` is (of ``base``'s recipe) and how it was trained: one line,
    the rest in an expander."""
    trained = (
        f"trained {plural(steps, 'AdamW step')} (lr {INSIDE_DEFAULTS['lr']:g}, B = "
        f"{INSIDE_DEFAULTS['batch']}, T = {INSIDE_DEFAULTS['seq_len']})"
        if steps
        else "untrained: the weights as initialised"
    )
    st.markdown(
        f"A small copy of the sidebar's recipe: **d={cfg.d_model}, {plural(cfg.n_layers, 'block')}, "
        f"{cfg.n_heads} heads / {cfg.n_kv_heads} KV, vocab {cfg.vocab_size}**, {trained}."
    )
    with st.expander("About this small model"):
        st.markdown(live_run_note(base, cfg))


def _trained_copy(cfg: ModelConfig, steps: int, prefix: str):
    """The trained copy the page shows, with a button that trains it here (progress, expected
    time): the one trained here, else the shipped one (said so), else the untrained weights
    with a note. None when a run was refused or stopped."""
    trained_here = _trained.holds(cfg, steps)
    shipped = None if trained_here else _shipped(cfg, steps)
    held = trained_here or shipped is not None
    button = "Re-train here" if held else f"Train the small model ({plural(steps, 'step')})"
    if st.button(
        button + expected_time(inside_flops(cfg, steps), "cpu"),
        type="secondary" if held else "primary",
        key=prefix + "train",
    ):
        if trained_here:
            _trained.forget(cfg, steps)
        done = run_with_status(
            f"Training the small model ({plural(steps, 'step')})",
            lambda progress: _trained(cfg, steps, _progress=progress),
        )
        if done is None:
            return None
        trained_here = True
    if trained_here:
        model, run = _trained(cfg, steps)
        st.caption(f"Trained here in this app: {_run_note(run)}.")
        return model
    if shipped is not None:
        model, entry = shipped
        st.caption(f"Shown at once: the weights were trained {entry.where}; {_run_note(entry.result)}.")
        return model
    st.info(
        "This recipe's trained copy is not shipped with the lab: the views below show the "
        "untrained weights until you press the button."
    )
    return _untrained(cfg)


def forward_trace(cfg: ModelConfig, steps: int, text: str, prefix: str):
    """The trace of ``text`` through the page's model: untrained, or the trained copy
    (``_trained_copy``). Nothing trains without the button. None when refused or stopped."""
    try:
        text_tokens(text, cfg)  # refused here, with its rule, before anything runs
    except ValueError as exc:
        show_error(str(exc))
        return None
    model = _trained_copy(cfg, steps, prefix) if steps else _untrained(cfg)
    if model is None:
        return None
    return _traced(model, text)


def attention_section(t, prefix: str) -> None:
    cfg = t.config
    st.subheader("Attention maps")
    st.caption(
        f"{cfg['n_heads']} query heads, {cfg['n_kv_heads']} KV heads: each KV head serves "
        f"{cfg['n_heads'] // cfg['n_kv_heads']} query heads, titled by it. Each row is "
        f"one query's softmax over the keys it may see (rows sum to 1)."
    )
    attending = [i for i, block in enumerate(t.layers) if block.attention is not None]
    if len(attending) < len(t.layers):
        st.caption(
            f"Blocks {', '.join(str(i) for i, b in enumerate(t.layers) if b.attention is None)} are "
            f"Gated DeltaNet (linear attention): they mix tokens through a recurrent state, with no "
            f"softmax weights to show."
        )
    if not attending:
        return
    if len(attending) > 1:
        layer = st.select_slider("block", attending, key=prefix + "block")
    else:
        layer = attending[0]
    st.plotly_chart(fig.attention_figure(t, layer), key=prefix + "attention")
    error = max(t.layers[i].max_attention_error for i in attending)
    st.caption(
        f"Recomputed from each block's own q and k (the fused kernel does not return its "
        f"weights); o_proj(weights · v) matches the block's own output to {error:.1e}."
    )


def _first_attending(t) -> int:
    """The first block with attention weights (Gated DeltaNet blocks have none)."""
    return next((i for i, block in enumerate(t.layers) if block.attention is not None), 0)


def positions_section(t, prefix: str) -> None:
    st.subheader("Positions")
    if t.rope is not None:
        r = t.rope
        st.plotly_chart(fig.rope_figure(r), key=prefix + "rope")
        st.caption(
            f"Each pair (x_i, x_i+D/2) of q turns by θ_i = θ^(−2i/D) per position "
            f"(θ = {t.config['rope_theta']:g}); q_m·k_n then depends on m − n only: at a "
            f"fixed offset the score spreads by {r['max_spread']:.1e} over positions, for "
            f"scores of size {r['score_scale']:.2f} (float32 rounding)."
        )
    st.plotly_chart(fig.offset_figure(t.positions), key=prefix + "offset")
    spreads = "; ".join(
        f"{name}: spread {found['spread']:.3g} of {found['scale']:.3g}" for name, found in t.positions.items()
    )
    st.caption(
        f"The text's first two tokens, one apart, placed at every position and scored "
        f"by block {_first_attending(t)}'s own projections — {spreads}. Added to the input, positions pass "
        f"through the norm and the projections, so the score depends on where the pair "
        f"stands, not only on how far apart it is."
    )


def stream_section(t, arrangement: str, prefix: str) -> None:
    st.subheader("The residual stream, the norms and the gates")
    st.plotly_chart(fig.residual_figure(t, arrangement), key=prefix + "residual")
    first = float(t.layers[0].residual_in_rms.median())
    last = float(t.layers[-1].residual_out_rms.median())
    norm = t.config["norm_type"]
    out = t.layers[0].norm_out
    st.caption(
        f"{'Pre-LN' if arrangement == 'pre' else 'Post-LN'}: the stream's median RMS goes "
        f"from {first:.3g} into block 0 to {last:.3g} out of the last block "
        f"({last / first:.2f}×); "
        + (
            "Pre-LN only ever adds to it, and each sublayer reads a normalised copy."
            if arrangement == "pre"
            else "Post-LN renormalises it after every sublayer."
        )
        + f" The table: what each block's first {norm} does to its input (|mean| over d, "
        f"std and RMS, averaged over the tokens) — here to |mean| {out['mean']:.2g}, std "
        f"{out['std']:.3g}, RMS {out['rms']:.3g} in block 0: "
        + (
            "LayerNorm centres (mean 0) and scales (std 1), times its γ and β."
            if norm == "layernorm"
            else "RMSNorm only scales (RMS 1, times its γ) and leaves the mean."
        )
        + " gates_closed_share: the share of SwiGLU gate inputs below 0, where SiLU "
        "passes at most 0.28 of the up projection."
    )
    show_table(fig.norm_frame(t), width="stretch")


def lens_section(t, prefix: str) -> None:
    st.subheader("Logit lens and the next token")
    st.plotly_chart(fig.lens_figure(t), key=prefix + "lens")
    st.plotly_chart(fig.final_figure(t), key=prefix + "final")
    routing = fig.routing_figure(t)
    if routing is not None:
        st.plotly_chart(routing, key=prefix + "routing")
