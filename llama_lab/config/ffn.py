"""FFN width rules: the seed's 8/3·d, Meta's 2/3·4d rounded up, the 2017 paper's 4d, and
which rule (and rounding) reproduces a given config's width.
"""

from __future__ import annotations

from .model_config import ModelConfig


def seed_ffn_hidden(d_model: int, *, multiple_of: int = 1) -> int:
    """The seed's rule: 8/3·d (so SwiGLU's 3·d·h equals a 4d FFN's 8·d²), rounded down to a
    multiple. ``multiple_of=1`` gives the demo's 1365 for d=512; the seed's code uses 64."""
    return int(8 * d_model / 3 / multiple_of) * multiple_of


def llama_ffn_hidden(d_model: int, *, multiple_of: int = 256, ffn_dim_multiplier: float | None = None) -> int:
    """Meta's rule (llama/model.py FeedForward): 2/3 of 4d, optional multiplier, round up."""
    hidden = int(2 * (4 * d_model) / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


FFN_RULES: dict[str, str] = {
    "seed": "seed: ⌊8/3·d⌋ (to a multiple)",
    "meta": "Meta: 2/3·4d (×multiplier), rounded up",
    "classic": "2017: 4·d",
    "manual": "manual",
}


# Rounding and multipliers of the published configs, tried in order when a preset or an upload
# is read, so that moving d_model afterwards keeps following the model's own rule.
_SEED_MULTIPLES = (1, 64)  # the demo's 1365; the seed code's int(8d/3/64)·64


_META_ROUNDINGS = ((256, None), (1024, 1.3), (4096, 1.3), (1024, 1.2), (256, 1.3))


_CLASSIC_FFN_FACTOR = 4  # Vaswani et al. 2017: d_ff = 2048 = 4·512


def ffn_from_rule(rule: str, d_model: int, multiple_of: int, multiplier: float | None) -> int | None:
    """The FFN width the rule gives (None for ``manual``)."""
    if rule == "seed":
        return seed_ffn_hidden(d_model, multiple_of=multiple_of)
    if rule == "meta":
        return llama_ffn_hidden(d_model, multiple_of=multiple_of, ffn_dim_multiplier=multiplier)
    if rule == "classic":
        return _CLASSIC_FFN_FACTOR * d_model
    return None


def detect_ffn_rule(cfg: ModelConfig) -> tuple[str, int, float]:
    """(rule, multiple_of, multiplier — 0 for none) that reproduces ``cfg.ffn_hidden``; a
    ReLU/GELU FFN is tried against the 2017 rule first."""
    classic = ffn_from_rule("classic", cfg.d_model, 1, None) == cfg.ffn_hidden
    if classic and cfg.ffn_type != "swiglu":
        return "classic", 1, 0.0
    for multiple_of in _SEED_MULTIPLES:
        if seed_ffn_hidden(cfg.d_model, multiple_of=multiple_of) == cfg.ffn_hidden:
            return "seed", multiple_of, 0.0
    for multiple_of, multiplier in _META_ROUNDINGS:
        if (
            llama_ffn_hidden(cfg.d_model, multiple_of=multiple_of, ffn_dim_multiplier=multiplier)
            == cfg.ffn_hidden
        ):
            return "meta", multiple_of, multiplier or 0.0
    if classic:
        return "classic", 1, 0.0
    return "manual", 1, 0.0
